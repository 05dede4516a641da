//! Recorded streams of real servers (vLLM's chat and completions streams, TGI's Messages API
//! and native generate_stream, an error event, a cut stream) through the SSE parser and the
//! client's stream state machine, fed in odd-sized byte chunks as a network delivers them.

use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use goodput_client::{Step, StreamParser};
use goodput_core::Stamp;

/// Feeds `name` in chunks of 7 bytes; returns the parser, how it ended and the events seen.
async fn replay(name: &str) -> (StreamParser, Option<Step>) {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    let raw = std::fs::read(&path).unwrap();
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> = raw.chunks(7).map(|c| Ok(c.to_vec())).collect();
    let mut events = futures_util::stream::iter(chunks).eventsource();
    let mut p = StreamParser::default();
    let mut t = 0;
    while let Some(ev) = events.next().await {
        t += 1;
        match p.event(&ev.unwrap().data, Stamp(t)) {
            Step::More => {}
            end => return (p, Some(end)),
        }
    }
    (p, None)
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
    assert_eq!(end, Some(Step::Failed("The engine is dead".into())));
    assert_eq!(p.chunks.len(), 1);
    // Cut mid-event: the partial event is never delivered, and no end marker came.
    let (p, end) = replay("broken.sse").await;
    assert_eq!(end, None);
    assert_eq!(p.chunks.len(), 1);
    assert!(p.http.done.is_none());
}
