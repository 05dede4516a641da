//! The state of one streamed response: a plain state machine fed with SSE events (so recorded
//! streams replay), for OpenAI-style chunks and TGI's native `generate_stream` alike, and the
//! loop that feeds it a response's events ([`read_stream`]), each at most
//! [`MAX_EVENT_BYTES`].

use crate::chunk::{self, Fast};
use crate::sse::{SseDecoder, MAX_EVENT_BYTES};
use goodput_core::{Chunk, Clock, FailureKind, HttpStamps, Outcome, Reasoning, ServerTimings, Stamp, TokenId};
use serde_json::Value;
use std::ops::ControlFlow;

/// What a stream event meant.
#[derive(Debug, PartialEq)]
pub enum Step {
    /// Go on reading.
    More,
    /// The end marker: the request is complete.
    Done,
    /// The server sent an error in the stream.
    Failed(FailureKind, String),
}

/// The state of one streamed response, fed event by event.
#[derive(Debug, Default)]
pub struct StreamParser {
    /// Every token chunk, reasoning and answer alike, in arrival order.
    pub chunks: Vec<Chunk>,
    /// The answer's text (what a conversation's history keeps).
    pub text: String,
    /// A reasoning model's reasoning text, apart from the answer.
    pub reasoning: String,
    /// How the chunks split into reasoning and answer (its `tokens` are settled after the
    /// stream, from usage or the client's count).
    pub split: Reasoning,
    /// Token ids the server sent with its chunks (`return_token_ids`), if it did.
    pub token_ids: Option<Vec<TokenId>>,
    pub http: HttpStamps,
    /// TGI's native stream: tokens counted from `token` events.
    pub native_tokens: usize,
    /// What the answer may stream before it fails as [`FailureKind::Protocol`].
    pub bounds: Bounds,
    /// Event bytes taken so far.
    pub event_bytes: usize,
}

/// What one answer may stream: a server sending more is broken (or hostile), and the
/// request fails as [`FailureKind::Protocol`] before the client holds it. Sized from the
/// request's `max_tokens`: 16 KiB of events a token (a token's chunk is a few hundred bytes;
/// the Responses API repeats the text in its closing events) over 1 MiB for the rest, and
/// twice `max_tokens` ids (plus 64) where the server returns token ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    pub bytes: usize,
    pub ids: usize,
}

impl Bounds {
    /// Event bytes allowed per token of `max_tokens`.
    pub const BYTES_PER_TOKEN: usize = 16 << 10;

    /// The bounds of an answer of at most `max_tokens` tokens.
    pub fn for_max_tokens(max_tokens: usize) -> Self {
        Bounds {
            bytes: (1usize << 20).saturating_add(max_tokens.saturating_mul(Self::BYTES_PER_TOKEN)),
            ids: max_tokens.saturating_mul(2).saturating_add(64),
        }
    }
}

impl Default for Bounds {
    /// The bounds of a 4,096-token answer.
    fn default() -> Self {
        Bounds::for_max_tokens(4096)
    }
}

impl StreamParser {
    /// The outcome of a stream that ended (its body whole) before its end marker.
    pub fn no_end_marker(&self) -> Outcome {
        let why = format!("the stream ended without its end marker after {} content chunks", self.chunks.len());
        Outcome::error(FailureKind::NoEndMarker, why)
    }

    /// The outcome of a stream that broke (its body cut short or unreadable) for `cause`.
    pub fn broke(&self, cause: impl std::fmt::Display) -> Outcome {
        let why = format!("the stream broke after {} content chunks: {cause}", self.chunks.len());
        Outcome::error(FailureKind::StreamBroken, why)
    }

    /// One SSE event's data, arrived at `at`.
    pub fn event(&mut self, data: &str, at: Stamp) -> Step {
        self.event_bytes = self.event_bytes.saturating_add(data.len());
        if self.event_bytes > self.bounds.bytes {
            let why = format!(
                "the answer streamed over {} of events after {} content chunks, beyond goodput's bound for a request of its max_tokens",
                crate::sse::size(self.bounds.bytes),
                self.chunks.len()
            );
            return Step::Failed(FailureKind::Protocol, why);
        }
        let step = self.event_within(data, at);
        match self.token_ids.as_ref().map_or(0, Vec::len) {
            n if n > self.bounds.ids && step != Step::Done => {
                let why = format!(
                    "the server sent {n} token ids, beyond goodput's bound of {} for a request of its max_tokens",
                    self.bounds.ids
                );
                self.token_ids = None;
                Step::Failed(FailureKind::Protocol, why)
            }
            _ => step,
        }
    }

    fn event_within(&mut self, data: &str, at: Stamp) -> Step {
        let data = data.trim();
        if data == "[DONE]" {
            self.http.done = Some(at);
            return Step::Done;
        }
        if data.is_empty() {
            self.http.empty_events += 1;
            return Step::More;
        }
        if let Fast::Chunk { text, reasoning, ids } = chunk::read(data) {
            self.choice(text.as_deref(), reasoning.as_deref(), ids, at);
            return Step::More;
        }
        self.general(data, at)
    }

    /// The general path: any event (a trimmed, non-empty one that is not the end marker),
    /// read as a `serde_json::Value`.
    fn general(&mut self, data: &str, at: Stamp) -> Step {
        let v: Value = match serde_json::from_str(data) {
            Ok(v) => v,
            Err(e) => {
                return Step::Failed(FailureKind::BadEvent, format!("an event is not JSON ({e}): {}", clip(data)))
            }
        };
        if let Some(kind) =
            v.get("type").and_then(Value::as_str).filter(|t| t.starts_with("response.") || *t == "error")
        {
            return self.responses_event(kind, &v, at);
        }
        if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
            let msg = err.get("message").and_then(Value::as_str).map_or_else(|| err.to_string(), String::from);
            return Step::Failed(FailureKind::ErrorEvent, msg);
        }
        if let Some(u) = v.get("usage").filter(|u| !u.is_null()) {
            self.http.usage_prompt_tokens = u["prompt_tokens"].as_u64().map(|x| x as usize);
            self.http.usage_completion_tokens = u["completion_tokens"].as_u64().map(|x| x as usize);
            if let Some(c) = u.pointer("/prompt_tokens_details/cached_tokens").and_then(Value::as_u64) {
                self.http.usage_cached_tokens = Some(c as usize);
            }
            let reasoning =
                u.pointer("/completion_tokens_details/reasoning_tokens").or_else(|| u.get("reasoning_tokens"));
            if let Some(r) = reasoning.and_then(Value::as_u64) {
                self.http.usage_reasoning_tokens = Some(r as usize);
            }
        }
        if let Some(t) = v.get("goodput").filter(|t| !t.is_null()) {
            self.http.server = serde_json::from_value::<ServerTimings>(t.clone()).ok();
        }
        // TGI's native generate_stream: {"token": {...}, "generated_text": ..., "details": ...}.
        if let Some(tok) = v.get("token").filter(|t| t.is_object()) {
            let special = tok["special"].as_bool().unwrap_or(false);
            let text = tok["text"].as_str().unwrap_or("");
            if !special && !text.is_empty() {
                self.content(text, at);
            } else {
                self.http.empty_events += 1;
            }
            self.native_tokens += 1;
            if v.get("generated_text").is_some_and(|g| !g.is_null()) {
                if let Some(n) = v.pointer("/details/generated_tokens").and_then(Value::as_u64) {
                    self.http.usage_completion_tokens = Some(n as usize);
                }
                self.http.done = Some(at);
                return Step::Done;
            }
            return Step::More;
        }
        let choice = v.pointer("/choices/0");
        // The first string of each pair: `text` (completions) or `delta.content` (chat), and
        // `delta.reasoning` (vLLM's name since October 2025) or `reasoning_content` (SGLang's
        // and llama.cpp's), as the fast path reads them.
        let first = |paths: [&str; 2]| choice.and_then(|c| paths.iter().find_map(|p| c.pointer(p)?.as_str()));
        let text = first(["/text", "/delta/content"]);
        let reasoning = first(["/delta/reasoning", "/delta/reasoning_content"]);
        let ids: Option<Vec<TokenId>> =
            choice.and_then(|c| c.get("token_ids")).and_then(|t| serde_json::from_value(t.clone()).ok());
        self.choice(text, reasoning, ids, at);
        Step::More
    }

    /// A choice's answer text, reasoning text and token ids, arrived at `at`.
    fn choice(&mut self, text: Option<&str>, reasoning: Option<&str>, ids: Option<Vec<TokenId>>, at: Stamp) {
        let reasoning = reasoning.filter(|t| !t.is_empty());
        if let Some(r) = reasoning {
            self.reasoning(r, at);
        }
        let text = text.filter(|t| !t.is_empty());
        match text {
            Some(t) => self.content(t, at),
            None if reasoning.is_none() => self.http.empty_events += 1,
            None => {}
        }
        if let Some(ids) = ids {
            // Tokens of a chunk: its ids; ids without text join the chunk before.
            if let Some(last) = self.chunks.last_mut().filter(|_| !ids.is_empty()) {
                if text.is_some() || reasoning.is_some() {
                    last.tokens = ids.len() as u32;
                } else {
                    last.tokens += ids.len() as u32;
                }
            }
            self.token_ids.get_or_insert_with(Vec::new).extend(ids);
        }
    }

    /// An event of OpenAI's Responses API (`type` = `kind`): answer and reasoning text deltas
    /// are token chunks; `response.completed`, or `response.incomplete` (the output length
    /// reached), ends the stream with the response's usage; `response.failed` and `error` fail
    /// it; the other events (created, in progress, items and parts opening and closing) carry
    /// no token.
    fn responses_event(&mut self, kind: &str, v: &Value, at: Stamp) -> Step {
        let delta = || v.get("delta").and_then(Value::as_str).filter(|t| !t.is_empty());
        match kind {
            "response.output_text.delta" => match delta() {
                Some(t) => self.content(t, at),
                None => self.http.empty_events += 1,
            },
            "response.reasoning_text.delta" | "response.reasoning_summary_text.delta" => match delta() {
                Some(t) => self.reasoning(t, at),
                None => self.http.empty_events += 1,
            },
            "response.completed" | "response.incomplete" => {
                if let Some(u) = v.pointer("/response/usage").filter(|u| !u.is_null()) {
                    let n = |p: &str| u.pointer(p).and_then(Value::as_u64).map(|x| x as usize);
                    self.http.usage_prompt_tokens = n("/input_tokens");
                    self.http.usage_completion_tokens = n("/output_tokens");
                    self.http.usage_cached_tokens = n("/input_tokens_details/cached_tokens");
                    self.http.usage_reasoning_tokens = n("/output_tokens_details/reasoning_tokens");
                }
                self.http.done = Some(at);
                return Step::Done;
            }
            "response.failed" | "error" => {
                let err = v.pointer("/response/error").filter(|e| !e.is_null()).unwrap_or(v);
                let msg = err.get("message").and_then(Value::as_str).map_or_else(|| err.to_string(), String::from);
                return Step::Failed(FailureKind::ErrorEvent, msg);
            }
            _ => {}
        }
        Step::More
    }

    fn content(&mut self, text: &str, at: Stamp) {
        self.text.push_str(text);
        self.chunks.push(Chunk { at, tokens: 1 });
        self.split.first_answer.get_or_insert(at);
    }

    /// A reasoning delta: a token chunk like the answer's, its text kept apart.
    fn reasoning(&mut self, text: &str, at: Stamp) {
        self.reasoning.push_str(text);
        self.chunks.push(Chunk { at, tokens: 1 });
        self.split.chunks += 1;
        if self.split.first_answer.is_some() {
            self.split.after_answer += 1;
        }
    }
}

/// Reads the events of `resp` (a 2xx answer to `url`) into `p` until the end marker; every
/// event is stamped when its chunk was decoded, the first byte when the first chunk came.
pub(crate) async fn read_stream(mut resp: reqwest::Response, url: &str, clock: Clock, p: &mut StreamParser) -> Outcome {
    let mut sse = SseDecoder::new(MAX_EVENT_BYTES);
    loop {
        let chunk = match resp.chunk().await {
            Ok(Some(c)) => c,
            Ok(None) => return p.no_end_marker(),
            Err(e) => {
                let why = crate::causes(&e);
                return match crate::error::send_failure(&why) {
                    FailureKind::Framing => Outcome::error(
                        FailureKind::Framing,
                        format!("the answer's framing broke after {} content chunks: {why}", p.chunks.len()),
                    ),
                    _ => p.broke(why),
                };
            }
        };
        // The events of one read arrived together: one stamp, the moment the bytes came.
        let at = clock.now();
        p.http.first_byte.get_or_insert(at);
        let mut end = None;
        let fed = sse.feed(&chunk, |data| match p.event(data, at) {
            Step::More => ControlFlow::Continue(()),
            step => {
                end = Some(step);
                ControlFlow::Break(())
            }
        });
        match (end, fed) {
            (Some(Step::Done), _) => return Outcome::Ok,
            (Some(Step::Failed(kind, why)), _) => return Outcome::error(kind, why),
            (_, Err(e)) => {
                return Outcome::error(FailureKind::BadEvent, format!("{e} from {}", crate::redact_url(url)))
            }
            _ => {}
        }
    }
}

pub(crate) fn clip(s: &str) -> &str {
    match s.char_indices().nth(200) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every recorded stream's events through the fast path (where it takes them) and through
    /// the general path alone leave the same state and end the same way.
    #[test]
    fn the_fast_path_reads_every_recorded_stream_as_the_general_path_does() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");
        let mut fast_taken = 0;
        for entry in
            std::fs::read_dir(dir).unwrap().flatten().filter(|e| e.path().extension().is_some_and(|x| x == "sse"))
        {
            let text = std::fs::read_to_string(entry.path()).unwrap();
            let (mut fast, mut general) = (StreamParser::default(), StreamParser::default());
            for (i, data) in text.lines().filter_map(|l| l.strip_prefix("data:")).enumerate() {
                let (at, data) = (Stamp(i as u64), data.trim());
                if data == "[DONE]" || data.is_empty() {
                    continue;
                }
                fast_taken += usize::from(matches!(chunk::read(data), Fast::Chunk { .. }));
                assert_eq!(fast.event(data, at), general.general(data, at), "{}: {data}", entry.path().display());
            }
            // The general path alone counts no bytes against the bounds.
            general.event_bytes = fast.event_bytes;
            assert_eq!(format!("{fast:?}"), format!("{general:?}"), "{}", entry.path().display());
        }
        assert!(fast_taken >= 10, "the fast path took {fast_taken} events");
    }

    /// An answer past its bounds fails as a protocol fault before the client holds it: too
    /// many bytes of events, or more token ids than the request's max_tokens allows.
    #[test]
    fn an_answer_past_its_bounds_fails_as_a_protocol_fault() {
        let mut p = StreamParser { bounds: Bounds::for_max_tokens(4), ..Default::default() };
        let big = format!(r#"{{"choices":[{{"text":"{}"}}]}}"#, "x".repeat(600 << 10));
        assert_eq!(p.event(&big, Stamp(1)), Step::More);
        match p.event(&big, Stamp(2)) {
            Step::Failed(FailureKind::Protocol, why) => assert!(why.contains("over 1088 KiB"), "{why}"),
            other => panic!("{other:?}"),
        }
        let mut p = StreamParser { bounds: Bounds::for_max_tokens(4), ..Default::default() };
        let ids: Vec<String> = (0..100).map(|i| i.to_string()).collect();
        let many = format!(r#"{{"choices":[{{"text":"a","token_ids":[{}]}}]}}"#, ids.join(","));
        match p.event(&many, Stamp(1)) {
            Step::Failed(FailureKind::Protocol, why) => assert!(why.contains("100 token ids"), "{why}"),
            other => panic!("{other:?}"),
        }
        assert!(p.token_ids.is_none(), "the ids are not kept");
    }
}
