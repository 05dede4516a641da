//! The OpenAI request and response bodies the server reads and writes, with vLLM's extensions
//! (`ignore_eos`, `min_tokens`, `top_k`, `stop_token_ids`), and OpenAI's error format.
//!
//! Fields the engine does not implement (`logprobs`, `echo`, `best_of`, `stop` strings,
//! penalties, …, see [`UNSUPPORTED`]) are refused with a 400 naming the field rather than
//! ignored, which would return something other than what was asked for; their no-op values
//! (`null`, `false`, `best_of: 1`, `[]`, …) are accepted, since SDKs send them.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A prompt: text, token ids, or a one-element list of either.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum Prompt {
    Text(String),
    Ids(Vec<u32>),
    Texts(Vec<String>),
    IdLists(Vec<Vec<u32>>),
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct StreamOptions {
    #[serde(default)]
    pub include_usage: bool,
}

/// Sampling fields shared by both endpoints.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Sampling {
    pub max_tokens: Option<usize>,
    /// Chat's newer name for `max_tokens`.
    pub max_completion_tokens: Option<usize>,
    pub temperature: Option<f32>,
    pub top_p: Option<f32>,
    pub top_k: Option<i64>,
    pub seed: Option<u64>,
    #[serde(default)]
    pub ignore_eos: bool,
    pub min_tokens: Option<usize>,
    #[serde(default)]
    pub stop_token_ids: Vec<u32>,
    pub n: Option<usize>,
    #[serde(default)]
    pub stream: bool,
    pub stream_options: Option<StreamOptions>,
    /// vLLM's extension: each choice carries the ids of the tokens it holds (`token_ids`).
    #[serde(default)]
    pub return_token_ids: bool,
    /// goodput's own extension fields ([`GoodputFields`]).
    pub goodput: Option<GoodputFields>,
    /// The fields of [`UNSUPPORTED`] (`null` reads as absent).
    #[serde(flatten)]
    pub unsupported: Unsupported,
}

/// goodput's request extension, `"goodput": {...}`; other servers ignore it (and
/// `goodput run --strict-openai` never sends it).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GoodputFields {
    /// Chat: the first this many output tokens are reasoning — streamed as
    /// `delta.reasoning`, counted in usage's `reasoning_tokens` — whatever the model's
    /// tokens are (the `reasoning` scenario on weights that do not think).
    #[serde(default)]
    pub reasoning_tokens: usize,
}

/// Fields the server reads only to refuse them unless they hold a no-op value.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Unsupported {
    logprobs: Option<Value>,
    top_logprobs: Option<Value>,
    prompt_logprobs: Option<Value>,
    echo: Option<Value>,
    best_of: Option<Value>,
    logit_bias: Option<Value>,
    stop: Option<Value>,
    suffix: Option<Value>,
    presence_penalty: Option<Value>,
    frequency_penalty: Option<Value>,
    repetition_penalty: Option<Value>,
    response_format: Option<Value>,
    tools: Option<Value>,
}

/// A field the engine does not implement, and the values of it that ask for nothing.
pub struct UnsupportedField {
    pub name: &'static str,
    /// The no-op value besides `null`, as the error message states it (none when empty).
    pub accepted: &'static str,
    get: fn(&Unsupported) -> &Option<Value>,
    no_op: fn(&Value) -> bool,
}

fn num(v: &Value, x: f64) -> bool {
    v.as_f64() == Some(x)
}
fn empty_array(v: &Value) -> bool {
    v.as_array().is_some_and(Vec::is_empty)
}

macro_rules! field {
    ($name:ident, $accepted:literal, $no_op:expr) => {
        UnsupportedField { name: stringify!($name), accepted: $accepted, get: |u| &u.$name, no_op: $no_op }
    };
}

/// Every field the server refuses unless it is absent, `null` or the value stated.
pub const UNSUPPORTED: &[UnsupportedField] = &[
    // Completions take a count (0 asks for the sampled token's), chat a boolean.
    field!(logprobs, "false", |v| v == &Value::Bool(false)),
    field!(top_logprobs, "0", |v| num(v, 0.0)),
    field!(prompt_logprobs, "", |_| false),
    field!(echo, "false", |v| v == &Value::Bool(false)),
    field!(best_of, "1", |v| num(v, 1.0)),
    field!(logit_bias, "{}", |v| v.as_object().is_some_and(|o| o.is_empty())),
    // Stop strings; `stop_token_ids` is supported.
    field!(stop, "[]", empty_array),
    field!(suffix, "\"\"", |v| v.as_str() == Some("")),
    field!(presence_penalty, "0", |v| num(v, 0.0)),
    field!(frequency_penalty, "0", |v| num(v, 0.0)),
    field!(repetition_penalty, "1", |v| num(v, 1.0)),
    field!(response_format, "{\"type\": \"text\"}", |v| v == &serde_json::json!({"type": "text"})),
    field!(tools, "[]", empty_array),
];

impl Unsupported {
    /// A 400 naming the first field that asks for something the engine does not do.
    pub fn refuse(&self) -> Result<(), ApiError> {
        for f in UNSUPPORTED {
            if let Some(v) = (f.get)(self) {
                if !(f.no_op)(v) {
                    let or = if f.accepted.is_empty() { String::new() } else { format!(" or {}", f.accepted) };
                    let msg = format!(
                        "`{}` is not supported by this server (got {v}); leave it out, or send null{or}",
                        f.name
                    );
                    return Err(ApiError::bad_request(msg, Some(f.name)));
                }
            }
        }
        Ok(())
    }
}

#[derive(Clone, Debug, Deserialize)]
pub struct CompletionRequest {
    pub model: String,
    pub prompt: Prompt,
    #[serde(flatten)]
    pub sampling: Sampling,
}

/// Message content: a string, or a list of parts of which the text ones are used.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum Content {
    Text(String),
    Parts(Vec<ContentPart>),
}

#[derive(Clone, Debug, Deserialize)]
pub struct ContentPart {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub text: Option<String>,
}

impl Content {
    pub fn text(&self) -> Result<String, ApiError> {
        match self {
            Content::Text(s) => Ok(s.clone()),
            Content::Parts(parts) => parts
                .iter()
                .map(|p| match (p.kind.as_str(), &p.text) {
                    ("text", Some(t)) => Ok(t.as_str()),
                    (kind, _) => Err(ApiError::bad_request(
                        format!("message content of type `{kind}` is not supported; only text"),
                        Some("messages"),
                    )),
                })
                .collect::<Result<Vec<_>, _>>()
                .map(|v| v.concat()),
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
pub struct Message {
    pub role: String,
    pub content: Content,
}

#[derive(Clone, Debug, Deserialize)]
pub struct ChatRequest {
    pub model: String,
    pub messages: Vec<Message>,
    #[serde(flatten)]
    pub sampling: Sampling,
}

/// vLLM's `/tokenize` request: a chat's messages (rendered with the chat template first) or a
/// prompt's text. The model is optional, as there.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum TokenizeRequest {
    Chat { model: Option<String>, messages: Vec<Message> },
    Text { model: Option<String>, prompt: String },
}

#[derive(Clone, Debug, Serialize)]
pub struct Usage {
    pub prompt_tokens: usize,
    pub completion_tokens: usize,
    pub total_tokens: usize,
    /// OpenAI's `{"cached_tokens": n}`: prompt tokens taken from the prefix cache.
    pub prompt_tokens_details: PromptTokensDetails,
    /// OpenAI's `{"reasoning_tokens": n}`: of the completion tokens, those that were
    /// reasoning; only for a response with a reasoning split.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completion_tokens_details: Option<CompletionTokensDetails>,
}

#[derive(Clone, Debug, Serialize)]
pub struct CompletionTokensDetails {
    pub reasoning_tokens: usize,
}

#[derive(Clone, Debug, Serialize)]
pub struct PromptTokensDetails {
    pub cached_tokens: usize,
}

impl Usage {
    pub fn new(prompt: usize, completion: usize, cached: usize) -> Self {
        Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: prompt + completion,
            prompt_tokens_details: PromptTokensDetails { cached_tokens: cached },
            completion_tokens_details: None,
        }
    }

    /// With the reasoning tokens of a split response.
    pub fn with_reasoning(self, reasoning: Option<usize>) -> Self {
        Usage { completion_tokens_details: reasoning.map(|r| CompletionTokensDetails { reasoning_tokens: r }), ..self }
    }
}

/// An error in OpenAI's format: `{"error": {"message", "type", "param", "code"}}`.
#[derive(Clone, Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    pub kind: &'static str,
    pub param: Option<&'static str>,
}

impl ApiError {
    pub fn bad_request(message: impl Into<String>, param: Option<&'static str>) -> Self {
        ApiError { status: StatusCode::BAD_REQUEST, message: message.into(), kind: "invalid_request_error", param }
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::NOT_FOUND,
            message: message.into(),
            kind: "not_found_error",
            param: Some("model"),
        }
    }
    fn status(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError { status, message: message.into(), kind: "invalid_request_error", param: None }
    }
    pub fn route_not_found(message: impl Into<String>) -> Self {
        ApiError { kind: "not_found_error", ..Self::status(StatusCode::NOT_FOUND, message) }
    }
    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::status(StatusCode::METHOD_NOT_ALLOWED, message)
    }
    pub fn unauthorized(message: impl Into<String>) -> Self {
        ApiError { kind: "authentication_error", ..Self::status(StatusCode::UNAUTHORIZED, message) }
    }
    pub fn forbidden(message: impl Into<String>) -> Self {
        ApiError { kind: "permission_error", ..Self::status(StatusCode::FORBIDDEN, message) }
    }
    pub fn timeout(message: impl Into<String>) -> Self {
        Self::status(StatusCode::REQUEST_TIMEOUT, message)
    }
    pub fn too_large(message: impl Into<String>) -> Self {
        Self::status(StatusCode::PAYLOAD_TOO_LARGE, message)
    }
    pub fn unsupported_media(message: impl Into<String>) -> Self {
        Self::status(StatusCode::UNSUPPORTED_MEDIA_TYPE, message)
    }
    pub fn overloaded(message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::TOO_MANY_REQUESTS,
            message: message.into(),
            kind: "rate_limit_error",
            param: None,
        }
    }
    pub fn unavailable(message: impl Into<String>) -> Self {
        ApiError { status: StatusCode::SERVICE_UNAVAILABLE, message: message.into(), kind: "server_error", param: None }
    }
    pub fn internal(message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            message: message.into(),
            kind: "server_error",
            param: None,
        }
    }

    pub fn body(&self) -> serde_json::Value {
        serde_json::json!({
            "error": {
                "message": self.message,
                "type": self.kind,
                "param": self.param,
                "code": self.status.as_u16(),
            }
        })
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, axum::Json(self.body())).into_response()
    }
}

/// Parses a JSON body, naming what is wrong: malformed JSON and wrong types are 400s.
pub fn parse<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    if body.is_empty() {
        return Err(ApiError::bad_request("the request body is empty; expected a JSON object", None));
    }
    serde_json::from_slice(body).map_err(|e| {
        let what = if e.is_syntax() || e.is_eof() { "malformed JSON" } else { "invalid request" };
        ApiError::bad_request(format!("{what}: {e}"), None)
    })
}
