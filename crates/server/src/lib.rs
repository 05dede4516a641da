//! `goodput serve`: an OpenAI-compatible HTTP server over goodput's in-process engine.
//!
//! - `POST /v1/completions` (prompt as text or token ids) and `POST /v1/chat/completions`
//!   (the model's chat template, or the documented ChatML fallback of [`chat`]), streamed as
//!   server-sent events ending with `data: [DONE]` (with `stream_options.include_usage`, a
//!   usage chunk before it), or whole;
//! - `GET /v1/models`, `GET /health`, `GET /metrics` (vLLM's metric names, [`metrics`]).
//!
//! Chat outputs of a reasoning model split into `delta.reasoning` and `delta.content` as
//! vLLM's reasoning parsers split them ([`reasoning`]: `<think>` tags, or goodput's
//! `"goodput": {"reasoning_tokens": N}` request extension for weights that do not think).
//!
//! Every response carries the engine's stamps of its request: a `goodput` object (see
//! [`goodput_core::ServerTimings`]) in the last streamed chunk or in the whole response, and
//! for whole responses TGI's timing headers (`x-queue-time`, `x-inference-time`,
//! `x-time-per-token`, … in milliseconds).
//!
//! Every error status has OpenAI's JSON body: malformed JSON or wrong types 400, a prompt
//! beyond the context 400, a field the engine does not implement 400 (naming it, see
//! [`openai::UNSUPPORTED`]), a missing or wrong API key 401 (with [`Policy::api_key`]), a host
//! that is not the server's 403 (a DNS-rebinding guard, [`hosts`]), an unknown model or route 404, a wrong method 405, a body slower than
//! [`Policy::body_timeout`] 408, a body beyond [`Policy::max_body_bytes`] 413, a body that is
//! not `application/json` 415 (so a web page cannot post a "simple" cross-origin request), a
//! waiting queue at [`Policy::max_waiting`] 429 (counted atomically at submission), a stopping
//! engine or a full connection table 503. A client that disconnects drops its response
//! stream, which aborts the request in the engine; its KV blocks return before the next step.
//! Connections, their deadlines and shutdown are [`listen`]'s.

pub mod chat;
mod checks;
pub mod hosts;
mod idle;
pub mod listen;
pub mod metrics;
pub mod mock;
pub mod openai;
pub mod reasoning;
pub mod replica;
mod respond;
pub mod tls;

pub use checks::LimitError;
pub use listen::{serve, serve_tls, ListenLimits};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use goodput_core::{Clock, SamplingParams, TokenId};
use goodput_engine::tokenizer::Tokenizer;
use goodput_engine::{EngineError, EngineHandle, RequestStream};
use openai::{ApiError, ChatRequest, CompletionRequest, Prompt, Sampling};
use respond::{respond, Kind, Options};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// What the server accepts: its admission limit, its key, and its bounds on request bodies.
#[derive(Clone, Debug)]
pub struct Policy {
    /// Refuse new requests (429) while this many wait for the engine.
    pub max_waiting: Option<usize>,
    /// When set, `/v1/*` requires `Authorization: Bearer <key>` (401 otherwise).
    pub api_key: Option<String>,
    /// A request body must arrive within this (408 otherwise).
    pub body_timeout: Duration,
    /// A request body may not exceed this many bytes (413).
    pub max_body_bytes: usize,
    /// The host names served (403 otherwise), checked against the bound address by the
    /// accept loop ([`hosts`]).
    pub allowed_hosts: hosts::AllowedHosts,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            max_waiting: None,
            api_key: None,
            body_timeout: Duration::from_secs(30),
            max_body_bytes: 16 << 20,
            allowed_hosts: hosts::AllowedHosts::default(),
        }
    }
}

/// Everything the handlers share.
pub struct AppState {
    pub engine: EngineHandle,
    pub tokenizer: Arc<Tokenizer>,
    /// The name clients must use in `model`.
    pub model_name: String,
    pub chat: chat::ChatTemplate,
    pub metrics: metrics::Metrics,
    pub policy: Policy,
    pub clock: Clock,
    /// How chat outputs split into reasoning and answer ([`reasoning`]).
    pub reasoning: reasoning::ReasoningParser,
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
        chat: goodput_engine::loader::ChatFormat,
        policy: Policy,
    ) -> Result<Self, ServerError> {
        let chat = chat::ChatTemplate::from_format(chat)?;
        Ok(AppState {
            clock: engine.clock(),
            metrics: metrics::Metrics::new(&model_name),
            engine,
            tokenizer,
            model_name,
            chat,
            policy,
            reasoning: Default::default(),
        })
    }

    /// With a reasoning parser for chat outputs.
    pub fn with_reasoning(self, reasoning: reasoning::ReasoningParser) -> Self {
        AppState { reasoning, ..self }
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
        s.unsupported.refuse()?;
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
            reasoning_tokens: s.goodput.as_ref().map_or(0, |g| g.reasoning_tokens),
        };
        p.validate().map_err(|e| ApiError::bad_request(e.to_string(), Some(e.field())))?;
        Ok(p)
    }

    /// Admits and submits a request.
    fn start(&self, prompt: Vec<TokenId>, params: SamplingParams) -> Result<RequestStream, ApiError> {
        let max = self.policy.max_waiting.unwrap_or(usize::MAX);
        self.engine.submit_bounded(prompt, params, max).map_err(|e| match e {
            EngineError::Admission(a) => ApiError::bad_request(a.to_string(), Some("prompt")),
            EngineError::Overloaded { waiting, limit } => ApiError::overloaded(format!(
                "the server is overloaded: {waiting} requests are waiting (limit {limit}); retry later"
            )),
            EngineError::Stopped => ApiError::unavailable("the engine is not running"),
            other => ApiError::internal(other.to_string()),
        })
    }

    /// A request's JSON body: its content type checked, read within the body timeout and the
    /// size limit.
    async fn body(&self, headers: &HeaderMap, body: Body) -> Result<Bytes, ApiError> {
        let ctype = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
        let essence = ctype.split(';').next().unwrap_or("").trim();
        if !essence.eq_ignore_ascii_case("application/json") {
            let got = if ctype.is_empty() { "none".to_string() } else { format!("`{ctype}`") };
            return Err(ApiError::unsupported_media(format!(
                "the request body must be JSON with `content-type: application/json` (got {got})"
            )));
        }
        let (limit, timeout) = (self.policy.max_body_bytes, self.policy.body_timeout);
        match tokio::time::timeout(timeout, axum::body::to_bytes(body, limit)).await {
            Err(_) => Err(ApiError::timeout(format!("the request body did not arrive within {timeout:?}"))),
            Ok(Ok(b)) => Ok(b),
            Ok(Err(e)) if is_length_limit(&e) => Err(ApiError::too_large(format!(
                "the request body exceeds the server's limit of {limit} bytes (--max-body)"
            ))),
            Ok(Err(e)) => Err(ApiError::bad_request(format!("reading the request body: {e}"), None)),
        }
    }

    fn encode(&self, text: &str) -> Result<Vec<TokenId>, ApiError> {
        self.tokenizer
            .encode(text)
            .map_err(|e| ApiError::bad_request(format!("tokenizing the prompt: {e}"), Some("prompt")))
    }
}

fn is_length_limit(e: &axum::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if s.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        source = s.source();
    }
    false
}

/// The routes, over `state`: `/v1/*`, vLLM's `/tokenize` and SGLang's `/model_info` (for
/// their routers) behind the API key when there is one; `/health` and `/metrics` open (as vLLM's),
/// and the wall clock the shards of a split run measure their offsets against. Unknown routes and methods get OpenAI error bodies.
pub fn router(state: Arc<AppState>) -> Router {
    let v1 = Router::new()
        .route("/v1/completions", post(completions))
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/models", get(models))
        .route("/tokenize", post(tokenize))
        .route("/model_info", get(model_info))
        .route("/get_model_info", get(model_info))
        .route("/server_info", get(model_info))
        .route("/get_server_info", get(model_info))
        .route_layer(axum::middleware::from_fn_with_state(state.clone(), authorize));
    Router::new()
        .merge(v1)
        .route("/health", get(|| async { "ok" }))
        .route("/metrics", get(metrics_text))
        .route(goodput_core::http::CLOCK_PATH, get(|| async { Json(goodput_core::http::WallClock::now()) }))
        .fallback(|uri: axum::http::Uri| async move { ApiError::route_not_found(format!("no route `{}`", uri.path())) })
        .method_not_allowed_fallback(|method: axum::http::Method, uri: axum::http::Uri| async move {
            ApiError::method_not_allowed(format!("`{}` does not accept {method}", uri.path()))
        })
        .with_state(state)
}

/// The credentials of `Authorization: Bearer <token>`. The scheme is case-insensitive and may
/// be followed by more than one space (RFC 7235 §2.1), so `bearer KEY` is the same key.
fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim_start_matches(' '))
}

/// Refuses a `/v1` request without the server's key (401), comparing in constant time.
async fn authorize(State(st): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let Some(key) = &st.policy.api_key else { return next.run(req).await };
    let given = req.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(bearer).unwrap_or("");
    let same = given.len() == key.len() && given.bytes().zip(key.bytes()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0;
    if same {
        next.run(req).await
    } else {
        ApiError::unauthorized("missing or incorrect API key: send `Authorization: Bearer <key>`").into_response()
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

/// vLLM's `/tokenize`: the prompt's token ids as the engine would take them (a chat rendered
/// with its template first). vllm-router's cache-aware policy asks it of every worker to
/// route by tokens.
async fn tokenize(State(st): State<Arc<AppState>>, headers: HeaderMap, body: Body) -> Response {
    let body = match st.body(&headers, body).await {
        Ok(b) => b,
        Err(e) => return e.into_response(),
    };
    let run = || -> Result<Json<Value>, ApiError> {
        let (model, tokens) = match openai::parse::<openai::TokenizeRequest>(&body)? {
            openai::TokenizeRequest::Chat { model, messages } => (model, st.encode(&st.chat.render(&messages)?)?),
            openai::TokenizeRequest::Text { model, prompt } => (model, st.encode(&prompt)?),
        };
        if let Some(m) = &model {
            st.check_model(m)?;
        }
        let max_model_len = st.engine.limits().max_model_len;
        Ok(Json(json!({ "count": tokens.len(), "max_model_len": max_model_len, "tokens": tokens, "token_strs": null })))
    };
    match run() {
        Ok(j) => j.into_response(),
        Err(e) => e.into_response(),
    }
}

/// SGLang's model and server descriptions (the fields a router reads of them), which
/// sglang-router asks for when a worker registers: without them it lists the model as
/// `unknown`, and clients checking `/v1/models` through it find nothing they asked for.
async fn model_info(State(st): State<Arc<AppState>>) -> Json<Value> {
    Json(json!({
        "model_path": st.model_name,
        "served_model_name": st.model_name,
        "is_generation": true,
        "max_model_len": st.engine.limits().max_model_len,
    }))
}

async fn metrics_text(State(st): State<Arc<AppState>>) -> Response {
    let text = st.metrics.render(&st.engine);
    ([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], text).into_response()
}

async fn completions(State(st): State<Arc<AppState>>, headers: HeaderMap, body: Body) -> Response {
    let received = st.clock.now();
    let body = match st.body(&headers, body).await {
        Ok(b) => b,
        Err(e) => return e.into_response(),
    };
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

async fn chat_completions(State(st): State<Arc<AppState>>, headers: HeaderMap, body: Body) -> Response {
    let received = st.clock.now();
    let body = match st.body(&headers, body).await {
        Ok(b) => b,
        Err(e) => return e.into_response(),
    };
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
