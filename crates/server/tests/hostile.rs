//! The server against hostile or broken clients, on loopback, bounded in count and time: a
//! half-sent request at shutdown, headers sent a byte at a time, more connections than the
//! limit, a burst against `max_waiting`, an OpenAI error body for every error status, API keys,
//! and foreign hosts (DNS rebinding). Silent and idle connections are `idle.rs`'s.

use goodput_server::{ListenLimits, Policy};
use serde_json::Value;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

mod common;
use common::{closed_within, h2, h2_request, post, start_with, Server};

async fn server(policy: Policy, limits: ListenLimits) -> Server {
    start_with(policy, limits, 8, Duration::ZERO).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_half_sent_request_does_not_hold_shutdown() {
    // Nothing is in flight, so the 5 s grace is not waited for (before: grace + 1 s).
    let limits = ListenLimits { grace: Duration::from_secs(5), ..Default::default() };
    let s = server(Policy::default(), limits).await;
    let mut half = TcpStream::connect(s.addr).await.unwrap();
    half.write_all(b"GET /heal").await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let t = Instant::now();
    s.shutdown().await; // panics when the server is still running after 10 s
    assert!(t.elapsed() < Duration::from_millis(1500), "shutdown took {:?}", t.elapsed());
    assert!(closed_within(&mut half, Duration::from_secs(1)).await.is_some(), "the half-sent connection is still open");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_sent_a_byte_at_a_time_are_cut_off_at_the_header_timeout() {
    let limits = ListenLimits { header_timeout: Duration::from_millis(500), ..Default::default() };
    let s = server(Policy::default(), limits).await;
    let mut slow = TcpStream::connect(s.addr).await.unwrap();
    let t = Instant::now();
    let head = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
    let mut cut = false;
    for i in 0..40 {
        // Each byte well within any read timeout, the whole head never.
        if slow.write_all(&[head.get(i).copied().unwrap_or(b'a')]).await.is_err() {
            cut = true;
            break;
        }
        if closed_within(&mut slow, Duration::from_millis(100)).await.is_some() {
            cut = true;
            break;
        }
    }
    assert!(cut, "a connection sending one byte per 100 ms was held for {:?}", t.elapsed());
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    let (st, _, _) = post(&s.url("/v1/completions"), r#"{"model":"tiny","prompt":"a","max_tokens":2}"#).await;
    assert_eq!(st, 200);
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beyond_max_connections_a_connection_gets_503_and_the_server_recovers() {
    let limits = ListenLimits { max_connections: 3, ..Default::default() };
    let s = server(Policy::default(), limits).await;
    let mut idle = Vec::new();
    for _ in 0..3 {
        idle.push(TcpStream::connect(s.addr).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let r = reqwest::get(s.url("/v1/models")).await.unwrap();
    assert_eq!(r.status(), 503);
    assert_eq!(r.headers()["connection"], "close");
    let v: Value = r.json().await.unwrap();
    assert!(v["error"]["message"].as_str().unwrap().contains("3 connections"), "{v}");
    drop(idle);
    let t = Instant::now();
    loop {
        let r = reqwest::get(s.url("/v1/models")).await.unwrap();
        if r.status() == 200 {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(3), "still {} after the idle connections closed", r.status());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_cannot_overshoot_max_waiting() {
    // Two sequences run at once; a step every 20 ms; requests of 480 tokens stay running for
    // the whole burst. Admitted at most: 2 running + 4 waiting.
    let policy = Policy { max_waiting: Some(4), ..Policy::default() };
    let s = start_with(policy, ListenLimits::default(), 2, Duration::from_millis(20)).await;
    let client = reqwest::Client::new();
    let body = r#"{"model":"tiny","prompt":"a","max_tokens":480,"ignore_eos":true,"stream":true}"#;
    let sends = (0..150).map(|_| {
        let req = client.post(s.url("/v1/completions")).header("content-type", "application/json").body(body);
        async move { req.send().await.unwrap() }
    });
    let responses = futures_util::future::join_all(sends).await;
    let admitted = responses.iter().filter(|r| r.status() == 200).count();
    let refused = responses.iter().filter(|r| r.status() == 429).count();
    assert_eq!(admitted + refused, 150);
    assert!((4..=6).contains(&admitted), "{admitted} admitted with max_waiting 4 and 2 running");
    let last_429 = responses.into_iter().find(|r| r.status() == 429).unwrap();
    let v: Value = last_429.json().await.unwrap();
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(msg.contains("(limit 4)") && !msg.contains(" 5 requests"), "{msg}");
    s.wait_idle().await;
    s.shutdown().await;
}

/// `(method, path, headers, body)` → status, for requests that must fail.
async fn raw(s: &Server, method: &str, path: &str, ctype: Option<&str>, body: &str) -> (u16, Value) {
    let mut r = reqwest::Client::new().request(method.parse().unwrap(), s.url(path)).body(body.to_string());
    if let Some(c) = ctype {
        r = r.header("content-type", c);
    }
    let resp = r.send().await.unwrap();
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or_else(|_| panic!("{method} {path}: {status} not JSON: {text:?}")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_error_status_has_an_openai_body() {
    let policy = Policy { max_body_bytes: 1024, body_timeout: Duration::from_millis(300), ..Policy::default() };
    let s = server(policy, ListenLimits::default()).await;
    let ok = r#"{"model":"tiny","prompt":"a","max_tokens":2}"#;
    let big = format!(r#"{{"model":"tiny","prompt":"{}"}}"#, "a".repeat(2000));
    let json = Some("application/json");
    let cases: Vec<(&str, &str, Option<&str>, &str, u16)> = vec![
        ("GET", "/v1/nowhere", None, "", 404),
        ("GET", "/v1/completions", None, "", 405),
        ("DELETE", "/health", None, "", 405),
        ("POST", "/v1/completions", json, &big, 413),
        ("POST", "/v1/completions", Some("text/plain"), ok, 415),
        ("POST", "/v1/chat/completions", Some("application/x-www-form-urlencoded"), ok, 415),
        ("POST", "/v1/completions", None, ok, 415),
    ];
    for (method, path, ctype, body, want) in cases {
        let (status, v) = raw(&s, method, path, ctype, body).await;
        assert_eq!(status, want, "{method} {path} {ctype:?}: {v}");
        assert_eq!(v["error"]["code"], want, "{v}");
        assert!(!v["error"]["message"].as_str().unwrap().is_empty());
    }
    assert_eq!(raw(&s, "POST", "/v1/completions", Some("application/json; charset=utf-8"), ok).await.0, 200);
    // A body that stops halfway: 408 at the body timeout.
    let mut sock = TcpStream::connect(s.addr).await.unwrap();
    let head = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"model\"";
    sock.write_all(head.as_bytes()).await.unwrap();
    let reply = closed_within(&mut sock, Duration::from_secs(3)).await.expect("the server answers a stalled body");
    let reply = String::from_utf8_lossy(&reply);
    assert!(reply.starts_with("HTTP/1.1 408"), "{reply}");
    assert!(reply.contains("\"code\":408"), "{reply}");
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_key_guards_v1_and_leaves_health_and_metrics_open() {
    let policy = Policy { api_key: Some("sk-test-1".into()), ..Policy::default() };
    let s = server(policy, ListenLimits::default()).await;
    let client = reqwest::Client::new();
    let body = r#"{"model":"tiny","prompt":"a","max_tokens":2}"#;
    for key in [None, Some("Bearer sk-test-2"), Some("Bearer sk-test-"), Some("sk-test-1"), Some("Bearersk-test-1")] {
        let mut r = client.post(s.url("/v1/completions")).header("content-type", "application/json").body(body);
        if let Some(k) = key {
            r = r.header("authorization", k);
        }
        let resp = r.send().await.unwrap();
        assert_eq!(resp.status(), 401, "{key:?}");
        let v: Value = resp.json().await.unwrap();
        assert_eq!(v["error"]["code"], 401);
        assert_eq!(v["error"]["type"], "authentication_error");
    }
    let ok = client
        .post(s.url("/v1/completions"))
        .header("content-type", "application/json")
        .bearer_auth("sk-test-1")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    // The scheme is case-insensitive (RFC 7235), and may be followed by more than one space.
    for auth in ["bearer sk-test-1", "BEARER sk-test-1", "Bearer   sk-test-1"] {
        let r = client.get(s.url("/v1/models")).header("authorization", auth).send().await.unwrap();
        assert_eq!(r.status(), 200, "{auth}");
    }
    assert_eq!(client.get(s.url("/v1/models")).send().await.unwrap().status(), 401);
    assert_eq!(client.get(s.url("/health")).send().await.unwrap().status(), 200);
    assert_eq!(client.get(s.url("/metrics")).send().await.unwrap().status(), 200);
    s.shutdown().await;
}

/// The status and body of `GET /v1/models` sent with `Host: host` over HTTP/1.1.
async fn with_host(s: &Server, host: &str) -> (u16, String) {
    let mut sock = TcpStream::connect(s.addr).await.unwrap();
    let req = format!("GET /v1/models HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    sock.write_all(req.as_bytes()).await.unwrap();
    let reply = closed_within(&mut sock, Duration::from_secs(3)).await.expect("the server answers and closes");
    let reply = String::from_utf8_lossy(&reply).into_owned();
    let status = reply.get(9..12).and_then(|c| c.parse().ok()).unwrap_or_else(|| panic!("{reply:?}"));
    (status, reply)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_host_is_refused_on_loopback_and_local_names_are_served() {
    let s = server(Policy::default(), ListenLimits::default()).await;
    let port = s.addr.port();
    for host in [format!("127.0.0.1:{port}"), format!("localhost:{port}"), format!("[::1]:{port}"), "localhost".into()]
    {
        assert_eq!(with_host(&s, &host).await.0, 200, "{host}");
    }
    // A page on evil.example whose name now resolves to 127.0.0.1 (DNS rebinding).
    let (status, reply) = with_host(&s, &format!("evil.example:{port}")).await;
    assert_eq!(status, 403, "{reply}");
    let body: Value = serde_json::from_str(reply.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    let msg = body["error"]["message"].as_str().unwrap();
    assert!(msg.contains("evil.example") && msg.contains("--allowed-hosts"), "{msg}");
    assert_eq!(body["error"]["code"], 403);
    // /health and /metrics are guarded too, and so is HTTP/2's :authority.
    let (mut send, _conn) = h2(TcpStream::connect(s.addr).await.unwrap()).await;
    assert_eq!(h2_request(&mut send, &format!("evil.example:{port}"), "/metrics", None).await.0, 403);
    assert_eq!(h2_request(&mut send, &s.addr.to_string(), "/metrics", None).await.0, 200);
    // The project's own client reaches it as 127.0.0.1:PORT.
    let target = goodput_client::HttpTarget::new(
        goodput_client::HttpConfig::new(format!("http://{}", s.addr), "tiny"),
        s.state.clock,
    )
    .unwrap();
    assert_eq!(target.models().await.unwrap(), ["tiny"]);
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listed_names_are_served_and_allow_any_host_turns_the_check_off() {
    use goodput_server::hosts::AllowedHosts;
    let listed = AllowedHosts { any: false, names: vec!["bench.internal".into(), ".corp.example".into()] };
    let s = server(Policy { allowed_hosts: listed, ..Policy::default() }, ListenLimits::default()).await;
    assert_eq!(with_host(&s, "bench.internal:8000").await.0, 200);
    assert_eq!(with_host(&s, "gpu1.corp.example").await.0, 200);
    assert_eq!(with_host(&s, "evil.example").await.0, 403);
    s.shutdown().await;
    let any = AllowedHosts { any: true, names: vec![] };
    let s = server(Policy { allowed_hosts: any, ..Policy::default() }, ListenLimits::default()).await;
    assert_eq!(with_host(&s, "evil.example").await.0, 200);
    s.shutdown().await;
}
