//! A reasoning model's stream through the whole HTTP target, from a loopback server that
//! answers every request with vLLM's recorded reasoning stream: the record's first chunk is
//! the first reasoning token, the answer's start is kept apart, the client's own count covers
//! reasoning and answer (as `usage.completion_tokens` does) and agrees with the server's, and
//! the ids a conversation would re-send are the answer's alone. Bounded: one connection.

use goodput_client::{Api, HttpConfig, HttpTarget};
use goodput_core::{Clock, SamplingParams, Target, TextCodec, TokenId, WorkRequest};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// One id per whitespace-separated word (its length), and words of that many `w`s back.
struct Words;

impl TextCodec for Words {
    fn encode(&self, text: &str) -> Result<Vec<TokenId>, goodput_core::CodecError> {
        Ok(text.split_whitespace().map(|w| w.len() as TokenId).collect())
    }
    fn decode(&self, ids: &[TokenId]) -> Result<String, goodput_core::CodecError> {
        Ok(ids.iter().map(|&n| "w".repeat(n as usize)).collect::<Vec<_>>().join(" "))
    }
}

/// Serves `body` as an SSE response to the first request it reads.
async fn server(body: Vec<u8>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let (mut conn, _) = listener.accept().await.unwrap();
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
            match conn.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        );
        let _ = conn.write_all(head.as_bytes()).await;
        let _ = conn.write_all(&body).await;
        let _ = conn.shutdown().await;
    });
    port
}

#[tokio::test]
async fn reasoning_tokens_are_output_counted_with_the_answer_and_kept_out_of_the_history() {
    let body = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/vllm-reasoning.sse")).unwrap();
    let port = server(body).await;
    let cfg = HttpConfig {
        api: Api::Chat,
        codec: Some(Arc::new(Words)),
        timeout: Duration::from_secs(5),
        ..HttpConfig::new(format!("http://127.0.0.1:{port}"), "m")
    };
    let t = HttpTarget::new(cfg, Clock::new()).unwrap();
    let req = WorkRequest { session: None, id: 1, prompt: vec![3, 4], params: SamplingParams::greedy_exact(5) };
    let rec = tokio::time::timeout(Duration::from_secs(10), t.run(req, t.clock().now())).await.unwrap();
    assert!(rec.is_ok(), "{:?}", rec.outcome);
    let http = rec.http.as_ref().unwrap();
    // Three reasoning chunks, then two of the answer: five output tokens, as usage says.
    assert_eq!((rec.chunks.len(), rec.output_tokens), (5, 5));
    let split = rec.reasoning.as_ref().unwrap();
    assert_eq!((split.chunks, split.tokens, http.usage_reasoning_tokens), (3, Some(3), Some(3)));
    assert_eq!(split.first_answer, Some(rec.chunks[3].at));
    // "Let me think." is 3 words, "Four now" 2: the client's count is all 5.
    assert_eq!((http.client_counted_tokens, http.client_counted_reasoning_tokens), (Some(5), Some(3)));
    assert!(http.anomalies.is_empty(), "{:?}", http.anomalies);
    // The answer's ids ("Four", "now"), not the thinking.
    assert_eq!(rec.output_ids, vec![4, 3]);
}
