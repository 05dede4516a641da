//! The client's per-token path without a network: a streamed response's network reads (one
//! SSE event each, as a server writes a token) through the SSE decoder and the stream state
//! machine, per event, for a completions and a chat stream; beside it, the `serde_json::Value`
//! parse of the same event alone (what every event cost before the borrowed fast path), so the
//! ratio is measured side by side.
//!
//! `cargo bench --bench client`. `goodput calibrate` measures the whole client (HTTP, runtime,
//! kernel) against a mock server.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use goodput_client::{SseDecoder, Step, StreamParser, MAX_EVENT_BYTES};
use goodput_core::Stamp;
use std::ops::ControlFlow;
use std::time::Duration;

const COMPLETIONS: &str = r#"{"id":"cmpl-8f1c","object":"text_completion","created":1764680000,"model":"mock","choices":[{"index":0,"text":" the","logprobs":null,"finish_reason":null,"stop_reason":null}],"usage":null}"#;
const CHAT: &str = r#"{"id":"chatcmpl-8f1c","object":"chat.completion.chunk","created":1764680000,"model":"mock","choices":[{"index":0,"delta":{"content":" the"},"logprobs":null,"finish_reason":null}]}"#;

/// `n` network reads, each one event of `data` (an HTTP chunk's payload, as hyper yields it).
fn reads(data: &str, n: usize) -> Vec<Vec<u8>> {
    (0..n).map(|_| format!("data: {data}\n\n").into_bytes()).collect()
}

fn client(c: &mut Criterion) {
    let mut g = c.benchmark_group("client_event");
    g.sample_size(30).warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(2));
    for (name, data) in [("completions", COMPLETIONS), ("chat", CHAT)] {
        let stream = reads(data, 64);
        g.bench_function(BenchmarkId::new("decode_and_parse", name), |b| {
            b.iter(|| {
                let (mut sse, mut p) = (SseDecoder::new(MAX_EVENT_BYTES), StreamParser::default());
                for (i, read) in stream.iter().enumerate() {
                    let _ = sse.feed(read, |d| match p.event(d, Stamp(i as u64)) {
                        Step::More => ControlFlow::Continue(()),
                        _ => ControlFlow::Break(()),
                    });
                }
                assert_eq!(p.chunks.len(), 64);
                p
            })
        });
        g.bench_function(BenchmarkId::new("value_parse_only", name), |b| {
            b.iter(|| {
                for _ in 0..64 {
                    std::hint::black_box(
                        serde_json::from_str::<serde_json::Value>(std::hint::black_box(data)).unwrap(),
                    );
                }
            })
        });
    }
    g.finish();
}

criterion_group!(benches, client);
criterion_main!(benches);
