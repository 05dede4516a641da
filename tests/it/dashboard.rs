//! The Grafana dashboard (`grafana/goodput.json`, built by `scripts/grafana-dashboard.py`)
//! against a real Prometheus (Debian's, `scripts/install-prometheus.sh`) scraping a `goodput
//! serve` and a `goodput run --metrics-port` driving it: every panel's query returns series.
//! The same against vLLM's own server (`../shared/peers/`, the dashboard's `vllm:` prefix),
//! ignored by default as it needs the peer running:
//! `GOODPUT_VLLM_PEER=127.0.0.1:8011 cargo test --test it -- --ignored dashboard`.

use crate::common::{serve, spawn, wait, Running};
use serde_json::Value;
use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A Prometheus server, killed when dropped.
struct Prometheus(Child);

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// `GET path` from `addr` over HTTP/1.0 (no chunked body): the body, or `None`.
fn get(addr: &str, path: &str) -> Option<String> {
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes()).ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    Some(text.split_once("\r\n\r\n")?.1.to_string())
}

/// `s` percent-encoded for a query string.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Whether an instant query's result holds a series with a finite value (`[time, "value"]`).
fn finite(result: &Value) -> bool {
    let value = |s: &Value| s["value"][1].as_str().and_then(|v| v.parse::<f64>().ok());
    result.as_array().is_some_and(|r| r.iter().any(|s| value(s).is_some_and(f64::is_finite)))
}

/// Every panel's queries, with the dashboard's variables as Grafana would fill them (the
/// server's metric `prefix`, a 10 s rate window).
fn queries(prefix: &str) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/grafana/goodput.json")).unwrap();
    let d: Value = serde_json::from_str(&text).unwrap();
    let mut out = Vec::new();
    for p in d["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().into_iter().flatten() {
            let expr = t["expr"].as_str().unwrap().replace("${prefix}", prefix).replace("$__rate_interval", "10s");
            out.push((p["title"].as_str().unwrap().to_string(), expr));
        }
    }
    out
}

#[test]
fn every_panel_of_the_dashboard_returns_series_from_a_real_prometheus() {
    let (_server, addr) = serve(&[]);
    every_panel_returns_series(&addr, "goodput_", &[]);
}

#[test]
#[ignore = "needs vLLM's CPU peer running (../shared/peers/run_vllm_peer.sh): GOODPUT_VLLM_PEER=HOST:PORT"]
fn every_panel_of_the_dashboard_returns_series_from_vllm() {
    let addr = std::env::var("GOODPUT_VLLM_PEER")
        .expect("GOODPUT_VLLM_PEER=HOST:PORT of a running vLLM peer (../shared/peers/run_vllm_peer.sh)");
    let model = std::env::var("GOODPUT_VLLM_MODEL").unwrap_or_else(|_| "/tmp/peers/tinyllama".into());
    every_panel_returns_series(&addr, "vllm:", &["--served-model-name", &model]);
}

/// Prometheus scraping the server at `addr` (its metrics named with `prefix`) and a `goodput
/// run --metrics-port` driving it (with `extra` flags): every panel's query has a finite value
/// while the run is in its second level.
fn every_panel_returns_series(addr: &str, prefix: &str, extra: &[&str]) {
    let installed = Command::new("bash")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/install-prometheus.sh"))
        .output()
        .unwrap();
    assert!(installed.status.success(), "install-prometheus.sh: {}", String::from_utf8_lossy(&installed.stderr));
    let prometheus = String::from_utf8(installed.stdout).unwrap().trim().to_string();
    let (run_port, prom_port) = (free_port(), free_port());
    let dir = crate::common::temp("dashboard");
    std::fs::create_dir_all(&dir).unwrap();
    let config = format!(
        "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: serve\n    static_configs: [{{targets: ['{addr}']}}]\n  - job_name: run\n    static_configs: [{{targets: ['127.0.0.1:{run_port}']}}]\n"
    );
    std::fs::write(dir.join("prometheus.yml"), config).unwrap();
    let prom_addr = format!("127.0.0.1:{prom_port}");
    let _prom = Prometheus(
        Command::new(&prometheus)
            .arg(format!("--config.file={}", dir.join("prometheus.yml").display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address={prom_addr}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start prometheus"),
    );
    let target = format!("http://{addr}");
    let port = run_port.to_string();
    let mut args =
        vec!["run", "--target", &target, "--metrics-port", &port, "--concurrency", "1,2", "--duration", "25s"];
    args.extend(["--refine", "0", "-q"]);
    args.extend(extra);
    let mut run = Running::new(spawn(&args));
    // Into the second level, every query at once; a query without a finite value in its
    // series is retried until the run ends (rates need two scrapes in their window, and a
    // quantile of buckets that did not move is NaN).
    let t = Instant::now();
    let mut missing: Vec<(String, String)> = queries(prefix);
    assert!(missing.len() >= 20, "{} queries", missing.len());
    std::thread::sleep(Duration::from_secs(15));
    while !missing.is_empty() && t.elapsed() < Duration::from_secs(45) && !run.ended() {
        missing.retain(|(_, expr)| {
            let body = get(&prom_addr, &format!("/api/v1/query?query={}", encode(expr)));
            let v: Option<Value> = body.and_then(|b| serde_json::from_str(&b).ok());
            !v.is_some_and(|v| v["status"] == "success" && finite(&v["data"]["result"]))
        });
        std::thread::sleep(Duration::from_secs(1));
    }
    assert!(!run.ended(), "the run ended before every panel had data: {:?}", wait(run.take(), Duration::from_secs(1)));
    assert!(missing.is_empty(), "panels whose queries returned no finite value: {missing:#?}");
    let (code, err) = wait(run.take(), Duration::from_secs(120));
    assert_eq!(code, Some(0), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
