//! Connections that say nothing, on loopback, bounded in count and time: silent sockets, HTTP/2
//! prefaces with nothing after, TLS handshakes with nothing after, idle HTTP/1 and HTTP/2
//! connections, half-sent heads. Each is closed at the header timeout and at once at
//! shutdown, while requests in flight keep their grace; a soak-like mix of them and real
//! requests leaves no connection open.

use goodput_server::{ListenLimits, Policy};
use std::time::{Duration, Instant};

mod common;
use common::{closed_within, events, h2, h2_request, post, silent, start_tls, start_with, tls_connect, H2_PREFACE};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn limits(header_timeout: Duration, max_connections: usize) -> ListenLimits {
    ListenLimits { header_timeout, max_connections, grace: Duration::from_secs(5) }
}

async fn health(url: &str) -> u16 {
    // A fresh client each time: no pooled connection of an earlier call.
    reqwest::Client::new().get(url).send().await.unwrap().status().as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_and_preface_only_sockets_are_closed_at_the_header_timeout() {
    let s = start_with(Policy::default(), limits(ms(1000), 10), 8, Duration::ZERO).await;
    let t = Instant::now();
    let mut socks = Vec::new();
    for i in 0..10 {
        socks.push(silent(s.addr, if i % 2 == 0 { b"" } else { H2_PREFACE }).await);
    }
    assert!(s.open_becomes(10, ms(1000)).await, "{} connections open", s.open());
    // The ten hold every slot.
    assert_eq!(health(&s.url("/health")).await, 503);
    let closes = socks.iter_mut().map(|sock| closed_within(sock, ms(2500)));
    let closed = futures_util::future::join_all(closes).await;
    let took = t.elapsed();
    assert!(
        closed.iter().all(Option::is_some),
        "still open after {took:?}: {:?}",
        closed.iter().map(Option::is_some).collect::<Vec<_>>()
    );
    assert!(took >= ms(900), "closed before the header timeout: {took:?}");
    assert!(s.open_becomes(0, ms(1000)).await, "{} connections still counted", s.open());
    assert_eq!(health(&s.url("/health")).await, 200);
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_connections_silent_before_or_after_the_handshake_are_closed_at_the_header_timeout() {
    let s = start_tls(Policy::default(), limits(ms(1000), 10)).await;
    let t = Instant::now();
    let mut no_hello = silent(s.addr, b"").await;
    let mut after_handshake = tls_connect(s.addr, &[]).await;
    // HTTP/2 by ALPN: one request, then idle.
    let (mut send, conn) = h2(tls_connect(s.addr, &[b"h2"]).await).await;
    let authority = format!("localhost:{}", s.addr.port());
    assert_eq!(h2_request(&mut send, &authority, "/health", None).await, (200, "ok".into()));
    assert!(closed_within(&mut no_hello, ms(2500)).await.is_some(), "no ClientHello: open after {:?}", t.elapsed());
    assert!(closed_within(&mut after_handshake, ms(2500)).await.is_some(), "open after {:?}", t.elapsed());
    tokio::time::timeout(ms(2500), conn).await.expect("the idle HTTP/2 connection is still open").unwrap();
    assert!(t.elapsed() >= ms(900), "closed before the header timeout: {:?}", t.elapsed());
    assert!(s.open_becomes(0, ms(1000)).await, "{} connections still counted", s.open());
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_h2_connection_is_closed_at_the_header_timeout_after_its_last_request() {
    let s = start_with(Policy::default(), limits(ms(800), 10), 8, Duration::ZERO).await;
    let (mut send, conn) = h2(tokio::net::TcpStream::connect(s.addr).await.unwrap()).await;
    let authority = s.addr.to_string();
    // Requests every 400 ms keep it open past the timeout; quiet after the last one, it closes.
    for _ in 0..4 {
        assert_eq!(h2_request(&mut send, &authority, "/health", None).await.0, 200);
        tokio::time::sleep(ms(400)).await;
    }
    assert!(!conn.is_finished(), "closed while requests kept coming");
    let t = Instant::now();
    tokio::time::timeout(ms(2000), conn).await.expect("the idle HTTP/2 connection is still open").unwrap();
    assert!((ms(200)..ms(1500)).contains(&t.elapsed()), "{:?}", t.elapsed());
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_h2_half_sent_heads_and_silent_sockets_do_not_hold_shutdown() {
    // The default 30 s header timeout: only shutdown can close these.
    let s = start_with(Policy::default(), limits(Duration::from_secs(30), 64), 8, Duration::ZERO).await;
    let (mut send, h2_conn) = h2(tokio::net::TcpStream::connect(s.addr).await.unwrap()).await;
    assert_eq!(h2_request(&mut send, &s.addr.to_string(), "/health", None).await.0, 200);
    let keep_alive = reqwest::Client::new();
    assert_eq!(keep_alive.get(s.url("/health")).send().await.unwrap().status(), 200);
    let mut socks = [
        silent(s.addr, b"").await,
        silent(s.addr, H2_PREFACE).await,
        silent(s.addr, b"GET /heal").await,
        silent(s.addr, b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n").await,
    ];
    assert!(s.open_becomes(6, ms(1000)).await, "{} connections open", s.open());
    let t = Instant::now();
    s.shutdown().await; // the grace is 5 s; before this fix it took 6 s (grace + last words)
    let took = t.elapsed();
    assert!(took < ms(1500), "shutdown took {took:?}");
    for (i, sock) in socks.iter_mut().enumerate() {
        assert!(closed_within(sock, ms(500)).await.is_some(), "socket {i} still open");
    }
    tokio::time::timeout(ms(500), h2_conn).await.expect("the idle HTTP/2 connection is still open").unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_h2_stream_in_flight_at_shutdown_gets_its_grace_while_an_idle_one_closes_at_once() {
    // 100 tokens at a step every 10 ms: about 1 s, well within the 5 s grace.
    let s = start_with(Policy::default(), limits(Duration::from_secs(30), 64), 8, ms(10)).await;
    let authority = s.addr.to_string();
    let (mut idle_send, idle_conn) = h2(tokio::net::TcpStream::connect(s.addr).await.unwrap()).await;
    assert_eq!(h2_request(&mut idle_send, &authority, "/health", None).await.0, 200);
    let (mut send, _busy_conn) = h2(tokio::net::TcpStream::connect(s.addr).await.unwrap()).await;
    let body = r#"{"model":"tiny","prompt":"a","max_tokens":100,"ignore_eos":true,"stream":true}"#;
    let stream = tokio::spawn(async move { h2_request(&mut send, &authority, "/v1/completions", Some(body)).await });
    tokio::time::sleep(ms(150)).await;
    let t = Instant::now();
    let stopped = tokio::spawn(s.shutdown());
    tokio::time::timeout(ms(600), idle_conn).await.expect("the idle HTTP/2 connection waited for the grace").unwrap();
    assert!(!stream.is_finished(), "the stream ended before the idle connection closed");
    let (status, text) = stream.await.unwrap();
    assert_eq!(status, 200);
    let ev = events(&text);
    assert_eq!(ev.last().map(String::as_str), Some("[DONE]"));
    assert!(text.contains(r#""finish_reason":"length""#) && !text.contains("shutting down"), "{text}");
    stopped.await.unwrap();
    assert!(t.elapsed() < Duration::from_secs(3), "shutdown took {:?}", t.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mix_of_silent_h2c_half_sent_and_real_requests_leaves_no_connection_open() {
    let header_timeout = ms(1000);
    let s = start_with(Policy::default(), limits(header_timeout, 64), 8, Duration::ZERO).await;
    let mut socks = Vec::new();
    for first in [&b""[..], H2_PREFACE, b"GET /v1/models HTTP/1.1\r\nHost: 127"] {
        for _ in 0..6 {
            socks.push(silent(s.addr, first).await);
        }
    }
    let whole = r#"{"model":"tiny","prompt":"abc","max_tokens":8}"#;
    let streamed = r#"{"model":"tiny","prompt":"abc","max_tokens":8,"stream":true}"#;
    let chat = r#"{"model":"tiny","messages":[{"role":"user","content":"hi"}],"max_tokens":8}"#;
    let h1 = (0..18).map(|i| {
        let (path, body) = match i % 3 {
            0 => ("/v1/completions", whole),
            1 => ("/v1/completions", streamed),
            _ => ("/v1/chat/completions", chat),
        };
        let url = s.url(path);
        tokio::spawn(async move { post(&url, body).await.0 })
    });
    let (send, _h2_conn) = h2(tokio::net::TcpStream::connect(s.addr).await.unwrap()).await;
    let authority = s.addr.to_string();
    let h2s = (0..6).map(|_| {
        let (mut send, authority) = (send.clone(), authority.clone());
        tokio::spawn(async move { h2_request(&mut send, &authority, "/v1/completions", Some(streamed)).await.0 })
    });
    // A client that goes away mid-stream.
    let gone = {
        let url = s.url("/v1/completions");
        tokio::spawn(async move {
            let long = r#"{"model":"tiny","prompt":"a","max_tokens":400,"ignore_eos":true,"stream":true}"#;
            let r = reqwest::Client::new().post(url).header("content-type", "application/json").body(long);
            let mut resp = r.send().await.unwrap();
            let _ = resp.chunk().await;
        })
    };
    let statuses: Vec<u16> =
        futures_util::future::join_all(h1.chain(h2s)).await.into_iter().map(Result::unwrap).collect();
    assert!(statuses.iter().all(|&c| c == 200), "{statuses:?}");
    gone.await.unwrap();
    let done = Instant::now();
    s.wait_idle().await;
    // Every connection, silent or served, is gone within the header timeout of its last
    // request (plus the linger).
    assert!(
        s.open_becomes(0, header_timeout + ms(1500)).await,
        "{} connections open after {:?}",
        s.open(),
        done.elapsed()
    );
    for (i, sock) in socks.iter_mut().enumerate() {
        assert!(closed_within(sock, ms(100)).await.is_some(), "silent socket {i} still open");
    }
    assert_eq!(health(&s.url("/health")).await, 200);
    let t = Instant::now();
    s.shutdown().await;
    assert!(t.elapsed() < ms(1000), "shutdown took {:?}", t.elapsed());
}
