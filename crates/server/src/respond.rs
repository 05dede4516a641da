//! Writing a response: whole (with TGI's timing headers) or streamed as server-sent events.

use crate::openai::{ApiError, Sampling, Usage};
use crate::reasoning::{Part, Split};
use crate::AppState;
use axum::http::{HeaderMap, HeaderValue};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use goodput_core::{EngineRecord, FinishReason, ServerTimings, Stamp, TokenId};
use goodput_engine::tokenizer::{DecodeStream, Tokenizer};
use goodput_engine::{RequestEvent, RequestStream};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;

/// How a response is written.
#[derive(Clone, Copy)]
pub(crate) struct Options {
    stream: bool,
    include_usage: bool,
    token_ids: bool,
    /// goodput's extension: the first this many output tokens are reasoning.
    reasoning_prefix: usize,
}

impl Options {
    pub(crate) fn of(s: &Sampling) -> Self {
        Options {
            stream: s.stream,
            include_usage: s.stream_options.as_ref().is_some_and(|o| o.include_usage),
            token_ids: s.return_token_ids,
            reasoning_prefix: s.goodput.as_ref().map_or(0, |g| g.reasoning_tokens),
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Kind {
    Completion,
    Chat,
}

fn finish_reason(r: FinishReason) -> &'static str {
    match r {
        FinishReason::Length => "length",
        FinishReason::Stop => "stop",
        FinishReason::Abort => "abort",
        FinishReason::Error => "error",
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// A response's fixed fields.
struct Meta {
    kind: Kind,
    id: String,
    created: u64,
    model: String,
    token_ids: bool,
}

impl Meta {
    fn new(kind: Kind, gen_id: u64, model: &str, token_ids: bool) -> Self {
        let id = match kind {
            Kind::Completion => format!("cmpl-{gen_id}"),
            Kind::Chat => format!("chatcmpl-{gen_id}"),
        };
        Meta { kind, id, created: unix_now(), model: model.to_string(), token_ids }
    }

    /// A streamed chunk with `text` (reasoning or answer, as `part` says) and the ids of its
    /// tokens; a chat stream's first chunk also carries the role (it is sent with the first
    /// token, never before: a client may take any chunk for a token).
    fn chunk(&self, text: Option<&str>, ids: &[TokenId], part: Part, first: bool, finish: Option<&str>) -> Value {
        let mut v = self.chunk_inner(text, part, first, finish);
        if self.token_ids {
            v["choices"][0]["token_ids"] = json!(ids);
        }
        v
    }

    fn chunk_inner(&self, text: Option<&str>, part: Part, first: bool, finish: Option<&str>) -> Value {
        match self.kind {
            Kind::Completion => json!({
                "id": self.id, "object": "text_completion", "created": self.created, "model": self.model,
                "choices": [{ "index": 0, "text": text.unwrap_or(""), "logprobs": null, "finish_reason": finish }],
            }),
            Kind::Chat => {
                let mut delta = json!({});
                match (text, part) {
                    (Some(t), Part::Answer) => delta["content"] = json!(t),
                    (Some(t), _) => delta["reasoning"] = json!(t),
                    (None, _) => {}
                }
                if first {
                    delta["role"] = json!("assistant");
                }
                json!({
                    "id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model,
                    "choices": [{ "index": 0, "delta": delta, "logprobs": null, "finish_reason": finish }],
                })
            }
        }
    }

    fn usage_chunk(&self, usage: &Usage) -> Value {
        let object = if self.kind == Kind::Chat { "chat.completion.chunk" } else { "text_completion" };
        json!({ "id": self.id, "object": object, "created": self.created, "model": self.model, "choices": [], "usage": usage })
    }

    fn whole(&self, text: &Answer, ids: &[TokenId], finish: &str, usage: &Usage, timings: &ServerTimings) -> Value {
        let mut v = self.whole_inner(&text.answer, finish, usage, timings);
        if self.token_ids {
            v["choices"][0]["token_ids"] = json!(ids);
        }
        if let Some(r) = &text.reasoning {
            v["choices"][0]["message"]["reasoning"] = json!(r);
        }
        v
    }

    fn whole_inner(&self, text: &str, finish: &str, usage: &Usage, timings: &ServerTimings) -> Value {
        match self.kind {
            Kind::Completion => json!({
                "id": self.id, "object": "text_completion", "created": self.created, "model": self.model,
                "choices": [{ "index": 0, "text": text, "logprobs": null, "finish_reason": finish }],
                "usage": usage, "goodput": timings,
            }),
            Kind::Chat => json!({
                "id": self.id, "object": "chat.completion", "created": self.created, "model": self.model,
                "choices": [{ "index": 0, "message": { "role": "assistant", "content": text }, "logprobs": null, "finish_reason": finish }],
                "usage": usage, "goodput": timings,
            }),
        }
    }
}

/// A whole response's text: the answer, and the reasoning of a split chat response.
struct Answer {
    answer: String,
    reasoning: Option<String>,
}

impl Answer {
    /// `tokens` split by `split` and decoded (the think tags carry no text).
    fn of(tokenizer: &Tokenizer, tokens: &[TokenId], mut split: Split) -> (Self, Option<usize>) {
        let (mut answer, mut reasoning) = (Vec::new(), Vec::new());
        for &t in tokens {
            match split.next(t) {
                Part::Answer => answer.push(t),
                Part::Reasoning => reasoning.push(t),
                Part::Tag => {}
            }
        }
        let text = |ids: &[TokenId]| tokenizer.decode(ids).unwrap_or_default();
        let count = split.reasoning_tokens();
        (Answer { answer: text(&answer), reasoning: count.map(|_| text(&reasoning)) }, count)
    }
}

fn data(v: &Value) -> Event {
    Event::default().data(v.to_string())
}

fn aborted_error(record: &EngineRecord) -> ApiError {
    ApiError::unavailable(format!(
        "the request ended before completing ({}): the server is shutting down or the engine failed",
        finish_reason(record.finish_reason)
    ))
}

pub(crate) async fn respond(
    st: Arc<AppState>,
    gen: RequestStream,
    kind: Kind,
    o: Options,
    received: Stamp,
    prompt_tokens: usize,
) -> Response {
    let meta = Meta::new(kind, gen.id, &st.model_name, o.token_ids);
    let split = Split::new(st.reasoning, o.reasoning_prefix, kind == Kind::Chat);
    if o.stream {
        sse(st, gen, meta, split, o.include_usage, received, prompt_tokens).into_response()
    } else {
        whole(st, gen, meta, split, received, prompt_tokens).await
    }
}

/// A whole (non-streamed) response, with TGI's timing headers.
async fn whole(
    st: Arc<AppState>,
    gen: RequestStream,
    meta: Meta,
    split: Split,
    received: Stamp,
    prompt_tokens: usize,
) -> Response {
    loop {
        match gen.events.recv_async().await {
            Ok(RequestEvent::Token { .. }) => {}
            Ok(RequestEvent::Finished { record, tokens }) => {
                st.metrics.observe(received, &record);
                if !matches!(record.finish_reason, FinishReason::Length | FinishReason::Stop) {
                    return aborted_error(&record).into_response();
                }
                let (text, reasoning) = Answer::of(&st.tokenizer, &tokens, split);
                let usage = Usage::new(prompt_tokens, tokens.len(), record.cached_tokens).with_reasoning(reasoning);
                let timings = ServerTimings::new(received, &record);
                let body = meta.whole(&text, &tokens, finish_reason(record.finish_reason), &usage, &timings);
                let mut headers = HeaderMap::new();
                for (k, v) in tgi_headers(&timings) {
                    if let Ok(v) = HeaderValue::from_str(&v) {
                        headers.insert(k, v);
                    }
                }
                return (headers, Json(body)).into_response();
            }
            Ok(RequestEvent::Error(e)) => return ApiError::internal(e).into_response(),
            Err(_) => return ApiError::unavailable("the engine stopped").into_response(),
        }
    }
}

/// TGI's per-request timing headers, in milliseconds.
fn tgi_headers(t: &ServerTimings) -> Vec<(&'static str, String)> {
    let ms = |x: f64| format!("{}", (x * 1e3).round() as i64);
    let mut h = vec![
        ("x-compute-type", "goodput".to_string()),
        ("x-total-time", ms(t.finished.secs_since(t.received))),
        ("x-validation-time", ms(t.arrival.secs_since(t.received))),
        ("x-prompt-tokens", t.prompt_tokens.to_string()),
        ("x-generated-tokens", t.generated_tokens.to_string()),
        ("x-cached-tokens", t.cached_tokens.to_string()),
    ];
    if let Some(fs) = t.first_scheduled {
        h.push(("x-queue-time", ms(fs.secs_since(t.queued))));
        if let Some(last) = t.last_token {
            let inference = last.secs_since(fs);
            h.push(("x-inference-time", ms(inference)));
            h.push(("x-time-per-token", ms(inference / t.generated_tokens.max(1) as f64)));
        }
    }
    h
}

/// What a streamed response still has to send.
struct Streaming {
    st: Arc<AppState>,
    gen: RequestStream,
    decoder: DecodeStream<Arc<Tokenizer>>,
    meta: Meta,
    split: Split,
    /// The part of the tokens held (reasoning or answer): text is sent with its part.
    held_part: Part,
    include_usage: bool,
    received: Stamp,
    prompt_tokens: usize,
    pending: VecDeque<Event>,
    /// Ids decoded but not yet sent (their text is held back until it is whole UTF-8).
    held: Vec<TokenId>,
    /// Engine stamp of the token that completed the first text sent.
    first_text: Option<Stamp>,
    done: bool,
}

impl Streaming {
    fn end(&mut self, record: EngineRecord, tokens: Vec<TokenId>) {
        self.st.metrics.observe(self.received, &record);
        if !matches!(record.finish_reason, FinishReason::Length | FinishReason::Stop) {
            self.pending.push_back(data(&aborted_error(&record).body()));
        } else {
            let timings = ServerTimings { first_text: self.first_text, ..ServerTimings::new(self.received, &record) };
            let usage = Usage::new(self.prompt_tokens, tokens.len(), record.cached_tokens)
                .with_reasoning(self.split.reasoning_tokens());
            let held = std::mem::take(&mut self.held);
            let first = self.first_text.is_none();
            let finish = Some(finish_reason(record.finish_reason));
            let mut last = self.meta.chunk(None, &held, self.held_part, first, finish);
            if self.include_usage {
                self.pending.push_back(data(&last));
                last = self.meta.usage_chunk(&usage);
            }
            last["goodput"] = serde_json::to_value(&timings).unwrap_or(Value::Null);
            self.pending.push_back(data(&last));
        }
        self.pending.push_back(Event::default().data("[DONE]"));
        self.done = true;
    }

    /// One generated token: its text, when it completes some, goes out as a chunk of its part
    /// (a think tag's text is never sent; its id joins the next chunk's).
    fn token(&mut self, token: TokenId, time: Stamp) {
        self.held.push(token);
        let part = self.split.next(token);
        if part == Part::Tag {
            return;
        }
        // Text still held across a switch (an unfinished UTF-8 sequence) goes with the new part.
        self.held_part = part;
        if let Ok(Some(text)) = self.decoder.step(token) {
            let first = self.first_text.is_none();
            self.first_text.get_or_insert(time);
            let ids = std::mem::take(&mut self.held);
            let c = self.meta.chunk(Some(&text), &ids, part, first, None);
            self.pending.push_back(data(&c));
        }
    }
}

fn sse(
    st: Arc<AppState>,
    gen: RequestStream,
    meta: Meta,
    split: Split,
    include_usage: bool,
    received: Stamp,
    prompt_tokens: usize,
) -> Sse<impl futures_util::Stream<Item = Result<Event, Infallible>>> {
    // Nothing is sent before the first token (no role-only opener: some clients, vLLM's
    // `bench serve` among them, take any chunk for the first token).
    let pending = VecDeque::new();
    let decoder = DecodeStream::new(st.tokenizer.clone());
    let state = Streaming {
        st,
        gen,
        decoder,
        meta,
        split,
        held_part: Part::Answer,
        include_usage,
        received,
        prompt_tokens,
        pending,
        held: Vec::new(),
        first_text: None,
        done: false,
    };
    // The state owns the engine stream: when the client goes away, axum drops this stream,
    // the RequestStream is dropped, and the engine aborts the request.
    Sse::new(futures_util::stream::unfold(state, |mut s| async move {
        loop {
            if let Some(ev) = s.pending.pop_front() {
                return Some((Ok(ev), s));
            }
            if s.done {
                return None;
            }
            match s.gen.events.recv_async().await {
                Ok(RequestEvent::Token { token, time, .. }) => s.token(token, time),
                Ok(RequestEvent::Finished { record, tokens }) => s.end(record, tokens),
                Ok(RequestEvent::Error(e)) => {
                    s.pending.push_back(data(&ApiError::internal(e).body()));
                    s.pending.push_back(Event::default().data("[DONE]"));
                    s.done = true;
                }
                Err(_) => {
                    s.pending.push_back(data(&ApiError::unavailable("the engine stopped").body()));
                    s.pending.push_back(Event::default().data("[DONE]"));
                    s.done = true;
                }
            }
        }
    }))
}
