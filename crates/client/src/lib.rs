//! A [`Target`] over HTTP: goodput's streaming client for OpenAI-compatible servers (vLLM,
//! SGLang, TGI's Messages API, llama.cpp, `goodput serve`), and TGI's native
//! `generate_stream`.
//!
//! Per request it stamps the intended and the actual send, the response headers, the first
//! byte, every content chunk (not role-only or empty deltas, not SSE comments, not usage-only
//! chunks) and the end marker. Token counts come from the server's `usage` when it sends one
//! and it agrees with the stream, the prompt and `max_tokens` (`trust`: a refused figure is
//! recorded as an [`goodput_core::Anomaly`] and the client's own count stands in). Parsing is
//! a plain state machine ([`StreamParser`]) fed with SSE events by goodput's own linear-time
//! decoder ([`SseDecoder`]), so recorded streams can be replayed.
//!
//! What a server can make the client hold is bounded: an SSE event at [`MAX_EVENT_BYTES`], an
//! error body at [`MAX_ERROR_BODY`], a `/metrics` page at [`MAX_SCRAPE_BYTES`] and
//! [`MAX_SCRAPE_LINES`]; past a bound the request (or scrape) fails saying which.
//!
//! The connection ([`Connection`]): HTTPS through rustls (the system's roots and
//! webpki-roots, plus a CA file, or no verification at all when asked), extra headers, and an
//! API key sent as `Authorization: Bearer` that no `Debug` output shows; a URL's
//! `user:password@` is taken out of it (sent as `Authorization: Basic`), so every URL the client
//! prints is free of it. Redirects are not followed. Every side request (`/v1/models`,
//! `/metrics`) has one deadline, [`HttpConfig::timeout`], and fails naming its URL past it.

mod api;
mod body;
mod chunk;
mod chunked;
mod connection;
mod error;
mod h1;
mod prompt_fit;
pub mod redact;
mod scrape;
mod sse;
mod stream;
mod trust;

pub use api::{Api, MaxTokensField};
pub use body::read_capped;
pub use body::{MAX_ERROR_BODY, MAX_SCRAPE_BYTES};
pub use connection::{is_sensitive, redact_url, split_credentials, ArgError, BasicAuth, Connection, Secret};
pub(crate) use connection::{redirect, redirect_why};
pub use error::{causes, ClientError, MetricsError};
/// The codec of [`HttpConfig::codec`] (defined in goodput-core, shared with the workloads).
pub use goodput_core::TextCodec;
pub use prompt_fit::exact_text;
pub use scrape::{parse_metrics, ServerScrape, MAX_SCRAPE_LINES};
pub use sse::{SseDecoder, SseError, MAX_EVENT_BYTES};
pub use stream::{Step, StreamParser};
pub use trust::{tolerance, COUNT_TOLERANCE_SHARE, COUNT_TOLERANCE_TOKENS, TEMPLATE_TOKENS};

use goodput_core::{ClientRecord, Clock, FailureKind, Outcome, Stamp, Target, TokenId, WorkRequest};
use serde_json::{json, Value};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

#[derive(Clone)]
pub struct HttpConfig {
    /// `http://host:port` (no trailing path).
    pub base_url: String,
    /// The served model name.
    pub model: String,
    pub api: Api,
    /// The body field of the output length.
    pub max_tokens_field: MaxTokensField,
    /// Send vLLM's `ignore_eos` and `min_tokens` so outputs have the requested length.
    pub exact_lengths: bool,
    /// Send only OpenAI's own fields: none of vLLM's extensions (`ignore_eos`, `min_tokens`,
    /// `top_k`, `return_token_ids`), for gateways that refuse unknown fields. Outputs that end
    /// early are then accounted as short outputs.
    pub strict_openai: bool,
    /// Ask for vLLM's `return_token_ids` (each chunk's token ids: exact per-chunk counts and
    /// output ids for multi-turn history; goodput's server and recent vLLM support it).
    pub return_token_ids: bool,
    pub codec: Option<Arc<dyn TextCodec>>,
    /// The codec is the model's tokenizer, so its count of the received text is a token count
    /// (to check `usage` against, and to count reasoning by). A byte-level stand-in (no
    /// tokenizer of the model here) only writes prompts: its count of bytes would make 355
    /// "reasoning tokens" of 70 streamed.
    pub codec_counts: bool,
    /// The server stamps with this target's clock (it runs in this process).
    pub same_clock: bool,
    /// Read the per-request engine stamps the server returns (goodput's `goodput` object).
    /// Off, the record holds none, as from a server that sends none.
    pub server_stamps: bool,
    /// Fields merged into every request body (`--extra-body`), over the ones goodput writes.
    pub extra_body: serde_json::Map<String, Value>,
    /// TLS, headers and the API key.
    pub connection: Connection,
    /// Measured requests to a plain-HTTP target on goodput's own HTTP/1.1 path (`h1`: the
    /// reading task reads the socket); off, through hyper as every other request.
    pub own_http1: bool,
    /// The deadline of a side request (`/v1/models`, a `/metrics` scrape), from sending until
    /// its whole body arrived: past it the request fails naming its URL and this. Measured
    /// requests are cut at the load generator's `--timeout` (recorded as timed out); give the
    /// same value here.
    pub timeout: Duration,
}

impl HttpConfig {
    /// `model` at `base_url` by token-id prompts with exact lengths, reading the server's
    /// stamps; no codec, no extra fields, plain connection settings.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        HttpConfig {
            base_url: base_url.into(),
            model: model.into(),
            api: Api::Completions,
            max_tokens_field: MaxTokensField::Auto,
            exact_lengths: true,
            strict_openai: false,
            return_token_ids: false,
            codec: None,
            codec_counts: true,
            same_clock: false,
            server_stamps: true,
            extra_body: Default::default(),
            connection: Connection::default(),
            own_http1: true,
            timeout: Duration::from_secs(120),
        }
    }
}

/// Workers past this many share the common client.
const MAX_WORKER_CLIENTS: usize = 256;

/// The HTTP target.
pub struct HttpTarget {
    cfg: HttpConfig,
    client: reqwest::Client,
    /// Each load-generator worker's own client (`goodput_core::worker`), built on its first
    /// request: a connection is then opened, and read, by the worker's runtime alone.
    per_worker: Vec<std::sync::OnceLock<reqwest::Client>>,
    /// The measured requests' own HTTP/1.1 path, where the target takes it.
    lean: Option<h1::Lean>,
    clock: Clock,
    /// Why scrapes of `/metrics` are off for the rest of the run (the page passed a bound).
    scrapes_off: std::sync::OnceLock<String>,
    /// Text prompts: the line from written tokens to the server's count, learnt from the
    /// responses, so prompts land on the scenario's length ([`prompt_fit`]).
    prompt_fit: std::sync::Mutex<prompt_fit::PromptFit>,
}

impl HttpTarget {
    /// A target stamping with `clock` (share the server's clock when it runs in-process).
    /// A `user:password@` in the URL moves to [`Connection::basic_auth`].
    pub fn new(mut cfg: HttpConfig, clock: Clock) -> Result<Self, ClientError> {
        if matches!(cfg.api, Api::Chat | Api::CompletionsText) && cfg.codec.is_none() {
            return Err(ClientError::NoCodec);
        }
        check_extra_body(&cfg.extra_body)?;
        let (base_url, credentials) = split_credentials(&cfg.base_url);
        if let Some(c) = credentials {
            if cfg.connection.basic_auth.is_some() {
                return Err(ClientError::Connection("credentials in the URL and in the connection; keep one".into()));
            }
            cfg.connection.basic_auth = Some(c);
        }
        cfg.base_url = base_url.trim_end_matches('/').to_string();
        let client = cfg.connection.client()?;
        let per_worker = (0..MAX_WORKER_CLIENTS).map(|_| std::sync::OnceLock::new()).collect();
        let lean = if cfg.own_http1 { h1::Lean::for_config(&cfg)? } else { None };
        Ok(HttpTarget {
            cfg,
            client,
            per_worker,
            lean,
            clock,
            scrapes_off: Default::default(),
            prompt_fit: Default::default(),
        })
    }

    pub fn config(&self) -> &HttpConfig {
        &self.cfg
    }

    /// The models the server lists (`GET /v1/models`), within [`HttpConfig::timeout`].
    pub async fn models(&self) -> Result<Vec<String>, ClientError> {
        let url = format!("{}/v1/models", self.cfg.base_url);
        self.within(&url, async {
            let mut resp = self.get(&url).await?;
            let text = body::read_side(&mut resp, &url).await?;
            let v: Value = serde_json::from_str(&text)
                .map_err(|e| ClientError::Connection(format!("GET {url}: the model list is not JSON: {e}")))?;
            Ok(v["data"].as_array().into_iter().flatten().filter_map(|m| m["id"].as_str().map(String::from)).collect())
        })
        .await
    }

    /// `side`, a side request to `url`, failed once [`HttpConfig::timeout`] has passed.
    pub(crate) async fn within<T>(
        &self,
        url: &str,
        side: impl Future<Output = Result<T, ClientError>>,
    ) -> Result<T, ClientError> {
        let timeout = self.cfg.timeout;
        tokio::time::timeout(timeout, side)
            .await
            .unwrap_or_else(|_| Err(ClientError::Timeout { url: url.to_string(), timeout }))
    }

    /// The client of the calling thread: a load-generator worker's own, else the shared one.
    /// A worker's is built like the shared one (which was built from the same settings, so a
    /// failure here cannot be new; it falls back to the shared client all the same).
    fn client_here(&self) -> &reqwest::Client {
        match goodput_core::worker::current().and_then(|k| self.per_worker.get(k)) {
            Some(slot) => slot.get_or_init(|| self.cfg.connection.client().unwrap_or_else(|_| self.client.clone())),
            None => &self.client,
        }
    }

    /// Builds the calling load-generator worker's client now, so that no measured request
    /// waits for it (a worker calls this as it starts).
    pub fn prepare_here(&self) {
        let _ = self.client_here();
    }

    /// A request to `url` with the URL's credentials, if it had any.
    pub(crate) fn request(&self, method: reqwest::Method, url: &str) -> reqwest::RequestBuilder {
        let b = self.client_here().request(method, url);
        match &self.cfg.connection.basic_auth {
            Some((user, password)) => b.basic_auth(user.expose(), password.as_ref().map(Secret::expose)),
            None => b,
        }
    }

    /// The request's URL and body, and for a text prompt the tokens written (the client's
    /// count, for [`prompt_fit`]).
    fn body(&self, req: &WorkRequest) -> Result<(String, Value, Option<usize>), String> {
        let p = &req.params;
        let mut body = json!({
            "model": self.cfg.model,
            "temperature": p.temperature,
            "top_p": p.top_p,
            "stream": true,
        });
        body[self.cfg.max_tokens_field.name(self.cfg.api)] = json!(p.max_tokens);
        // The Responses API has no seed and always streams its usage.
        if self.cfg.api != Api::Responses {
            body["seed"] = json!(p.seed);
            body["stream_options"] = json!({ "include_usage": true });
        }
        // vLLM's extensions (SGLang and goodput take them too), unless strictly OpenAI.
        if !self.cfg.strict_openai {
            if p.top_k > 0 {
                body["top_k"] = json!(p.top_k);
            }
            if self.cfg.exact_lengths {
                body["ignore_eos"] = json!(p.ignore_eos);
                // 0 is the default everywhere, and sglang-router refuses it (`min_tokens`
                // must be at least 1 there): sent only when it says something.
                if p.min_tokens > 0 {
                    body["min_tokens"] = json!(p.min_tokens);
                }
            }
            if self.cfg.return_token_ids && self.cfg.api != Api::Responses {
                body["return_token_ids"] = json!(true);
            }
            // goodput's own extension: the first N output tokens are reasoning (the
            // `reasoning` scenario on weights that do not think); other servers ignore it.
            if p.reasoning_tokens > 0 {
                body["goodput"] = json!({ "reasoning_tokens": p.reasoning_tokens });
            }
        }
        // A text prompt of the length the server will count (its template taken off), from
        // the prompt's ids (cycled where the server counts fewer tokens than written).
        let mut written = None;
        let mut text = || -> Result<String, String> {
            let codec = self.cfg.codec.as_ref().ok_or("no tokenizer to write the prompt as text")?;
            let want = self.prompt_fit.lock().unwrap_or_else(|e| e.into_inner()).written_for(req.prompt.len());
            let ids: Vec<TokenId> = req.prompt.iter().cycle().take(want).copied().collect();
            // A request's failure is recorded as text.
            let (text, n) =
                exact_text(codec.as_ref(), &codec.writable(&ids)).map_err(|e| format!("the prompt as text: {e}"))?;
            written = Some(n);
            Ok(text)
        };
        let path = match self.cfg.api {
            Api::Completions => {
                body["prompt"] = json!(req.prompt);
                "/v1/completions"
            }
            Api::CompletionsText => {
                body["prompt"] = json!(text()?);
                "/v1/completions"
            }
            Api::Chat => {
                body["messages"] = json!([{ "role": "user", "content": text()? }]);
                "/v1/chat/completions"
            }
            Api::Responses => {
                body["input"] = json!(text()?);
                "/v1/responses"
            }
        };
        if let Some(obj) = body.as_object_mut() {
            obj.extend(self.cfg.extra_body.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        Ok((format!("{}{path}", self.cfg.base_url), body, written))
    }
}

/// Fields of the body only goodput writes: the stream it measures, the prompt it drew, the
/// model it was told.
const OWN_FIELDS: [&str; 5] = ["stream", "prompt", "messages", "model", "stream_options"];

/// Refuses extra body fields that would change what is measured.
pub fn check_extra_body(extra: &serde_json::Map<String, Value>) -> Result<(), ClientError> {
    match extra.keys().find(|k| OWN_FIELDS.contains(&k.as_str())) {
        Some(k) => Err(ClientError::Connection(format!(
            "--extra-body may not set `{k}`: goodput writes it (streamed responses, the scenario's prompts, \
             --served-model-name)"
        ))),
        None => Ok(()),
    }
}

/// The `x-request-id` of request `id`: the id in a UUID (version 4, RFC 4122 variant), since
/// servers that check the header want a UUID (llama-cpp-python's answers a plain number with
/// an empty 400). The id is readable in the last group: request 26 is
/// `00000000-0000-4000-8000-00000000001a`.
pub fn request_id(id: u64) -> String {
    format!("00000000-0000-4000-{:04x}-{:012x}", 0x8000 | ((id >> 48) & 0x3fff), id & 0xffff_ffff_ffff)
}

impl Target for HttpTarget {
    fn clock(&self) -> Clock {
        self.clock
    }

    fn describe(&self) -> String {
        let api = match self.cfg.api {
            Api::Completions => "completions (token ids)",
            Api::CompletionsText => "completions (text)",
            Api::Chat => "chat completions",
            Api::Responses => "responses",
        };
        format!("HTTP {} ({api}, model {})", redact_url(&self.cfg.base_url), self.cfg.model)
    }

    async fn run(&self, req: WorkRequest, intended: Stamp) -> ClientRecord {
        let (id, input) = (req.id, req.prompt.len());
        let mut rec = ClientRecord::unanswered(id, intended, input, intended, Outcome::Ok);
        let (url, body, written) = match self.body(&req) {
            Ok(x) => x,
            Err(e) => {
                rec.end = self.clock.now();
                rec.outcome = Outcome::refused(FailureKind::Invalid, e);
                return rec;
            }
        };
        rec.sent = self.clock.now();
        // Room for every chunk the request may stream (bounded: a huge max_tokens is no promise).
        let mut p = StreamParser {
            chunks: Vec::with_capacity(req.params.max_tokens.min(256)),
            bounds: stream::Bounds::for_max_tokens(req.params.max_tokens),
            ..Default::default()
        };
        let session = self.cfg.connection.session_header.as_deref().zip(req.session.map(|s| s.to_string()));
        let outcome = self.follow((id, session), &url, &body, &mut p).await;
        rec.end = self.clock.now();
        rec.outcome = outcome;
        if !self.cfg.server_stamps {
            p.http.server = None;
        }
        p.http.same_clock = self.cfg.same_clock;
        let exact = p.token_ids.as_ref().map(Vec::len).or((p.native_tokens > 0).then_some(p.native_tokens));
        if let Some(ids) = p.token_ids.take() {
            p.http.client_counted_tokens = Some(ids.len());
            rec.output_ids = ids;
        } else if let Some(codec) = self.cfg.codec.as_ref().filter(|_| self.cfg.codec_counts) {
            if let Ok(ids) = codec.encode(&p.text) {
                // Reasoning is output too (`usage.completion_tokens` includes it); the answer's
                // ids alone are what a conversation re-sends.
                let thought =
                    if p.reasoning.is_empty() { Some(0) } else { codec.encode(&p.reasoning).ok().map(|r| r.len()) };
                if let Some(r) = thought {
                    p.http.client_counted_tokens = Some(ids.len() + r);
                    p.http.client_counted_reasoning_tokens = (r > 0).then_some(r);
                }
                rec.output_ids = ids;
            }
        }
        // The server's counts where they stand (its prompt count includes its template and
        // BOS), else the prompt's length and the stream's count.
        let sent = trust::Sent {
            at: rec.sent,
            prompt_tokens: input,
            text_prompt: self.cfg.api != Api::Completions,
            max_tokens: body
                .get(self.cfg.max_tokens_field.name(self.cfg.api))
                .and_then(Value::as_u64)
                .map(|m| m as usize),
        };
        let got = trust::Received {
            chunks: &p.chunks,
            exact,
            counted: p.http.client_counted_tokens,
            reasoning_chunks: p.split.chunks,
        };
        // The server's own count of the text written, before the trust check (which refuses a
        // count far from the scenario's length: what an unfitted text prompt can give).
        if let (Some(w), Some(counted)) = (written, p.http.usage_prompt_tokens) {
            if counted <= 100 * w + 4096 {
                self.prompt_fit.lock().unwrap_or_else(|e| e.into_inner()).add(w, counted);
            }
        }
        (rec.input_tokens, rec.output_tokens) = trust::settle(&mut p.http, &sent, &got);
        // Reasoning streamed, or hidden (OpenAI's o-series): counted by usage alone, the
        // answer's first chunk the record's first.
        // A usage count below the reasoning chunks streamed contradicts the stream (vLLM says
        // 0 when `</think>` never came): the stream's count stands.
        let usage = p.http.usage_reasoning_tokens.filter(|&u| u >= p.split.chunks);
        let tokens = usage.or(p.http.client_counted_reasoning_tokens);
        if p.split.chunks > 0 || tokens.is_some_and(|t| t > 0) {
            rec.reasoning = Some(goodput_core::Reasoning { tokens, ..p.split });
        }
        if let Some(t) = &p.http.server {
            rec.engine = Some(t.to_record(id));
        }
        rec.chunks = p.chunks;
        rec.http = Some(p.http);
        rec
    }
}

impl HttpTarget {
    /// POSTs `body` as request `id`, with its session's header when it has one.
    async fn follow(
        &self,
        (id, session): (u64, Option<(&str, String)>),
        url: &str,
        body: &Value,
        p: &mut StreamParser,
    ) -> Outcome {
        if let Some(lean) = &self.lean {
            return lean.post(url, (id, session), body, self.clock, p).await;
        }
        let mut post = self.request(reqwest::Method::POST, url).header("x-request-id", request_id(id)).json(body);
        if let Some((name, value)) = session {
            post = post.header(name, value);
        }
        let resp = match post.send().await {
            Ok(r) => r,
            Err(e) => {
                let why = causes(&e);
                return Outcome::error(error::send_failure(&why), format!("POST {url}: {why}"));
            }
        };
        p.http.headers = Some(self.clock.now());
        let status = resp.status();
        p.http.status = status.as_u16();
        if let Some(why) = redirect(&resp) {
            return Outcome::refused(FailureKind::Http(status.as_u16()), why);
        }
        if !status.is_success() {
            return body::error_outcome(resp).await;
        }
        stream::read_stream(resp, url, self.clock, p).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use goodput_core::SamplingParams;

    fn target(strict: bool, extra: Value) -> Result<HttpTarget, ClientError> {
        let cfg = HttpConfig {
            strict_openai: strict,
            return_token_ids: true,
            extra_body: extra.as_object().cloned().unwrap_or_default(),
            ..HttpConfig::new("http://127.0.0.1:1/", "m")
        };
        HttpTarget::new(cfg, Clock::new())
    }

    fn body(t: &HttpTarget) -> Value {
        let params = SamplingParams { top_k: 5, min_tokens: 4, ..SamplingParams::greedy_exact(4) };
        t.body(&WorkRequest { session: None, id: 1, prompt: vec![1, 2], params }).unwrap().1
    }

    #[test]
    fn vllm_extensions_unless_strict_and_extra_fields_on_top() {
        let b = body(&target(false, json!({"temperature": 0.7, "chat_template_kwargs": {"x": 1}})).unwrap());
        for k in ["ignore_eos", "min_tokens", "top_k", "return_token_ids"] {
            assert!(b.get(k).is_some(), "{k} in {b}");
        }
        assert_eq!((b["temperature"].as_f64(), b["chat_template_kwargs"]["x"].as_i64()), (Some(0.7), Some(1)));
        let strict = body(&target(true, json!({})).unwrap());
        for k in ["ignore_eos", "min_tokens", "top_k", "return_token_ids"] {
            assert!(strict.get(k).is_none(), "{k} in {strict}");
        }
        assert_eq!(strict["max_tokens"], 4);
        assert_eq!(strict["stream_options"]["include_usage"], true);
        // No minimum, none sent (sglang-router refuses `min_tokens: 0`).
        let t = target(false, json!({})).unwrap();
        let b = t
            .body(&WorkRequest { session: None, id: 1, prompt: vec![1], params: SamplingParams::greedy_exact(4) })
            .unwrap()
            .1;
        assert!(b.get("min_tokens").is_none() && b["ignore_eos"] == true, "{b}");
    }

    /// Each API's length field by default (`max_completion_tokens` for chat), or the one
    /// chosen; the Responses API's own shape; goodput's reasoning extension unless strict; and
    /// reasoning-effort fields passed through `--extra-body`.
    #[test]
    fn the_length_field_the_responses_shape_and_the_reasoning_extension() {
        struct Ids;
        impl TextCodec for Ids {
            fn encode(&self, text: &str) -> Result<Vec<TokenId>, goodput_core::CodecError> {
                Ok(text.split(' ').map(|w| w.parse().unwrap_or(0)).collect())
            }
            fn decode(&self, ids: &[TokenId]) -> Result<String, goodput_core::CodecError> {
                Ok(ids.iter().map(|i| i.to_string()).collect::<Vec<_>>().join(" "))
            }
        }
        let with = |api, field, strict, extra: Value| {
            let cfg = HttpConfig {
                api,
                max_tokens_field: field,
                strict_openai: strict,
                codec: Some(Arc::new(Ids)),
                extra_body: extra.as_object().cloned().unwrap_or_default(),
                ..HttpConfig::new("http://127.0.0.1:1", "m")
            };
            let params = SamplingParams { reasoning_tokens: 3, ..SamplingParams::greedy_exact(9) };
            HttpTarget::new(cfg, Clock::new())
                .unwrap()
                .body(&WorkRequest { session: None, id: 1, prompt: vec![4, 5], params })
                .unwrap()
        };
        let (url, chat, _) = with(Api::Chat, MaxTokensField::Auto, false, json!({}));
        assert!(url.ends_with("/v1/chat/completions") && chat.get("max_tokens").is_none(), "{chat}");
        assert_eq!(
            (chat["max_completion_tokens"].as_u64(), chat["goodput"]["reasoning_tokens"].as_u64()),
            (Some(9), Some(3))
        );
        let (_, old, _) = with(Api::Chat, MaxTokensField::MaxTokens, false, json!({}));
        assert!(old["max_tokens"] == 9 && old.get("max_completion_tokens").is_none(), "{old}");
        let (_, cmpl, _) = with(Api::Completions, MaxTokensField::MaxCompletionTokens, true, json!({}));
        assert!(cmpl["max_tokens"] == 9 && cmpl.get("goodput").is_none(), "{cmpl}");
        let effort = json!({"reasoning_effort": "low", "chat_template_kwargs": {"enable_thinking": true, "thinking_budget": 64}});
        let (url, resp, _) = with(Api::Responses, MaxTokensField::Auto, false, effort);
        assert!(url.ends_with("/v1/responses"), "{url}");
        assert_eq!((resp["input"].as_str(), resp["max_output_tokens"].as_u64()), (Some("4 5"), Some(9)));
        assert!(
            resp.get("seed").is_none() && resp.get("stream_options").is_none() && resp.get("messages").is_none(),
            "{resp}"
        );
        assert_eq!(
            (resp["reasoning_effort"].as_str(), resp["chat_template_kwargs"]["thinking_budget"].as_u64()),
            (Some("low"), Some(64))
        );
    }

    /// Each id decodes to one letter; the text encodes in pairs of letters (and drops id 0).
    struct Pairs;
    impl TextCodec for Pairs {
        fn encode(&self, text: &str) -> Result<Vec<TokenId>, goodput_core::CodecError> {
            Ok((0..text.len().div_ceil(2) as u32).collect())
        }
        fn decode(&self, ids: &[TokenId]) -> Result<String, goodput_core::CodecError> {
            Ok(ids.iter().filter(|&&i| i != 0).map(|_| 'a').collect())
        }
    }

    #[test]
    fn text_prompts_are_extended_or_trimmed_to_their_length_in_tokens() {
        // 5 ids are 3 tokens of text; extended from the ids until the text is 5 tokens.
        let (text, n) = exact_text(&Pairs, &[1, 2, 3, 4, 5]).unwrap();
        assert_eq!((text.len().div_ceil(2), n), (5, 5));
        // A special id that decodes to nothing is made up for.
        assert_eq!(exact_text(&Pairs, &[0, 0, 3, 4]).unwrap().1, 4);
        assert_eq!(exact_text(&Pairs, &[]).unwrap(), (String::new(), 0));
    }

    #[test]
    fn usage_says_how_many_prompt_tokens_were_cached() {
        let mut p = StreamParser::default();
        let usage = r#"{"choices":[],"usage":{"prompt_tokens":128,"completion_tokens":4,"prompt_tokens_details":{"cached_tokens":112}}}"#;
        assert_eq!(p.event(usage, Stamp(1)), Step::More);
        assert_eq!((p.http.usage_prompt_tokens, p.http.usage_cached_tokens), (Some(128), Some(112)));
    }

    #[test]
    fn extra_fields_may_not_replace_what_is_measured() {
        for k in OWN_FIELDS {
            let err = target(false, json!({ k: 1 })).err().unwrap().to_string();
            assert!(err.contains(&format!("may not set `{k}`")), "{err}");
        }
    }
}
