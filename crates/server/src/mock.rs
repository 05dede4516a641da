//! A mock OpenAI completions server with no model: every streamed response waits a fixed
//! time to first token, then sends its tokens a fixed interval apart (on an absolute schedule,
//! so delays do not accumulate). It stamps when it wrote each chunk, by the client's
//! `x-request-id`, so `goodput calibrate` can measure the client's own delay per chunk.
//!
//! HTTP/1.1 is written here by hand (the request head parsed by `httparse`, the response a
//! fixed head and pre-encoded chunks), not served by axum: the mock is the instrument the
//! client is measured against and must cost less than the client at every load. Under axum
//! each chunk went through an SSE stream, hyper's body channel and two task wake-ups; at
//! 2,000 streams (100k chunks/s) that held the mock's core at 60–100 %, and the time a chunk
//! waited in the mock after its stamp was counted as the client's delay. Here a chunk is one
//! timer wake-up and one `write`, stamped just before it.

use goodput_core::{Clock, Stamp};
use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

pub struct Mock {
    pub clock: Clock,
    pub ttft: Duration,
    pub itl: Duration,
    /// Tokens per response, unless the request's max_tokens is smaller.
    pub tokens: usize,
    /// When each chunk was written, by request id.
    pub sent: Mutex<HashMap<String, Vec<Stamp>>>,
    /// When each request's handler started, by request id: its first chunk is due `ttft`
    /// later, so the mock's own lateness (its timer's) is told apart from the client's.
    pub received: Mutex<HashMap<String, Stamp>>,
}

impl Mock {
    pub fn new(clock: Clock, ttft: Duration, itl: Duration, tokens: usize) -> Self {
        Mock { clock, ttft, itl, tokens, sent: Mutex::default(), received: Mutex::default() }
    }
}

/// The longest request head or body the mock reads.
const MAX_REQUEST: usize = 64 * 1024;

/// One token's chunk: the chunked encoding's size line, the SSE event, the chunk's CRLF.
const TOKEN: &str = r#"data: {"object":"text_completion","choices":[{"index":0,"text":"x","finish_reason":null}]}"#;

/// Serves the mock on `listener` until `shutdown` resolves, each connection with
/// `TCP_NODELAY` (as a real server sends its small SSE events: without it, Nagle holds a chunk
/// until the client's ACK of the last one). At shutdown every connection is closed at once,
/// whatever its client is doing (the mock is an instrument: nothing it serves needs a grace).
pub async fn serve(listener: TcpListener, mock: Arc<Mock>, shutdown: impl std::future::Future<Output = ()>) {
    let mut conns = tokio::task::JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => accepted,
            Some(_) = conns.join_next(), if !conns.is_empty() => continue,
        };
        let tcp = match accepted {
            Ok((tcp, _)) => tcp,
            // Out of file descriptors or a connection reset before it was taken: go on.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = tcp.set_nodelay(true);
        let mock = mock.clone();
        conns.spawn(async move {
            let _ = connection(tcp, &mock).await;
        });
    }
    conns.abort_all();
}

/// A request as the mock reads it.
struct Request {
    method: String,
    path: String,
    id: String,
    body: Vec<u8>,
}

/// One kept-alive connection: requests answered one after the other until the client closes.
async fn connection(mut tcp: TcpStream, mock: &Mock) -> io::Result<()> {
    let mut buf = Vec::with_capacity(4096);
    let chunk = encoded_chunk(TOKEN);
    while let Some(req) = read_request(&mut tcp, &mut buf).await? {
        match (req.method.as_str(), req.path.as_str()) {
            ("POST", "/v1/completions") => complete(&mut tcp, mock, &req, &chunk).await?,
            ("GET", "/v1/models") => {
                let models = r#"{"object":"list","data":[{"id":"mock","object":"model"}]}"#;
                respond(&mut tcp, "200 OK", models).await?
            }
            _ => respond(&mut tcp, "404 Not Found", r#"{"error":{"message":"not found"}}"#).await?,
        }
    }
    Ok(())
}

/// Reads the next request's head and body into `buf` (bytes past them stay for the next
/// request); `None` when the client closed between requests.
async fn read_request(tcp: &mut TcpStream, buf: &mut Vec<u8>) -> io::Result<Option<Request>> {
    let bad = |why: String| io::Error::new(io::ErrorKind::InvalidData, why);
    loop {
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut head = httparse::Request::new(&mut headers);
        if let httparse::Status::Complete(len) = head.parse(buf).map_err(|e| bad(e.to_string()))? {
            let field =
                |name: &str| head.headers.iter().find(|h| h.name.eq_ignore_ascii_case(name)).map(|h| h.value.to_vec());
            let length: usize = match field("content-length") {
                Some(v) => std::str::from_utf8(&v)
                    .ok()
                    .and_then(|s| s.trim().parse().ok())
                    .ok_or_else(|| bad("bad content-length".into()))?,
                None => 0,
            };
            if len + length > MAX_REQUEST {
                return Err(bad(format!("a request of {} bytes", len + length)));
            }
            let req = Request {
                method: head.method.unwrap_or("").to_string(),
                path: head.path.unwrap_or("").to_string(),
                id: field("x-request-id").map(|v| String::from_utf8_lossy(&v).into_owned()).unwrap_or_default(),
                body: Vec::new(),
            };
            while buf.len() < len + length {
                fill(tcp, buf).await?.then_some(()).ok_or_else(|| bad("the request ended early".into()))?;
            }
            let body = buf[len..len + length].to_vec();
            buf.drain(..len + length);
            return Ok(Some(Request { body, ..req }));
        }
        if buf.len() > MAX_REQUEST {
            return Err(bad("a request head over 64 KiB".into()));
        }
        if !fill(tcp, buf).await? {
            return if buf.is_empty() { Ok(None) } else { Err(bad("the request head ended early".into())) };
        }
    }
}

/// Reads more bytes onto `buf`; false at the end of the stream.
async fn fill(tcp: &mut TcpStream, buf: &mut Vec<u8>) -> io::Result<bool> {
    let mut more = [0u8; 4096];
    let n = tcp.read(&mut more).await?;
    buf.extend_from_slice(&more[..n]);
    Ok(n > 0)
}

/// A whole JSON answer with its length.
async fn respond(tcp: &mut TcpStream, status: &str, body: &str) -> io::Result<()> {
    let head =
        format!("HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}", body.len());
    tcp.write_all(head.as_bytes()).await
}

/// `data` as one chunk of a chunked body.
fn encoded_chunk(data: &str) -> Vec<u8> {
    let event = format!("{data}\n\n");
    format!("{:x}\r\n{event}\r\n", event.len()).into_bytes()
}

/// A streamed completion: the head at once, each token's chunk when its time comes (stamped
/// just before its write), then the usage event, `[DONE]` and the last chunk together. The
/// stamps are filed before the end is written, so a client that has read the end finds them.
async fn complete(tcp: &mut TcpStream, m: &Mock, req: &Request, chunk: &[u8]) -> io::Result<()> {
    #[derive(serde::Deserialize)]
    struct Body {
        max_tokens: Option<u64>,
    }
    let start = tokio::time::Instant::now();
    let max = serde_json::from_slice::<Body>(&req.body).ok().and_then(|b| b.max_tokens);
    let n = max.map_or(m.tokens, |x| (x as usize).min(m.tokens)).max(1);
    m.received.lock().unwrap_or_else(|e| e.into_inner()).insert(req.id.clone(), m.clock.now());
    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n";
    tcp.write_all(head.as_bytes()).await?;
    let mut stamps = Vec::with_capacity(n);
    for i in 0..n {
        tokio::time::sleep_until(start + m.ttft + m.itl * i as u32).await;
        stamps.push(m.clock.now());
        tcp.write_all(chunk).await?;
    }
    m.sent.lock().unwrap_or_else(|e| e.into_inner()).insert(req.id.clone(), stamps);
    let usage = format!(
        r#"data: {{"object":"text_completion","choices":[],"usage":{{"prompt_tokens":1,"completion_tokens":{n},"total_tokens":{}}}}}"#,
        n + 1
    );
    let mut end = encoded_chunk(&usage);
    end.extend_from_slice(&encoded_chunk("data: [DONE]"));
    end.extend_from_slice(b"0\r\n\r\n");
    tcp.write_all(&end).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunk_is_its_size_in_hex_its_event_and_crlf() {
        assert_eq!(encoded_chunk("data: [DONE]"), b"e\r\ndata: [DONE]\n\n\r\n");
    }

    /// At shutdown the mock returns at once and its connections close, one in the middle of a
    /// slow stream and one that sent half a request head alike.
    #[tokio::test]
    async fn shutdown_closes_every_connection_at_once() {
        let mock = Arc::new(Mock::new(Clock::new(), Duration::from_secs(30), Duration::from_secs(1), 5));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let served = tokio::spawn(serve(listener, mock, async {
            let _ = stopped.await;
        }));
        let mut streaming = TcpStream::connect(addr).await.unwrap();
        let body = r#"{"prompt":[1],"max_tokens":5,"stream":true}"#;
        let req = format!("POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\n\r\n{body}", body.len());
        streaming.write_all(req.as_bytes()).await.unwrap();
        let mut half = TcpStream::connect(addr).await.unwrap();
        half.write_all(b"POST /v1/completions HTTP/1.1\r\nhost: x\r\n").await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let t = std::time::Instant::now();
        stop.send(()).unwrap();
        served.await.unwrap();
        for mut c in [streaming, half] {
            let mut rest = Vec::new();
            let read = tokio::time::timeout(Duration::from_secs(2), c.read_to_end(&mut rest)).await;
            assert!(matches!(read, Ok(Ok(_)) | Ok(Err(_))), "the connection is closed");
        }
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    }
}
