//! The measured requests' own HTTP/1.1 path to a plain-HTTP target: the request written in
//! one `write` on a kept-alive connection, the response head parsed by `httparse`, the body
//! unframed by [`crate::chunked`] and fed to the SSE decoder in the reading task itself.
//!
//! Why not hyper (through reqwest), which serves every other request: hyper's client runs
//! each connection as a task of its own that reads the socket and hands body frames to the
//! response through a channel, so every token costs two task wake-ups, a channel hand-over
//! and a `Bytes` per frame. `goodput calibrate --floor` measured that at 3.5–5 µs a token
//! above the bare reads of the same streams, half the client's whole cost; here the task that
//! waits for the token reads it. TLS, proxies and `user:password@` credentials stay on
//! reqwest ([`Lean::for_config`] says which targets take this path).

use crate::body::{error_from, ERROR_BODY_WITHIN, MAX_ERROR_BODY};
use crate::chunked::{Body, Chunked, FramingError};
use crate::sse::{SseDecoder, MAX_EVENT_BYTES};
use crate::stream::{Step, StreamParser};
use crate::{redact_url, redirect_why, request_id, ClientError, HttpConfig};
use goodput_core::{Clock, FailureKind, Outcome, Stamp};
use serde_json::Value;
use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The longest response head read.
const MAX_HEAD: usize = 64 << 10;

/// A plain-HTTP target's connections, kept alive per runtime (a socket is read by the
/// runtime that opened it).
pub(crate) struct Lean {
    /// `host:port` to connect to.
    authority: String,
    /// The header lines every request carries (host, content type, `--header`s, the key).
    fixed: String,
    idle: Arc<Idle>,
}

/// Kept-alive connections by runtime, each answer read to its end.
type Idle = Mutex<HashMap<tokio::runtime::Id, Vec<TcpStream>>>;

/// How one exchange on a connection ended.
enum Exchange {
    /// A kept-alive connection the server had closed before a byte of the request went out:
    /// send again on a new one (as hyper does). A request whose bytes were written is never
    /// sent again: the server may have read it and acted on it.
    Stale,
    /// The request's outcome, and the response body's framing where the connection can
    /// carry the next request (its last bytes may still be on their way).
    Done(Outcome, Option<Body>),
}

impl Lean {
    /// The path for `cfg`'s target: `None` where it stays on reqwest (HTTPS, a proxy in the
    /// environment, Basic credentials).
    pub fn for_config(cfg: &HttpConfig) -> Result<Option<Lean>, ClientError> {
        let bad = |why: String| ClientError::Connection(why);
        let url = reqwest::Url::parse(&cfg.base_url).map_err(|e| bad(format!("{}: {e}", redact_url(&cfg.base_url))))?;
        let Some(host) = url.host_str() else { return Ok(None) };
        if url.scheme() != "http" || cfg.connection.basic_auth.is_some() || proxied(host) {
            return Ok(None);
        }
        let port = url.port_or_known_default().unwrap_or(80);
        let mut fixed = match url.port() {
            Some(p) => format!("host: {host}:{p}\r\n"),
            None => format!("host: {host}\r\n"),
        };
        fixed.push_str("accept: */*\r\ncontent-type: application/json\r\n");
        for (name, value) in &cfg.connection.header_map()? {
            let value = value.to_str().map_err(|_| bad(format!("the value of header `{name}` is not text")))?;
            fixed.push_str(&format!("{name}: {value}\r\n"));
        }
        Ok(Some(Lean { authority: format!("{host}:{port}"), fixed, idle: Arc::default() }))
    }

    /// POSTs `body` to `url` as request `id`, reading its streamed answer into `p`.
    /// With its session's header (`name`, `value`) when it has one.
    pub async fn post(
        &self,
        url: &str,
        (id, session): (u64, Option<(&str, String)>),
        body: &Value,
        clock: Clock,
        p: &mut StreamParser,
    ) -> Outcome {
        let parsed = match reqwest::Url::parse(url) {
            Ok(u) => u,
            Err(e) => return Outcome::refused(FailureKind::Invalid, format!("{}: {e}", redact_url(url))),
        };
        let json = serde_json::to_vec(body).unwrap_or_default();
        let target = match parsed.query() {
            Some(q) => format!("{}?{q}", parsed.path()),
            None => parsed.path().to_string(),
        };
        let mut req = format!(
            "POST {target} HTTP/1.1\r\n{}x-request-id: {}\r\n{}content-length: {}\r\n\r\n",
            self.fixed,
            request_id(id),
            session.map_or(String::new(), |(name, value)| format!("{name}: {value}\r\n")),
            json.len()
        )
        .into_bytes();
        req.extend_from_slice(&json);
        let mut kept = self.take();
        loop {
            let reused = kept.is_some();
            let mut tcp = match kept.take() {
                Some(t) => t,
                None => match self.connect().await {
                    Ok(t) => t,
                    Err(e) => return Outcome::error(FailureKind::Connect, format!("POST {url}: {e}")),
                },
            };
            match exchange(&mut tcp, &req, &parsed, clock, p, reused).await {
                Exchange::Stale if reused => {}
                Exchange::Stale => {
                    let why = format!("POST {url}: the connection closed before the request was written");
                    return Outcome::error(FailureKind::Connect, why);
                }
                Exchange::Done(outcome, keep) => {
                    if let Some(body) = keep {
                        self.put(tcp, body);
                    }
                    return outcome;
                }
            }
        }
    }

    async fn connect(&self) -> std::io::Result<TcpStream> {
        let tcp = TcpStream::connect(&self.authority).await?;
        tcp.set_nodelay(true)?;
        Ok(tcp)
    }

    /// A kept-alive connection of this runtime that the server has not closed since (as far
    /// as this runtime has seen: an EOF already reported is caught here, one still on its way
    /// by [`Exchange::Stale`]).
    fn take(&self) -> Option<TcpStream> {
        let rt = tokio::runtime::Handle::try_current().ok()?.id();
        loop {
            let tcp = self.idle.lock().unwrap_or_else(|e| e.into_inner()).get_mut(&rt)?.pop()?;
            let mut probe = [0u8; 1];
            if matches!(tcp.try_read(&mut probe), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock) {
                return Some(tcp);
            }
        }
    }

    /// Keeps `tcp` for the next request once its answer's `body` is read to its end: now, or
    /// (its last chunk still on its way after the end marker) by a task of this runtime that
    /// reads the rest, as hyper's connection task does, so no request waits for it.
    fn put(&self, mut tcp: TcpStream, body: Body) {
        let Ok(h) = tokio::runtime::Handle::try_current() else { return };
        let (rt, idle) = (h.id(), self.idle.clone());
        let keep = move |tcp| idle.lock().unwrap_or_else(|e| e.into_inner()).entry(rt).or_default().push(tcp);
        if body.finished() {
            return keep(tcp);
        }
        h.spawn(async move {
            if matches!(tokio::time::timeout(SETTLE, settle(&mut tcp, body)).await, Ok(Ok(()))) {
                keep(tcp);
            }
        });
    }
}

/// How long a kept connection may take to deliver the rest of its last answer.
const SETTLE: std::time::Duration = std::time::Duration::from_secs(1);

/// Reads the rest of a kept connection's last answer (its framing's end); an error where the
/// connection closed, broke or sent more than the answer.
async fn settle(tcp: &mut TcpStream, mut body: Body) -> std::io::Result<()> {
    let mut buf = Vec::new();
    while !body.finished() {
        buf.clear();
        if read_more(tcp, &mut buf).await? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        let taken = body.feed(&buf, |_| {}).map_err(std::io::Error::other)?;
        if taken < buf.len() {
            return Err(std::io::Error::other("bytes past the answer"));
        }
    }
    Ok(())
}

/// A proxy in the environment (as reqwest reads it) that would carry requests to `host`.
fn proxied(host: &str) -> bool {
    let var = |names: [&str; 2]| names.iter().find_map(|n| std::env::var(n).ok().filter(|v| !v.trim().is_empty()));
    if var(["http_proxy", "HTTP_PROXY"]).or(var(["all_proxy", "ALL_PROXY"])).is_none() {
        return false;
    }
    let exempt = var(["no_proxy", "NO_PROXY"]).unwrap_or_default();
    !exempt.split(',').map(str::trim).any(|e| e == "*" || e.trim_start_matches('.') == host)
}

/// The response head: status, framing, whether the connection stays open, where a redirect
/// points; and the head's length in the buffer.
struct Head {
    status: u16,
    body: Body,
    keep_alive: bool,
    location: Option<String>,
    len: usize,
}

/// Writes `req` on `tcp` and reads its answer into `p` (`reused`: the connection carried an
/// earlier answer).
async fn exchange(
    tcp: &mut TcpStream,
    req: &[u8],
    url: &reqwest::Url,
    clock: Clock,
    p: &mut StreamParser,
    reused: bool,
) -> Exchange {
    let failed =
        |kind: FailureKind, why: String| Exchange::Done(Outcome::error(kind, format!("POST {url}: {why}")), None);
    match write_request(tcp, req).await {
        Ok(()) => {}
        Err(0) => return Exchange::Stale,
        Err(_) => return failed(FailureKind::Connect, "the connection closed while the request was written".into()),
    }
    let mut buf = Vec::with_capacity(8 << 10);
    let head = loop {
        match read_head(&buf) {
            Ok(Some(h)) if h.len > MAX_HEAD => {
                return failed(FailureKind::Protocol, format!("a response head over {MAX_HEAD} bytes"))
            }
            Ok(Some(h)) if (100..200).contains(&h.status) => {
                buf.drain(..h.len);
            }
            Ok(Some(h)) => break h,
            Ok(None) if buf.len() > MAX_HEAD => {
                return failed(FailureKind::Protocol, format!("a response head over {MAX_HEAD} bytes"))
            }
            Ok(None) => match read_more(tcp, &mut buf).await {
                Ok(0) | Err(_) if buf.is_empty() => {
                    let why = if reused {
                        "the kept-alive connection closed after the request was written, before any answer (not sent again: the server may have acted on it)"
                    } else {
                        "the server closed the connection without answering"
                    };
                    return failed(FailureKind::Connect, why.into());
                }
                Ok(0) => return failed(FailureKind::Connect, "the connection closed inside the response head".into()),
                Err(e) => return failed(FailureKind::Connect, e.to_string()),
                Ok(_) => {}
            },
            Err((kind, e)) => return failed(kind, format!("invalid HTTP response: {e}")),
        }
    };
    p.http.headers = Some(clock.now());
    p.http.status = head.status;
    buf.drain(..head.len);
    if let Some(why) = redirect_why(head.status, head.location.as_deref(), url) {
        return Exchange::Done(Outcome::refused(FailureKind::Http(head.status), why), None);
    }
    if !(200..300).contains(&head.status) {
        let (text, cut) = error_body(tcp, buf, head.body).await;
        return Exchange::Done(error_from(head.status, &text, cut), None);
    }
    let (outcome, body) = stream(tcp, buf, head.body, url, clock, p).await;
    Exchange::Done(outcome, body.filter(|_| head.keep_alive))
}

/// Writes `req` whole; on failure, how many of its bytes went out (0: none, so it may be sent
/// again elsewhere).
async fn write_request(tcp: &mut TcpStream, req: &[u8]) -> Result<(), usize> {
    let mut written = 0;
    while written < req.len() {
        match tcp.write(&req[written..]).await {
            Ok(0) | Err(_) => return Err(written),
            Ok(n) => written += n,
        }
    }
    Ok(())
}

/// The response head in `buf`, if it is whole; a head that cannot be read, with the kind of
/// its fault (its framing, or HTTP itself).
fn read_head(buf: &[u8]) -> Result<Option<Head>, (FailureKind, String)> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut r = httparse::Response::new(&mut headers);
    let parsed = r.parse(buf).map_err(|e| match e {
        httparse::Error::TooManyHeaders => (FailureKind::Protocol, "more than 64 headers".to_string()),
        e => (FailureKind::Protocol, e.to_string()),
    })?;
    let httparse::Status::Complete(len) = parsed else { return Ok(None) };
    let headers = &*r.headers;
    let field = |name: &'static str| {
        headers.iter().filter(move |h| h.name.eq_ignore_ascii_case(name)).map(|h| String::from_utf8_lossy(h.value))
    };
    let has = |name: &'static str, token: &str| {
        field(name).any(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
    };
    let status = r.code.unwrap_or(0);
    // RFC 9112 §6.3: no body after 1xx, 204 and 304, whatever the head says.
    let body = if status == 204 || status == 304 {
        Body::Length(0)
    } else if has("transfer-encoding", "chunked") {
        Body::Chunked(Chunked::default())
    } else {
        match content_length(field("content-length")).map_err(|e| (FailureKind::Framing, e.to_string()))? {
            Some(n) => Body::Length(n),
            None => Body::UntilClose,
        }
    };
    Ok(Some(Head {
        status,
        keep_alive: r.version == Some(1) && !has("connection", "close"),
        body,
        location: field("location").next().map(|l| l.into_owned()),
        len,
    }))
}

/// The body's length from its `Content-Length` fields: every value (a field may list several)
/// a decimal number of at most 19 digits, all the same (RFC 9110 §8.6).
fn content_length<'a>(fields: impl Iterator<Item = std::borrow::Cow<'a, str>>) -> Result<Option<u64>, FramingError> {
    let mut length = None;
    for f in fields {
        for v in f.split(',').map(str::trim) {
            let n = v
                .parse::<u64>()
                .ok()
                .filter(|_| !v.is_empty() && v.len() <= 19 && v.bytes().all(|b| b.is_ascii_digit()))
                .ok_or_else(|| FramingError::ContentLength(v.into()))?;
            match length {
                Some(m) if m != n => return Err(FramingError::TwoLengths(m, n)),
                _ => length = Some(n),
            }
        }
    }
    Ok(length)
}

/// Reads more bytes onto `buf`: how many (0 at the end of the stream).
async fn read_more(tcp: &mut TcpStream, buf: &mut Vec<u8>) -> std::io::Result<usize> {
    if buf.capacity() - buf.len() < 2048 {
        buf.reserve(8 << 10);
    }
    tcp.read_buf(buf).await
}

/// At most [`MAX_ERROR_BODY`] bytes of an error answer's body, and whether it held more;
/// what came within [`ERROR_BODY_WITHIN`] when its body trickles.
async fn error_body(tcp: &mut TcpStream, buf: Vec<u8>, body: Body) -> (Vec<u8>, bool) {
    let mut text = Vec::new();
    let cut = tokio::time::timeout(ERROR_BODY_WITHIN, read_error_body(tcp, buf, body, &mut text)).await;
    let cut = cut.unwrap_or(false) || text.len() > MAX_ERROR_BODY;
    text.truncate(MAX_ERROR_BODY);
    (text, cut)
}

/// Reads the error body into `text` up to its end or past [`MAX_ERROR_BODY`] (then true).
async fn read_error_body(tcp: &mut TcpStream, mut buf: Vec<u8>, mut body: Body, text: &mut Vec<u8>) -> bool {
    loop {
        if body.feed(&buf, |d| text.extend_from_slice(d)).is_err() || body.finished() {
            return false;
        }
        if text.len() > MAX_ERROR_BODY {
            return true;
        }
        buf.clear();
        if !matches!(read_more(tcp, &mut buf).await, Ok(n) if n > 0) {
            return false;
        }
    }
}

/// Reads a 2xx answer's events into `p` until the end marker, starting with the body bytes
/// already in `buf`; every event of one read is stamped when that read returned. Also gives
/// the body's framing where the connection can be kept (the answer ended well, its framing
/// says where it ends, and nothing came past it).
async fn stream(
    tcp: &mut TcpStream,
    mut buf: Vec<u8>,
    mut body: Body,
    url: &reqwest::Url,
    clock: Clock,
    p: &mut StreamParser,
) -> (Outcome, Option<Body>) {
    let mut sse = SseDecoder::new(MAX_EVENT_BYTES);
    let mut at = clock.now();
    let mut stray = false;
    loop {
        if let Some(end) = feed(&mut body, &buf, &mut sse, url, at, p, &mut stray) {
            let keep = matches!(end, Outcome::Ok) && body != Body::UntilClose && !stray;
            return (end, keep.then_some(body));
        }
        buf.clear();
        match read_more(tcp, &mut buf).await {
            // A framed body cut short broke; one that runs to the close ended.
            Ok(0) if body != Body::UntilClose => return (p.broke("the connection closed inside the body"), None),
            Ok(0) => return (p.no_end_marker(), None),
            Ok(_) => at = clock.now(),
            Err(e) => return (p.broke(e), None),
        }
    }
}

/// Feeds one read's bytes through the body's framing and the SSE decoder into `p`: the
/// request's outcome once it has one. `stray`: bytes came past the body's end.
#[allow(clippy::too_many_arguments)]
fn feed(
    body: &mut Body,
    bytes: &[u8],
    sse: &mut SseDecoder,
    url: &reqwest::Url,
    at: Stamp,
    p: &mut StreamParser,
    stray: &mut bool,
) -> Option<Outcome> {
    let mut end: Option<Outcome> = None;
    let framed = body.feed(bytes, |data| {
        if end.is_some() {
            return;
        }
        p.http.first_byte.get_or_insert(at);
        let fed = sse.feed(data, |event| match p.event(event, at) {
            Step::More => ControlFlow::Continue(()),
            Step::Done => {
                end = Some(Outcome::Ok);
                ControlFlow::Break(())
            }
            Step::Failed(kind, why) => {
                end = Some(Outcome::error(kind, why));
                ControlFlow::Break(())
            }
        });
        if let Err(e) = fed {
            end = Some(Outcome::error(FailureKind::BadEvent, format!("{e} from {}", redact_url(url.as_str()))));
        }
    });
    *stray |= framed.as_ref().is_ok_and(|&taken| taken < bytes.len());
    if let Err(e) = framed {
        let why = format!("the answer's framing broke after {} content chunks: {e}", p.chunks.len());
        return Some(end.unwrap_or(Outcome::error(FailureKind::Framing, why)));
    }
    if end.is_none() && body.finished() {
        return Some(p.no_end_marker());
    }
    end
}
