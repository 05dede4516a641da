//! goodput over HTTP, end to end: `goodput serve` as a process (driven by `goodput run
//! --target URL`, scraped, stopped by SIGTERM) and `--target http-local` against the
//! in-process run of the same workload.

use crate::common::{chart, chart_data, check_schema, goodput, run_ok, summary_of, temp};
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A plain HTTP/1.0 GET on loopback.
fn get(addr: &str, path: &str) -> String {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn http_local_agrees_with_in_process_and_http_adds_little_to_ttft() {
    let _serial = crate::serial();
    let dir = temp("local");
    // The engine on one core, the load generator and the HTTP server on another (the seeds'
    // advice: a client sharing cores with the server moves the numbers it measures).
    let cpus = goodput_engine::affinity::allowed();
    let (e, h) = (cpus[0].to_string(), cpus.last().unwrap().to_string());
    let mut common = vec!["--concurrency", "1", "--requests", "12", "--warmup", "2", "--refine", "0", "--seed", "3"];
    if cpus.len() >= 2 {
        common.extend(["--engine-cpus", &e, "--harness-cpus", &h]);
    }
    let mut args = vec!["run", "--target", "http-local", "--report", "--scrape-interval", "50ms", "--out"];
    let http_dir = dir.join("http");
    args.push(http_dir.to_str().unwrap());
    args.extend(common.iter().copied());
    let (ok, out, err) = goodput(&args);
    assert!(ok, "{err}");
    assert!(out.contains("TTFT over HTTP, decomposed"), "{out}");
    let mut args = vec!["run", "--out"];
    let proc_dir = dir.join("inproc");
    args.push(proc_dir.to_str().unwrap());
    args.extend(common.iter().copied());
    let (ok, _, err) = goodput(&args);
    assert!(ok, "{err}");
    let (h, p) = (&summary_of(&http_dir)["levels"][0]["summary"], &summary_of(&proc_dir)["levels"][0]["summary"]);
    // Same prompts and lengths: the engine did the same work either way.
    assert_eq!(h["mean_input_tokens"], p["mean_input_tokens"]);
    assert_eq!(h["mean_output_tokens"], p["mean_output_tokens"]);
    // HTTP adds nothing to the engine's own work: its prefill and decode medians agree within
    // 40 % (12 requests on a pinned core of a shared machine: 1.30 seen once for a 18 ms
    // prefill), not "within 2× either way".
    for k in ["prefill_time", "decode_time"] {
        let (a, b) = (h[k]["p50"].as_f64().unwrap(), p[k]["p50"].as_f64().unwrap());
        assert!((1.0 / 1.4..1.4).contains(&(a / b)), "{k}: http-local {a} vs in-process {b}");
    }
    let d = &h["http"];
    assert_eq!(d["n"], 12);
    // On loopback, one user at a time: HTTP adds well under 2 ms to TTFT (median).
    let beyond = d["beyond_engine"]["p50"].as_f64().unwrap();
    assert!(beyond < 0.002, "TTFT beyond the engine: {beyond}: {d}");
    assert!(d["unexplained"]["max"].as_f64().unwrap().abs() < 1e-6, "one clock: the parts add up");
    assert_eq!(d["usage_mismatches"], 0);
    // The server's own /metrics, scraped around the level: its histograms are taken from the
    // scrape after the 2 warm-up requests ended to the one after the 12 measured ones did, so
    // they count the measured requests (less one that ended before the first scrape came),
    // and its gauges were read at least before and after.
    let server = &summary_of(&http_dir)["levels"][0]["server"];
    let count = server["histograms"]["request_queue_time_seconds"]["count"].as_f64().unwrap();
    assert!((11.0..=12.0).contains(&count), "{server}");
    assert!(server["histogram_window_s"][0].as_f64().unwrap() > 0.0, "warm-up left out: {server}");
    assert!(server["histograms"]["request_prefill_time_seconds"]["p50"].as_f64().unwrap() > 0.0);
    assert!(server["scrapes"].as_u64().unwrap() >= 2 && server["series"].as_array().unwrap().len() >= 2);
    assert!(out.contains("Server side, from its /metrics"), "{out}");
    // The report's TTFT chart stacks the HTTP breakdown: its parts are the level's medians.
    let page = std::fs::read_to_string(http_dir.join("report.html")).unwrap();
    let start = page.find("id=\"chart-data\">").unwrap() + 16;
    let end = start + page[start..].find("</script>").unwrap();
    let charts: Value = serde_json::from_str(&page[start..end].replace("<\\/", "</")).unwrap();
    let ttft = charts.as_array().unwrap().iter().find(|c| c["id"] == "ttft-decomposition").unwrap();
    let names: Vec<&str> = ttft["series"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["queue", "prefill", "handoff", "UTF-8 hold", "HTTP overhead (beyond the engine)"]);
    let overhead = ttft["series"][4]["points"][0][1].as_f64().unwrap();
    assert!((overhead - d["beyond_engine"]["p50"].as_f64().unwrap() * 1e3).abs() < 1e-9);
    let rec: Value =
        serde_json::from_str(std::fs::read_to_string(http_dir.join("records.jsonl")).unwrap().lines().last().unwrap())
            .unwrap();
    assert_eq!(rec["http"]["status"], 200);
    assert!(rec["http"]["headers"].is_u64() && rec["http"]["first_byte"].is_u64() && rec["http"]["done"].is_u64());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A child process killed when dropped: a failing assertion must not leave a server running
/// (it would hold the test's output pipe open and the run would hang).
struct Server(std::process::Child);
impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The server at `url` seen as an HTTP-only one (as vLLM is): no per-request stamps, so queue
/// and prefill come from its /metrics, in the table, the conclusion and the report.
fn http_only_view_of(url: &str) {
    let bare = temp("bare");
    let out = run_ok(
        &bare,
        &[
            "--target",
            url,
            "--ignore-server-stamps",
            "--scrape-interval",
            "100ms",
            "--concurrency",
            "1,3",
            "--requests",
            "6",
            "--refine",
            "0",
            "--report",
        ],
    );
    assert!(out.contains("Server side, from its /metrics") && out.contains("queue mean"), "{out}");
    assert!(out.contains("(queue times from the server's /metrics)"), "{out}");
    let sum = summary_of(&bare);
    check_schema(&sum);
    for l in sum["levels"].as_array().unwrap() {
        assert!(l["summary"]["queue_time"].is_null() && l["summary"]["http"]["queue"].is_null(), "{l}");
        let q = &l["server"]["histograms"]["request_queue_time_seconds"];
        // 6 measured requests, each waiting well under a second. The histograms are the
        // difference of the scrapes after the last warm-up end and after the last measured end
        // (`goodput_metrics::server::bracket`); a queue time is observed when its request is
        // scheduled, so with U users up to U measured ones fall outside (U − 1 in flight as the
        // last warm-up ends, and the one its user sends then, scheduled before that scrape).
        let users = l["summary"]["load"].as_f64().unwrap();
        assert!(q["count"].as_f64().unwrap() >= 6.0 - users, "{q} at {users} users");
        assert!((0.0..1.0).contains(&q["mean"].as_f64().unwrap()), "{q}");
        // Occupancy from the server's gauges, not zeros from an engine that is not here.
        let o = &l["occupancy"];
        assert!(
            o["from_server"] == true && o["running_max"].as_f64().unwrap() >= 1.0 && o["preemptions"].is_null(),
            "{o}"
        );
        assert!(l["harness"]["engine_in_process"] == false, "{l}");
    }
    let charts = chart_data(&std::fs::read_to_string(bare.join("report.html")).unwrap());
    let chart = |id: &str| chart(&charts, id);
    let ttft = &chart("ttft-decomposition")["series"];
    assert_eq!(ttft[0]["name"], "queue (server /metrics)");
    let (load, queue_ms) = (ttft[0]["points"][1][0].as_f64().unwrap(), ttft[0]["points"][1][1].as_f64().unwrap());
    let level = &sum["levels"][1];
    assert_eq!(load, level["summary"]["load"].as_f64().unwrap());
    let mean = level["server"]["histograms"]["request_queue_time_seconds"]["mean"].as_f64().unwrap();
    assert!((queue_ms - mean * 1e3).abs() < 1e-9, "{queue_ms} vs {mean}");
    // Queue + prefill + the rest is the client's mean TTFT.
    let total: f64 = ttft.as_array().unwrap().iter().map(|s| s["points"][1][1].as_f64().unwrap()).sum();
    let client = level["summary"]["ttft"]["mean"].as_f64().unwrap() * 1e3;
    assert!((total - client).abs() < 1e-6 || total > client, "{total} vs {client}");
    // The engine's state over time from the server's gauges, level after level.
    let timeline = chart("engine-timeline");
    assert!(timeline["caption"].as_str().unwrap().contains("/metrics gauges"), "{timeline}");
    assert!(timeline["series"][0]["points"].as_array().unwrap().len() >= 4, "{timeline}");
    let _ = std::fs::remove_dir_all(&bare);
}

#[test]
fn serve_runs_as_a_process_is_driven_by_url_scraped_and_stops_on_sigterm() {
    let _serial = crate::serial();
    let mut server = Server(
        Command::new(env!("CARGO_BIN_EXE_goodput"))
            .args(["serve", "--port", "0", "--max-model-len", "1024", "--shutdown-grace", "2s"])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let child = &mut server.0;
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let addr = first.split("http://").nth(1).and_then(|s| s.split_whitespace().next()).expect(&first).to_string();
    assert!(get(&addr, "/health").ends_with("ok"));
    let dir = temp("url");
    let url = format!("http://{addr}");
    let out = run_ok(&dir, &["--target", &url, "--concurrency", "2", "--requests", "6", "--refine", "0"]);
    assert!(out.contains("TTFT over HTTP"), "{out}");
    let level = &summary_of(&dir)["levels"][0];
    let s = &level["summary"];
    assert_eq!(s["completed"], 6);
    // Another process: engine durations come from the server, cross-clock parts do not.
    assert!(s["http"]["beyond_engine"]["p50"].is_number() && s["http"]["request_path"].is_null(), "{}", s["http"]);
    assert!(s["prefill_time"]["p50"].as_f64().unwrap() > 0.0);
    let m = get(&addr, "/metrics");
    // The server counted every request: the 6 measured and the warm-up (both users' first
    // requests, and any sent before the second of them ended).
    let all = 6 + level["warmup_requests"].as_u64().unwrap();
    assert!(m.contains(&format!("goodput_e2e_request_latency_seconds_count{{model_name=\"tiny\"}} {all}")), "{m}");
    http_only_view_of(&url);
    // A wrong model name and a wrong URL are clear errors before anything runs.
    let (ok, _, err) = goodput(&["run", "--target", &url, "--served-model-name", "llama", "--requests", "1"]);
    assert!(!ok && err.contains("does not serve `llama`"), "{err}");
    let (ok, _, err) = goodput(&["run", "--target", "ftp://x", "--requests", "1"]);
    assert!(!ok && err.contains("expected in-process, http-local or http://"), "{err}");
    // SIGTERM: a clean stop within the grace period.
    let t = Instant::now();
    assert!(Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap().success());
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "{status}");
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "goodput serve did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(rest.iter().any(|l| l.contains("stopped")), "{rest:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn calibrate_measures_the_client_against_a_known_schedule() {
    let _serial = crate::serial();
    let dir = temp("calibrate");
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("calib.json");
    let (ok, out, err) = goodput(&[
        "calibrate",
        "--concurrency",
        "1,20",
        "--ttft",
        "50ms",
        "--itl",
        "10ms",
        "--tokens",
        "10",
        "--floor",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert!(out.contains("Client calibration") && out.contains("chunk delay p50"), "{out}");
    assert!(out.contains("Floor at 20 streams") && out.contains("Streams per client core within"), "{out}");
    let levels: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    for (l, streams) in levels.as_array().unwrap().iter().zip([1u64, 20]) {
        assert_eq!(l["streams"], streams);
        assert_eq!(l["failed"], 0);
        assert_eq!(l["tokens"].as_u64().unwrap(), streams * 2 * 10);
        assert_eq!(l["chunk_delay"]["n"].as_u64().unwrap(), streams * 2 * 10, "every chunk matched to its write");
        // On loopback a chunk reaches the client within milliseconds of being written.
        let d = l["chunk_delay"]["p50"].as_f64().unwrap();
        assert!((0.0..0.005).contains(&d), "chunk delay {d}");
        // The measured ITL is the mock's 10 ms within the timer's granularity.
        assert!(l["itl_error"]["p50"].as_f64().unwrap().abs() < 0.003, "{}", l["itl_error"]);
        assert!(l["cpu_per_token_s"].as_f64().unwrap() > 0.0);
        // Every measured request's receipt matched: the mock's own lateness is its timer's.
        assert_eq!(l["mock_late"]["n"].as_u64().unwrap(), streams * 2);
        assert!((0.0..0.005).contains(&l["mock_late"]["p50"].as_f64().unwrap()), "{}", l["mock_late"]);
        // The floor read every event in about one read per token.
        let reads = l["floor"]["reads_per_token"].as_f64().unwrap();
        assert!((0.5..2.5).contains(&reads) && l["floor"]["cpu_per_token_s"].as_f64().unwrap() > 0.0, "{}", l["floor"]);
    }
    let (ok, _, err) = goodput(&["calibrate", "--concurrency", "0"]);
    assert!(!ok && err.contains("at least 1 stream"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
