//! goodput's own HTTP/1.1 path for measured requests against scripted servers on loopback,
//! each answer read by it and by hyper (`own_http1: false`) alike: every framing of a
//! streamed body (chunked in pieces split anywhere, a stated length, one that runs to the
//! close, after an informational head), the ways a stream breaks, error answers, and
//! kept-alive connections (reused, and replaced when the server had closed one).

mod common;

use goodput_client::{HttpConfig, HttpTarget};
use goodput_core::{ClientRecord, Clock, FailureKind, Outcome, SamplingParams, Target, WorkRequest};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

/// One scripted answer: its bytes written in these pieces (a few ms apart), and whether the
/// server closes the connection after it.
#[derive(Clone)]
struct Answer {
    pieces: Vec<Vec<u8>>,
    close: bool,
}

/// Three tokens, the usage event and `[DONE]`, as SSE.
fn events() -> String {
    let tok = |t: &str| format!("data: {{\"choices\":[{{\"index\":0,\"text\":\"{t}\"}}]}}\n\n");
    let usage = "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":3}}\n\n";
    format!("{}{}{}{usage}data: [DONE]\n\n", tok("a"), tok("b"), tok("c"))
}

/// `body` as a chunked body, one chunk per piece of `sizes` bytes, cut for writing into
/// pieces of `cut` bytes.
fn chunked(head: &str, body: &str, size: usize, cut: usize) -> Vec<Vec<u8>> {
    let mut wire = head.as_bytes().to_vec();
    for c in body.as_bytes().chunks(size) {
        wire.extend_from_slice(format!("{:x};ext=1\r\n", c.len()).as_bytes());
        wire.extend_from_slice(c);
        wire.extend_from_slice(b"\r\n");
    }
    wire.extend_from_slice(b"0\r\nx-trailer: t\r\n\r\n");
    wire.chunks(cut).map(<[u8]>::to_vec).collect()
}

const SSE_CHUNKED: &str = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";

/// A server answering requests in the order they come with `answers`; returns its port and
/// how many connections it accepted.
async fn server(answers: Vec<Answer>) -> (u16, Arc<Mutex<usize>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let queue = Arc::new(Mutex::new(VecDeque::from(answers)));
    let accepted = Arc::new(Mutex::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((conn, _)) = listener.accept().await {
            *count.lock().unwrap() += 1;
            tokio::spawn(serve(conn, queue.clone()));
        }
    });
    (port, accepted)
}

async fn serve(mut conn: TcpStream, queue: Arc<Mutex<VecDeque<Answer>>>) {
    let mut buf = Vec::new();
    loop {
        if common::read_request(&mut conn, &mut buf).await.is_none() {
            return;
        }
        let Some(answer) = queue.lock().unwrap().pop_front() else { return };
        for p in &answer.pieces {
            if conn.write_all(p).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(3)).await;
        }
        if answer.close {
            return;
        }
    }
}

fn target(port: u16, own: bool) -> HttpTarget {
    let cfg = HttpConfig { own_http1: own, ..HttpConfig::new(format!("http://127.0.0.1:{port}"), "m") };
    HttpTarget::new(cfg, Clock::new()).unwrap()
}

async fn one(t: &HttpTarget, id: u64) -> ClientRecord {
    let req = WorkRequest { session: None, id, prompt: vec![5, 6, 7], params: SamplingParams::greedy_exact(3) };
    let r = tokio::time::timeout(Duration::from_secs(10), t.run(req, t.clock().now())).await;
    r.expect("the request ended within 10 s")
}

/// What a record says, without its times.
fn gist(r: &ClientRecord) -> (String, usize, u16) {
    let outcome = match &r.outcome {
        Outcome::Ok => "ok".to_string(),
        other => format!("{other:?}"),
    };
    (outcome, r.chunks.len(), r.http.as_ref().map_or(0, |h| h.status))
}

/// `answer` read by both paths, each on a server of its own: the two records' gists.
async fn both(answer: Answer) -> [(String, usize, u16); 2] {
    let mut out = Vec::new();
    for own in [true, false] {
        let (port, _) = server(vec![answer.clone()]).await;
        out.push(gist(&one(&target(port, own), 1).await));
    }
    [out[0].clone(), out[1].clone()]
}

#[tokio::test]
async fn every_framing_of_a_stream_reads_as_hyper_reads_it() {
    let body = events();
    let framings = [
        ("chunked, one piece", chunked(SSE_CHUNKED, &body, 1000, 100_000)),
        ("chunked in 7-byte chunks, written in 5-byte pieces", chunked(SSE_CHUNKED, &body, 7, 5)),
        ("chunked, written a byte at a time", chunked(SSE_CHUNKED, &body, 40, 1)),
        (
            "a stated length",
            vec![format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}", body.len()).into_bytes()],
        ),
        (
            "after an informational head",
            chunked(&format!("HTTP/1.1 103 Early Hints\r\nlink: </x>\r\n\r\n{SSE_CHUNKED}"), &body, 30, 64),
        ),
    ];
    for (what, pieces) in framings {
        let [own, hyper] = both(Answer { pieces, close: false }).await;
        assert_eq!(own, ("ok".to_string(), 3, 200), "{what}");
        assert_eq!(own, hyper, "{what}");
    }
    let until_close = format!("HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n{body}");
    let [own, hyper] = both(Answer { pieces: vec![until_close.into_bytes()], close: true }).await;
    assert_eq!(own, ("ok".to_string(), 3, 200), "a body that runs to the close");
    assert_eq!(own, hyper);
}

#[tokio::test]
async fn broken_streams_and_error_answers_fail_as_with_hyper() {
    let body = events();
    let cut = &body[..body.find("data: {\"choices\":[]").unwrap()];
    let bad_size = format!("{SSE_CHUNKED}zz\r\n");
    let error = "{\"error\":{\"message\":\"the engine is overloaded\"}}";
    let cases = [
        (
            "closed inside the body",
            vec![format!("{SSE_CHUNKED}{:x}\r\n{cut}\r\n", cut.len()).into_bytes()],
            FailureKind::StreamBroken,
        ),
        ("a bad chunk size", vec![bad_size.into_bytes()], FailureKind::Framing),
        ("a chunked body that ends without [DONE]", chunked(SSE_CHUNKED, cut, 1000, 100_000), FailureKind::NoEndMarker),
        (
            "503 with a JSON message",
            chunked("HTTP/1.1 503 Service Unavailable\r\ntransfer-encoding: chunked\r\n\r\n", error, 10, 100_000),
            FailureKind::Http(503),
        ),
    ];
    for (what, pieces, kind) in cases {
        let [own, hyper] = both(Answer { pieces, close: true }).await;
        assert!(own.0.contains(&format!("{kind:?}")), "{what}: {own:?}");
        assert_eq!((own.1, own.2), (hyper.1, hyper.2), "{what}");
        assert!(hyper.0.contains(&format!("{kind:?}")), "{what}: {hyper:?}");
    }
    let (port, _) = server(vec![Answer {
        pieces: chunked("HTTP/1.1 503 Service Unavailable\r\ntransfer-encoding: chunked\r\n\r\n", error, 10, 100_000),
        close: false,
    }])
    .await;
    let r = one(&target(port, true), 1).await;
    assert!(format!("{:?}", r.outcome).contains("HTTP 503: the engine is overloaded"), "{:?}", r.outcome);
}

#[tokio::test]
async fn a_kept_alive_connection_carries_the_next_request_and_one_the_server_closed_is_replaced() {
    let body = events();
    let keep = Answer { pieces: chunked(SSE_CHUNKED, &body, 1000, 100_000), close: false };
    let then_close = Answer { close: true, ..keep.clone() };
    // 1 and 2 on one connection, closed by the server after 2; 3 finds it closed and goes
    // again on a new one, which 4 reuses.
    let (port, accepted) = server(vec![keep.clone(), then_close, keep.clone(), keep]).await;
    in_turn(&target(port, true), 4, Duration::from_millis(20)).await;
    assert_eq!(*accepted.lock().unwrap(), 2, "connections opened for four requests");
}

#[tokio::test]
async fn an_answer_whose_last_chunk_comes_after_its_end_marker_leaves_its_connection_usable() {
    // The end marker, then the chunked body's end in two writes a few ms later (as a server
    // that writes the body's end once its generator has returned): the request ends at the
    // marker, the rest is read in the background (as hyper's connection task reads it), and
    // the next request goes on the same connection.
    let body = events();
    let mut pieces = chunked(SSE_CHUNKED, &body, 1000, 100_000);
    let whole = pieces.concat();
    let end = whole.len() - b"0\r\nx-trailer: t\r\n\r\n".len();
    pieces = vec![whole[..end].to_vec(), b"0\r\n".to_vec(), b"x-trailer: t\r\n\r\n".to_vec()];
    let late = Answer { pieces, close: false };
    let (port, accepted) = server(vec![late.clone(), late.clone(), late]).await;
    in_turn(&target(port, true), 3, Duration::from_millis(50)).await;
    assert_eq!(*accepted.lock().unwrap(), 1, "connections opened for three requests");
}

/// Requests 1 to `n` one after another, `pause` apart, each a whole answer of three events.
async fn in_turn(t: &HttpTarget, n: u64, pause: Duration) {
    for id in 1..=n {
        let r = one(t, id).await;
        assert_eq!(gist(&r), ("ok".to_string(), 3, 200), "request {id}");
        tokio::time::sleep(pause).await;
    }
}

/// A server that answers the first request of each connection (kept alive), then on that
/// connection reads each later request whole, waits 100 ms and closes: every POST it read is
/// counted. The own path never sends a written request again, so the server reads exactly one
/// POST per request; the ones it dropped fail as `connect`, saying why.
#[tokio::test]
async fn a_request_the_server_read_is_never_sent_again() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let posts = Arc::new(Mutex::new(0usize));
    let seen = posts.clone();
    let body = events();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let (seen, body) = (seen.clone(), body.clone());
            tokio::spawn(async move {
                let mut buf = Vec::new();
                for n in 0.. {
                    if common::read_request(&mut conn, &mut buf).await.is_none() {
                        return;
                    }
                    *seen.lock().unwrap() += 1;
                    if n > 0 {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        return;
                    }
                    let answer = chunked(SSE_CHUNKED, &body, 1000, 100_000).concat();
                    if conn.write_all(&answer).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    let t = target(port, true);
    let mut outcomes = Vec::new();
    for id in 1..=7 {
        let r = one(&t, id).await;
        outcomes.push((r.outcome.failure_kind(), r.retries, r.outcome.message().unwrap_or("").to_string()));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(*posts.lock().unwrap(), 7, "one POST per request: {outcomes:?}");
    let failed: Vec<_> = outcomes.iter().filter(|o| o.0.is_some()).collect();
    assert!(!failed.is_empty(), "{outcomes:?}");
    for (kind, _, why) in failed {
        assert_eq!(*kind, Some(FailureKind::Connect));
        assert!(why.contains("not sent again"), "{why}");
    }
}

/// How a scripted answer is written.
#[derive(Clone)]
enum Script {
    /// These bytes at once, then the connection is held (not closed) for 20 s.
    Hold(Vec<u8>),
    /// A head, then the body one byte every 200 ms.
    Trickle(Vec<u8>),
}

/// A server answering every request with `script`.
async fn scripted(script: Script) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let script = script.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                if common::read_request(&mut conn, &mut buf).await.is_none() {
                    return;
                }
                match script {
                    Script::Hold(bytes) => {
                        let _ = conn.write_all(&bytes).await;
                        tokio::time::sleep(Duration::from_secs(20)).await;
                    }
                    Script::Trickle(head) => {
                        let _ = conn.write_all(&head).await;
                        for _ in 0..100 {
                            tokio::time::sleep(Duration::from_millis(200)).await;
                            if conn.write_all(b"e").await.is_err() {
                                return;
                            }
                        }
                    }
                }
            });
        }
    });
    port
}

/// Answers that cannot be read fail at once, with the kind that names their fault: a body
/// framed wrongly is `framing`, a head that is not HTTP/1.x (or past goodput's bounds on it)
/// is `protocol`, a 204 has no body (so no end marker), and a 500 whose body trickles is still
/// `http-500` (its status is the answer), never `timeout` or `connect`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failure_kinds_name_the_fault() {
    let head = |extra: &str| format!("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n{extra}\r\n").into_bytes();
    let many: String = (0..70).map(|i| format!("x-h{i}: v\r\n")).collect();
    let long = format!("x-long: {}\r\n", "v".repeat(70 << 10));
    let cases: Vec<(&str, Script, FailureKind)> = vec![
        ("content-length abc", Script::Hold(head("content-length: abc\r\n")), FailureKind::Framing),
        ("content-length -5", Script::Hold(head("content-length: -5\r\n")), FailureKind::Framing),
        (
            "content-length 10^23",
            Script::Hold(head("content-length: 100000000000000000000000\r\n")),
            FailureKind::Framing,
        ),
        (
            "two content-lengths",
            Script::Hold(head("content-length: 10\r\ncontent-length: 20\r\n")),
            FailureKind::Framing,
        ),
        ("70 headers", Script::Hold(head(&many)), FailureKind::Protocol),
        ("a head over 64 KiB", Script::Hold(head(&long)), FailureKind::Protocol),
        ("HTTP/2.0 in a status line", Script::Hold(b"HTTP/2.0 200 OK\r\n\r\n".to_vec()), FailureKind::Protocol),
        ("204", Script::Hold(b"HTTP/1.1 204 No Content\r\n\r\n".to_vec()), FailureKind::NoEndMarker),
        (
            "a 500 that trickles",
            Script::Trickle(b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 1000\r\n\r\n".to_vec()),
            FailureKind::Http(500),
        ),
    ];
    for (what, script, kind) in cases {
        let port = scripted(script).await;
        let started = std::time::Instant::now();
        let r = one(&target(port, true), 1).await;
        assert_eq!(r.outcome.failure_kind(), Some(kind), "{what}: {:?}", r.outcome);
        assert!(started.elapsed() < Duration::from_secs(4), "{what}: {:?}", started.elapsed());
    }
    // hyper's path names the same faults where it reads them.
    for (what, script, kind) in [
        ("content-length abc", Script::Hold(head("content-length: abc\r\n")), FailureKind::Framing),
        (
            "a 500 that trickles",
            Script::Trickle(b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 1000\r\n\r\n".to_vec()),
            FailureKind::Http(500),
        ),
    ] {
        let r = one(&target(scripted(script).await, false), 1).await;
        assert_eq!(r.outcome.failure_kind(), Some(kind), "hyper, {what}: {:?}", r.outcome);
    }
}

#[tokio::test]
async fn a_session_is_sent_in_the_session_header_by_both_paths() {
    use tokio::io::AsyncReadExt;
    for own in [true, false] {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let head = tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            let mut buf = Vec::new();
            while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                let mut chunk = [0u8; 4096];
                let n = conn.read(&mut chunk).await.unwrap();
                assert!(n > 0, "the request ended before its head");
                buf.extend_from_slice(&chunk[..n]);
            }
            let _ = conn.write_all(b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n").await;
            String::from_utf8_lossy(&buf).to_ascii_lowercase()
        });
        let mut cfg = HttpConfig { own_http1: own, ..HttpConfig::new(format!("http://127.0.0.1:{port}"), "m") };
        cfg.connection.session_header = Some("X-Session-ID".into());
        let t = HttpTarget::new(cfg, Clock::new()).unwrap();
        let req = WorkRequest { session: Some(42), id: 1, prompt: vec![5], params: SamplingParams::greedy_exact(2) };
        t.run(req, t.clock().now()).await;
        let head = head.await.unwrap();
        assert!(head.contains("\r\nx-session-id: 42\r\n"), "own path {own}: {head}");
    }
    // A name no header can have, or one --header sends already, is refused at the start.
    for (name, headers) in [("bad name", vec![]), ("X-Session-ID", vec![("x-session-id".to_string(), "1".into())])] {
        let mut cfg = HttpConfig::new("http://127.0.0.1:1", "m");
        cfg.connection.session_header = Some(name.into());
        cfg.connection.headers =
            headers.into_iter().map(|(n, v): (String, String)| (n, goodput_client::Secret::new(v))).collect();
        let e = HttpTarget::new(cfg, Clock::new()).err().expect("refused").to_string();
        assert!(e.contains("--session-header"), "{e}");
    }
}
