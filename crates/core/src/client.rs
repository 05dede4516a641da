//! What a client saw of one request: raw stamps only (oha's manner). Every metric is derived
//! afterwards, in `goodput-metrics`.

use crate::clock::Stamp;
use crate::request::EngineRecord;
use serde::{Deserialize, Serialize};

/// One streamed chunk that carried content: when it arrived and how many tokens it held.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chunk {
    pub at: Stamp,
    pub tokens: u32,
}

/// How a request ended, from the client's side.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "detail")]
pub enum Outcome {
    /// The end-of-stream marker arrived.
    Ok,
    /// The request failed (broken stream, overload, server error); the text says why.
    /// Retrying may help.
    Error(String),
    /// The target refused the request as invalid (the engine's admission check, an HTTP 4xx
    /// other than 429); sending it again cannot help.
    Refused(String),
    /// No end marker within the request timeout.
    Timeout,
}

impl Outcome {
    /// Whether a retry policy may send the request again after this outcome.
    pub fn retryable(&self) -> bool {
        matches!(self, Outcome::Error(_) | Outcome::Timeout)
    }
}

/// The raw record of one request as the client saw it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClientRecord {
    pub id: u64,
    /// The moment the request was due to be sent (`start` of every latency: measuring from
    /// the intended time avoids coordinated omission).
    pub intended: Stamp,
    /// The moment it was actually sent.
    pub sent: Stamp,
    /// Every content chunk, in arrival order (not role-only or empty chunks, not comments).
    pub chunks: Vec<Chunk>,
    /// The end-of-stream marker arrived (or the request ended otherwise).
    pub end: Stamp,
    pub input_tokens: usize,
    pub output_tokens: usize,
    pub outcome: Outcome,
    /// Retries made before this attempt (0 without a retry policy).
    pub retries: u32,
    /// The engine's record of the same request, when the target is goodput's own engine.
    pub engine: Option<EngineRecord>,
    /// The generated token ids, when the target returns them (multi-turn sessions re-send
    /// them as history).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub output_ids: Vec<crate::request::TokenId>,
    /// Multi-turn: the session and the 1-based turn this request belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<u32>,
    /// HTTP targets: the response's own stamps and counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<crate::http::HttpStamps>,
    /// The output length the workload required ([`SamplingParams::required_output_tokens`]),
    /// set by the load generator; a completed request with fewer is a short output.
    ///
    /// [`SamplingParams::required_output_tokens`]: crate::SamplingParams::required_output_tokens
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required_output_tokens: Option<usize>,
}

impl ClientRecord {
    /// A request that ended without a stream (timed out, refused, failed before sending);
    /// `outcome` says why.
    pub fn unanswered(id: u64, intended: Stamp, input_tokens: usize, end: Stamp, outcome: Outcome) -> Self {
        ClientRecord {
            id,
            intended,
            sent: intended,
            chunks: Vec::new(),
            end,
            input_tokens,
            output_tokens: 0,
            outcome,
            retries: 0,
            engine: None,
            output_ids: Vec::new(),
            session: None,
            turn: None,
            http: None,
            required_output_tokens: None,
        }
    }

    pub fn is_ok(&self) -> bool {
        self.outcome == Outcome::Ok
    }
    /// Arrival of the first content chunk.
    pub fn first_token(&self) -> Option<Stamp> {
        self.chunks.first().map(|c| c.at)
    }
}

/// One agent task: a sequence of model calls, tool calls and retrievals for one user request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskRecord {
    pub task: u64,
    pub start: Stamp,
    pub end: Stamp,
    /// Each step in order: what it was, when it started and ended.
    pub steps: Vec<TaskStep>,
    /// Every model call ended with its end marker.
    pub ok: bool,
}

/// One step of a task.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskStep {
    /// `llm`, `tool` or `retrieve`.
    pub kind: String,
    pub start: Stamp,
    pub end: Stamp,
}

/// Which part of a level a request belongs to: warm-up and cool-down requests run but are
/// left out of the statistics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Warmup,
    Measured,
    Cooldown,
}
