//! The reasoning split on a real loopback socket: goodput's `reasoning_tokens` extension
//! (streamed and whole) and `think-tags` with a tokenizer that has `<think>`/`</think>`.

mod common;

use common::{events, post, start};
use goodput_server::reasoning::{ReasoningError, ReasoningParser};
use serde_json::Value;
use std::time::Duration;

/// The streamed chunks of `body` (without `[DONE]`) as JSON.
fn chunks(body: &str) -> Vec<Value> {
    let ev = events(body);
    assert_eq!(ev.last().map(String::as_str), Some("[DONE]"), "{body}");
    ev[..ev.len() - 1].iter().map(|e| serde_json::from_str(e).unwrap()).collect()
}

/// Per token chunk: its kind (`reasoning` or `content`) and its token ids.
fn deltas(chunks: &[Value]) -> Vec<(&'static str, usize)> {
    let mut out = Vec::new();
    for c in chunks.iter().filter(|c| !c["choices"].as_array().unwrap().is_empty()) {
        let d = &c["choices"][0]["delta"];
        let ids = c["choices"][0]["token_ids"].as_array().map_or(0, Vec::len);
        for kind in ["reasoning", "content"] {
            if d.get(kind).and_then(Value::as_str).is_some_and(|t| !t.is_empty()) {
                out.push((kind, ids));
            }
        }
    }
    out
}

#[tokio::test]
async fn the_extension_s_prefix_streams_as_reasoning_then_the_answer() {
    let s = start(None, 8, Duration::from_secs(5)).await;
    let body = r#"{"model":"tiny","messages":[{"role":"user","content":"Hi"}],"max_completion_tokens":8,
        "temperature":0,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true},
        "return_token_ids":true,"goodput":{"reasoning_tokens":5}}"#;
    let (st, _, text) = post(&s.url("/v1/chat/completions"), body).await;
    assert_eq!(st, 200, "{text}");
    let c = chunks(&text);
    // The first chunk carries the role and reasoning; reasoning never follows the answer.
    assert_eq!(c[0]["choices"][0]["delta"]["role"], "assistant");
    assert!(c[0]["choices"][0]["delta"].get("reasoning").is_some(), "{}", c[0]);
    let d = deltas(&c);
    let first_answer = d.iter().position(|x| x.0 == "content").expect("an answer");
    assert!(d[first_answer..].iter().all(|x| x.0 == "content"), "{d:?}");
    // 8 tokens, 5 reasoning: the reasoning chunks' ids are at most 5 (a byte held across the
    // switch goes with the answer), all ids are 8; usage says 5 of 8.
    let reasoning_ids: usize = d[..first_answer].iter().map(|x| x.1).sum();
    assert!((1..=5).contains(&reasoning_ids) && d.iter().map(|x| x.1).sum::<usize>() <= 8, "{d:?}");
    let usage = &c.last().unwrap()["usage"];
    assert_eq!(
        (usage["completion_tokens"].as_u64(), usage["completion_tokens_details"]["reasoning_tokens"].as_u64()),
        (Some(8), Some(5))
    );
    // Whole: the message's reasoning apart from its content; completions are never split.
    let whole = body.replace(r#""stream":true,"stream_options":{"include_usage":true},"#, "");
    let (st, _, text) = post(&s.url("/v1/chat/completions"), &whole).await;
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(st, 200, "{text}");
    assert!(v["choices"][0]["message"]["reasoning"].is_string(), "{v}");
    assert_eq!(v["usage"]["completion_tokens_details"]["reasoning_tokens"], 5);
    let cmpl = r#"{"model":"tiny","prompt":[5,6,7],"max_tokens":4,"ignore_eos":true,"goodput":{"reasoning_tokens":2}}"#;
    let (_, _, text) = post(&s.url("/v1/completions"), cmpl).await;
    let v: Value = serde_json::from_str(&text).unwrap();
    assert!(v["usage"].get("completion_tokens_details").is_none(), "{v}");
    // A misspelt extension field is named.
    let bad = r#"{"model":"tiny","prompt":[5],"max_tokens":1,"goodput":{"reasoning_token":2}}"#;
    let (st, _, text) = post(&s.url("/v1/completions"), bad).await;
    assert!(st == 400 && text.contains("reasoning_token"), "{st} {text}");
    s.wait_idle().await;
    s.shutdown().await;
}

/// A word-level tokenizer of the tiny model's 32,000 ids whose last two are `<think>` and
/// `</think>` (special tokens, as Qwen3's).
fn thinking_tokenizer() -> goodput_engine::tokenizer::Tokenizer {
    let n = 32_000u32;
    let mut vocab = serde_json::Map::new();
    for i in 0..n - 2 {
        vocab.insert(format!("w{i}"), i.into());
    }
    vocab.insert("<think>".into(), (n - 2).into());
    vocab.insert("</think>".into(), (n - 1).into());
    let special = |id: u32, content: &str| {
        serde_json::json!({"id": id, "content": content, "single_word": false, "lstrip": false, "rstrip": false,
                           "normalized": false, "special": true})
    };
    let json = serde_json::json!({
        "version": "1.0", "truncation": null, "padding": null,
        "added_tokens": [special(n - 2, "<think>"), special(n - 1, "</think>")],
        "normalizer": null, "pre_tokenizer": {"type": "WhitespaceSplit"}, "post_processor": null,
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": false},
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "w0"}
    });
    let dir = std::env::temp_dir().join(format!("goodput-think-tok-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("tokenizer.json");
    std::fs::write(&path, json.to_string()).unwrap();
    let t = goodput_engine::tokenizer::Tokenizer::from_file(&path).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    t
}

#[test]
fn think_tags_need_the_end_tag_in_the_vocabulary() {
    let bytes = goodput_engine::tokenizer::Tokenizer::byte_level(32_000);
    assert!(matches!(ReasoningParser::named("think-tags", &bytes), Err(ReasoningError::NoEndTag)));
    assert!(matches!(ReasoningParser::named("r1", &bytes), Err(ReasoningError::Unknown(_))));
    let tags = ReasoningParser::named("think-tags", &thinking_tokenizer()).unwrap();
    assert_eq!(tags, ReasoningParser::ThinkTags { start: Some(31_998), end: 31_999 });
}

/// With `think-tags`, a chat output is reasoning up to `</think>` (the template opened
/// `<think>`): usage counts the tokens to the end tag, or all of them when it never comes (as
/// vLLM's `deepseek_r1` parser with dummy weights).
#[tokio::test]
async fn think_tags_count_the_output_before_the_end_tag_as_reasoning() {
    let tok = std::sync::Arc::new(thinking_tokenizer());
    let parser = ReasoningParser::named("think-tags", &tok).unwrap();
    let s = common::start_with_tokenizer(tok, parser).await;
    let body = r#"{"model":"tiny","messages":[{"role":"user","content":"w5 w6"}],"max_tokens":12,"temperature":0,
        "ignore_eos":true,"stream":true,"stream_options":{"include_usage":true},"return_token_ids":true}"#;
    let (st, _, text) = post(&s.url("/v1/chat/completions"), body).await;
    assert_eq!(st, 200, "{text}");
    let c = chunks(&text);
    let ids: Vec<u64> =
        c.iter().filter_map(|c| c["choices"][0]["token_ids"].as_array()).flatten().filter_map(Value::as_u64).collect();
    assert_eq!(ids.len(), 12, "{text}");
    let expected = ids.iter().position(|&i| i == 31_999).map_or(12, |p| p + 1);
    let usage = &c.last().unwrap()["usage"];
    assert_eq!(usage["completion_tokens_details"]["reasoning_tokens"].as_u64(), Some(expected as u64), "{text}");
    assert_eq!(deltas(&c)[0].0, "reasoning");
    s.wait_idle().await;
    s.shutdown().await;
}
