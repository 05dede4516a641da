//! Property-based fuzzing of what the HTTP client reads from servers: the data of SSE events
//! through `StreamParser::event` (OpenAI chat and completions chunks, usage chunks, goodput's
//! timing object, error events, TGI's native token events, `token_ids`), fed as a stream of
//! several events into one parser, and Prometheus `/metrics` text through `parse_metrics`.
//! Every property is "no panic, bounded in time": each call returns a `Step` (or Ok/Err), and
//! the parser's state stays consistent (`done` is stamped on `Done`; every content chunk
//! carries text; chunk stamps never go back; histogram buckets come sorted).
//!
//! Inputs are arbitrary text and valid chunks / vLLM-style expositions mutated structurally
//! (fields deleted, renamed or duplicated, values replaced by other types, huge or
//! non-finite numbers, deep nesting, lone surrogates; lines of any metric kind with odd
//! names, labels, values and timestamps) and then at the byte level, by the mutations of
//! `goodput-fuzzing` (`json::mutated`, `mutate_bytes`).
//!
//! Cases: 256 per property (5 properties, about 1,300 cases in all; a stream case feeds up
//! to 8 events); failures are not persisted (no `proptest-regressions` files).

use goodput_client::{parse_metrics, Step, StreamParser};
use goodput_core::Stamp;
use goodput_fuzzing::json::mutated;
use goodput_fuzzing::{byte_edits, config, mutate_bytes, small_bytes};
use proptest::prelude::*;
use serde_json::{json, Value};

// ---------------------------------------------------------------------------------------------
// SSE event data.

const KEYS: &[&str] = &[
    "reasoning",
    "reasoning_content",
    "reasoning_tokens",
    "completion_tokens_details",
    "id",
    "object",
    "created",
    "model",
    "choices",
    "index",
    "delta",
    "role",
    "content",
    "text",
    "logprobs",
    "finish_reason",
    "stop_reason",
    "token_ids",
    "usage",
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "error",
    "message",
    "type",
    "param",
    "code",
    "goodput",
    "received",
    "arrival",
    "queued",
    "first_scheduled",
    "first_token",
    "first_text",
    "last_token",
    "finished",
    "cached_tokens",
    "generated_tokens",
    "preemptions",
    "token",
    "special",
    "generated_text",
    "details",
    "length",
    "stop",
    "type",
    "delta",
    "response",
    "response.output_text.delta",
    "response.reasoning_text.delta",
    "response.completed",
    "output_tokens",
    "output_tokens_details",
];

fn timings() -> Value {
    json!({"received": 10, "arrival": 11, "queued": 12, "first_scheduled": 13, "first_token": 20,
           "first_text": 21, "last_token": 40, "finished": 41, "prompt_tokens": 12, "cached_tokens": 0,
           "generated_tokens": 3, "preemptions": 0, "finish_reason": "length"})
}

fn chunk_seeds() -> Vec<Value> {
    vec![
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1732000000, "model": "m",
               "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": null, "finish_reason": null}]}),
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1732000000, "model": "m",
               "choices": [{"index": 0, "delta": {"content": " wörld"}, "logprobs": null, "finish_reason": null}]}),
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "m", "choices": [],
               "usage": {"prompt_tokens": 12, "total_tokens": 15, "completion_tokens": 3}}),
        json!({"id": "cmpl-1", "object": "text_completion", "model": "m",
               "choices": [{"index": 0, "text": " Paris", "logprobs": null, "finish_reason": null, "token_ids": [3, 4]}],
               "usage": null}),
        json!({"id": "cmpl-1", "object": "text_completion", "model": "m",
               "choices": [{"index": 0, "text": "", "token_ids": [5], "finish_reason": "length"}]}),
        json!({"id": "cmpl-1", "choices": [{"index": 0, "text": "!", "finish_reason": "length"}],
               "usage": {"prompt_tokens": 5, "completion_tokens": 4, "total_tokens": 9}, "goodput": timings()}),
        json!({"error": {"object": "error", "message": "The engine is dead", "type": "InternalServerError",
                         "param": null, "code": 500}}),
        json!({"index": 1, "token": {"id": 22557, "text": "Hello", "logprob": -0.41, "special": false},
               "generated_text": null, "details": null}),
        json!({"index": 3, "token": {"id": 2, "text": "</s>", "logprob": -0.05, "special": true},
               "generated_text": "Hello world", "details": {"finish_reason": "eos_token", "generated_tokens": 3, "seed": null}}),
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "m",
               "choices": [{"index": 0, "delta": {"reasoning": "Let me"}, "finish_reason": null}]}),
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "m",
               "choices": [{"index": 0, "delta": {"reasoning_content": " think", "content": "So"}}]}),
        json!({"id": "chatcmpl-1", "choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 9,
               "completion_tokens_details": {"reasoning_tokens": 6}}}),
        // OpenAI's Responses API.
        json!({"type": "response.created", "sequence_number": 0, "response": {"id": "resp_1", "status": "in_progress", "usage": null}}),
        json!({"type": "response.reasoning_text.delta", "sequence_number": 1, "item_id": "rs_1", "delta": "Hmm"}),
        json!({"type": "response.reasoning_summary_text.delta", "sequence_number": 2, "item_id": "rs_1", "delta": "ok"}),
        json!({"type": "response.output_text.delta", "sequence_number": 3, "item_id": "msg_1", "delta": "Yes"}),
        json!({"type": "response.completed", "sequence_number": 4, "response": {"usage": {"input_tokens": 3,
               "input_tokens_details": {"cached_tokens": 1}, "output_tokens": 3, "output_tokens_details": {"reasoning_tokens": 2}}}}),
        json!({"type": "response.failed", "response": {"error": {"code": "server_error", "message": "down"}}}),
        json!({"type": "error", "code": "rate_limit_exceeded", "message": "slow down"}),
    ]
}

/// The data of one event: a mutated chunk, the end marker, or arbitrary text.
fn event_data() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => mutated(chunk_seeds(), KEYS).prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
        1 => prop::sample::select(vec!["[DONE]", " [DONE] ", "", "  ", "[DONE", "null", "{}", "[]", "0"]).prop_map(String::from),
        1 => "\\PC{0,64}",
    ]
}

/// Feeds `events` into one parser, stamped 1, 2, …, until it ends; checks its state.
fn feed(events: &[String]) -> Result<(), TestCaseError> {
    let mut p = StreamParser::default();
    for (i, data) in events.iter().enumerate() {
        let at = Stamp(i as u64 + 1);
        let step = p.event(data, at);
        prop_assert!(p.chunks.len() <= 2 * (i + 1), "at most a reasoning and an answer chunk per event");
        prop_assert!(p.text.len() + p.reasoning.len() >= p.chunks.len(), "every token chunk carries text");
        prop_assert!(p.split.chunks <= p.chunks.len());
        prop_assert!(p.split.after_answer <= p.split.chunks);
        prop_assert_eq!(p.split.first_answer.is_some(), !p.text.is_empty(), "the answer starts with its text");
        prop_assert_eq!(p.reasoning.is_empty(), p.split.chunks == 0);
        prop_assert!(p.chunks.windows(2).all(|w| w[0].at <= w[1].at));
        match step {
            Step::More => {}
            Step::Done => {
                prop_assert_eq!(p.http.done, Some(at));
                break;
            }
            Step::Failed(_, msg) => {
                prop_assert!(!msg.is_empty() || data.contains("error"));
                break;
            }
        }
    }
    Ok(())
}

#[test]
fn the_seed_chunks_are_taken_as_content_usage_timings_errors_and_ends() {
    let events: Vec<String> = chunk_seeds().iter().map(Value::to_string).collect();
    let mut p = StreamParser::default();
    for (i, e) in events.iter().enumerate().take(6) {
        assert_eq!(p.event(e, Stamp(i as u64 + 1)), Step::More, "{e}");
    }
    assert_eq!(p.text, " wörld Paris!");
    assert_eq!(p.token_ids, Some(vec![3, 4, 5]));
    assert!(p.http.server.is_some(), "the goodput timings parse");
    assert_eq!(p.http.usage_completion_tokens, Some(4));
    assert!(matches!(p.event(&events[6], Stamp(7)), Step::Failed(_, m) if m == "The engine is dead"));
    let mut tgi = StreamParser::default();
    assert_eq!(tgi.event(&events[7], Stamp(1)), Step::More);
    assert_eq!(tgi.event(&events[8], Stamp(2)), Step::Done);
    assert_eq!(tgi.native_tokens, 2);
    // Reasoning under either name: tokens before the answer, one event may carry both.
    let mut r = StreamParser::default();
    for (i, e) in events[9..12].iter().enumerate() {
        assert_eq!(r.event(e, Stamp(i as u64 + 1)), Step::More, "{e}");
    }
    assert_eq!((r.reasoning.as_str(), r.text.as_str(), r.chunks.len()), ("Let me think", "So", 3));
    assert_eq!((r.split.chunks, r.split.first_answer, r.http.usage_reasoning_tokens), (2, Some(Stamp(2)), Some(6)));
}

// ---------------------------------------------------------------------------------------------
// Prometheus text exposition.

const VLLM_METRICS: &str = r#"# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 1.0
# HELP vllm:gpu_cache_usage_perc GPU KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{engine="0",model_name="m"} 0.25
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="m"} 1234.0
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001",model_name="m"} 0.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="m"} 5.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="1.0",model_name="m"} 9.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 10.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 10.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 2.5
# HELP goodput_num_preemptions_total Preemptions.
# TYPE goodput_num_preemptions_total counter
goodput_num_preemptions_total 7 1395066363000
# EOF
"#;

#[test]
fn the_seed_exposition_parses() {
    let s = parse_metrics(VLLM_METRICS, Stamp(5)).unwrap();
    assert_eq!(s.gauges["num_requests_running"], 3.0);
    assert_eq!(s.histograms["time_to_first_token_seconds"].len(), 4);
    assert_eq!(s.sums["time_to_first_token_seconds"], 2.5);
    assert_eq!(s.gauges["num_preemptions_total"], 7.0);
}

fn metric_name() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(vec![
            "vllm:num_requests_running",
            "vllm:num_requests_waiting",
            "vllm:gpu_cache_usage_perc",
            "vllm:time_to_first_token_seconds",
            "vllm:e2e_request_latency_seconds",
            "vllm:prompt_tokens_total",
            "sglang:num_running_reqs",
            "goodput_num_requests_running",
            "goodput_",
            "vllm:",
            ":",
            "a::b:",
            "x",
        ]).prop_map(String::from),
        2 => "[a-zA-Z_:][a-zA-Z0-9_:]{0,20}",
        1 => "\\PC{0,12}",
    ]
}

fn number() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(vec![
            "0", "1", "3.0", "-1", "NaN", "nan", "+Inf", "-Inf", "inf", "Inf", "infinity", "1e308", "1e400", "-1e400",
            "-0", "0x10", "1_000", "", " ", "1.5e-300", "5e-324", "18446744073709551616", "١", "∞",
        ]).prop_map(String::from),
        2 => any::<f64>().prop_map(|x| x.to_string()),
        1 => any::<i64>().prop_map(|x| x.to_string()),
        1 => "\\PC{0,8}",
    ]
}

fn timestamp() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => Just(String::new()),
        2 => prop::sample::select(vec![
            i64::MIN.to_string(),
            i64::MAX.to_string(),
            "-1".into(),
            "0".into(),
            "1395066363000".into(),
            "9223372036854775808".into(),
            "8210266876799999".into(),
            "-8334601228800000".into(),
            "abc".into(),
        ]).prop_map(|t| format!(" {t}")),
        1 => any::<i64>().prop_map(|t| format!(" {t}")),
    ]
}

fn labels() -> impl Strategy<Value = String> {
    let pair = prop_oneof![
        prop::sample::select(vec![
            "model_name=\"m\"",
            "engine=\"0\"",
            "le=\"0.1\"",
            "le=\"+Inf\"",
            "le=\"NaN\"",
            "le=\"abc\"",
            "le=\"\"",
            "quantile=\"0.5\"",
            "quantile=\"x\"",
            "a=b=c",
            "=x",
            "x=",
            "\"",
            "le=1e400",
            "model_name=\"a,b\"",
            "model_name=\"{}\"",
            "le=\"-Inf\"",
            "le=\"1e-320\"",
        ])
        .prop_map(String::from),
        "[a-z_]{1,8}=\"\\PC{0,8}\"",
        "\\PC{0,10}",
    ];
    prop_oneof![
        2 => Just(String::new()),
        3 => prop::collection::vec(pair, 0..4).prop_map(|p| format!("{{{}}}", p.join(","))),
        1 => "\\{\\PC{0,12}",
    ]
}

fn sample_line() -> impl Strategy<Value = String> {
    (
        metric_name(),
        prop::sample::select(vec!["", "_bucket", "_sum", "_count", "_total", "_created"]),
        labels(),
        number(),
        timestamp(),
    )
        .prop_map(|(n, suffix, l, v, t)| format!("{n}{suffix}{l} {v}{t}"))
}

/// One family: `# HELP`/`# TYPE` lines of any kind, then its samples (buckets for histograms).
fn family() -> impl Strategy<Value = Vec<String>> {
    let kind = prop_oneof![
        4 => prop::sample::select(vec!["counter", "gauge", "histogram", "summary", "untyped", "info", "stateset"]).prop_map(String::from),
        1 => "\\PC{0,8}",
    ];
    let bucket = (number(), number(), labels()).prop_map(|(le, v, l)| (le, v, l));
    (
        metric_name(),
        kind,
        any::<bool>(),
        prop::collection::vec(bucket, 0..6),
        prop::collection::vec(sample_line(), 0..3),
        number(),
    )
        .prop_map(|(name, kind, help, buckets, extra, sum)| {
            let mut lines = Vec::new();
            if help {
                lines.push(format!("# HELP {name} Some help text: with {{braces}} and \\n."));
            }
            lines.push(format!("# TYPE {name} {kind}"));
            for (le, v, l) in buckets {
                let inner = l.trim_start_matches('{').trim_end_matches('}');
                let sep = if inner.is_empty() { "" } else { "," };
                lines.push(format!("{name}_bucket{{{inner}{sep}le=\"{le}\"}} {v}"));
                lines.push(format!("{name}{{{inner}{sep}quantile=\"{le}\"}} {v}"));
            }
            lines.push(format!("{name}_sum {sum}"));
            lines.push(format!("{name}_count {sum}"));
            lines.extend(extra);
            lines
        })
}

/// An exposition: families and stray lines, then line- and byte-level edits.
fn exposition() -> impl Strategy<Value = String> {
    let stray = prop_oneof![
        3 => sample_line(),
        1 => prop::sample::select(vec!["# EOF", "#", "# ", "# TYPE", "# HELP", "# TYPE x", "#TYPE x gauge", "", "   ", "{", "}"]).prop_map(String::from),
        1 => "\\PC{0,40}",
    ];
    let block = prop_oneof![2 => family(), 1 => stray.prop_map(|l| vec![l])];
    let seed = prop_oneof![
        3 => prop::collection::vec(block, 0..8).prop_map(|b| b.concat()),
        1 => Just(VLLM_METRICS.lines().map(String::from).collect::<Vec<_>>()),
    ];
    let newline = prop::sample::select(vec!["\n", "\r\n", "\r"]);
    (seed, newline, byte_edits()).prop_map(|(lines, nl, edits)| {
        let text = lines.join(nl);
        String::from_utf8_lossy(&mutate_bytes(text.into_bytes(), &edits)).into_owned()
    })
}

/// Parses `text`; on success, the scrape is consistent.
fn check_metrics(text: &str) -> Result<(), TestCaseError> {
    if let Ok(s) = parse_metrics(text, Stamp(9)) {
        prop_assert_eq!(s.at, Stamp(9));
        for (name, buckets) in &s.histograms {
            prop_assert!(
                buckets.windows(2).all(|w| w[0].0.total_cmp(&w[1].0).is_le()),
                "buckets of {} not sorted: {:?}",
                name,
                buckets
            );
            let count = format!("{name}_count");
            prop_assert!(!s.gauges.contains_key(&count));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_event_text_is_taken_or_refused(events in prop::collection::vec("\\PC{0,96}", 1..8)) {
        feed(&events)?;
    }

    #[test]
    fn a_stream_of_openai_chunks_of_any_shape_is_taken_or_refused(events in prop::collection::vec(event_data(), 1..8)) {
        feed(&events)?;
    }

    #[test]
    fn any_bytes_as_event_data_are_taken_or_refused(events in prop::collection::vec(small_bytes(128), 1..8)) {
        let events: Vec<String> = events.iter().map(|b| String::from_utf8_lossy(b).into_owned()).collect();
        feed(&events)?;
    }

    #[test]
    fn any_text_is_parsed_as_metrics_or_refused(text in "\\PC{0,512}") {
        check_metrics(&text)?;
    }

    #[test]
    fn a_vllm_style_exposition_of_any_shape_is_parsed_or_refused(text in exposition()) {
        check_metrics(&text)?;
    }
}
