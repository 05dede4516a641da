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
    /// The request failed (broken stream, overload, server error); retrying may help.
    Error(Failure),
    /// The target refused the request as invalid (the engine's admission check, an HTTP 4xx
    /// other than 429); sending it again cannot help.
    Refused(Failure),
    /// No end marker within the request timeout.
    Timeout,
}

impl Outcome {
    /// Whether a retry policy may send the request again after this outcome.
    pub fn retryable(&self) -> bool {
        matches!(self, Outcome::Error(_) | Outcome::Timeout)
    }

    /// An [`Outcome::Error`] of `kind`.
    pub fn error(kind: FailureKind, message: impl Into<String>) -> Self {
        Outcome::Error(Failure { kind, message: message.into() })
    }

    /// An [`Outcome::Refused`] of `kind`.
    pub fn refused(kind: FailureKind, message: impl Into<String>) -> Self {
        Outcome::Refused(Failure { kind, message: message.into() })
    }

    /// Why the request did not complete; `None` when it did.
    pub fn failure_kind(&self) -> Option<FailureKind> {
        match self {
            Outcome::Ok => None,
            Outcome::Timeout => Some(FailureKind::Timeout),
            Outcome::Error(f) | Outcome::Refused(f) => Some(f.kind),
        }
    }

    /// The failure's message (`"timed out"` for a timeout); `None` when it completed.
    pub fn message(&self) -> Option<&str> {
        match self {
            Outcome::Ok => None,
            Outcome::Timeout => Some("no end marker within the request timeout"),
            Outcome::Error(f) | Outcome::Refused(f) => Some(&f.message),
        }
    }
}

/// A failed request: what kind of failure, and the message that says why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "FailureRepr")]
pub struct Failure {
    pub kind: FailureKind,
    pub message: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// A failure as written: typed, or (results written before failures had kinds) its message.
#[derive(Deserialize)]
#[serde(untagged)]
enum FailureRepr {
    Typed { kind: FailureKind, message: String },
    Message(String),
}

impl From<FailureRepr> for Failure {
    fn from(r: FailureRepr) -> Self {
        match r {
            FailureRepr::Typed { kind, message } => Failure { kind, message },
            FailureRepr::Message(message) => Failure { kind: FailureKind::Other, message },
        }
    }
}

/// The kinds of failure a run counts apart, from the client's side of the request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(into = "String", try_from = "String")]
#[schemars(extend("pattern" = "^(timeout|connect|http-[0-9]{3}|framing|protocol|stream-broken|no-end-marker|bad-event|error-event|invalid|engine|other)$"))]
pub enum FailureKind {
    /// No end marker within the request timeout.
    Timeout,
    /// The request could not be sent or its response head never came (connection refused,
    /// reset, DNS, TLS).
    Connect,
    /// The server answered with this HTTP status (4xx or 5xx).
    Http(u16),
    /// The answer's framing cannot be trusted: a `Content-Length` that is not a number, two
    /// that differ, a chunk size that is not one, or both `Content-Length` and chunked
    /// `Transfer-Encoding` disagreeing (RFC 9112 §6.3: the message cannot be read safely).
    Framing,
    /// The server broke HTTP or goodput's bounds on an answer: a status line or version that is
    /// not HTTP/1.x, more than 64 headers, a head over 64 KiB, an answer streaming more bytes
    /// or token ids than its `max_tokens` allows.
    Protocol,
    /// The byte stream broke after the response head.
    StreamBroken,
    /// The stream ended without its end marker (`[DONE]`).
    NoEndMarker,
    /// An event that is not JSON, or not the API's shape.
    BadEvent,
    /// The server sent an error event in the stream.
    ErrorEvent,
    /// The engine refused the request (admission: too long, bad parameters).
    Invalid,
    /// The engine ended the request (aborted, stopped, failed step).
    Engine,
    /// Anything else, and failures recorded before kinds were.
    Other,
}

impl std::fmt::Display for FailureKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FailureKind::Http(s) => write!(f, "http-{s}"),
            k => f.write_str(match k {
                FailureKind::Timeout => "timeout",
                FailureKind::Connect => "connect",
                FailureKind::Framing => "framing",
                FailureKind::Protocol => "protocol",
                FailureKind::StreamBroken => "stream-broken",
                FailureKind::NoEndMarker => "no-end-marker",
                FailureKind::BadEvent => "bad-event",
                FailureKind::ErrorEvent => "error-event",
                FailureKind::Invalid => "invalid",
                FailureKind::Engine => "engine",
                _ => "other",
            }),
        }
    }
}

impl From<FailureKind> for String {
    fn from(k: FailureKind) -> String {
        k.to_string()
    }
}

impl TryFrom<String> for FailureKind {
    type Error = crate::ValueError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        const NAMED: [FailureKind; 11] = [
            FailureKind::Timeout,
            FailureKind::Connect,
            FailureKind::Framing,
            FailureKind::Protocol,
            FailureKind::StreamBroken,
            FailureKind::NoEndMarker,
            FailureKind::BadEvent,
            FailureKind::ErrorEvent,
            FailureKind::Invalid,
            FailureKind::Engine,
            FailureKind::Other,
        ];
        if let Some(code) = s.strip_prefix("http-") {
            return code
                .parse()
                .map(FailureKind::Http)
                .map_err(|_| crate::ValueError::new(&s, "a failure kind of a bad HTTP status"));
        }
        NAMED
            .into_iter()
            .find(|k| k.to_string() == s)
            .ok_or_else(|| crate::ValueError::new(s, "an unknown failure kind"))
    }
}

/// A reasoning model's request: how its output split into reasoning and answer. The record's
/// chunks hold both kinds in arrival order; its first chunk is the first token of any kind.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reasoning {
    /// The first answer (not reasoning) chunk; `None` when the answer never started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_answer: Option<Stamp>,
    /// Chunks of reasoning (over HTTP `delta.reasoning`, or `delta.reasoning_content` as
    /// SGLang and llama.cpp send it): output tokens like the answer's, counted apart.
    pub chunks: usize,
    /// Reasoning chunks after the answer had started (a stream that switched back): counted,
    /// still tokens.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub after_answer: usize,
    /// The reasoning tokens: the server's count where it sent one the client accepts
    /// (usage's `reasoning_tokens`), else the client's tokenizer count over the reasoning
    /// text, else the engine's own (in-process); `None`: only the chunks are known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<usize>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Reasoning {
    /// The first `k` of `chunks` (one token each) as reasoning, the rest as the answer: what
    /// a target that knows the split (the in-process engine, the simulator) records. `None`
    /// for `k` = 0 or no chunks.
    pub fn prefix(chunks: &[Chunk], k: usize) -> Option<Reasoning> {
        let n = chunks.len().min(k);
        (n > 0).then(|| Reasoning {
            first_answer: chunks.get(n).map(|c| c.at),
            chunks: n,
            after_answer: 0,
            tokens: Some(chunks[..n].iter().map(|c| c.tokens as usize).sum()),
        })
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
    /// Reasoning models: the split of the output into reasoning and answer; `None` for a
    /// request that did not reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<Reasoning>,
    /// The output length the workload required ([`SamplingParams::required_output_tokens`]),
    /// set by the load generator; a completed request with fewer is a short output.
    ///
    /// [`SamplingParams::required_output_tokens`]: crate::SamplingParams::required_output_tokens
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required_output_tokens: Option<usize>,
    /// The prompt length the workload drew (its token ids), set by the load generator: what
    /// `input_tokens` (the target's own count, for a server its `usage.prompt_tokens`) is held
    /// against, since a chat template or another tokenizer counts differently.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drawn_input_tokens: Option<usize>,
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
            reasoning: None,
            required_output_tokens: None,
            drawn_input_tokens: None,
        }
    }

    pub fn is_ok(&self) -> bool {
        self.outcome == Outcome::Ok
    }

    /// Every stamp of the record on a clock whose origin is `ns` nanoseconds earlier: the
    /// client's, the in-process engine's (the same clock) and the server's where it shares
    /// the client's clock; a remote server's own stamps stay on its clock.
    pub fn shift(&mut self, ns: u64) {
        for s in [&mut self.intended, &mut self.sent, &mut self.end] {
            *s = s.shifted(ns);
        }
        self.chunks.iter_mut().for_each(|c| c.at = c.at.shifted(ns));
        if let Some(a) = self.reasoning.as_mut().and_then(|r| r.first_answer.as_mut()) {
            *a = a.shifted(ns);
        }
        if let Some(e) = self.engine.as_mut() {
            e.shift(ns);
        }
        if let Some(h) = self.http.as_mut() {
            h.shift(ns);
        }
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
    pub kind: StepKind,
    pub start: Stamp,
    pub end: Stamp,
}

/// What a step of a task is: an agent's model calls, tools and retrievals, and a RAG query's
/// stages (embed, retrieve, rerank, assemble, then its model call). Named once, here; written
/// by these names (`llm`, `tool`, …).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepKind {
    /// A model call.
    Llm,
    /// An agent's tool call.
    Tool,
    /// A knowledge-base retrieval (an agent's, or a RAG query's search).
    Retrieve,
    /// A RAG query's embedding.
    Embed,
    /// A RAG query's reranking of what it retrieved.
    Rerank,
    /// A RAG query's assembling of its prompt.
    Assemble,
}

impl StepKind {
    pub const ALL: [StepKind; 6] =
        [StepKind::Llm, StepKind::Tool, StepKind::Retrieve, StepKind::Embed, StepKind::Rerank, StepKind::Assemble];

    pub fn name(self) -> &'static str {
        match self {
            StepKind::Llm => "llm",
            StepKind::Tool => "tool",
            StepKind::Retrieve => "retrieve",
            StepKind::Embed => "embed",
            StepKind::Rerank => "rerank",
            StepKind::Assemble => "assemble",
        }
    }

    /// A call the task waits on outside the model: a tool or a retrieval (what
    /// `tool_calls_per_task` counts and `tool_wait_share` times). A RAG query's embed, rerank
    /// and assemble stages are its own work, not calls.
    pub fn is_tool_call(self) -> bool {
        matches!(self, StepKind::Tool | StepKind::Retrieve)
    }
}

impl std::fmt::Display for StepKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
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

#[cfg(test)]
mod shift_tests {
    use super::*;
    use crate::http::{HttpStamps, ServerTimings};
    use crate::request::{EngineRecord, FinishReason};

    fn engine(at: u64) -> EngineRecord {
        EngineRecord {
            id: 1,
            arrival: Stamp(at),
            queued: Stamp(at + 1),
            first_scheduled: Some(Stamp(at + 2)),
            first_token: Some(Stamp(at + 3)),
            token_times: vec![Stamp(at + 3), Stamp(at + 4)],
            finished: Stamp(at + 5),
            prompt_tokens: 1,
            cached_tokens: 0,
            generated_tokens: 2,
            preemptions: 0,
            finish_reason: FinishReason::Length,
        }
    }

    fn record(at: u64, same_clock: bool) -> ClientRecord {
        let mut r = ClientRecord::unanswered(1, Stamp(at), 3, Stamp(at + 9), Outcome::Ok);
        r.sent = Stamp(at + 1);
        r.chunks = vec![Chunk { at: Stamp(at + 3), tokens: 1 }, Chunk { at: Stamp(at + 4), tokens: 1 }];
        r.reasoning = Some(Reasoning { first_answer: Some(Stamp(at + 4)), chunks: 1, ..Default::default() });
        r.engine = Some(engine(at));
        let mut server = ServerTimings::new(Stamp(at), &engine(at));
        server.first_text = Some(Stamp(at + 3));
        r.http = Some(HttpStamps {
            same_clock,
            headers: Some(Stamp(at + 2)),
            first_byte: Some(Stamp(at + 3)),
            done: Some(Stamp(at + 9)),
            server: Some(server),
            ..Default::default()
        });
        r
    }

    #[test]
    fn every_stamp_of_the_clients_clock_moves_and_a_remote_servers_stay() {
        let mut r = record(100, true);
        r.shift(1000);
        assert_eq!(r, record(1100, true), "the client's, the engine's and a same-clock server's");
        let mut remote = record(100, false);
        remote.shift(1000);
        let mut want = record(1100, false);
        want.http.as_mut().unwrap().server = record(100, false).http.unwrap().server;
        assert_eq!(remote, want, "a remote server's stamps are on its own clock");
    }
}
