//! goodput's SSE decoder against `eventsource-stream` (the parser it replaced): the same
//! events, in the same order, from the recorded streams and from generated ones (fields,
//! comments, every line end, a byte-order mark, multi-byte characters), however the bytes are
//! split into chunks. Generated streams end in a line feed: at a stream's very end a lone CR
//! ends a line for goodput (as the format says) while `eventsource-stream` waits for a LF. They
//! open without a byte-order mark, which `eventsource-stream` 0.2.3 panics on (it slices the
//! 3-byte mark at byte 1); goodput drops it (`sse.rs`' own tests).
//!
//! Cases: 256 (`PROPTEST_CASES`), failures not persisted.

use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use goodput_client::{SseDecoder, MAX_EVENT_BYTES};
use goodput_fuzzing::config;
use proptest::prelude::*;
use std::ops::ControlFlow;

fn ours(chunks: &[&[u8]]) -> Vec<String> {
    let mut d = SseDecoder::new(MAX_EVENT_BYTES);
    let mut out = Vec::new();
    for c in chunks {
        let flow = d.feed(c, |e| {
            out.push(e.to_string());
            ControlFlow::Continue(())
        });
        assert_eq!(flow, Ok(ControlFlow::Continue(())));
    }
    out
}

fn theirs(chunks: &[&[u8]]) -> Vec<String> {
    let owned: Vec<Result<Vec<u8>, std::io::Error>> = chunks.iter().map(|c| Ok(c.to_vec())).collect();
    let events = futures_util::stream::iter(owned).eventsource();
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    rt.block_on(events.map(|e| e.unwrap().data).collect())
}

fn split<'a>(bytes: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut at: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    at.sort_unstable();
    let mut out = Vec::new();
    let mut from = 0;
    for a in at.into_iter().chain(std::iter::once(bytes.len())) {
        out.push(&bytes[from..a]);
        from = a;
    }
    out
}

#[test]
fn the_recorded_streams_give_the_same_events() {
    let dir = format!("{}/tests/fixtures", env!("CARGO_MANIFEST_DIR"));
    for name in
        ["vllm-chat.sse", "vllm-completions.sse", "tgi-messages.sse", "tgi-generate-stream.sse", "vllm-error.sse"]
    {
        let raw = std::fs::read(format!("{dir}/{name}")).unwrap();
        for size in [1, 7, 64, raw.len()] {
            let chunks: Vec<&[u8]> = raw.chunks(size).collect();
            let got = ours(&chunks);
            assert!(!got.is_empty(), "{name}");
            assert_eq!(got, theirs(&chunks), "{name} in chunks of {size}");
        }
    }
}

fn piece() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("data: ".to_string()),
        Just("data:".to_string()),
        Just("data".to_string()),
        Just("event: e".to_string()),
        Just("id: 1".to_string()),
        Just("retry: 5".to_string()),
        Just(": comment".to_string()),
        Just(":".to_string()),
        Just("\n".to_string()),
        Just("\r\n".to_string()),
        Just("\r".to_string()),
        Just("\n\n".to_string()),
        Just(" ".to_string()),
        Just("wörld ✓".to_string()),
        "[a-z{}\":, ]{0,12}",
    ]
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn generated_streams_give_the_same_events(
        pieces in prop::collection::vec(piece(), 0..40),
        cuts in prop::collection::vec(any::<usize>(), 0..8),
    ) {
        let text = format!("{}\n", pieces.concat());
        let chunks = split(text.as_bytes(), &cuts);
        prop_assert_eq!(ours(&chunks), theirs(&chunks), "{:?}", text);
    }
}

/// One event of `GOODPUT_MEASURE_MB` MiB (50 by default) in 16 KiB chunks through both
/// decoders (goodput's with its bound raised above the event), timed:
/// `cargo test -p goodput-client --test sse -- --ignored --nocapture measure_one_long_line`.
#[test]
#[ignore = "a measurement"]
fn measure_one_long_line() {
    let mb: usize = std::env::var("GOODPUT_MEASURE_MB").ok().and_then(|v| v.parse().ok()).unwrap_or(50);
    let line = [b"data: ".as_slice(), &vec![b'x'; mb << 20], b"\n\n"].concat();
    let chunks: Vec<&[u8]> = line.chunks(16 << 10).collect();
    let t = std::time::Instant::now();
    let mut d = SseDecoder::new(usize::MAX);
    let mut got = 0;
    for c in &chunks {
        let flow = d.feed(c, |e| {
            got = e.len();
            ControlFlow::Continue(())
        });
        assert_eq!(flow, Ok(ControlFlow::Continue(())));
    }
    eprintln!("goodput's decoder: {mb} MiB line in {} chunks: {:.3} s", chunks.len(), t.elapsed().as_secs_f64());
    assert_eq!(got, mb << 20);
    if std::env::var("GOODPUT_MEASURE_OLD").is_ok() {
        let t = std::time::Instant::now();
        assert_eq!(theirs(&chunks)[0].len(), mb << 20);
        eprintln!("eventsource-stream: {mb} MiB line: {:.3} s", t.elapsed().as_secs_f64());
    }
}
