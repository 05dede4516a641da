//! A run that is interrupted, killed, or pointed at a server whose every stream fails, and a
//! server sent a half request at shutdown: the real `goodput` binary on loopback, bounded in
//! count and time.

use crate::common::{
    check_schema, goodput, goodput_code, read_request, records, signal, spawn, summary_of, temp, wait,
};
use goodput_results::RecordRow;
use std::io::{BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;

use std::time::{Duration, Instant};

/// Lines of a file (none when it does not exist yet).
fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path).map(|t| t.lines().map(String::from).collect()).unwrap_or_default()
}

fn wait_for_lines(path: &Path, n: usize, limit: Duration) {
    let t = Instant::now();
    while lines(path).len() < n {
        assert!(t.elapsed() < limit, "{} has fewer than {n} lines after {limit:?}", path.display());
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn an_interrupted_run_writes_what_finished_marks_itself_incomplete_and_exits_130() {
    let dir = temp("interrupted");
    let out = dir.join("out");
    let child =
        spawn(&["run", "--concurrency", "1,2", "--requests", "60", "--refine", "0", "--out", out.to_str().unwrap()]);
    // A warm-up request and two measured ones have finished: interrupt the first level.
    wait_for_lines(&out.join("records.jsonl"), 3, Duration::from_secs(60));
    signal(&child, "-INT");
    let (code, err) = wait(child, Duration::from_secs(30));
    assert_eq!(code, Some(130), "{err}");
    assert!(err.contains("interrupted") && !err.contains("panicked"), "{err}");
    let s = summary_of(&out);
    check_schema(&s);
    assert_eq!(s["complete"], false);
    let levels = s["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 1, "the second level never started");
    assert_eq!(levels[0]["partial"], true);
    let measured = records(&out).iter().filter(|r| r["phase"] == "measured").count();
    assert_eq!(levels[0]["summary"]["requests"].as_u64().unwrap() as usize, measured);
    assert!((2..60).contains(&measured), "{measured} measured requests");
    assert!(std::fs::read_to_string(out.join("conclusion.txt")).unwrap().contains("ended early"));
    // The report and compare of it say so at the top.
    let (ok, _, err) = goodput(&["report", out.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(err.contains("incomplete run"), "{err}");
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    let (banner, charts) = (page.find("Incomplete run.").unwrap(), page.find("id=\"charts\"").unwrap());
    assert!(banner < charts, "the banner leads the page");
    let (code, md, _) = goodput_code(&["compare", out.to_str().unwrap(), out.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(md.contains("**Incomplete run:**"), "{md}");
}

/// `GET /metrics` of a server: the count of requests it has finished.
fn finished_by_server(addr: &str) -> u64 {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(s, "GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let line = text.lines().find(|l| l.starts_with("goodput_e2e_request_latency_seconds_count")).unwrap();
    line.rsplit(' ').next().unwrap().parse::<f64>().unwrap() as u64
}

/// A free loopback port.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[test]
fn a_killed_run_keeps_every_request_that_finished_in_whole_lines() {
    let dir = temp("killed");
    let port = free_port().to_string();
    let addr = format!("127.0.0.1:{port}");
    let server = spawn(&["serve", "--port", &port, "--shutdown-grace", "1s"]);
    let t = Instant::now();
    while TcpStream::connect(&addr).is_err() {
        assert!(t.elapsed() < Duration::from_secs(60), "the server did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    let url = format!("http://{addr}");
    // Killed at different moments of a level: 2.0 s, 3.3 s and 4.6 s after it started.
    let mut checked = 0;
    for (i, at_ms) in [2000u64, 3300, 4600].into_iter().enumerate() {
        let out = dir.join(format!("run{i}"));
        let before = finished_by_server(&addr);
        let args = ["run", "--target", &url, "--concurrency", "4", "--requests", "400", "--warmup", "0"];
        let run = spawn(&[&args[..], &["--refine", "0", "--out", out.to_str().unwrap()]].concat());
        std::thread::sleep(Duration::from_millis(at_ms - 1000));
        // What the server had finished a second before the kill must all be on disk.
        let finished = finished_by_server(&addr) - before;
        std::thread::sleep(Duration::from_secs(1));
        signal(&run, "-KILL");
        let _ = wait(run, Duration::from_secs(10));
        let lines = lines(&out.join("records.jsonl"));
        for (n, line) in lines.iter().enumerate() {
            serde_json::from_str::<RecordRow>(line).unwrap_or_else(|e| panic!("run {i} line {}: {e}: {line}", n + 1));
        }
        let csv = std::fs::read_to_string(out.join("requests.csv")).unwrap();
        assert!(csv.is_empty() || csv.ends_with('\n'), "run {i}: requests.csv ends mid-row");
        assert!(lines.len() as u64 >= finished, "run {i}: {} records, the server had finished {finished}", lines.len());
        checked += finished;
        std::thread::sleep(Duration::from_millis(300));
    }
    assert!(checked > 0, "the server finished no request a second before any of the kills");
    signal(&server, "-TERM");
    let (code, err) = wait(server, Duration::from_secs(10));
    assert_eq!(code, Some(0), "{err}");
}

/// A server that lists model `tiny`, has no /metrics, and answers every completion with a
/// stream of `tokens` chunks that ends without `[DONE]`.
fn broken_stream_server(tokens: usize) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            std::thread::spawn(move || serve_broken(conn, tokens));
        }
    });
    addr
}

fn serve_broken(conn: TcpStream, tokens: usize) {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut writer = conn;
    loop {
        let Some(head) = read_request(&mut reader) else { return };
        let reply = |w: &mut TcpStream, status: &str, ctype: &str, body: &str| {
            let _ =
                write!(w, "HTTP/1.1 {status}\r\ncontent-type: {ctype}\r\ncontent-length: {}\r\n\r\n{body}", body.len());
        };
        if head.starts_with("GET /v1/models") {
            reply(
                &mut writer,
                "200 OK",
                "application/json",
                r#"{"object":"list","data":[{"id":"tiny","object":"model"}]}"#,
            );
        } else if head.starts_with("GET") {
            reply(&mut writer, "404 Not Found", "text/plain", "no");
        } else {
            let _ = write!(writer, "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n");
            for _ in 0..tokens {
                let chunk = r#"{"object":"text_completion","choices":[{"index":0,"text":"x","finish_reason":null}]}"#;
                let _ = write!(writer, "data: {chunk}\n\n");
                let _ = writer.flush();
                std::thread::sleep(Duration::from_millis(2));
            }
            return; // cut: no usage, no [DONE]
        }
    }
}

#[test]
fn a_server_whose_every_stream_breaks_has_no_throughput_and_the_run_exits_3_saying_why() {
    let dir = temp("broken-streams");
    let url = format!("http://{}", broken_stream_server(20));
    let out = dir.join("out");
    let (code, stdout, err) = goodput_code(&[
        "run",
        "--target",
        &url,
        "--concurrency",
        "1,2",
        "--requests",
        "6",
        "--refine",
        "0",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 3, "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.contains("6 of 6 failed: 6 no-end-marker"), "{err}");
    assert!(err.contains("at 1 users no measured request completed") && err.contains("at 2 users"), "{err}");
    assert!(!stdout.contains("NaN"), "{stdout}");
    assert!(!stdout.contains("limit capacity"), "nothing completed: no limit to name\n{stdout}");
    assert!(stdout.contains("none of 6 measured requests completed"), "{stdout}");
    assert!(stdout.contains("12 of 12 measured requests failed: 12 no-end-marker"), "{stdout}");
    let s = summary_of(&out);
    check_schema(&s);
    assert_eq!(s["complete"], true);
    for l in s["levels"].as_array().unwrap() {
        let l = &l["summary"];
        assert_eq!(l["output_throughput"], 0.0);
        assert_eq!(l["failed_output_tokens"], 6 * 20);
        assert_eq!(l["failures"][0]["kind"], "no-end-marker");
        assert_eq!(l["failures"][0]["count"], 6);
    }
    assert!(s["capacity"]["limit"].is_null());
}

#[test]
fn a_half_sent_request_does_not_keep_goodput_serve_alive_past_its_grace() {
    let port = free_port().to_string();
    let addr = format!("127.0.0.1:{port}");
    let server = spawn(&["serve", "--port", &port, "--shutdown-grace", "1s"]);
    let t = Instant::now();
    let mut half = loop {
        if let Ok(s) = TcpStream::connect(&addr) {
            break s;
        }
        assert!(t.elapsed() < Duration::from_secs(60), "the server did not start");
        std::thread::sleep(Duration::from_millis(50));
    };
    half.write_all(b"GET /heal").unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let t = Instant::now();
    signal(&server, "-TERM");
    let (code, err) = wait(server, Duration::from_secs(10));
    assert_eq!(code, Some(0), "{err}");
    assert!(t.elapsed() < Duration::from_secs(4), "it took {:?} to stop", t.elapsed());
}

#[test]
fn impossible_counts_and_unknown_scenario_keys_are_refused_by_name() {
    let (code, _, err) = goodput_code(&["run", "--concurrency", "1000000000"]);
    assert_eq!(code, 1);
    assert!(err.contains("--concurrency: 1000000000") && err.contains("at most 100000"), "{err}");
    let (code, _, err) = goodput_code(&["run", "--rate", "1e12"]);
    assert_eq!(code, 1);
    assert!(err.contains("--rate") && err.contains("at most"), "{err}");
    let dir = temp("bad-scenario");
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("s.toml");
    std::fs::write(&f, "bogus = 1\ninput = { kind = \"fixed\", n = 10 }\noutput = { kind = \"fixed\", n = 5 }\n")
        .unwrap();
    let (code, _, err) = goodput_code(&["run", "--scenario", f.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("bogus") && err.contains("s.toml"), "{err}");
    let cat = dir.join("cat.toml");
    std::fs::write(
        &cat,
        "[models.huge]\narchitecture = \"llama\"\nhidden_size = 1099511627776\nnum_layers = 1\nnum_heads = 8\n\
         num_kv_heads = 8\nintermediate_size = 64\nvocab_size = 1099511627776\nmax_position_embeddings = 64\n\
         rope_theta = 10000.0\nrms_norm_eps = 1e-5\ntie_word_embeddings = false\n",
    )
    .unwrap();
    let (code, _, err) =
        goodput_code(&["generate", "--catalog", cat.to_str().unwrap(), "-m", "huge", "--prompt-ids", "1"]);
    assert_eq!(code, 1);
    assert!(err.contains("huge") && err.contains("hidden_size") && !err.contains("panicked"), "{err}");
}

/// An open loop offered far more than the engine serves (300 req/s against 4 sequences at a
/// time) is stopped once its queue grows without bound, not run through its 3000 requests:
/// the level says why, counts as broken, and the conclusion names it.
#[test]
fn an_over_saturated_open_loop_is_stopped_early_and_counts_as_broken() {
    let dir = temp("saturated");
    let t = Instant::now();
    let args = ["run", "--rate", "300", "--requests", "3000", "--max-num-seqs", "4", "--refine", "0"];
    let (ok, out, err) = goodput(&[&args[..], &["--out", dir.to_str().unwrap()]].concat());
    assert!(ok, "{err}");
    let s = goodput_results::files::read_summary(&dir).unwrap();
    let level = &s.levels[0];
    let stop = level.saturated.as_ref().unwrap_or_else(|| panic!("not stopped: {err}"));
    assert!(stop.at_s < 30.0 && stop.completion_rate < 0.85 * 300.0, "{stop:?}");
    assert!(stop.late_e2e_s > 2.0 * stop.early_e2e_s, "{stop:?}");
    assert!(records(&dir).len() < 3000, "the level ran through");
    assert!(!level.outcome().slos_hold, "an over-saturated level does not hold");
    assert!(err.contains("over-saturated: stopped"), "{err}");
    assert!(out.contains("Over-saturated: the queue grew without bound at 300 req/s (stopped after"), "{out}");
    assert!(t.elapsed() < Duration::from_secs(120), "{:?}", t.elapsed());
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--soak` runs the usable capacity for its duration in windows, keeps the process's memory
/// and descriptors per window (in-process: `/proc/self`), writes its requests to soak.jsonl
/// and says in the conclusion whether capacity held.
#[test]
fn a_soak_is_judged_per_window_with_the_target_s_process_and_its_records_kept() {
    let dir = temp("soak");
    let args =
        ["run", "--concurrency", "2", "--requests", "80", "--refine", "0", "--soak", "6s", "--soak-windows", "3"];
    let (ok, out, err) = goodput(&[&args[..], &["--out", dir.to_str().unwrap()]].concat());
    assert!(ok, "{err}");
    let s = goodput_results::files::read_summary(&dir).unwrap();
    let soak = s.soak.as_ref().unwrap_or_else(|| panic!("no soak: {err}"));
    assert_eq!((soak.load, soak.windows.len()), (2.0, 3));
    assert!(soak.windows.iter().all(|w| w.requests > 0 && w.rss_max_bytes.is_some_and(|b| b > 1e6)), "{soak:?}");
    assert!(soak.windows.iter().all(|w| w.open_fds_max.is_some() && w.kv_max.is_some()), "{soak:?}");
    let rows: Vec<goodput_results::RecordRow> =
        goodput_results::files::read_jsonl(&dir.join(goodput_results::files::SOAK_RECORDS)).unwrap();
    let sent: usize = soak.windows.iter().map(|w| w.requests).sum();
    assert_eq!(rows.len(), sent);
    assert!(rows.iter().all(|r| r.level == 2.0), "one load");
    assert!(out.contains("Held over time? The soak ran 2 users for"), "{out}");
    // Windows of a few dozen requests are too short for a P95's interval to close (72), and
    // the verdict says so of exactly those; a faster machine's longer windows hold surely.
    assert!(soak.windows.iter().all(|w| w.slos_hold), "{soak:?}");
    let unsure = soak.windows.iter().filter(|w| !w.slos_surely_hold).count();
    assert!(soak.windows.iter().all(|w| w.slos_surely_hold == (w.completed >= 72)), "{soak:?}");
    let said = match unsure {
        0 => "every SLO held with 95 % confidence".to_string(),
        n => format!("every SLO held by value, in {n} of 3 windows not significantly"),
    };
    assert!(out.contains(&said), "{said}: {out}");
    assert!(out.contains("RSS (MiB)"), "the soak's table: {out}");
    let _ = std::fs::remove_dir_all(&dir);
}
