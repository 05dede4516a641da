//! Response bodies read up to a bound: an error answer keeps its status and the head of its
//! body, a `/metrics` page or a model list over its bound is refused, and in both cases the
//! rest is never read (the connection is dropped), so a server cannot make the client hold
//! more than the bound.

use crate::sse::size;
use crate::stream::clip;
use crate::ClientError;
use goodput_core::{FailureKind, Outcome};
use serde_json::Value;

/// The most of a non-2xx body read: an error message is a few hundred bytes.
pub const MAX_ERROR_BODY: usize = 64 << 10;

/// The most of a `/metrics` page (or a `/v1/models` list) read. vLLM's page is about 100 KiB
/// per engine; 32 MiB holds hundreds of engines or adapters.
pub const MAX_SCRAPE_BYTES: usize = 32 << 20;

/// At most `limit` bytes of `resp`'s body, and whether it held more (not read): every body
/// goodput reads from a server goes through this bound (error answers, `/metrics`, model
/// lists, `--clock-ref`'s answer).
pub async fn read_capped(resp: &mut reqwest::Response, limit: usize) -> Result<(Vec<u8>, bool), reqwest::Error> {
    let mut out = Vec::new();
    let more = read_into(resp, limit, &mut out).await?;
    Ok((out, more))
}

/// The body of a side request to `url` (`/metrics`, `/v1/models`) as text (bytes that are not
/// UTF-8 replaced), refused past [`MAX_SCRAPE_BYTES`]: by its `Content-Length` before reading,
/// or once that much came.
pub(crate) async fn read_side(resp: &mut reqwest::Response, url: &str) -> Result<String, ClientError> {
    let over = || ClientError::Oversize {
        url: url.to_string(),
        why: format!("the answer is larger than {}, goodput's bound for it", size(MAX_SCRAPE_BYTES)),
    };
    if resp.content_length().is_some_and(|n| n > MAX_SCRAPE_BYTES as u64) {
        return Err(over());
    }
    let read = read_capped(resp, MAX_SCRAPE_BYTES).await;
    match read.map_err(|source| ClientError::Get { url: url.to_string(), source })? {
        (_, true) => Err(over()),
        (bytes, false) => {
            Ok(String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
        }
    }
}

/// The outcome of a request answered with a non-2xx status: the status and the server's
/// message (its JSON `error.message` or `message`, else the head of the body), from at most
/// [`MAX_ERROR_BODY`] bytes. Overload (429) and server errors may pass on a retry; other
/// client errors will not.
pub(crate) async fn error_outcome(mut resp: reqwest::Response) -> Outcome {
    let status = resp.status().as_u16();
    let mut head = Vec::new();
    let read = tokio::time::timeout(ERROR_BODY_WITHIN, read_into(&mut resp, MAX_ERROR_BODY, &mut head)).await;
    let cut = matches!(read, Ok(Ok(true)));
    drop(resp);
    error_from(status, &head, cut)
}

/// How long an error answer's body may take: its status is the answer, so a body that
/// trickles (or never ends) is not waited for until the request's timeout.
pub const ERROR_BODY_WITHIN: std::time::Duration = std::time::Duration::from_secs(2);

/// At most `limit` bytes of `resp`'s body into `out` (what came before an error or a timeout
/// stays), and whether it held more.
async fn read_into(resp: &mut reqwest::Response, limit: usize, out: &mut Vec<u8>) -> Result<bool, reqwest::Error> {
    while let Some(c) = resp.chunk().await? {
        let room = limit - out.len();
        if c.len() > room {
            out.extend_from_slice(&c[..room]);
            return Ok(true);
        }
        out.extend_from_slice(&c);
    }
    Ok(false)
}

/// The outcome of a non-2xx `status` whose body began with `head` (`cut`: it held more).
pub(crate) fn error_from(status: u16, head: &[u8], cut: bool) -> Outcome {
    // The head may end inside a character.
    let text = String::from_utf8_lossy(head);
    let json = serde_json::from_str::<Value>(&text).ok();
    let message = json.as_ref().and_then(|v| v.pointer("/error/message").or_else(|| v.get("message")));
    let msg = match message.and_then(Value::as_str) {
        Some(m) => first_chars(m, 1000),
        None => clip(&text),
    };
    let mut why = format!("HTTP {status}: {msg}");
    if cut {
        why.push_str(&format!(" (an error body over {}: the rest was not read)", size(MAX_ERROR_BODY)));
    }
    let kind = FailureKind::Http(status);
    if status == 429 || (500..600).contains(&status) {
        Outcome::error(kind, why)
    } else {
        Outcome::refused(kind, why)
    }
}

/// The first `n` characters of `s`.
fn first_chars(s: &str, n: usize) -> &str {
    s.char_indices().nth(n).map_or(s, |(i, _)| &s[..i])
}
