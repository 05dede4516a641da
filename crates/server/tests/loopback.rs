//! The server on a real loopback socket: completions and chat, streamed and whole, usage and
//! engine timings, every error status, a client that disconnects (its KV blocks come back),
//! /metrics, and graceful shutdown.

use goodput_core::{Target, WorkRequest};
use serde_json::{json, Value};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

mod common;
use common::{events, post, start};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_and_chat_whole_and_streamed() {
    let s = start(None, 8, Duration::from_secs(5)).await;
    // Whole, text prompt: usage, engine timings, TGI headers.
    let (st, h, body) = post(
        &s.url("/v1/completions"),
        r#"{"model":"tiny","prompt":"Hello there","max_tokens":5,"temperature":0,"ignore_eos":true}"#,
    )
    .await;
    assert_eq!(st, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["object"], "text_completion");
    assert_eq!(v["usage"]["prompt_tokens"], 11);
    assert_eq!(v["usage"]["completion_tokens"], 5);
    assert_eq!(v["choices"][0]["finish_reason"], "length");
    assert_eq!(v["goodput"]["generated_tokens"], 5);
    assert!(v["goodput"]["first_token"].as_u64() >= v["goodput"]["first_scheduled"].as_u64());
    for k in ["x-queue-time", "x-inference-time", "x-time-per-token", "x-total-time", "x-generated-tokens"] {
        assert!(h.contains_key(k), "header {k} missing: {h:?}");
    }
    assert_eq!(h["x-generated-tokens"], "5");
    // Streamed, token-id prompt, with usage: content chunks, then the finish chunk, the usage
    // chunk (carrying the timings), and [DONE].
    let (st, _, body) = post(
        &s.url("/v1/completions"),
        r#"{"model":"tiny","prompt":[72,101,108,108,111],"max_tokens":6,"temperature":0,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}"#,
    )
    .await;
    assert_eq!(st, 200);
    let ev = events(&body);
    assert_eq!(ev.last().unwrap(), "[DONE]");
    let json: Vec<Value> = ev[..ev.len() - 1].iter().map(|e| serde_json::from_str(e).unwrap()).collect();
    let usage = json.last().unwrap();
    assert_eq!(usage["choices"].as_array().unwrap().len(), 0);
    assert_eq!(usage["usage"]["completion_tokens"], 6);
    assert_eq!(usage["usage"]["prompt_tokens"], 5);
    assert_eq!(usage["goodput"]["prompt_tokens"], 5);
    assert_eq!(json[json.len() - 2]["choices"][0]["finish_reason"], "length");
    // Chat, streamed: content deltas, the first carrying the role (nothing is sent before the
    // first token exists).
    let (st, _, body) = post(
        &s.url("/v1/chat/completions"),
        r#"{"model":"tiny","messages":[{"role":"user","content":"Hi"}],"max_tokens":4,"temperature":0,"ignore_eos":true,"stream":true}"#,
    )
    .await;
    assert_eq!(st, 200);
    let ev = events(&body);
    let first: Value = serde_json::from_str(&ev[0]).unwrap();
    assert_eq!(first["choices"][0]["delta"]["role"], "assistant");
    assert!(first["choices"][0]["delta"]["content"].as_str().is_some_and(|t| !t.is_empty()), "{first}");
    assert_eq!(first["object"], "chat.completion.chunk");
    assert_eq!(ev.last().unwrap(), "[DONE]");
    // Chat, whole: the ChatML prompt of "Hi" is 32 bytes.
    let (st, _, body) = post(
        &s.url("/v1/chat/completions"),
        r#"{"model":"tiny","messages":[{"role":"user","content":[{"type":"text","text":"Hi"}]}],"max_tokens":3,"temperature":0.8,"seed":3,"ignore_eos":true}"#,
    )
    .await;
    assert_eq!(st, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["usage"]["prompt_tokens"], "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n".len());
    assert_eq!(v["choices"][0]["message"]["role"], "assistant");
    // Models and health.
    let models: Value = reqwest::get(s.url("/v1/models")).await.unwrap().json().await.unwrap();
    assert_eq!(models["data"][0]["id"], "tiny");
    // SGLang's model description, as sglang-router reads it when a worker registers.
    for path in ["/model_info", "/get_model_info", "/server_info", "/get_server_info"] {
        let info: Value = reqwest::get(s.url(path)).await.unwrap().json().await.unwrap();
        assert_eq!(
            (info["model_path"].as_str(), info["is_generation"].as_bool()),
            (Some("tiny"), Some(true)),
            "{path}"
        );
    }
    // vLLM's /tokenize, as vllm-router's cache-aware policy asks it: text, and a chat rendered
    // with its template (the same prompt tokens the chat completion above counted).
    let client = reqwest::Client::new();
    let tokenize = |body: &'static str| {
        client.post(s.url("/tokenize")).header("content-type", "application/json").body(body).send()
    };
    let t: Value = tokenize(r#"{"model":"tiny","prompt":"Hi!"}"#).await.unwrap().json().await.unwrap();
    assert_eq!((t["count"].as_u64(), t["tokens"].as_array().map(|a| a.len())), (Some(3), Some(3)), "{t}");
    let chat = r#"{"messages":[{"role":"user","content":"Hi"}]}"#;
    let t: Value = tokenize(chat).await.unwrap().json().await.unwrap();
    assert_eq!(t["count"], "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n".len(), "{t}");
    let r = tokenize(r#"{"model":"other","prompt":"Hi"}"#).await.unwrap();
    assert_eq!(r.status(), 404);
    let r = tokenize(r#"{"prompt":3}"#).await.unwrap();
    assert_eq!(r.status(), 400);
    assert_eq!(reqwest::get(s.url("/health")).await.unwrap().status(), 200);
    s.wait_idle().await;
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bad_request_gets_its_status_in_openai_s_format() {
    let s = start(Some(1), 1, Duration::from_secs(5)).await;
    let cases: &[(&str, &str, u16, &str)] = &[
        ("/v1/completions", "{\"model\": \"tiny\", \"prompt\": ", 400, "malformed JSON"),
        ("/v1/completions", "", 400, "empty"),
        ("/v1/completions", r#"{"model":"tiny","prompt":"x","max_tokens":"ten"}"#, 400, "invalid request"),
        ("/v1/completions", r#"{"model":"tiny"}"#, 400, "prompt"),
        ("/v1/completions", r#"{"model":"gpt-9","prompt":"x"}"#, 404, "gpt-9"),
        ("/v1/completions", r#"{"model":"tiny","prompt":"x","max_tokens":0}"#, 400, "max_tokens"),
        ("/v1/completions", r#"{"model":"tiny","prompt":"x","top_p":7}"#, 400, "top_p"),
        ("/v1/completions", r#"{"model":"tiny","prompt":["a","b"]}"#, 400, "one prompt"),
        ("/v1/completions", r#"{"model":"tiny","prompt":[]}"#, 400, "empty"),
        ("/v1/chat/completions", r#"{"model":"tiny","messages":[]}"#, 400, "messages"),
        (
            "/v1/chat/completions",
            r#"{"model":"tiny","messages":[{"role":"user","content":[{"type":"image_url"}]}]}"#,
            400,
            "image_url",
        ),
    ];
    for (path, body, status, needle) in cases {
        let (st, _, text) = post(&s.url(path), body).await;
        assert_eq!(st, *status, "{body}: {text}");
        let v: Value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}"));
        let msg = v["error"]["message"].as_str().unwrap();
        assert!(msg.contains(needle), "{body}: {msg}");
        assert_eq!(v["error"]["code"], *status);
    }
    // A prompt longer than the context (512).
    let long = format!(r#"{{"model":"tiny","prompt":"{}","max_tokens":4}}"#, "a".repeat(600));
    let (st, _, text) = post(&s.url("/v1/completions"), &long).await;
    assert_eq!(st, 400);
    assert!(text.contains("512"), "{text}");
    // One sequence at a time and at most one waiting: a third concurrent request is refused.
    let slow = r#"{"model":"tiny","prompt":"a","max_tokens":400,"ignore_eos":true,"temperature":0}"#;
    let a = tokio::spawn(post(s.url("/v1/completions").leak(), slow));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let b = tokio::spawn(post(s.url("/v1/completions").leak(), slow));
    let t = Instant::now();
    while s.state.engine.gauges().waiting.load(Ordering::Relaxed) < 1 {
        assert!(t.elapsed() < Duration::from_secs(5));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (st, _, text) = post(&s.url("/v1/completions"), slow).await;
    assert_eq!(st, 429, "{text}");
    assert!(text.contains("overloaded"));
    assert_eq!(a.await.unwrap().0, 200);
    assert_eq!(b.await.unwrap().0, 200);
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_goes_away_frees_its_blocks_at_once() {
    let s = start(None, 8, Duration::from_secs(5)).await;
    let resp = reqwest::Client::new()
        .post(s.url("/v1/completions"))
        .json(&json!({"model":"tiny","prompt":"x".repeat(100),"max_tokens":400,"ignore_eos":true,"stream":true}))
        .send()
        .await
        .unwrap();
    let mut body = resp.bytes_stream();
    use futures_util::StreamExt;
    let _ = body.next().await.unwrap().unwrap();
    let g = s.state.engine.gauges();
    assert!(g.blocks_used.load(Ordering::Relaxed) > 0, "the request holds KV blocks while streaming");
    drop(body);
    // Aborted in the engine: blocks back, nothing running, long before 400 tokens are done.
    let t = Instant::now();
    s.wait_idle().await;
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    let m = reqwest::get(s.url("/metrics")).await.unwrap().text().await.unwrap();
    assert!(m.contains("goodput_kv_cache_usage_perc{model_name=\"tiny\"} 0.0"), "{m}");
    // No sliding layers in this model: none of the pool is theirs.
    assert!(m.contains("goodput_kv_cache_sliding_usage_perc{model_name=\"tiny\"} 0.0"), "{m}");
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_use_vllm_s_names_and_count_what_ran() {
    let s = start(None, 8, Duration::from_secs(5)).await;
    for _ in 0..3 {
        let (st, _, _) =
            post(&s.url("/v1/completions"), r#"{"model":"tiny","prompt":"abcdefgh","max_tokens":4,"ignore_eos":true}"#)
                .await;
        assert_eq!(st, 200);
    }
    let m = reqwest::get(s.url("/metrics")).await.unwrap().text().await.unwrap();
    for name in [
        "goodput_time_to_first_token_seconds_bucket",
        "goodput_inter_token_latency_seconds_count",
        "goodput_e2e_request_latency_seconds_sum",
        "goodput_request_queue_time_seconds_bucket",
        "goodput_request_prefill_time_seconds_count",
        "goodput_request_decode_time_seconds_count",
        "goodput_request_inference_time_seconds_count",
        "goodput_num_requests_running",
        "goodput_num_requests_waiting",
        "goodput_kv_cache_usage_perc",
        "goodput_kv_cache_sliding_usage_perc",
        "goodput_prefix_cache_queries_total",
        "goodput_prefix_cache_hits_total",
        "goodput_num_preemptions_total",
    ] {
        assert!(m.contains(name), "{name} missing:\n{m}");
    }
    assert!(m.contains("goodput_time_to_first_token_seconds_count{model_name=\"tiny\"} 3"), "{m}");
    // The process's memory and descriptors under Prometheus's own names, in one exposition.
    let gauge = |name: &str| -> f64 {
        let line = m.lines().find(|l| l.starts_with(&format!("{name} "))).unwrap_or_else(|| panic!("{name}:\n{m}"));
        line[name.len() + 1..].parse().unwrap()
    };
    assert!(gauge("process_resident_memory_bytes") > 1e6 && gauge("process_open_fds") >= 3.0, "{m}");
    assert_eq!(m.matches("# EOF").count(), 1, "{m}");
    assert!(m.ends_with("# EOF\n"), "{m}");
    assert!(m.contains("goodput_prompt_tokens_total{model_name=\"tiny\"} 24"), "{m}");
    assert!(m.contains("goodput_generation_tokens_total{model_name=\"tiny\"} 12"), "{m}");
    // 3 requests × 3 gaps between 4 tokens.
    assert!(m.contains("goodput_inter_token_latency_seconds_count{model_name=\"tiny\"} 9"), "{m}");
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_lets_streams_finish_within_the_grace_then_ends_them() {
    let s = start(None, 8, Duration::from_millis(300)).await;
    let url = s.url("/v1/completions");
    // A stream far longer than the grace period.
    let long = tokio::spawn(async move {
        post(&url, r#"{"model":"tiny","prompt":"a","max_tokens":480,"ignore_eos":true,"stream":true}"#).await
    });
    tokio::time::sleep(Duration::from_millis(150)).await;
    let t = Instant::now();
    s.shutdown().await;
    assert!(t.elapsed() < Duration::from_secs(5), "shutdown hung: {:?}", t.elapsed());
    let (st, _, body) = long.await.unwrap();
    assert_eq!(st, 200);
    let ev = events(&body);
    assert_eq!(ev.last().unwrap(), "[DONE]");
    let err: Value = serde_json::from_str(&ev[ev.len() - 2]).unwrap();
    assert!(err["error"]["message"].as_str().unwrap().contains("shutting down"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_http_target_stamps_a_request_and_reads_the_engine_s_timings() {
    let s = start(None, 8, Duration::from_secs(5)).await;
    let cfg = goodput_client::HttpConfig {
        return_token_ids: true,
        same_clock: true,
        ..goodput_client::HttpConfig::new(format!("http://{}", s.addr), "tiny")
    };
    let target = goodput_client::HttpTarget::new(cfg, s.state.clock).unwrap();
    assert_eq!(target.models().await.unwrap(), ["tiny"]);
    let req = WorkRequest {
        session: None,
        id: 7,
        prompt: (10..60).collect(),
        params: goodput_core::SamplingParams::greedy_exact(12),
    };
    let intended = target.clock().now();
    let rec = target.run(req, intended).await;
    assert!(rec.is_ok(), "{:?}", rec.outcome);
    assert_eq!(rec.output_tokens, 12);
    assert_eq!(rec.input_tokens, 50);
    let http = rec.http.as_ref().unwrap();
    assert_eq!(http.status, 200);
    assert_eq!(http.usage_completion_tokens, Some(12));
    let (headers, first_byte) = (http.headers.unwrap(), http.first_byte.unwrap());
    assert!(rec.sent <= headers && headers <= first_byte && first_byte <= rec.chunks[0].at);
    let e = rec.engine.as_ref().unwrap();
    let server = http.server.as_ref().unwrap();
    // One clock: the server received the request after it was sent, and the client saw the
    // first token after the engine sampled it.
    assert!(server.received >= rec.sent && e.first_token.unwrap() <= rec.chunks[0].at);
    assert_eq!(e.generated_tokens, 12);
    // An unknown model is refused (not retried), and so is an overlong prompt.
    let bad = goodput_client::HttpTarget::new(
        goodput_client::HttpConfig { model: "nope".into(), ..target.config().clone() },
        s.state.clock,
    )
    .unwrap();
    let rec = bad
        .run(WorkRequest { session: None, id: 8, prompt: vec![5; 4], params: Default::default() }, target.clock().now())
        .await;
    assert!(
        matches!(&rec.outcome, goodput_core::Outcome::Refused(f) if f.message.contains("404") && f.kind == goodput_core::FailureKind::Http(404)),
        "{:?}",
        rec.outcome
    );
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fields_the_engine_does_not_implement_are_refused_by_name_and_their_no_op_values_accepted() {
    let s = start(None, 8, Duration::from_secs(5)).await;
    let (cmpl, chat) = ("/v1/completions", "/v1/chat/completions");
    let body = |path: &str, extra: &str| {
        let what = if path == cmpl { r#""prompt":"a""# } else { r#""messages":[{"role":"user","content":"a"}]"# };
        format!(r#"{{"model":"tiny",{what},"max_tokens":2,{extra}}}"#)
    };
    let refused = [
        (cmpl, r#""logprobs":1"#, "logprobs"),
        (cmpl, r#""logprobs":0"#, "logprobs"),
        (chat, r#""logprobs":true"#, "logprobs"),
        (chat, r#""top_logprobs":3"#, "top_logprobs"),
        (cmpl, r#""prompt_logprobs":1"#, "prompt_logprobs"),
        (cmpl, r#""echo":true"#, "echo"),
        (cmpl, r#""best_of":2"#, "best_of"),
        (chat, r#""n":2"#, "n"),
        (cmpl, r#""logit_bias":{"50":100}"#, "logit_bias"),
        (cmpl, r#""stop":["\n"]"#, "stop"),
        (chat, r#""stop":"x""#, "stop"),
        (cmpl, r#""suffix":"end""#, "suffix"),
        (chat, r#""presence_penalty":0.5"#, "presence_penalty"),
        (chat, r#""frequency_penalty":1"#, "frequency_penalty"),
        (cmpl, r#""repetition_penalty":1.2"#, "repetition_penalty"),
        (chat, r#""response_format":{"type":"json_object"}"#, "response_format"),
        (chat, r#""tools":[{"type":"function","function":{"name":"f"}}]"#, "tools"),
    ];
    for (path, extra, field) in refused {
        let (st, _, text) = post(&s.url(path), &body(path, extra)).await;
        assert_eq!(st, 400, "{extra}: {text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["error"]["param"], field, "{extra}: {text}");
        assert!(v["error"]["message"].as_str().unwrap().contains(&format!("`{field}`")) || field == "n", "{text}");
    }
    // What SDKs send by default asks for nothing, and is served.
    let no_ops = [
        (
            cmpl,
            r#""logprobs":null,"echo":false,"best_of":1,"n":1,"logit_bias":{},"stop":[],"suffix":"","prompt_logprobs":null,"presence_penalty":0,"frequency_penalty":0.0,"repetition_penalty":1"#,
        ),
        (
            chat,
            r#""logprobs":false,"top_logprobs":0,"stop":null,"n":null,"response_format":{"type":"text"},"tools":[],"logit_bias":null"#,
        ),
    ];
    for (path, extra) in no_ops {
        let (st, _, text) = post(&s.url(path), &body(path, extra)).await;
        assert_eq!(st, 200, "{extra}: {text}");
    }
    s.shutdown().await;
}
