//! `goodput serve`: an OpenAI-compatible HTTP server over goodput's in-process engine.
//!
//! - `POST /v1/completions` (prompt as text or token ids) and `POST /v1/chat/completions`
//!   (the model's chat template, or the documented ChatML fallback of [`chat`]), streamed as
//!   server-sent events ending with `data: [DONE]` (with `stream_options.include_usage`, a
//!   usage chunk before it), or whole;
//! - `GET /v1/models`, `GET /health`, `GET /metrics` (vLLM's metric names, [`metrics`]).
//!
//! Every response carries the engine's stamps of its request: a `goodput` object (see
//! [`goodput_core::ServerTimings`]) in the last streamed chunk or in the whole response, and
//! for whole responses TGI's timing headers (`x-queue-time`, `x-inference-time`,
//! `x-time-per-token`, … in milliseconds).
//!
//! Errors use OpenAI's format and status codes: malformed JSON or wrong types 400, a prompt
//! beyond the context 400, an unknown model 404, a waiting queue beyond `max_waiting` 429, a
//! stopping engine 503. A client that disconnects drops its response stream, which aborts the
//! request in the engine; its KV blocks return before the next step.

pub mod chat;
pub mod metrics;
pub mod mock;
pub mod openai;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use goodput_core::{Clock, EngineRecord, FinishReason, SamplingParams, ServerTimings, Stamp, TokenId};
use goodput_engine::tokenizer::{DecodeStream, Tokenizer};
use goodput_engine::{EngineError, EngineHandle, RequestEvent, RequestStream};
use openai::{ApiError, ChatRequest, CompletionRequest, Prompt, Sampling, Usage};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// Everything the handlers share.
pub struct AppState {
    pub engine: EngineHandle,
    pub tokenizer: Arc<Tokenizer>,
    /// The name clients must use in `model`.
    pub model_name: String,
    pub chat: chat::ChatTemplate,
    pub metrics: metrics::Metrics,
    /// Refuse new requests (429) while this many wait in the engine's queue.
    pub max_waiting: Option<usize>,
    pub clock: Clock,
}

/// Why the server's state could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("the model's chat template does not parse: {0}")]
    ChatTemplate(minijinja::Error),
}

impl AppState {
    pub fn new(
        engine: EngineHandle,
        tokenizer: Arc<Tokenizer>,
        model_name: String,
        chat_template: Option<String>,
        max_waiting: Option<usize>,
    ) -> Result<Self, ServerError> {
        let chat = chat::ChatTemplate::new(chat_template)?;
        Ok(AppState {
            clock: engine.clock(),
            metrics: metrics::Metrics::new(&model_name),
            engine,
            tokenizer,
            model_name,
            chat,
            max_waiting,
        })
    }

    fn check_model(&self, model: &str) -> Result<(), ApiError> {
        if model == self.model_name {
            Ok(())
        } else {
            Err(ApiError::not_found(format!(
                "The model `{model}` does not exist; this server serves `{}`",
                self.model_name
            )))
        }
    }

    /// SamplingParams of a request; `default_max` when it gives no max_tokens.
    fn sampling(&self, s: &Sampling, default_max: usize) -> Result<SamplingParams, ApiError> {
        if s.n.is_some_and(|n| n != 1) {
            return Err(ApiError::bad_request("only n = 1 is supported", Some("n")));
        }
        let top_k = match s.top_k {
            None | Some(-1) | Some(0) => 0,
            Some(k) if k > 0 => k as usize,
            Some(k) => {
                return Err(ApiError::bad_request(format!("top_k must be -1 or positive, got {k}"), Some("top_k")))
            }
        };
        let p = SamplingParams {
            max_tokens: s.max_tokens.or(s.max_completion_tokens).unwrap_or(default_max),
            min_tokens: s.min_tokens.unwrap_or(0),
            temperature: s.temperature.unwrap_or(1.0),
            top_k,
            top_p: s.top_p.unwrap_or(1.0),
            seed: s.seed.unwrap_or(0),
            ignore_eos: s.ignore_eos,
            stop_token_ids: s.stop_token_ids.clone(),
        };
        p.validate().map_err(|e| ApiError::bad_request(e, None))?;
        Ok(p)
    }

    /// Admits and submits a request.
    fn start(&self, prompt: Vec<TokenId>, params: SamplingParams) -> Result<RequestStream, ApiError> {
        if let Some(max) = self.max_waiting {
            let waiting = self.engine.gauges().waiting.load(Ordering::Relaxed);
            if waiting >= max {
                return Err(ApiError::overloaded(format!(
                    "the server is overloaded: {waiting} requests are waiting (limit {max}); retry later"
                )));
            }
        }
        self.engine.submit(prompt, params).map_err(|e| match e {
            EngineError::Admission(a) => ApiError::bad_request(a.to_string(), Some("prompt")),
            EngineError::Stopped => ApiError::unavailable("the engine is not running"),
            other => ApiError::internal(other.to_string()),
        })
    }

    fn encode(&self, text: &str) -> Result<Vec<TokenId>, ApiError> {
        self.tokenizer
            .encode(text)
            .map_err(|e| ApiError::bad_request(format!("tokenizing the prompt: {e}"), Some("prompt")))
    }
}

/// The routes, over `state`.
pub fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/v1/completions", post(completions))
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/models", get(models))
        .route("/health", get(|| async { "ok" }))
        .route("/metrics", get(metrics_text))
        .with_state(state)
}

/// Serves `state` on `listener` until `shutdown` resolves; then stops accepting, lets
/// in-flight requests finish for up to `grace`, and after that aborts what is left (those
/// streams end with an error event). Returns when every connection is closed.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: Arc<AppState>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    grace: Duration,
) -> std::io::Result<()> {
    let (tx, mut rx) = tokio::sync::watch::channel(false);
    let engine = state.engine.clone();
    use axum::serve::ListenerExt;
    // Small SSE events go out as they are written (no Nagle delay behind a pending ACK).
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    let server = axum::serve(listener, router(state)).with_graceful_shutdown(async move {
        shutdown.await;
        let _ = tx.send(true);
    });
    let deadline = async move {
        let _ = rx.wait_for(|stopping| *stopping).await;
        tokio::time::sleep(grace).await;
        // Whatever still runs ends now: its stream gets an error event and closes.
        engine.stop(false);
        std::future::pending::<()>().await
    };
    tokio::select! {
        r = std::future::IntoFuture::into_future(server) => r,
        _ = deadline => Ok(()),
    }
}

async fn models(State(st): State<Arc<AppState>>) -> Json<Value> {
    Json(json!({
        "object": "list",
        "data": [{
            "id": st.model_name,
            "object": "model",
            "created": 0,
            "owned_by": "goodput",
            "max_model_len": st.engine.limits().max_model_len,
        }]
    }))
}

async fn metrics_text(State(st): State<Arc<AppState>>) -> Response {
    let text = st.metrics.render(&st.engine);
    ([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], text).into_response()
}

/// How a response is written.
#[derive(Clone, Copy)]
struct Options {
    stream: bool,
    include_usage: bool,
    token_ids: bool,
}

impl Options {
    fn of(s: &Sampling) -> Self {
        Options {
            stream: s.stream,
            include_usage: s.stream_options.as_ref().is_some_and(|o| o.include_usage),
            token_ids: s.return_token_ids,
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Completion,
    Chat,
}

async fn completions(State(st): State<Arc<AppState>>, body: Bytes) -> Response {
    let received = st.clock.now();
    let run = || -> Result<(RequestStream, Options, usize), ApiError> {
        let req: CompletionRequest = openai::parse(&body)?;
        st.check_model(&req.model)?;
        let prompt = match req.prompt {
            Prompt::Text(s) => st.encode(&s)?,
            Prompt::Ids(ids) => ids,
            Prompt::Texts(v) if v.len() == 1 => st.encode(&v[0])?,
            Prompt::IdLists(mut v) if v.len() == 1 => v.remove(0),
            _ => {
                return Err(ApiError::bad_request(
                    "one prompt per request (batched prompts are not supported)",
                    Some("prompt"),
                ))
            }
        };
        let params = st.sampling(&req.sampling, 16)?;
        let n = prompt.len();
        Ok((st.start(prompt, params)?, Options::of(&req.sampling), n))
    };
    match run() {
        Ok((gen, o, n)) => respond(st, gen, Kind::Completion, o, received, n).await,
        Err(e) => e.into_response(),
    }
}

async fn chat_completions(State(st): State<Arc<AppState>>, body: Bytes) -> Response {
    let received = st.clock.now();
    let run = || -> Result<(RequestStream, Options, usize), ApiError> {
        let req: ChatRequest = openai::parse(&body)?;
        st.check_model(&req.model)?;
        if req.messages.is_empty() {
            return Err(ApiError::bad_request("messages must not be empty", Some("messages")));
        }
        let text = st.chat.render(&req.messages)?;
        let prompt = st.encode(&text)?;
        // vLLM's default for chat: whatever the context leaves.
        let room = st.engine.limits().max_model_len.saturating_sub(prompt.len()).max(1);
        let params = st.sampling(&req.sampling, room)?;
        let n = prompt.len();
        Ok((st.start(prompt, params)?, Options::of(&req.sampling), n))
    };
    match run() {
        Ok((gen, o, n)) => respond(st, gen, Kind::Chat, o, received, n).await,
        Err(e) => e.into_response(),
    }
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

    /// A streamed chunk with `text` and the ids of its tokens (or, for chat, the role-only
    /// opener when `role`).
    fn chunk(&self, text: Option<&str>, ids: &[TokenId], role: bool, finish: Option<&str>) -> Value {
        let mut v = self.chunk_inner(text, role, finish);
        if self.token_ids && !role {
            v["choices"][0]["token_ids"] = json!(ids);
        }
        v
    }

    fn chunk_inner(&self, text: Option<&str>, role: bool, finish: Option<&str>) -> Value {
        match self.kind {
            Kind::Completion => json!({
                "id": self.id, "object": "text_completion", "created": self.created, "model": self.model,
                "choices": [{ "index": 0, "text": text.unwrap_or(""), "logprobs": null, "finish_reason": finish }],
            }),
            Kind::Chat => {
                let delta = if role {
                    json!({ "role": "assistant", "content": "" })
                } else if let Some(t) = text {
                    json!({ "content": t })
                } else {
                    json!({})
                };
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

    fn whole(&self, text: &str, ids: &[TokenId], finish: &str, usage: &Usage, timings: &ServerTimings) -> Value {
        let mut v = self.whole_inner(text, finish, usage, timings);
        if self.token_ids {
            v["choices"][0]["token_ids"] = json!(ids);
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

fn data(v: &Value) -> Event {
    Event::default().data(v.to_string())
}

fn aborted_error(record: &EngineRecord) -> ApiError {
    ApiError::unavailable(format!(
        "the request ended before completing ({}): the server is shutting down or the engine failed",
        finish_reason(record.finish_reason)
    ))
}

async fn respond(
    st: Arc<AppState>,
    gen: RequestStream,
    kind: Kind,
    o: Options,
    received: Stamp,
    prompt_tokens: usize,
) -> Response {
    let meta = Meta::new(kind, gen.id, &st.model_name, o.token_ids);
    if o.stream {
        sse(st, gen, meta, o.include_usage, received, prompt_tokens).into_response()
    } else {
        whole(st, gen, meta, received, prompt_tokens).await
    }
}

/// A whole (non-streamed) response, with TGI's timing headers.
async fn whole(st: Arc<AppState>, gen: RequestStream, meta: Meta, received: Stamp, prompt_tokens: usize) -> Response {
    loop {
        match gen.events.recv_async().await {
            Ok(RequestEvent::Token { .. }) => {}
            Ok(RequestEvent::Finished { record, tokens }) => {
                st.metrics.observe(received, &record);
                if !matches!(record.finish_reason, FinishReason::Length | FinishReason::Stop) {
                    return aborted_error(&record).into_response();
                }
                let text = st.tokenizer.decode(&tokens).unwrap_or_default();
                let usage = Usage::new(prompt_tokens, tokens.len());
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
            let usage = Usage::new(self.prompt_tokens, tokens.len());
            let held = std::mem::take(&mut self.held);
            let mut last = self.meta.chunk(None, &held, false, Some(finish_reason(record.finish_reason)));
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
}

fn sse(
    st: Arc<AppState>,
    gen: RequestStream,
    meta: Meta,
    include_usage: bool,
    received: Stamp,
    prompt_tokens: usize,
) -> Sse<impl futures_util::Stream<Item = Result<Event, Infallible>>> {
    let mut pending = VecDeque::new();
    if meta.kind == Kind::Chat {
        pending.push_back(data(&meta.chunk(None, &[], true, None)));
    }
    let decoder = DecodeStream::new(st.tokenizer.clone());
    let state = Streaming {
        st,
        gen,
        decoder,
        meta,
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
                Ok(RequestEvent::Token { token, time, .. }) => {
                    s.held.push(token);
                    if let Ok(Some(text)) = s.decoder.step(token) {
                        s.first_text.get_or_insert(time);
                        let ids = std::mem::take(&mut s.held);
                        let c = s.meta.chunk(Some(&text), &ids, false, None);
                        s.pending.push_back(data(&c));
                    }
                }
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
