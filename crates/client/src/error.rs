//! The client's errors: why the HTTP target could not be built or a side request failed (the
//! measured requests' failures are recorded, not raised), and the chain of causes they show.

use std::time::Duration;

/// Why the HTTP target could not be built, or a side request (models, /metrics) failed.
/// Failures of the measured requests themselves are not errors: they are recorded
/// ([`goodput_core::Outcome`]).
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("text prompts need the model's tokenizer on the client side")]
    NoCodec,
    #[error("building the HTTP client: {0}")]
    Build(reqwest::Error),
    #[error("{0}")]
    Connection(String),
    #[error("GET {url}: {}", causes(source))]
    Get { url: String, source: reqwest::Error },
    #[error("GET {url}: HTTP {status}")]
    Status { url: String, status: reqwest::StatusCode },
    #[error("GET {url}: {why}")]
    Redirect { url: String, why: String },
    /// The answer passed a size bound ([`crate::MAX_SCRAPE_BYTES`], [`crate::MAX_SCRAPE_LINES`]).
    #[error("GET {url}: {why}")]
    Oversize { url: String, why: String },
    #[error("GET {url}: no complete answer within {timeout:?} (--timeout)")]
    Timeout { url: String, timeout: Duration },
    #[error("parsing /metrics: {0}")]
    Metrics(#[from] MetricsError),
}

/// Why a `/metrics` text was not read.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// More than `max` lines ([`crate::MAX_SCRAPE_LINES`]).
    #[error("/metrics holds more than {max} lines (series, HELP and TYPE), goodput's bound for it")]
    TooLong { max: usize },
    /// `prometheus-parse`'s error.
    #[error("{0}")]
    Exposition(std::io::Error),
}

/// An error with its causes, `a: b: c` (reqwest's own message hides why a connection failed:
/// a refused port, an unknown certificate authority, a name that does not resolve).
pub fn causes(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(c) = next {
        let s = c.to_string();
        if !out.contains(&s) {
            out.push_str(": ");
            out.push_str(&s);
        }
        next = c.source();
    }
    out
}

/// The kind of a request that failed before its answer's body, from its error chain's text
/// (hyper names its parse errors: `invalid content-length parsed`, `invalid HTTP version
/// parsed`, `message head is too large`): the framing, the protocol, else the connection.
pub fn send_failure(causes: &str) -> goodput_core::FailureKind {
    use goodput_core::FailureKind;
    let t = causes.to_ascii_lowercase();
    // A connection that ended is the connection's fault, whatever it was reading.
    let ended = ["eof", "closed", "reset", "broken pipe", "timed out"];
    if ended.iter().any(|e| t.contains(e)) {
        FailureKind::Connect
    } else if t.contains("content-length") || t.contains("transfer-encoding") || t.contains("chunk size") {
        FailureKind::Framing
    } else if t.contains(" parsed") || t.contains("message head is too large") || t.contains("too many headers") {
        FailureKind::Protocol
    } else {
        FailureKind::Connect
    }
}
