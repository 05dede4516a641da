//! What a hostile or broken server can make the client hold: one SSE event, an error body, a
//! `/metrics` page. Each is bounded, fails the one request (or the scrape) with a message that
//! says which bound, and the client stops reading there instead of taking the whole body.
//!
//! The server is a raw loopback socket that writes its responses from a recipe (a few bytes
//! and long runs of one byte), so it holds none of the tens of megabytes it sends, and counts
//! what it managed to write before the client hung up.
//!
//! The `measure_*` tests are ignored: they size the same cases by environment variables for
//! `/usr/bin/time -v` (time and peak RSS of the client), e.g.
//! `GOODPUT_MEASURE_MB=50 cargo test -p goodput-client --test bounds -- --ignored measure_one_sse_line`.

use goodput_client::{HttpConfig, HttpTarget};
use goodput_core::{ClientRecord, Clock, Outcome, SamplingParams, Target, WorkRequest};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A piece of a response body.
#[derive(Clone)]
enum Part {
    Text(String),
    /// `n` copies of one byte.
    Fill(u8, usize),
}

#[derive(Clone)]
struct Reply {
    status: u16,
    content_type: &'static str,
    body: Vec<Part>,
}

impl Reply {
    fn sse(body: Vec<Part>) -> Self {
        Reply { status: 200, content_type: "text/event-stream", body }
    }
}

/// What the server saw: requests answered, body bytes written (until the client hung up).
#[derive(Default)]
struct Seen {
    requests: AtomicUsize,
    written: AtomicUsize,
}

/// A loopback HTTP/1.1 server answering every request with `reply(path)`, the body delimited
/// by closing the connection.
async fn serve(reply: impl Fn(&str) -> Reply + Send + Sync + 'static) -> (String, Arc<Seen>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (seen, reply) = (Arc::new(Seen::default()), Arc::new(reply));
    let s = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            let (seen, reply) = (s.clone(), reply.clone());
            tokio::spawn(async move {
                let Some(path) = read_request(&mut tcp).await else { return };
                seen.requests.fetch_add(1, Ordering::SeqCst);
                let r = reply(&path);
                let head =
                    format!("HTTP/1.1 {} X\r\ncontent-type: {}\r\nconnection: close\r\n\r\n", r.status, r.content_type);
                if tcp.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                let block = vec![0u8; 64 << 10];
                for part in r.body {
                    let ok = match part {
                        Part::Text(t) => write(&mut tcp, t.as_bytes(), &seen).await,
                        Part::Fill(b, mut n) => {
                            let block: Vec<u8> = block.iter().map(|_| b).collect();
                            let mut ok = true;
                            while n > 0 && ok {
                                let k = n.min(block.len());
                                ok = write(&mut tcp, &block[..k], &seen).await;
                                n -= k;
                            }
                            ok
                        }
                    };
                    if !ok {
                        return;
                    }
                }
                let _ = tcp.shutdown().await;
            });
        }
    });
    (url, seen)
}

async fn write(tcp: &mut tokio::net::TcpStream, bytes: &[u8], seen: &Seen) -> bool {
    let ok = tcp.write_all(bytes).await.is_ok();
    if ok {
        seen.written.fetch_add(bytes.len(), Ordering::SeqCst);
    }
    ok
}

/// Reads a request's head and body; returns its path.
async fn read_request(tcp: &mut tokio::net::TcpStream) -> Option<String> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        let n = tcp.read(&mut chunk).await.ok().filter(|&n| n > 0)?;
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let len: usize = head
        .lines()
        .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap_or(0)))
        .unwrap_or(0);
    while buf.len() < head_end + len {
        let n = tcp.read(&mut chunk).await.ok().filter(|&n| n > 0)?;
        buf.extend_from_slice(&chunk[..n]);
    }
    head.split_whitespace().nth(1).map(String::from)
}

fn target(url: &str) -> HttpTarget {
    HttpTarget::new(HttpConfig::new(url, "m"), Clock::new()).unwrap()
}

async fn one(t: &HttpTarget, max_tokens: usize) -> ClientRecord {
    let req =
        WorkRequest { session: None, id: 1, prompt: vec![5, 6, 7], params: SamplingParams::greedy_exact(max_tokens) };
    t.run(req, t.clock().now()).await
}

fn env_mb(default: usize) -> usize {
    std::env::var("GOODPUT_MEASURE_MB").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn report(what: &str, t: Instant, r: Result<String, String>) {
    eprintln!(
        "{what}: {:.2} s, {}",
        t.elapsed().as_secs_f64(),
        match r {
            Ok(s) | Err(s) => s.chars().take(300).collect::<String>(),
        }
    );
}

/// One SSE line of `GOODPUT_MEASURE_MB` MB of `x` (50 by default), then a blank line.
#[tokio::test]
#[ignore = "a measurement for /usr/bin/time -v"]
async fn measure_one_sse_line() {
    let mb = env_mb(50);
    let (url, _) = serve(move |_| {
        Reply::sse(vec![Part::Text("data: ".into()), Part::Fill(b'x', mb << 20), Part::Text("\n\n".into())])
    })
    .await;
    let t = Instant::now();
    let rec = one(&target(&url), 16).await;
    report(&format!("one SSE line of {mb} MiB"), t, Err(format!("{:?}", rec.outcome)));
}

/// An HTTP 500 whose body is `GOODPUT_MEASURE_MB` MB (300 by default).
#[tokio::test]
#[ignore = "a measurement for /usr/bin/time -v"]
async fn measure_error_body() {
    let mb = env_mb(300);
    let (url, _) = serve(move |_| Reply {
        status: 500,
        content_type: "text/plain",
        body: vec![Part::Text("engine failed: ".into()), Part::Fill(b'e', mb << 20)],
    })
    .await;
    let t = Instant::now();
    let rec = one(&target(&url), 16).await;
    report(&format!("an error body of {mb} MiB"), t, Err(format!("{:?}", rec.outcome)));
}

/// `/metrics` of `GOODPUT_MEASURE_MB` MB of one label value (100 by default), or with
/// `GOODPUT_MEASURE_SERIES` series of one short line each.
#[tokio::test]
#[ignore = "a measurement for /usr/bin/time -v"]
async fn measure_metrics() {
    let mb = env_mb(100);
    let series: Option<usize> = std::env::var("GOODPUT_MEASURE_SERIES").ok().and_then(|v| v.parse().ok());
    let (url, _) = serve(move |_| {
        let body = match series {
            Some(n) => vec![Part::Text((0..n).map(|i| format!("vllm:s{{i=\"{i}\"}} 1\n")).collect())],
            None => vec![Part::Text("vllm:big{l=\"".into()), Part::Fill(b'v', mb << 20), Part::Text("\"} 1\n".into())],
        };
        Reply { status: 200, content_type: "text/plain", body }
    })
    .await;
    let t = Instant::now();
    let r = target(&url).scrape().await;
    let what = match series {
        Some(n) => format!("/metrics of {n} series"),
        None => format!("/metrics of {mb} MiB"),
    };
    report(&what, t, r.map(|s| format!("{} gauges", s.gauges.len())).map_err(|e| e.to_string()));
}

const MIB: usize = 1 << 20;

/// A completions stream of `n` one-token chunks, then `last` (a usage chunk) and `[DONE]`.
fn stream(n: usize, last: &str) -> Vec<Part> {
    let mut s: String =
        (0..n).map(|i| format!("data: {{\"choices\":[{{\"index\":0,\"text\":\"t{i}\"}}]}}\n\n")).collect();
    if !last.is_empty() {
        s.push_str(&format!("data: {last}\n\n"));
    }
    s.push_str("data: [DONE]\n\n");
    vec![Part::Text(s)]
}

fn failure(rec: &ClientRecord) -> (goodput_core::FailureKind, String) {
    match &rec.outcome {
        Outcome::Error(f) | Outcome::Refused(f) => (f.kind, f.message.clone()),
        o => panic!("expected a failure, got {o:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sse_event_over_4_mib_fails_that_request_and_the_next_one_runs() {
    // The first request gets one 64 MiB line; the second a 4 MiB − 1 KiB content event (under
    // the bound: it passes), then two one-token chunks.
    let n = Arc::new(AtomicUsize::new(0));
    let (url, seen) = serve(move |_| match n.fetch_add(1, Ordering::SeqCst) {
        0 => Reply::sse(vec![Part::Text("data: ".into()), Part::Fill(b'x', 64 * MIB), Part::Text("\n\n".into())]),
        _ => {
            let mut body = vec![
                Part::Text("data: {\"choices\":[{\"index\":0,\"text\":\"".into()),
                Part::Fill(b'y', goodput_client::MAX_EVENT_BYTES - 1024),
                Part::Text("\"}]}\n\n".into()),
            ];
            body.extend(stream(2, ""));
            Reply::sse(body)
        }
    })
    .await;
    let t = target(&url);
    let started = Instant::now();
    let rec = one(&t, 16).await;
    let (kind, message) = failure(&rec);
    assert_eq!(kind, goodput_core::FailureKind::BadEvent);
    assert_eq!(message, format!("SSE event longer than 4 MiB from {url}/v1/completions"));
    assert!(rec.outcome.retryable());
    assert!(started.elapsed() < Duration::from_secs(20), "{:?}", started.elapsed());
    // The client hung up near the bound: at most the bound and the sockets' buffers were sent.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let written = seen.written.load(Ordering::SeqCst);
    assert!(written < 24 * MIB, "the server wrote {} MiB of 64", written / MIB);
    // The run goes on: the next request on the same target completes (its max_tokens allows
    // a 4 MiB event: 1 MiB + 16 KiB a token).
    let rec = one(&t, 256).await;
    assert_eq!(rec.outcome, Outcome::Ok, "{:?}", rec.outcome);
    assert_eq!(rec.chunks.len(), 3);
}

/// Twenty events of 3 MB each, every one under the 4 MiB event bound, for a request of 20
/// tokens: the answer is cut off once its events pass the request's bound (1 MiB + 16 KiB a
/// token), as a protocol fault, before the client holds 60 MB of text; so are 10,000 token
/// ids for 20 tokens (the record keeps none of them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_larger_than_its_max_tokens_allows_fails_as_a_protocol_fault() {
    let event = |fill: u8| {
        vec![
            Part::Text("data: {\"choices\":[{\"index\":0,\"text\":\"".into()),
            Part::Fill(fill, 3_000_000),
            Part::Text("\"}]}\n\n".into()),
        ]
    };
    let ids = {
        let list = vec!["0"; 10_000].join(",");
        format!("data: {{\"choices\":[{{\"index\":0,\"text\":\"a\",\"token_ids\":[{list}]}}]}}\n\n")
    };
    let n = Arc::new(AtomicUsize::new(0));
    let (url, seen) = serve(move |_| match n.fetch_add(1, Ordering::SeqCst) {
        0 => Reply::sse((0..20).flat_map(|_| event(b'z')).collect()),
        _ => Reply::sse(vec![Part::Text(ids.clone())]),
    })
    .await;
    let t = target(&url);
    let rec = one(&t, 20).await;
    let (kind, message) = failure(&rec);
    assert_eq!(kind, goodput_core::FailureKind::Protocol, "{message}");
    assert!(message.contains("beyond goodput's bound"), "{message}");
    assert!(rec.output_ids.is_empty() && rec.chunks.len() <= 1, "{} chunks kept", rec.chunks.len());
    tokio::time::sleep(Duration::from_millis(200)).await;
    let written = seen.written.load(Ordering::SeqCst);
    assert!(written < 24 * MIB, "the server wrote {} MiB of 60", written / MIB);
    let rec = one(&t, 20).await;
    let (kind, message) = failure(&rec);
    assert_eq!(kind, goodput_core::FailureKind::Protocol, "{message}");
    assert!(message.contains("token ids"), "{message}");
    assert!(rec.output_ids.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_body_is_read_up_to_64_kib_and_keeps_its_status_and_head() {
    let (url, seen) = serve(|_| Reply {
        status: 500,
        content_type: "text/plain",
        body: vec![Part::Text("engine failed: ".into()), Part::Fill(b'e', 64 * MIB)],
    })
    .await;
    let rec = one(&target(&url), 16).await;
    let (kind, message) = failure(&rec);
    assert_eq!(kind, goodput_core::FailureKind::Http(500));
    assert!(message.starts_with("HTTP 500: engine failed: eeee"), "{message}");
    assert!(message.ends_with("(an error body over 64 KiB: the rest was not read)"), "{message}");
    assert!(message.len() < 400, "{} bytes", message.len());
    tokio::time::sleep(Duration::from_millis(200)).await;
    let written = seen.written.load(Ordering::SeqCst);
    assert!(written < 24 * MIB, "the server wrote {} MiB of 64", written / MIB);
    // A short JSON error: its message, whole.
    let other = serve(|_| Reply {
        status: 429,
        content_type: "application/json",
        body: vec![Part::Text(r#"{"error":{"message":"too many requests, slow down"}}"#.into())],
    })
    .await;
    let rec = one(&target(&other.0), 16).await;
    assert_eq!(failure(&rec), (goodput_core::FailureKind::Http(429), "HTTP 429: too many requests, slow down".into()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_metrics_page_over_its_bounds_turns_scrapes_off_without_failing() {
    // 128 MiB in one label value: refused past 32 MiB, then not asked for again.
    let (url, seen) = serve(|_| Reply {
        status: 200,
        content_type: "text/plain",
        body: vec![Part::Text("vllm:big{l=\"".into()), Part::Fill(b'v', 128 * MIB), Part::Text("\"} 1\n".into())],
    })
    .await;
    let t = target(&url);
    let started = Instant::now();
    let err = t.scrape().await.unwrap_err().to_string();
    assert_eq!(
        err,
        format!(
            "GET {url}/metrics: the answer is larger than 32 MiB, goodput's bound for it: not scraped again this run"
        )
    );
    assert!(started.elapsed() < Duration::from_secs(20));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let written = seen.written.load(Ordering::SeqCst);
    assert!(written < 48 * MIB, "the server wrote {} MiB of 128", written / MIB);
    assert_eq!(t.scrape().await.unwrap_err().to_string(), err);
    assert_eq!(seen.requests.load(Ordering::SeqCst), 1, "a scrape that is off sends nothing");

    // 150,000 short series (2.4 MB): over the line bound. 1,000: parsed.
    let series = |n: usize| Part::Text((0..n).map(|i| format!("vllm:s{{i=\"{i}\"}} 1\n")).collect());
    let (many, _) =
        serve(move |_| Reply { status: 200, content_type: "text/plain", body: vec![series(150_000)] }).await;
    let err = target(&many).scrape().await.unwrap_err().to_string();
    assert!(err.contains("/metrics holds more than 100000 lines (series, HELP and TYPE)"), "{err}");
    assert!(err.ends_with("not scraped again this run"), "{err}");
    let (few, _) = serve(move |_| Reply { status: 200, content_type: "text/plain", body: vec![series(1_000)] }).await;
    let s = target(&few).scrape().await.unwrap();
    assert_eq!((s.gauges["s"], s.label_sets["s"].0), (1000.0, 1000));
    // The parser itself keeps the bound for every caller.
    let text: String = (0..100_001).map(|i| format!("s{i} 1\n")).collect();
    let e = goodput_client::parse_metrics(&text, goodput_core::Stamp(0)).unwrap_err();
    assert!(
        matches!(e, goodput_client::MetricsError::TooLong { max: 100_000 })
            && e.to_string().contains("more than 100000"),
        "{e}"
    );
}

/// The `goodput` object of a final chunk, with `first_scheduled` before `queued`.
const REVERSED: &str = r#""goodput":{"received":10,"arrival":11,"queued":50,"first_scheduled":13,"first_token":60,
    "last_token":70,"finished":71,"prompt_tokens":3,"cached_tokens":0,"generated_tokens":3,"preemptions":0,
    "finish_reason":"length"}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_s_impossible_counts_and_stamps_are_refused_and_the_client_s_counts_stand() {
    use goodput_core::AnomalyKind as K;
    let usage = format!(
        r#"{{"choices":[],"usage":{{"prompt_tokens":3,"completion_tokens":1000000000000000,
            "prompt_tokens_details":{{"cached_tokens":1000000000}}}},{}}}"#,
        REVERSED.replace('\n', "")
    )
    .replace('\n', "");
    let (url, _) = serve(move |path| match path {
        "/v1/completions" => Reply::sse(stream(3, &usage)),
        _ => Reply::sse(vec![]),
    })
    .await;
    let rec = one(&target(&url), 16).await;
    assert_eq!(rec.outcome, Outcome::Ok, "{:?}", rec.outcome);
    let h = rec.http.as_ref().unwrap();
    let kinds: Vec<K> = h.anomalies.iter().map(|a| a.kind).collect();
    assert_eq!(kinds, [K::CompletionTokens, K::CachedTokens, K::ServerTimings], "{:?}", h.anomalies);
    assert!(h.anomalies[0].message.contains("1000000000000000 above max_tokens 16"), "{:?}", h.anomalies[0]);
    assert!(h.anomalies[2].message.contains("first_scheduled 13 ns before queued 50 ns"), "{:?}", h.anomalies[2]);
    // The client's own counts, no cache figure, no engine record (no negative queue time).
    assert_eq!((rec.input_tokens, rec.output_tokens), (3, 3));
    assert_eq!((h.usage_completion_tokens, h.usage_cached_tokens, h.server.is_some()), (None, None, false));
    assert!(rec.engine.is_none());
    // Through a level: 3 tokens of throughput, not 10¹⁵; the anomalies counted by kind.
    let slos = goodput_metrics::slo::parse_slos("ttft_p95=10s").unwrap();
    let s = goodput_metrics::level::summarize(1.0, &[&rec], &slos);
    assert_eq!(s.total_output_tokens, 3);
    assert!(s.output_throughput < 1e6, "{}", s.output_throughput);
    let counts: Vec<(K, usize)> = s.server_anomalies.iter().map(|a| (a.kind, a.count)).collect();
    assert_eq!(counts, [(K::CompletionTokens, 1), (K::CachedTokens, 1), (K::ServerTimings, 1)]);
    assert!(s.queue_time.is_none());
    assert_eq!(goodput_metrics::cache::PrefixHits::of_records(&[&rec]), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_longer_than_max_tokens_is_flagged() {
    use goodput_core::AnomalyKind as K;
    let (url, _) =
        serve(|_| Reply::sse(stream(120, r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":120}}"#)))
            .await;
    let rec = one(&target(&url), 100).await;
    assert_eq!(rec.outcome, Outcome::Ok);
    let h = rec.http.as_ref().unwrap();
    assert_eq!(h.anomalies.iter().map(|a| a.kind).collect::<Vec<_>>(), [K::OverMaxTokens]);
    assert_eq!(h.anomalies[0].message, "120 output tokens streamed against max_tokens 100: the server ignored it");
    // The stream and usage agree: that is the output length.
    assert_eq!(rec.output_tokens, 120);
    let s = goodput_metrics::level::summarize(1.0, &[&rec], &[]);
    assert_eq!(s.server_anomalies.len(), 1);
}
