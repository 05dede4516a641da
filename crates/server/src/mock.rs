//! A mock OpenAI completions server with no model: every streamed response waits a fixed
//! time to first token, then sends its tokens a fixed interval apart (on an absolute schedule,
//! so delays do not accumulate). It stamps when it wrote each chunk, by the client's
//! `x-request-id`, so `goodput calibrate` can measure the client's own delay per chunk.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use goodput_core::{Clock, Stamp};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub struct Mock {
    pub clock: Clock,
    pub ttft: Duration,
    pub itl: Duration,
    /// Tokens per response, unless the request's max_tokens is smaller.
    pub tokens: usize,
    /// When each chunk was written, by request id.
    pub sent: Mutex<HashMap<String, Vec<Stamp>>>,
    /// When each request's handler started, by request id: its first chunk is due `ttft`
    /// later, so the mock's own lateness (its timer's) is told apart from the client's.
    pub received: Mutex<HashMap<String, Stamp>>,
}

impl Mock {
    pub fn new(clock: Clock, ttft: Duration, itl: Duration, tokens: usize) -> Self {
        Mock { clock, ttft, itl, tokens, sent: Mutex::default(), received: Mutex::default() }
    }
}

pub fn router(mock: Arc<Mock>) -> Router {
    Router::new()
        .route("/v1/completions", post(complete))
        .route(
            "/v1/models",
            get(|| async { Json(json!({"object": "list", "data": [{"id": "mock", "object": "model"}]})) }),
        )
        .with_state(mock)
}

async fn complete(State(m): State<Arc<Mock>>, headers: HeaderMap, body: Bytes) -> Response {
    let req: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let n = req["max_tokens"].as_u64().map_or(m.tokens, |x| (x as usize).min(m.tokens)).max(1);
    let id = headers.get("x-request-id").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    let start = tokio::time::Instant::now();
    m.received.lock().unwrap_or_else(|e| e.into_inner()).insert(id.clone(), m.clock.now());
    let stream = futures_util::stream::unfold(0usize, move |i| {
        let (m, id) = (m.clone(), id.clone());
        async move {
            if i > n + 1 {
                return None;
            }
            let ev = if i < n {
                tokio::time::sleep_until(start + m.ttft + m.itl * i as u32).await;
                let c =
                    json!({"object": "text_completion", "choices": [{"index": 0, "text": "x", "finish_reason": null}]});
                let at = m.clock.now();
                m.sent.lock().unwrap_or_else(|e| e.into_inner()).entry(id).or_default().push(at);
                Event::default().data(c.to_string())
            } else if i == n {
                let u = json!({"object": "text_completion", "choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": n, "total_tokens": n + 1}});
                Event::default().data(u.to_string())
            } else {
                Event::default().data("[DONE]")
            };
            Some((Ok::<_, Infallible>(ev), i + 1))
        }
    });
    Sse::new(stream).into_response()
}
