//! A [`Target`] over HTTP: goodput's streaming client for OpenAI-compatible servers (vLLM,
//! SGLang, TGI's Messages API, llama.cpp, `goodput serve`), and TGI's native
//! `generate_stream`.
//!
//! Per request it stamps the intended and the actual send, the response headers, the first
//! byte, every content chunk (not role-only or empty deltas, not SSE comments, not usage-only
//! chunks) and the end marker. Token counts come from the server's `usage` when it sends one,
//! cross-checked against the client's own tokenizer when one is given. Parsing is a plain
//! state machine ([`StreamParser`]) fed with SSE events, so recorded streams can be replayed.

use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use goodput_core::{
    Chunk, ClientRecord, Clock, FailureKind, HttpStamps, Outcome, ServerTimings, Stamp, Target, TokenId, WorkRequest,
};
use serde_json::{json, Value};
use std::sync::Arc;

/// Text ↔ token ids, for chat prompts, counting received tokens and multi-turn history.
pub trait TextCodec: Send + Sync + 'static {
    fn encode(&self, text: &str) -> Result<Vec<TokenId>, String>;
    fn decode(&self, ids: &[TokenId]) -> Result<String, String>;
}

/// Which API the requests go to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Api {
    /// `POST /v1/completions` with the prompt as token ids (exact lengths; vLLM, SGLang and
    /// goodput accept them).
    Completions,
    /// `POST /v1/completions` with the prompt decoded to text by the client's codec.
    CompletionsText,
    /// `POST /v1/chat/completions` with the prompt decoded to text, as one user message.
    Chat,
}

#[derive(Clone)]
pub struct HttpConfig {
    /// `http://host:port` (no trailing path).
    pub base_url: String,
    /// The served model name.
    pub model: String,
    pub api: Api,
    /// Send vLLM's `ignore_eos` and `min_tokens` so outputs have the requested length.
    pub exact_lengths: bool,
    /// Ask for vLLM's `return_token_ids` (each chunk's token ids: exact per-chunk counts and
    /// output ids for multi-turn history; goodput's server and recent vLLM support it).
    pub return_token_ids: bool,
    pub codec: Option<Arc<dyn TextCodec>>,
    /// The server stamps with this target's clock (it runs in this process).
    pub same_clock: bool,
    /// Read the per-request engine stamps the server returns (goodput's `goodput` object).
    /// Off, the record holds none, as from a server that sends none.
    pub server_stamps: bool,
}

/// The HTTP target.
pub struct HttpTarget {
    cfg: HttpConfig,
    client: reqwest::Client,
    clock: Clock,
}

/// Why the HTTP target could not be built, or a side request (models, /metrics) failed.
/// Failures of the measured requests themselves are not errors: they are recorded
/// ([`goodput_core::Outcome`]).
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("text prompts need the model's tokenizer on the client side")]
    NoCodec,
    #[error("building the HTTP client: {0}")]
    Build(reqwest::Error),
    #[error("GET {url}: {source}")]
    Get { url: String, source: reqwest::Error },
    #[error("GET {url}: HTTP {status}")]
    Status { url: String, status: reqwest::StatusCode },
    #[error("parsing /metrics: {0}")]
    Metrics(String),
}

impl HttpTarget {
    /// A target stamping with `clock` (share the server's clock when it runs in-process).
    pub fn new(cfg: HttpConfig, clock: Clock) -> Result<Self, ClientError> {
        if matches!(cfg.api, Api::Chat | Api::CompletionsText) && cfg.codec.is_none() {
            return Err(ClientError::NoCodec);
        }
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(usize::MAX)
            .tcp_nodelay(true)
            .build()
            .map_err(ClientError::Build)?;
        Ok(HttpTarget {
            cfg: HttpConfig { base_url: cfg.base_url.trim_end_matches('/').to_string(), ..cfg },
            client,
            clock,
        })
    }

    pub fn config(&self) -> &HttpConfig {
        &self.cfg
    }

    /// The models the server lists (`GET /v1/models`).
    pub async fn models(&self) -> Result<Vec<String>, ClientError> {
        let url = format!("{}/v1/models", self.cfg.base_url);
        let resp = self.get(&url).await?;
        let v: Value = resp.json().await.map_err(|source| ClientError::Get { url, source })?;
        Ok(v["data"].as_array().into_iter().flatten().filter_map(|m| m["id"].as_str().map(String::from)).collect())
    }

    fn body(&self, req: &WorkRequest) -> Result<(String, Value), String> {
        let p = &req.params;
        let mut body = json!({
            "model": self.cfg.model,
            "max_tokens": p.max_tokens,
            "temperature": p.temperature,
            "top_p": p.top_p,
            "seed": p.seed,
            "stream": true,
            "stream_options": { "include_usage": true },
        });
        if p.top_k > 0 {
            body["top_k"] = json!(p.top_k);
        }
        if self.cfg.exact_lengths {
            body["ignore_eos"] = json!(p.ignore_eos);
            body["min_tokens"] = json!(p.min_tokens);
        }
        if self.cfg.return_token_ids {
            body["return_token_ids"] = json!(true);
        }
        let text = || -> Result<String, String> {
            self.cfg.codec.as_ref().ok_or("no tokenizer to write the prompt as text")?.decode(&req.prompt)
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
        };
        Ok((format!("{}{path}", self.cfg.base_url), body))
    }
}

/// The `x-request-id` of request `id`: the id in a UUID (version 4, RFC 4122 variant), since
/// servers that check the header want a UUID (llama-cpp-python's answers a plain number with
/// an empty 400). The id is readable in the last group: request 26 is
/// `00000000-0000-4000-8000-00000000001a`.
pub fn request_id(id: u64) -> String {
    format!("00000000-0000-4000-{:04x}-{:012x}", 0x8000 | ((id >> 48) & 0x3fff), id & 0xffff_ffff_ffff)
}

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
    pub chunks: Vec<Chunk>,
    pub text: String,
    /// Token ids the server sent with its chunks (`return_token_ids`), if it did.
    pub token_ids: Option<Vec<TokenId>>,
    pub http: HttpStamps,
    /// TGI's native stream: tokens counted from `token` events.
    pub native_tokens: usize,
}

impl StreamParser {
    /// One SSE event's data, arrived at `at`.
    pub fn event(&mut self, data: &str, at: Stamp) -> Step {
        let data = data.trim();
        if data == "[DONE]" {
            self.http.done = Some(at);
            return Step::Done;
        }
        if data.is_empty() {
            self.http.empty_events += 1;
            return Step::More;
        }
        let v: Value = match serde_json::from_str(data) {
            Ok(v) => v,
            Err(e) => {
                return Step::Failed(FailureKind::BadEvent, format!("an event is not JSON ({e}): {}", clip(data)))
            }
        };
        if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
            let msg = err.get("message").and_then(Value::as_str).map_or_else(|| err.to_string(), String::from);
            return Step::Failed(FailureKind::ErrorEvent, msg);
        }
        if let Some(u) = v.get("usage").filter(|u| !u.is_null()) {
            self.http.usage_prompt_tokens = u["prompt_tokens"].as_u64().map(|x| x as usize);
            self.http.usage_completion_tokens = u["completion_tokens"].as_u64().map(|x| x as usize);
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
        let text = choice.and_then(|c| c.get("text").or_else(|| c.pointer("/delta/content"))).and_then(Value::as_str);
        let ids: Option<Vec<TokenId>> =
            choice.and_then(|c| c.get("token_ids")).and_then(|t| serde_json::from_value(t.clone()).ok());
        match text {
            Some(t) if !t.is_empty() => self.content(t, at),
            _ => self.http.empty_events += 1,
        }
        if let Some(ids) = ids {
            // Tokens of a chunk: its ids; ids without text join the chunk before.
            if let Some(last) = self.chunks.last_mut().filter(|_| !ids.is_empty()) {
                if text.is_some_and(|t| !t.is_empty()) {
                    last.tokens = ids.len() as u32;
                } else {
                    last.tokens += ids.len() as u32;
                }
            }
            self.token_ids.get_or_insert_with(Vec::new).extend(ids);
        }
        Step::More
    }

    fn content(&mut self, text: &str, at: Stamp) {
        self.text.push_str(text);
        self.chunks.push(Chunk { at, tokens: 1 });
    }
}

fn clip(s: &str) -> &str {
    match s.char_indices().nth(200) {
        Some((i, _)) => &s[..i],
        None => s,
    }
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
        };
        format!("HTTP {} ({api}, model {})", self.cfg.base_url, self.cfg.model)
    }

    async fn run(&self, req: WorkRequest, intended: Stamp) -> ClientRecord {
        let (id, input) = (req.id, req.prompt.len());
        let mut rec = ClientRecord::unanswered(id, intended, input, intended, Outcome::Ok);
        let (url, body) = match self.body(&req) {
            Ok(x) => x,
            Err(e) => {
                rec.end = self.clock.now();
                rec.outcome = Outcome::refused(FailureKind::Invalid, e);
                return rec;
            }
        };
        rec.sent = self.clock.now();
        let mut p = StreamParser::default();
        let outcome = self.follow(id, &url, &body, &mut p).await;
        rec.end = self.clock.now();
        rec.outcome = outcome;
        if !self.cfg.server_stamps {
            p.http.server = None;
        }
        if let Some(t) = &p.http.server {
            rec.engine = Some(t.to_record(id));
        }
        let counted: usize = p.chunks.iter().map(|c| c.tokens as usize).sum();
        rec.output_tokens = p.http.usage_completion_tokens.unwrap_or(counted);
        if let Some(ids) = p.token_ids.take() {
            p.http.client_counted_tokens = Some(ids.len());
            rec.output_ids = ids;
        } else if let Some(codec) = &self.cfg.codec {
            if let Ok(ids) = codec.encode(&p.text) {
                p.http.client_counted_tokens = Some(ids.len());
                rec.output_ids = ids;
            }
        }
        rec.chunks = p.chunks;
        p.http.same_clock = self.cfg.same_clock;
        rec.http = Some(p.http);
        rec
    }
}

impl HttpTarget {
    async fn follow(&self, id: u64, url: &str, body: &Value, p: &mut StreamParser) -> Outcome {
        let resp = match self.client.post(url).header("x-request-id", request_id(id)).json(body).send().await {
            Ok(r) => r,
            Err(e) => return Outcome::error(FailureKind::Connect, format!("POST {url}: {e}")),
        };
        p.http.headers = Some(self.clock.now());
        let status = resp.status();
        p.http.status = status.as_u16();
        if !status.is_success() {
            let text = resp.text().await.unwrap_or_default();
            let msg = serde_json::from_str::<Value>(&text)
                .ok()
                .and_then(|v| {
                    v.pointer("/error/message").or_else(|| v.get("message")).and_then(Value::as_str).map(String::from)
                })
                .unwrap_or_else(|| clip(&text).to_string());
            let why = format!("HTTP {}: {msg}", status.as_u16());
            // Overload and server errors may pass; other client errors will not.
            let kind = FailureKind::Http(status.as_u16());
            return if status.as_u16() == 429 || status.is_server_error() {
                Outcome::error(kind, why)
            } else {
                Outcome::refused(kind, why)
            };
        }
        let clock = self.clock;
        let mut first_byte = None;
        let bytes = resp.bytes_stream().inspect(|_| {
            first_byte.get_or_insert_with(|| clock.now());
        });
        let mut events = bytes.eventsource();
        loop {
            match events.next().await {
                Some(Ok(ev)) => {
                    let at = clock.now();
                    match p.event(&ev.data, at) {
                        Step::More => {}
                        Step::Done => break,
                        Step::Failed(kind, e) => {
                            p.http.first_byte = first_byte;
                            return Outcome::error(kind, e);
                        }
                    }
                }
                Some(Err(e)) => {
                    p.http.first_byte = first_byte;
                    return Outcome::error(
                        FailureKind::StreamBroken,
                        format!("the stream broke after {} content chunks: {e}", p.chunks.len()),
                    );
                }
                None => {
                    p.http.first_byte = first_byte;
                    return Outcome::error(
                        FailureKind::NoEndMarker,
                        format!("the stream ended without its end marker after {} content chunks", p.chunks.len()),
                    );
                }
            }
        }
        drop(events);
        p.http.first_byte = first_byte;
        Outcome::Ok
    }
}

pub use goodput_core::ServerScrape;

/// What a `:` in a metric name becomes for `prometheus-parse`, whose name pattern is `\w+`
/// (colons are legal in Prometheus names, and vLLM's all have one).
const COLON: &str = "__colon__";

/// The name without a server's prefix: after the last `:`, or without `goodput_`.
fn bare(name: &str) -> &str {
    match name.rsplit_once(COLON) {
        Some((_, n)) => n,
        None => name.strip_prefix("goodput_").unwrap_or(name),
    }
}

/// `line` with the colons of its metric name mapped to [`COLON`] (label values untouched).
fn map_colons(line: &str) -> String {
    let (head, rest) = match line.strip_prefix('#') {
        Some(r) => {
            // `# HELP name …` / `# TYPE name …`: the third word is the name.
            let mut words = r.trim_start().splitn(2, ' ');
            let kind = words.next().unwrap_or("");
            let tail = words.next().unwrap_or("");
            let (name, after) = tail.split_once(' ').unwrap_or((tail, ""));
            return format!("# {kind} {} {after}", name.replace(':', COLON));
        }
        None => match line.find(|c: char| c == '{' || c.is_whitespace()) {
            Some(i) => line.split_at(i),
            None => (line, ""),
        },
    };
    format!("{}{rest}", head.replace(':', COLON))
}

/// Parses Prometheus text exposition (or OpenMetrics) with `prometheus-parse`.
pub fn parse_metrics(text: &str, at: Stamp) -> Result<ServerScrape, String> {
    let lines = text.lines().filter(|l| l.trim() != "# EOF").map(|l| Ok(map_colons(l)));
    let scrape = prometheus_parse::Scrape::parse(lines).map_err(|e| format!("parsing /metrics: {e}"))?;
    let mut out = ServerScrape { at, ..Default::default() };
    for s in scrape.samples {
        let name = bare(&s.metric).to_string();
        match s.value {
            prometheus_parse::Value::Histogram(h) => {
                let e = out.histograms.entry(name).or_default();
                for b in h {
                    match e.iter_mut().find(|x| x.0 == b.less_than) {
                        Some(x) => x.1 += b.count,
                        None => e.push((b.less_than, b.count)),
                    }
                }
                e.sort_by(|a, b| a.0.total_cmp(&b.0));
            }
            prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v)
            | prometheus_parse::Value::Counter(v) => {
                *out.gauges.entry(name).or_default() += v;
            }
            prometheus_parse::Value::Summary(_) => {}
        }
    }
    // A histogram's `_sum` and `_count` come as samples of their own.
    for h in out.histograms.keys() {
        if let Some(v) = out.gauges.remove(&format!("{h}_sum")) {
            out.sums.insert(h.clone(), v);
        }
        out.gauges.remove(&format!("{h}_count"));
    }
    Ok(out)
}

impl HttpTarget {
    /// Scrapes the server's `/metrics`.
    pub async fn scrape(&self) -> Result<ServerScrape, ClientError> {
        let url = format!("{}/metrics", self.cfg.base_url);
        let resp = self.get(&url).await?;
        let text = resp.text().await.map_err(|source| ClientError::Get { url, source })?;
        parse_metrics(&text, self.clock.now()).map_err(ClientError::Metrics)
    }

    /// `GET url`, a success status or the error naming it.
    async fn get(&self, url: &str) -> Result<reqwest::Response, ClientError> {
        let resp = self.client.get(url).send().await.map_err(|source| ClientError::Get { url: url.into(), source })?;
        if !resp.status().is_success() {
            return Err(ClientError::Status { url: url.into(), status: resp.status() });
        }
        Ok(resp)
    }
}
