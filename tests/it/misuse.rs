//! A hostile or unlucky user, second round (issue 23): results directories never mixed or
//! written through planted links, `compare` failing closed on broken runs, charts of numbers
//! no axis holds, a closed stdout, and numeric inputs beyond any bound. Every run is the tiny
//! model in-process (or a closed loopback port), a few requests, bounded in time.

use crate::common::{goodput, goodput_code, read_request, records, spawn, summary_of, temp, wait};
use std::io::{BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A small run's flags, each unless `extra` gives it.
const SMALL: [(&str, &str); 4] = [("--concurrency", "1"), ("--requests", "3"), ("--warmup", "0"), ("--refine", "0")];

fn run_into(dir: &Path, extra: &[&str]) -> (i32, String, String) {
    let mut args = vec!["run", "--quiet", "--out", dir.to_str().unwrap()];
    for (flag, value) in SMALL.iter().filter(|(f, _)| !extra.contains(f)) {
        args.extend([*flag, *value]);
    }
    args.extend_from_slice(extra);
    goodput_code(&args)
}

#[test]
fn a_second_run_never_mixes_with_the_first_in_its_out_directory() {
    let dir = temp("out-mixed");
    let (code, _, err) = run_into(&dir, &["--seed", "1", "--report"]);
    assert_eq!(code, 0, "{err}");
    let first = std::fs::read(dir.join("summary.json")).unwrap();
    // Before: the second run overwrote records.jsonl beside the first run's summary.
    let (code, _, err) = run_into(&dir, &["--seed", "2"]);
    assert_eq!(code, 1, "a directory holding a run is refused: {err}");
    assert!(err.contains("not empty") && err.contains("--overwrite"), "{err}");
    assert_eq!(std::fs::read(dir.join("summary.json")).unwrap(), first, "the first run is untouched");
    // A second run killed before its first level ends leaves no file of the first beside it.
    let d = dir.to_str().unwrap();
    let slow = ["run", "--out", d, "--overwrite", "--concurrency", "4", "--requests", "400", "--seed", "2"];
    let mut child = spawn(&slow);
    assert!(first_level_started(&mut child, &dir, Duration::from_secs(60)), "the second run reached its first level");
    let _ = child.kill();
    let _ = child.wait();
    for stale in ["report.html", "conclusion.txt", "summary.json"] {
        assert!(!dir.join(stale).exists(), "{stale} of the first run is gone");
    }
    assert!(records(&dir).iter().all(|r| r["level"] == 4.0), "records are the second run's alone");
    let (ok, _, err) = goodput(&["report", d]);
    assert!(!ok && err.contains("no summary.json"), "report sees no finished run: {err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Polls until `child`'s run has written a whole record of its first level (4 users) into
/// `dir`, so a kill lands while that level runs however slowly the machine started it; false
/// when the run ended or `limit` passed first.
fn first_level_started(child: &mut std::process::Child, dir: &Path, limit: Duration) -> bool {
    let t = std::time::Instant::now();
    while t.elapsed() < limit {
        if child.try_wait().unwrap().is_some() {
            return false;
        }
        let text = std::fs::read_to_string(dir.join("records.jsonl")).unwrap_or_default();
        // A line still being written does not parse, and is read again on the next poll.
        if text.lines().filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()).any(|r| r["level"] == 4.0) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn planted_links_in_the_out_directory_are_never_followed() {
    let dir = temp("out-links");
    std::fs::create_dir_all(&dir).unwrap();
    let victim = temp("out-links-victim");
    std::fs::write(&victim, "precious").unwrap();
    std::os::unix::fs::symlink(&victim, dir.join("records.jsonl")).unwrap();
    // Refused without --overwrite; with it the link itself is replaced, its target kept.
    let (code, _, err) = run_into(&dir, &[]);
    assert_eq!(code, 1, "{err}");
    let (code, _, err) = run_into(&dir, &["--overwrite"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    assert!(!std::fs::symlink_metadata(dir.join("records.jsonl")).unwrap().file_type().is_symlink());
    assert_eq!(records(&dir).iter().filter(|r| r["phase"] == "measured").count(), 3);
    // A file no run writes is never deleted: --overwrite refuses the directory.
    std::os::unix::fs::symlink(&victim, dir.join("summary.json.tmp")).unwrap();
    let (code, _, err) = run_into(&dir, &["--overwrite"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("summary.json.tmp") && err.contains("does not write"), "{err}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(&victim);
}

/// A loopback server that lists `tiny` and fails every other request with a 500; it
/// answers until `stop` is raised (polled every 10 ms).
fn failing_server(stop: Arc<AtomicBool>) -> (String, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    listener.set_nonblocking(true).unwrap();
    let handle = std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            let Ok((conn, _)) = listener.accept() else {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            };
            conn.set_nonblocking(false).unwrap();
            conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut reader = BufReader::new(conn);
            let head = read_request(&mut reader).unwrap_or_default();
            let (status, body) = if head.lines().next().is_some_and(|l| l.contains("/v1/models")) {
                ("200 OK", r#"{"object":"list","data":[{"id":"tiny","object":"model"}]}"#)
            } else {
                ("500 Internal Server Error", r#"{"error":{"message":"broken","type":"server_error"}}"#)
            };
            let answer = format!(
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = reader.get_mut().write_all(answer.as_bytes());
        }
    });
    (url, handle)
}

/// A run whose every request fails (HTTP 500).
fn dead_run(dir: &Path, levels: &str) {
    let stop = Arc::new(AtomicBool::new(false));
    let (target, server) = failing_server(stop.clone());
    let args = ["--target", &target, "--served-model-name", "tiny", "--concurrency", levels, "--timeout", "5s"];
    let (code, _, err) = run_into(dir, &args);
    stop.store(true, Ordering::Relaxed);
    server.join().unwrap();
    assert_eq!(code, 3, "a level without a completed request: {err}");
}

#[test]
fn compare_fails_closed_on_a_broken_run() {
    let (a, b, c) = (temp("cmp-a"), temp("cmp-b"), temp("cmp-c"));
    let (code, _, err) = run_into(&a, &["--concurrency", "1,2"]);
    assert_eq!(code, 0, "{err}");
    dead_run(&b, "1,2");
    let (sa, sb) = (a.to_str().unwrap(), b.to_str().unwrap());
    // Before: the TTFT rows vanished and the gate passed (exit 0).
    let (code, out, err) = goodput_code(&["compare", sa, sb, "--fail-on", "ttft_p95=+10%"]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(err.contains("ttft_p95 at load 1: B has no value"), "{err}");
    // Before: 0 % → 100 % printed "NaN (NaN %)" and passed.
    let (code, out, err) = goodput_code(&["compare", sa, sb, "--fail-on", "error_rate=+1%"]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(out.contains("— (from 0)") && !out.contains("NaN"), "{out}");
    assert!(err.contains("error_rate at load 1: 0.00 % → 100.00 % (from 0"), "{err}");
    // A level missing from B is a failure of the gate, not skipped.
    let (code, _, err) = run_into(&c, &["--concurrency", "1"]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = goodput_code(&["compare", sa, c.to_str().unwrap(), "--fail-on", "ttft_p95=+500%"]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(err.contains("load 2 has measured requests in A but not in B"), "{err}");
    assert!(out.contains("**Not compared:** load 2"), "{out}");
    // A corrupt or newer summary is an error (2), never "missing".
    std::fs::write(c.join("summary.json"), "{\"format\": 999}").unwrap();
    let (code, _, err) = goodput_code(&["compare", sa, c.to_str().unwrap(), "--fail-on", "ttft_p95=+10%"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("summary cannot be read"), "{err}");
    for d in [a, b, c] {
        let _ = std::fs::remove_dir_all(d);
    }
}

#[test]
fn a_report_of_numbers_beyond_any_axis_ends_and_says_so() {
    let dir = temp("report-huge");
    std::fs::create_dir_all(&dir).unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/run-small");
    for f in ["records.jsonl", "timeseries.csv", "conclusion.txt"] {
        std::fs::copy(fixture.join(f), dir.join(f)).unwrap();
    }
    let mut s = summary_of(&fixture);
    for level in s["levels"].as_array_mut().unwrap() {
        level["summary"]["output_throughput"] = serde_json::json!(1.5e308);
        level["output_throughput"] = serde_json::json!(1.5e308);
    }
    std::fs::write(dir.join("summary.json"), serde_json::to_vec(&s).unwrap()).unwrap();
    // Before: the chart's axis to 1.5e308 × 1.3 = ∞ never finished its ticks.
    let (code, err) = wait(spawn(&["report", dir.to_str().unwrap()]), Duration::from_secs(60));
    assert_eq!(code, Some(0), "{err}");
    let page = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(page.contains("beyond the plottable range left out"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_closed_stdout_ends_listings_quietly() {
    for cmd in [["models"], ["hardware"]] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_goodput"))
            .args(cmd)
            .env_remove("RUST_BACKTRACE")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The reader goes away before the listing is written (`goodput models | head -0`).
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{cmd:?}: {err}");
        assert!(!err.contains("panicked"), "{cmd:?}: {err}");
    }
}

#[test]
fn numeric_inputs_beyond_their_bounds_are_refused_by_name() {
    let trace = temp("speedup.jsonl");
    std::fs::write(&trace, "{\"timestamp\":0,\"input_length\":8,\"output_length\":2}\n").unwrap();
    let scenario = temp("nan.toml");
    std::fs::write(&scenario, "input = { kind = \"normal\", mean = nan, std = 1.0, min = 1, max = 9 }\noutput = { kind = \"fixed\", n = 4 }\n").unwrap();
    let t = trace.to_str().unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--requests", "0"], "--requests: a level must measure at least 1"),
        (vec!["--concurrency", "2,2,1"], "the load 2 is given twice"),
        (vec!["--trace", t, "--trace-speedup", "1e308"], "--trace-speedup"),
        (vec!["--rate", "1e-300"], "at least 0.001 requests per second"),
        (vec!["--timeout", "1e300s"], "longer than a year"),
        (vec!["--scenario", scenario.to_str().unwrap()], "normal needs a mean"),
    ];
    for (args, want) in cases {
        let mut all = vec!["run"];
        all.extend(&args);
        let (code, _, err) = goodput_code(&all);
        assert!(code == 1 || code == 2, "{args:?} (exit {code}, 2 from the argument parser): {err}");
        assert!(err.contains(want) && !err.contains("panicked"), "{args:?}: {err}");
    }
    let _ = (std::fs::remove_file(trace), std::fs::remove_file(scenario));
}

#[test]
fn long_gen_runs_on_the_default_model_and_says_how_it_was_fitted() {
    let dir = temp("long-gen");
    let (code, _, err) = run_into(&dir, &["--scenario", "long-gen", "--requests", "1"]);
    assert_eq!(code, 0, "{err}");
    let s = summary_of(&dir);
    let lengths = s["workload"]["lengths"].as_str().unwrap();
    assert!(lengths.contains("scaled from 400–600 to 298–448 tokens"), "{lengths}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The third round's numeric and mode inputs: refused by name, at once, never wrapped or
/// waited on.
#[test]
fn third_round_inputs_are_refused_by_name() {
    let trace = temp("third.jsonl");
    std::fs::write(&trace, "{\"timestamp\":0,\"input_length\":8,\"output_length\":2}\n").unwrap();
    let t = trace.to_str().unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["plan", "-m", "llama-3.1-8b", "--rate", "1e308"],
            "--rate must be a positive number of requests per second up to",
        ),
        (vec!["plan", "-m", "llama-3.1-8b", "--curve", "--trace", t], "cannot be used with"),
        (vec!["plan", "-m", "llama-3.1-8b", "--trace", t, "--rate", "2"], "cannot be used with"),
        (vec!["run", "--rate", "2", "--start-at", "9999-12-31T23:59:59Z"], "at most 168 hours ahead"),
        (vec!["run", "--rate", "2", "--start-at", "2001-01-01T00:00:00Z"], "hours in the past"),
        (
            vec![
                "run",
                "--target",
                "http://127.0.0.1:9",
                "--rate",
                "2",
                "--seed",
                "1",
                "--shard",
                "9999/10000",
                "--requests",
                "2",
            ],
            "none of which falls to shard 9999",
        ),
        (
            vec!["run", "--scenario", "chat"],
            "built in: short-qa, long-gen, long-context, reasoning, multi-turn, agent, rag",
        ),
    ];
    for (args, want) in cases {
        let started = std::time::Instant::now();
        let (code, _, err) = goodput_code(&args);
        assert!(code == 1 || code == 2, "{args:?} (exit {code}): {err}");
        assert!(err.contains(want) && !err.contains("panicked"), "{args:?}: {err}");
        assert!(started.elapsed() < Duration::from_secs(30), "{args:?}: {:?}", started.elapsed());
    }
    let _ = std::fs::remove_file(trace);
}

/// A refused connection's causes are each said once: the client's message holds them all, and
/// the lines after it add nothing it said.
#[test]
fn an_error_s_causes_are_said_once() {
    let (ok, _, err) = goodput(&["run", "--target", "http://127.0.0.1:9", "--concurrency", "1"]);
    assert!(!ok && err.contains("Connection refused"), "{err}");
    assert_eq!(err.matches("Connection refused").count(), 1, "{err}");
    assert!(err.lines().filter(|l| l.contains("caused by")).count() <= 1, "{err}");
}
