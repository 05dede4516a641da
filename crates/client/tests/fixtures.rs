//! Streams through the SSE parser and the client's stream state machine, fed in odd-sized byte
//! chunks as a network delivers them. Two kinds, named as what they are:
//!
//! - **Written from each server's source** (`fixtures/*.sse`): vLLM's chat and completions
//!   streams, TGI's Messages API and native generate_stream, SGLang's and llama.cpp's
//!   reasoning, OpenAI's Responses events, an error event, a cut stream — hand-written to the
//!   formats those servers' code emits (ids like `chatcmpl-r1` are ours, not theirs).
//! - **Recorded** (`fixtures/recorded/*`): the raw bodies of vLLM's CPU build answering
//!   goodput's requests (completions and chat with usage, the `deepseek_r1` reasoning parser,
//!   an error), written by `scripts/record-vllm-streams.sh` with a comment naming the server's
//!   version and the request.

use goodput_client::{SseDecoder, Step, StreamParser, MAX_EVENT_BYTES};
use goodput_core::Stamp;
use std::ops::ControlFlow;

/// Feeds `name` in chunks of 7 bytes; returns the parser, how it ended and the events seen.
async fn replay(name: &str) -> (StreamParser, Option<Step>) {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    let raw = std::fs::read(&path).unwrap();
    let mut sse = SseDecoder::new(MAX_EVENT_BYTES);
    let (mut p, mut t, mut end) = (StreamParser::default(), 0, None);
    for chunk in raw.chunks(7) {
        let flow = sse.feed(chunk, |data| {
            t += 1;
            match p.event(data, Stamp(t)) {
                Step::More => ControlFlow::Continue(()),
                step => {
                    end = Some(step);
                    ControlFlow::Break(())
                }
            }
        });
        if flow.unwrap().is_break() {
            break;
        }
    }
    (p, end)
}

#[tokio::test]
async fn vllm_chat_role_chunk_and_usage_chunk_are_not_content() {
    let (p, end) = replay("vllm-chat.sse").await;
    assert_eq!(end, Some(Step::Done));
    assert_eq!(p.text, "Hello wörld!");
    assert_eq!(p.chunks.len(), 3);
    // Event 1 is role-only: the first content token is event 2.
    assert_eq!(p.chunks[0].at, Stamp(2));
    assert_eq!(p.http.empty_events, 2, "role chunk and usage chunk");
    assert_eq!((p.http.usage_prompt_tokens, p.http.usage_completion_tokens), (Some(12), Some(3)));
    assert_eq!(p.http.done, Some(Stamp(6)));
}

#[tokio::test]
async fn vllm_completions_with_an_empty_chunk() {
    let (p, end) = replay("vllm-completions.sse").await;
    assert_eq!(end, Some(Step::Done));
    assert_eq!(p.text, " Paris is the capital");
    assert_eq!(p.chunks.len(), 3);
    assert_eq!(p.chunks.iter().map(|c| c.at.0).collect::<Vec<_>>(), [1, 2, 4]);
    assert_eq!(p.http.usage_completion_tokens, Some(4), "usage counts 4 tokens over 3 chunks");
}

#[tokio::test]
async fn tgi_messages_api_puts_role_and_content_together_and_skips_a_comment() {
    let (p, end) = replay("tgi-messages.sse").await;
    assert_eq!(end, Some(Step::Done));
    assert_eq!(p.text, "Hello there");
    assert_eq!(p.chunks[0].at, Stamp(1), "the comment is not an event; the first chunk is content");
    assert_eq!(p.http.usage_completion_tokens, Some(3));
}

#[tokio::test]
async fn tgi_native_stream_ends_with_generated_text_and_skips_special_tokens() {
    let (p, end) = replay("tgi-generate-stream.sse").await;
    assert_eq!(end, Some(Step::Done));
    assert_eq!(p.text, "Hello world");
    assert_eq!(p.chunks.len(), 2);
    assert_eq!(p.native_tokens, 3);
    assert_eq!(p.http.usage_completion_tokens, Some(3));
}

#[tokio::test]
async fn an_error_event_and_a_cut_stream_are_failures() {
    let (p, end) = replay("vllm-error.sse").await;
    assert_eq!(end, Some(Step::Failed(goodput_core::FailureKind::ErrorEvent, "The engine is dead".into())));
    assert_eq!(p.chunks.len(), 1);
    // Cut mid-event: the partial event is never delivered, and no end marker came.
    let (p, end) = replay("broken.sse").await;
    assert_eq!(end, None);
    assert_eq!(p.chunks.len(), 1);
    assert!(p.http.done.is_none());
}

#[test]
fn vllm_and_goodput_metrics_parse_to_the_same_names() {
    let vllm = "# HELP vllm:request_queue_time_seconds Histogram of time spent in WAITING phase for request.\n\
# TYPE vllm:request_queue_time_seconds histogram\n\
vllm:request_queue_time_seconds_bucket{engine=\"0\",le=\"0.3\",model_name=\"m\"} 3.0\n\
vllm:request_queue_time_seconds_bucket{engine=\"0\",le=\"0.5\",model_name=\"m\"} 5.0\n\
vllm:request_queue_time_seconds_bucket{engine=\"0\",le=\"+Inf\",model_name=\"m\"} 6.0\n\
vllm:request_queue_time_seconds_count{engine=\"0\",model_name=\"m\"} 6.0\n\
vllm:request_queue_time_seconds_sum{engine=\"0\",model_name=\"m\"} 1.9\n\
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.\n\
# TYPE vllm:kv_cache_usage_perc gauge\n\
vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m\"} 0.25\n";
    let s = goodput_client::parse_metrics(vllm, Stamp(1)).unwrap();
    assert_eq!(s.histograms["request_queue_time_seconds"], vec![(0.3, 3.0), (0.5, 5.0), (f64::INFINITY, 6.0)]);
    assert_eq!(s.gauges["kv_cache_usage_perc"], 0.25);
    assert_eq!(s.sums["request_queue_time_seconds"], 1.9);
    assert!(!s.gauges.contains_key("request_queue_time_seconds_sum"));
    assert!(!s.gauges.contains_key("request_queue_time_seconds_count"));
    let ours = "# HELP goodput_kv_cache_usage_perc KV-cache block usage: 1 is full.\n\
# TYPE goodput_kv_cache_usage_perc gauge\n\
goodput_kv_cache_usage_perc{model_name=\"tiny\"} 0.5\n\
# HELP goodput_request_queue_time_seconds Histogram.\n\
# TYPE goodput_request_queue_time_seconds histogram\n\
goodput_request_queue_time_seconds_sum{model_name=\"tiny\"} 0.1\n\
goodput_request_queue_time_seconds_count{model_name=\"tiny\"} 2\n\
goodput_request_queue_time_seconds_bucket{le=\"0.001\",model_name=\"tiny\"} 1\n\
goodput_request_queue_time_seconds_bucket{le=\"+Inf\",model_name=\"tiny\"} 2\n\
# EOF\n";
    let s = goodput_client::parse_metrics(ours, Stamp(1)).unwrap();
    assert_eq!(s.histograms["request_queue_time_seconds"], vec![(0.001, 1.0), (f64::INFINITY, 2.0)]);
    assert_eq!(s.gauges["kv_cache_usage_perc"], 0.5);
    assert_eq!(s.sums["request_queue_time_seconds"], 0.1);
}

#[test]
fn request_ids_are_version_4_uuids_that_keep_the_id() {
    use goodput_client::request_id;
    assert_eq!(request_id(26), "00000000-0000-4000-8000-00000000001a");
    // Above 48 bits the id spills into the fourth group, under the variant bits.
    assert_eq!(request_id((1 << 48) + 1), "00000000-0000-4000-8001-000000000001");
    for id in [0, 1, u64::MAX >> 2] {
        let s = request_id(id);
        let groups: Vec<&str> = s.split('-').collect();
        assert_eq!(groups.iter().map(|g| g.len()).collect::<Vec<_>>(), [8, 4, 4, 4, 12], "{s}");
        assert!(s.chars().all(|c| c == '-' || c.is_ascii_hexdigit()), "{s}");
        assert!(groups[2].starts_with('4') && matches!(&groups[3][..1], "8" | "9" | "a" | "b"), "{s}");
    }
}

/// vLLM with a reasoning parser (2026: `delta.reasoning`): reasoning deltas are tokens, the
/// first of them the first token; the answer starts at event 5; usage says 3 of the 5 output
/// tokens were reasoning.
#[tokio::test]
async fn vllm_reasoning_deltas_are_tokens_and_the_answer_starts_later() {
    let (p, end) = replay("vllm-reasoning.sse").await;
    assert_eq!(end, Some(Step::Done));
    assert_eq!((p.text.as_str(), p.reasoning.as_str()), ("Four now", "Let me think."));
    assert_eq!(p.chunks.iter().map(|c| c.at.0).collect::<Vec<_>>(), [2, 3, 4, 5, 6]);
    assert_eq!(p.split.first_answer, Some(Stamp(5)));
    assert_eq!((p.split.chunks, p.split.after_answer), (3, 0));
    assert_eq!((p.http.usage_completion_tokens, p.http.usage_reasoning_tokens), (Some(5), Some(3)));
    // The role-only first event and the usage-only last one carry no token.
    assert_eq!(p.http.empty_events, 2);
}

/// SGLang (`delta.reasoning_content`, top-level `usage.reasoning_tokens`), in a stream that
/// goes back to reasoning after the answer started: still tokens, and counted.
#[tokio::test]
async fn sglang_reasoning_content_and_a_switch_back_to_reasoning_are_counted() {
    let (p, end) = replay("sglang-reasoning-switch.sse").await;
    assert_eq!(end, Some(Step::Done));
    assert_eq!((p.text.as_str(), p.reasoning.as_str()), ("Yes!", "Hmm, wait"));
    assert_eq!(p.chunks.iter().map(|c| c.at.0).collect::<Vec<_>>(), [1, 2, 3, 4, 5]);
    assert_eq!(p.split.first_answer, Some(Stamp(3)));
    assert_eq!((p.split.chunks, p.split.after_answer), (3, 1));
    assert_eq!(p.http.usage_reasoning_tokens, Some(3));
    assert_eq!(p.http.empty_events, 1);
}

/// llama.cpp (`reasoning_content`) cut by `max_tokens` before any answer: two tokens, no
/// answer start.
#[tokio::test]
async fn reasoning_without_an_answer_has_tokens_and_no_answer_start() {
    let (p, end) = replay("llamacpp-reasoning-only.sse").await;
    assert_eq!(end, Some(Step::Done));
    assert_eq!((p.text.as_str(), p.reasoning.as_str()), ("", "Thinking"));
    assert_eq!(p.chunks.len(), 2);
    assert_eq!((p.split.first_answer, p.split.chunks), (None, 2));
    assert_eq!(p.http.empty_events, 1);
}

/// OpenAI's chat with a reasoning model (o-series): the reasoning is hidden — no reasoning
/// delta — and only usage counts it (64 of 66 output tokens). TTFT is the first content chunk
/// (event 2) and holds the thinking; the output is usage's 66.
#[tokio::test]
async fn openai_chat_hides_reasoning_and_counts_it_in_usage() {
    let (p, end) = replay("openai-chat-hidden-reasoning.sse").await;
    assert_eq!(end, Some(Step::Done));
    assert_eq!((p.text.as_str(), p.reasoning.as_str()), ("Paris.", ""));
    assert_eq!(p.chunks.iter().map(|c| c.at.0).collect::<Vec<_>>(), [2, 3]);
    assert_eq!((p.split.first_answer, p.split.chunks), (Some(Stamp(2)), 0));
    assert_eq!((p.http.usage_completion_tokens, p.http.usage_reasoning_tokens), (Some(66), Some(64)));
    assert_eq!(p.http.usage_cached_tokens, Some(0));
    // Role-only opener, the finish chunk with an empty delta, the usage chunk.
    assert_eq!(p.http.empty_events, 3);
}

/// OpenAI's Responses API: typed events; reasoning text and summary deltas are tokens
/// (events 4–6), the answer starts at event 10; the bookkeeping events carry none; the
/// stream ends at `response.completed` (no `[DONE]`) with usage's input, cached, output and
/// reasoning counts.
#[tokio::test]
async fn responses_events_split_reasoning_from_the_answer_and_end_with_usage() {
    let (p, end) = replay("openai-responses.sse").await;
    assert_eq!(end, Some(Step::Done));
    assert_eq!((p.text.as_str(), p.reasoning.as_str()), ("Paris.", "Capital of FranceRecalled it."));
    assert_eq!(p.chunks.iter().map(|c| c.at.0).collect::<Vec<_>>(), [4, 5, 6, 10, 11]);
    assert_eq!((p.split.first_answer, p.split.chunks, p.split.after_answer), (Some(Stamp(10)), 3, 0));
    assert_eq!((p.http.usage_prompt_tokens, p.http.usage_cached_tokens), (Some(14), Some(8)));
    assert_eq!((p.http.usage_completion_tokens, p.http.usage_reasoning_tokens), (Some(7), Some(5)));
    assert_eq!((p.http.done, p.http.empty_events), (Some(Stamp(13)), 0));
}

/// A Responses stream that fails midway: the failure's own message, the token before kept.
#[tokio::test]
async fn a_failed_response_event_fails_the_request_with_its_message() {
    let (p, end) = replay("openai-responses-failed.sse").await;
    assert_eq!(end, Some(Step::Failed(goodput_core::FailureKind::ErrorEvent, "The model ran out of memory".into())));
    assert_eq!((p.text.as_str(), p.chunks.len()), ("Par", 1));
}

/// Replays a recorded body (`fixtures/recorded/NAME`, written by
/// `scripts/record-vllm-streams.sh`): its comment lines are SSE comments, skipped.
async fn recorded(name: &str) -> (StreamParser, Option<Step>) {
    replay(&format!("recorded/{name}")).await
}

#[tokio::test]
async fn recorded_vllm_completions_stream_counts_its_tokens_and_usage() {
    let (p, end) = recorded("vllm-completions-usage.sse").await;
    assert_eq!(end, Some(Step::Done));
    // Six tokens asked with ignore_eos: six text chunks, then the usage-only chunk.
    assert_eq!(p.chunks.len(), 6);
    assert_eq!(p.text, " rakukzesokojwuval paqi Rofujqadagxe");
    assert_eq!((p.http.usage_prompt_tokens, p.http.usage_completion_tokens), (Some(8), Some(6)));
    assert_eq!(p.http.empty_events, 1, "the usage chunk carries no content");
}

#[tokio::test]
async fn recorded_vllm_chat_stream_has_a_role_chunk_and_counts_the_template() {
    let (p, end) = recorded("vllm-chat-usage.sse").await;
    assert_eq!(end, Some(Step::Done));
    assert_eq!(p.chunks.len(), 6);
    // The role chunk (empty content) and the usage chunk are not content; the prompt's 29
    // tokens are the user's text under the chat template.
    assert_eq!(p.http.empty_events, 2);
    assert_eq!((p.http.usage_prompt_tokens, p.http.usage_completion_tokens), (Some(29), Some(6)));
}

/// vLLM's reasoning parser with a model that never closes `</think>`: every token streams as
/// `delta.reasoning`, while its usage says `reasoning_tokens: 0` — the stream, not the usage,
/// says how much was reasoning.
#[tokio::test]
async fn recorded_vllm_reasoning_stream_contradicts_its_usage() {
    let (p, end) = recorded("vllm-reasoning-usage.sse").await;
    assert_eq!(end, Some(Step::Done));
    assert_eq!(p.split.chunks, 8, "eight reasoning chunks");
    assert!(p.text.is_empty() && p.split.first_answer.is_none(), "no answer: {}", p.text);
    assert_eq!(p.http.usage_completion_tokens, Some(8));
    assert_eq!(p.http.usage_reasoning_tokens, Some(0));
}

#[test]
fn recorded_vllm_error_names_the_limit() {
    let path = format!("{}/tests/fixtures/recorded/vllm-error-too-long.json", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(path).unwrap();
    let body = text.lines().filter(|l| !l.starts_with(':') && !l.is_empty()).collect::<String>();
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["error"]["code"], 400);
    assert!(v["error"]["message"].as_str().unwrap().contains("max_model_len=2048"));
}

/// goodput's own server (`scripts/record-goodput-streams.sh`): token ids per chunk, chunks of
/// whole characters (tokens held until their bytes make one), the engine's stamps in the
/// `goodput` object of the usage chunk.
#[tokio::test]
async fn recorded_goodput_completions_carry_token_ids_and_engine_stamps() {
    let (p, end) = recorded("goodput-completions-usage.sse").await;
    assert_eq!(end, Some(Step::Done));
    assert_eq!(p.token_ids.as_ref().map(Vec::len), Some(6), "six ids over the chunks");
    assert_eq!(p.chunks.iter().map(|c| c.tokens).sum::<u32>(), 6);
    assert!(p.chunks.len() < 6, "ids held until they make whole characters: {} chunks", p.chunks.len());
    assert_eq!((p.http.usage_prompt_tokens, p.http.usage_completion_tokens), (Some(8), Some(6)));
    let t = p.http.server.as_ref().expect("the goodput object");
    assert_eq!((t.prompt_tokens, t.generated_tokens), (8, 6));
}

#[tokio::test]
async fn recorded_goodput_chat_counts_its_template() {
    let (p, end) = recorded("goodput-chat-usage.sse").await;
    assert_eq!(end, Some(Step::Done));
    assert_eq!(p.http.usage_completion_tokens, Some(6));
    // 24 bytes of text under the tiny model's byte-level tokenizer and its chat template.
    assert_eq!(p.http.usage_prompt_tokens, Some(74));
    assert!(p.http.server.is_some());
}
