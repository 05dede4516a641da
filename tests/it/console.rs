//! The console and the shell: completions that a real bash loads, man pages for every
//! command, `--json` on stdout, and color only where asked for (`--color`, `NO_COLOR`).

use crate::common::{goodput, goodput_env, temp};
use goodput_results::RunSummary;
use std::process::Command;

#[test]
fn completions_load_in_bash_and_name_every_command_and_run_flag() {
    let (ok, script, err) = goodput(&["completions", "bash"]);
    assert!(ok, "{err}");
    for word in ["run", "plan", "completions", "--concurrency", "--config", "--json"] {
        assert!(script.contains(word), "{word} missing from the bash completions");
    }
    // bash itself loads the script and registers the completion, and completes a flag.
    let dir = temp("completions");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("goodput.bash");
    std::fs::write(&path, &script).unwrap();
    let probe = format!(
        "source {}; complete -p goodput; COMP_WORDS=(goodput run --concu); COMP_CWORD=2; COMP_LINE='goodput run --concu'; \
         COMP_POINT=${{#COMP_LINE}}; _goodput goodput --concu run; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        path.display()
    );
    let out = Command::new("bash").args(["-c", &probe]).output().expect("bash");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("-F _goodput goodput") && text.lines().any(|l| l == "--concurrency"), "{text}");
    for (shell, mark) in
        [("zsh", "#compdef goodput"), ("fish", "complete -c goodput"), ("powershell", "Register-ArgumentCompleter")]
    {
        let (ok, s, err) = goodput(&["completions", shell]);
        assert!(ok && s.contains(mark), "{shell}: {err}");
    }
    let (ok, _, err) = goodput(&["completions", "tcsh"]);
    assert!(!ok && err.contains("tcsh"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn man_pages_cover_every_command() {
    let dir = temp("man");
    let (ok, _, err) = goodput(&["man", "--out", dir.to_str().unwrap()]);
    assert!(ok, "{err}");
    let main = std::fs::read_to_string(dir.join("goodput.1")).unwrap();
    assert!(main.starts_with(".ie") || main.contains(".TH goodput"), "{main}");
    for command in ["run", "plan", "profile", "serve", "compare", "report", "completions"] {
        let page = std::fs::read_to_string(dir.join(format!("goodput-{command}.1"))).unwrap();
        assert!(page.contains(&format!(".TH goodput-{command}")), "{command}");
    }
    let run = std::fs::read_to_string(dir.join("goodput-run.1")).unwrap();
    assert!(run.contains("concurrency") && run.contains("config"), "the run page lists its flags");
    // man's own formatter reads it without a warning, where man is installed.
    if Command::new("man").arg("--version").output().is_ok_and(|o| o.status.success()) {
        let out = Command::new("man")
            .args(["-l", dir.join("goodput-run.1").to_str().unwrap()])
            .env("MANWIDTH", "100")
            .output()
            .unwrap();
        assert!(out.status.success() && String::from_utf8_lossy(&out.stdout).contains("concurrency"));
        assert!(out.stderr.is_empty(), "man warns: {}", String::from_utf8_lossy(&out.stderr));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn json_goes_to_stdout_and_color_only_when_asked() {
    let args = ["run", "--concurrency", "1,2", "--requests", "3", "--warmup", "1", "--refine", "0", "-q"];
    let (ok, stdout, err) = goodput(&[&args[..], &["--json"]].concat());
    assert!(ok, "{err}");
    let line = stdout.lines().next().unwrap_or_default();
    assert_eq!(stdout.lines().count(), 1, "one line of JSON: {stdout}");
    let s: RunSummary = serde_json::from_str(line).expect("stdout is the summary");
    assert_eq!(s.levels.len(), 2);
    assert!(err.contains("Conclusion"), "the tables and conclusion go to stderr: {err}");
    // Color: never on a pipe by default, on with --color always, off again with NO_COLOR
    // (auto) and --color never.
    let (ok, plain, _) = goodput(&args);
    assert!(ok && !plain.contains('\u{1b}') && (plain.contains("hold") || plain.contains("broken")), "{plain}");
    let (ok, colored, _) = goodput(&[&args[..], &["--color", "always"]].concat());
    assert!(ok && colored.contains("\u{1b}["), "{colored}");
    let (ok, forced, _) = goodput_env(&args, &[("CLICOLOR_FORCE", "1")]);
    assert!(ok && forced.contains("\u{1b}["), "{forced}");
    let (ok, none, _) = goodput_env(&args, &[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")]);
    assert!(ok && !none.contains('\u{1b}'), "{none}");
    let (ok, never, _) = goodput_env(&[&["--color", "never"][..], &args[..]].concat(), &[("CLICOLOR_FORCE", "1")]);
    assert!(ok && !never.contains('\u{1b}'), "{never}");
}

/// `GET /metrics` from `addr` by hand: the body, or `None` while nothing listens.
fn scrape(addr: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    Some(text.split_once("\r\n\r\n")?.1.to_string())
}

#[test]
fn a_running_sweep_serves_its_live_metrics() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port().to_string();
    let args = [
        "run",
        "--metrics-port",
        &port,
        "--concurrency",
        "1,2",
        "--requests",
        "60",
        "--warmup",
        "1",
        "--refine",
        "0",
        "-q",
    ];
    let mut child = crate::common::Running::new(crate::common::spawn(&args));
    let addr = format!("127.0.0.1:{port}");
    let t = std::time::Instant::now();
    let mut seen = None;
    while t.elapsed() < std::time::Duration::from_secs(120) && !child.ended() {
        match scrape(&addr) {
            Some(body) if body.contains("goodput_run_requests_total{phase=\"measured\"") => {
                seen = Some(body);
                break;
            }
            _ => std::thread::sleep(std::time::Duration::from_millis(100)),
        }
    }
    let body = seen.expect("the run's metrics, with measured requests, while it ran");
    for series in [
        "goodput_run_info{model=\"tiny\",scenario=\"short-qa\",target=\"in-process\",unit=\"users\"} 1",
        "goodput_run_level_number ",
        "goodput_run_time_to_first_token_seconds_bucket",
        "goodput_run_request_time_per_output_token_seconds_count",
        "goodput_run_e2e_request_latency_seconds_sum",
        "goodput_run_rolling_ttft_seconds{quantile=\"0.95\"}",
        "goodput_run_output_tokens_total",
    ] {
        assert!(body.contains(series), "{series} missing: {body}");
    }
    let (code, err) = crate::common::wait(child.take(), std::time::Duration::from_secs(180));
    assert_eq!(code, Some(0), "{err}");
    assert!(scrape(&addr).is_none(), "the metrics stop with the run");
    // A port already taken is refused by name before anything runs.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let (ok, _, err) = goodput(&["run", "--metrics-port", &port, "--concurrency", "1", "--requests", "2"]);
    assert!(!ok && err.contains("--metrics-port: cannot listen on"), "{err}");
}

/// The answer at a glance: `run -h` is a screen of one line a flag under headings; a run's
/// default output fits a 120-column terminal, its final table ten columns at most; `--wide`
/// and `--explain` give the rest; `--dry-run` lists the runs and runs none.
#[test]
fn the_default_output_is_one_screen_and_the_rest_is_asked_for() {
    let (ok, short, err) = goodput(&["run", "-h"]);
    assert!(ok, "{err}");
    assert!(short.lines().count() <= 80, "`run -h` is {} lines:\n{short}", short.lines().count());
    for heading in ["Workload:", "Load:", "SLOs:", "Target and HTTP:", "Output:"] {
        assert!(short.contains(heading), "{heading}\n{short}");
    }
    let (_, long, _) = goodput(&["run", "--help"]);
    assert!(long.contains("CUDA engine:") && long.len() > 3 * short.len());
    let dir = temp("one-screen");
    let args = ["run", "--concurrency", "1,2", "--requests", "4", "--refine", "0", "--seed", "3"];
    // A 120-column terminal, as COLUMNS says (a pipe's lines are left as written).
    let (ok, out, err) = goodput_env(&[&args[..], &["--out", dir.to_str().unwrap()]].concat(), &[("COLUMNS", "120")]);
    assert!(ok, "{err}");
    let wide: Vec<&str> = out.lines().chain(err.lines()).filter(|l| l.chars().count() > 120).collect();
    assert!(wide.is_empty(), "lines over 120 columns: {wide:#?}");
    let header = out.lines().find(|l| l.contains("load (users)")).expect("the levels table");
    assert!(header.matches('┆').count() < 10, "at most ten columns: {header}");
    assert!(!err.contains("Level 1 users"), "the three layers only with --explain:\n{err}");
    let more = temp("one-screen-more");
    let (ok, out, err) = goodput(&[&args[..], &["--wide", "--explain", "--out", more.to_str().unwrap()]].concat());
    assert!(ok, "{err}");
    assert!(out.contains("KV max") && out.contains("harness CPU"), "--wide: every column\n{out}");
    assert!(err.contains("Level 2 users") && err.contains("per-user tok/s"), "--explain: the three layers\n{err}");
    let (ok, listed, err) = goodput(&["run", "--repeats", "3", "--out", "/nonexistent/x", "--dry-run"]);
    assert!(ok, "{err}");
    assert!(listed.starts_with("3 runs under /nonexistent/x:") && listed.lines().count() == 4, "{listed}");
    assert!(!std::path::Path::new("/nonexistent/x").exists());
    let _ = (std::fs::remove_dir_all(&dir), std::fs::remove_dir_all(&more));
}
