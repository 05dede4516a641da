//! What goes over HTTP beside the content: the client's own stamps of a streamed response,
//! and the engine timings goodput's server returns with each request.

use crate::clock::Stamp;
use crate::request::{EngineRecord, FinishReason, RequestId};
use serde::{Deserialize, Serialize};

/// A streamed HTTP response as the client saw it, beyond its content chunks.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HttpStamps {
    /// HTTP status of the response (0 when none arrived).
    pub status: u16,
    /// The server stamps with the client's clock (it runs in the same process): stamps of
    /// the two sides can be subtracted.
    #[serde(default)]
    pub same_clock: bool,
    /// The response headers arrived.
    pub headers: Option<Stamp>,
    /// The first byte of the body arrived.
    pub first_byte: Option<Stamp>,
    /// The end marker (`data: [DONE]`, or the last event of a stream without one) arrived.
    pub done: Option<Stamp>,
    /// SSE events that carried no content (role-only or empty deltas, usage-only chunks).
    pub empty_events: usize,
    /// Token counts from the server's `usage`, when it sent one.
    pub usage_prompt_tokens: Option<usize>,
    pub usage_completion_tokens: Option<usize>,
    /// `usage.prompt_tokens_details.cached_tokens`: prompt tokens the server took from its
    /// prefix cache, when it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_cached_tokens: Option<usize>,
    /// Output tokens counted by the client's tokenizer over the received text, when the
    /// client has one (to cross-check `usage`).
    pub client_counted_tokens: Option<usize>,
    /// The engine timings returned by goodput's server (`goodput` object), when present.
    pub server: Option<ServerTimings>,
    /// The server's reasoning token count: `usage.completion_tokens_details.reasoning_tokens`
    /// (OpenAI, vLLM), or SGLang's `usage.reasoning_tokens`; part of `usage_completion_tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_reasoning_tokens: Option<usize>,
    /// Reasoning tokens counted by the client's tokenizer over the received reasoning text
    /// (included in `client_counted_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_counted_reasoning_tokens: Option<usize>,
    /// The server's figures the client refused for this request (they contradict what it sent
    /// or received): each refused field above is `None`, and the record's counts are the
    /// client's own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub anomalies: Vec<Anomaly>,
}

/// A figure a server reported that the client did not use, and why. The refused value lives
/// only in `message`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Anomaly {
    pub kind: AnomalyKind,
    /// What the server said and what it contradicts, e.g. `usage.completion_tokens
    /// 1000000000000000 above max_tokens 100 (12 tokens streamed)`.
    pub message: String,
}

/// What a server reported wrongly about one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AnomalyKind {
    /// `usage.completion_tokens` contradicts the stream or `max_tokens`: the client's count of
    /// streamed tokens is the request's output length.
    CompletionTokens,
    /// `usage.prompt_tokens` contradicts the prompt sent: the prompt's length is used.
    PromptTokens,
    /// More prompt tokens cached than the prompt holds: no cache figure for the request.
    CachedTokens,
    /// The per-request engine stamps (`goodput` object) go back in time or contradict the
    /// request's counts: dropped, no engine record for the request.
    ServerTimings,
    /// More output tokens streamed than `max_tokens` allows: the server ignored it (the
    /// counterpart of a short output; the lengths are not the scenario's).
    OverMaxTokens,
    /// The server's reasoning token count is more than the request's output, or fewer than
    /// the reasoning chunks streamed: no reasoning count from the server for the request.
    ReasoningTokens,
}

impl std::fmt::Display for AnomalyKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            AnomalyKind::CompletionTokens => "usage.completion_tokens refused",
            AnomalyKind::PromptTokens => "usage.prompt_tokens refused",
            AnomalyKind::CachedTokens => "cached tokens refused",
            AnomalyKind::ReasoningTokens => "reasoning tokens refused",
            AnomalyKind::ServerTimings => "server stamps refused",
            AnomalyKind::OverMaxTokens => "outputs over max_tokens",
        })
    }
}

/// One request's engine stamps as goodput's server returns them: the `goodput` object of the
/// last streamed chunk or of a whole response. Stamps are on the server's clock (the client's
/// own when the server runs in the same process, `--target http-local`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServerTimings {
    /// The server received the request (its handler started).
    pub received: Stamp,
    /// The engine handle accepted it (after parsing, templating and tokenization).
    pub arrival: Stamp,
    pub queued: Stamp,
    pub first_scheduled: Option<Stamp>,
    pub first_token: Option<Stamp>,
    /// Streams: when the engine sampled the token that completed the first text sent (later
    /// than `first_token` when the first tokens were not yet a whole UTF-8 character).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_text: Option<Stamp>,
    pub last_token: Option<Stamp>,
    pub finished: Stamp,
    pub prompt_tokens: usize,
    pub cached_tokens: usize,
    pub generated_tokens: usize,
    pub preemptions: u32,
    pub finish_reason: FinishReason,
}

impl HttpStamps {
    /// The client's stamps on a clock whose origin is `ns` nanoseconds earlier; the server's
    /// too where it stamps with the client's clock ([`HttpStamps::same_clock`]).
    pub fn shift(&mut self, ns: u64) {
        for s in [&mut self.headers, &mut self.first_byte, &mut self.done].into_iter().flatten() {
            *s = s.shifted(ns);
        }
        if let Some(t) = self.server.as_mut().filter(|_| self.same_clock) {
            for s in [&mut t.received, &mut t.arrival, &mut t.queued, &mut t.finished] {
                *s = s.shifted(ns);
            }
            for s in
                [&mut t.first_scheduled, &mut t.first_token, &mut t.first_text, &mut t.last_token].into_iter().flatten()
            {
                *s = s.shifted(ns);
            }
        }
    }
}

impl ServerTimings {
    pub fn new(received: Stamp, r: &EngineRecord) -> Self {
        ServerTimings {
            received,
            arrival: r.arrival,
            queued: r.queued,
            first_scheduled: r.first_scheduled,
            first_token: r.first_token,
            first_text: None,
            last_token: r.last_token(),
            finished: r.finished,
            prompt_tokens: r.prompt_tokens,
            cached_tokens: r.cached_tokens,
            generated_tokens: r.generated_tokens,
            preemptions: r.preemptions,
            finish_reason: r.finish_reason,
        }
    }

    /// The first pair of stamps out of the order the engine makes them — received ≤ arrival ≤
    /// queued ≤ first scheduled ≤ first token ≤ first text ≤ last token ≤ finished, absent
    /// stamps skipped — as `(later name, its stamp, earlier name, its stamp)`; `None` when in
    /// order (only then are differences of them durations).
    pub fn out_of_order(&self) -> Option<(&'static str, Stamp, &'static str, Stamp)> {
        let order = [
            ("received", Some(self.received)),
            ("arrival", Some(self.arrival)),
            ("queued", Some(self.queued)),
            ("first_scheduled", self.first_scheduled),
            ("first_token", self.first_token),
            ("first_text", self.first_text),
            ("last_token", self.last_token),
            ("finished", Some(self.finished)),
        ];
        let present: Vec<(&'static str, Stamp)> = order.into_iter().filter_map(|(n, at)| Some((n, at?))).collect();
        present.windows(2).find(|w| w[1].1 < w[0].1).map(|w| (w[1].0, w[1].1, w[0].0, w[0].1))
    }

    /// The engine record these timings describe (token times: the first and the last only).
    pub fn to_record(&self, id: RequestId) -> EngineRecord {
        let mut token_times: Vec<Stamp> = self.first_token.into_iter().collect();
        if let Some(l) = self.last_token.filter(|l| Some(*l) != self.first_token) {
            token_times.push(l);
        }
        EngineRecord {
            id,
            arrival: self.arrival,
            queued: self.queued,
            first_scheduled: self.first_scheduled,
            first_token: self.first_token,
            token_times,
            finished: self.finished,
            prompt_tokens: self.prompt_tokens,
            cached_tokens: self.cached_tokens,
            generated_tokens: self.generated_tokens,
            preemptions: self.preemptions,
            finish_reason: self.finish_reason,
        }
    }
}

/// One scrape of a server's `/metrics`, keyed by metric name without its prefix (`vllm:`,
/// `sglang:`, `goodput_`), summed over label sets (several engines, data-parallel ranks),
/// with the number of label sets and the largest value kept beside the sum, so a fraction
/// (KV usage) is combined as a mean and a max, never a sum. The HTTP client fills it; the
/// metrics crate turns two scrapes into a level's server-side numbers.
#[derive(Clone, Debug, Default)]
pub struct ServerScrape {
    pub at: Stamp,
    /// Cumulative bucket counts `(le, count)`, `le` ascending.
    pub histograms: std::collections::HashMap<String, Vec<(f64, f64)>>,
    /// Each histogram's `_sum` (its `_count` is the `+Inf` bucket).
    pub sums: std::collections::HashMap<String, f64>,
    /// Gauges and counters (and any other untyped sample), summed over label sets.
    pub gauges: std::collections::HashMap<String, f64>,
    /// Per gauge: how many label sets it came in, and the largest of their values.
    pub label_sets: std::collections::HashMap<String, (usize, f64)>,
}

impl ServerScrape {
    /// A gauge's mean and max over its label sets (its value and itself for one).
    pub fn mean_max(&self, name: &str) -> Option<(f64, f64)> {
        let sum = *self.gauges.get(name)?;
        let (n, max) = self.label_sets.get(name).copied().unwrap_or((1, sum));
        Some((sum / n.max(1) as f64, max))
    }
}

/// Where `goodput serve` answers with its wall clock: the common reference the shards of a
/// run split over machines (`goodput run --shard i/N --clock-ref URL`) measure their clocks'
/// offsets against.
pub const CLOCK_PATH: &str = "/goodput/clock";

/// The body of [`CLOCK_PATH`]: the server's wall time when it answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WallClock {
    /// Nanoseconds since the Unix epoch.
    pub unix_ns: u64,
}

impl WallClock {
    /// This machine's wall clock now (0 before the epoch).
    pub fn now() -> Self {
        let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        WallClock { unix_ns: since.as_nanos() as u64 }
    }
}
