//! Property-based fuzzing of trace and dataset files: Mooncake JSONL lines, Azure CSV rows,
//! ShareGPT arrays and JSONL datasets, mutated structurally (fields deleted, renamed or
//! replaced, integers at every type's edge — `u64::MAX`, `i64::MIN`, `usize::MAX` — floats
//! at 1e300, NaN and beyond-f64 literals) and at the byte level (`goodput-fuzzing`'s
//! `json::mutated`). The property is "no panic, bounded": reading returns Ok or Err; what
//! reads builds into a replay against several context lengths or is refused; every request a
//! built trace or dataset makes fits the context it was built for.
//!
//! Cases: 256 per property (`PROPTEST_CASES=N` for more); failures are not persisted.
//!
//! Finding, fixed: `input_length + output_length` wrapped past the context filter
//! (`u64::MAX + 1`) and the prompt's allocation panicked ("capacity overflow"); the dataset's
//! session context wrapped the same way. Both are checked additions now (the minimal inputs
//! are unit tests in `trace.rs` and `dataset.rs`).

use goodput_core::TextCodec;
use goodput_core::TokenId;
use goodput_fuzzing::json::{edge_int, mutated};
use goodput_fuzzing::{config, temp_path};
use goodput_workload::dataset::{self, Dataset, DatasetFormat, DatasetOptions};
use goodput_workload::trace::{self, Trace, TraceFormat, TraceOptions};
use proptest::prelude::*;
use serde_json::{json, Value};

const KEYS: &[&str] = &[
    "timestamp",
    "input_length",
    "output_length",
    "hash_ids",
    "prompt",
    "messages",
    "output_tokens",
    "role",
    "content",
    "from",
    "value",
    "conversations",
];

fn trace_seeds() -> Vec<Value> {
    vec![
        json!({"timestamp": 0, "input_length": 12, "output_length": 3, "hash_ids": [1, 2]}),
        json!({"timestamp": 1500, "input_length": 700, "output_length": 40, "hash_ids": [1, 2, 9]}),
        json!({"timestamp": 27.5, "input_length": 1, "output_length": 1}),
    ]
}

fn dataset_seeds() -> Vec<Value> {
    vec![
        json!({"prompt": "one two three four", "output_tokens": 5}),
        json!({"messages": [{"role": "user", "content": "a b c d"}, {"role": "assistant", "content": "e f"}]}),
        json!({"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "x y z w v"}],
               "output_tokens": 2}),
    ]
}

/// One token per whitespace-separated word (decoded as one word per id).
struct Words;
impl TextCodec for Words {
    fn encode(&self, text: &str) -> Result<Vec<TokenId>, goodput_core::CodecError> {
        Ok(text.split_whitespace().map(|w| w.len() as TokenId + 3).collect())
    }
    fn decode(&self, ids: &[TokenId]) -> Result<String, goodput_core::CodecError> {
        Ok(vec!["w"; ids.len()].join(" "))
    }
}

/// Several mutated lines, one file.
fn lines(seeds: Vec<Value>) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(mutated(seeds, KEYS), 1..6).prop_map(|ls| ls.join(&b'\n'))
}

/// A line whose lengths are each an edge integer: the wraps the general mutations rarely hit.
fn edge_line() -> impl Strategy<Value = Vec<u8>> {
    (edge_int(), edge_int(), edge_int()).prop_map(|(t, i, o)| {
        let t = if t.as_i64().is_some_and(|t| t < 0) { json!(0) } else { t };
        format!("{{\"timestamp\":{t},\"input_length\":{i},\"output_length\":{o}}}\n{{\"timestamp\":1,\"input_length\":1,\"output_length\":{o}}}")
            .into_bytes()
    })
}

fn check_trace(bytes: &[u8], tag: &str) -> Result<(), TestCaseError> {
    let path = temp_path(tag, "jsonl");
    std::fs::write(&path, bytes).unwrap();
    let read = trace::read(&path, TraceFormat::Auto);
    let _ = std::fs::remove_file(&path);
    let Ok(all) = read else { return Ok(()) };
    for max_len in [2, 2048, usize::MAX] {
        let opts = TraceOptions { window: (0.0, None), block_size: 512 };
        let Ok(t) = Trace::new("fuzz".into(), all.clone(), opts, max_len.min(1 << 16), 3) else { continue };
        prop_assert!(t.span_s.is_finite() && t.rate().is_finite());
        for i in 0..t.entries.len().min(4) {
            let r = t.request(100 + i as u64, i, 1000);
            prop_assert!(r.prompt.len() + r.params.max_tokens <= max_len.min(1 << 16));
        }
        let _ = t.describe();
    }
    Ok(())
}

fn check_dataset(bytes: &[u8], tag: &str, format: DatasetFormat) -> Result<(), TestCaseError> {
    let path = temp_path(tag, "json");
    std::fs::write(&path, bytes).unwrap();
    let read = dataset::read(&path, format);
    let _ = std::fs::remove_file(&path);
    let Ok(convs) = read else { return Ok(()) };
    for (sessions, max_len) in [(false, 16), (true, 2048)] {
        let opts = DatasetOptions { output_tokens: None, min_input: 1, max_input: None, sessions };
        let Ok(d) = Dataset::build("fuzz".into(), convs.clone(), &Words, opts, max_len, 1) else { continue };
        for c in &d.conversations {
            let context: usize = c.iter().map(|t| t.prompt.len() + t.output).sum();
            prop_assert!(context <= max_len, "{context} > {max_len}");
        }
        let _ = (d.request(0), d.describe());
    }
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn a_mooncake_trace_of_any_shape_is_replayed_or_refused(bytes in lines(trace_seeds())) {
        check_trace(&bytes, "trace-any")?;
    }

    #[test]
    fn a_trace_with_edge_lengths_is_replayed_or_refused(bytes in edge_line()) {
        check_trace(&bytes, "trace-edge")?;
    }

    #[test]
    fn an_azure_trace_of_any_rows_is_replayed_or_refused(
        rows in prop::collection::vec(("\\PC{0,30}", edge_int(), edge_int()), 1..5)
    ) {
        let mut text = String::from("TIMESTAMP,ContextTokens,GeneratedTokens\n");
        for (t, i, o) in rows {
            text += &format!("{},{i},{o}\n", t.replace([',', '\n', '"'], " "));
        }
        text += "2023-11-16 18:15:46.6805900,10,2\n";
        check_trace(text.as_bytes(), "trace-azure")?;
    }

    #[test]
    fn a_jsonl_dataset_of_any_shape_is_built_or_refused(bytes in lines(dataset_seeds())) {
        check_dataset(&bytes, "dataset-jsonl", DatasetFormat::Auto)?;
    }

    #[test]
    fn a_sharegpt_dataset_of_any_shape_is_built_or_refused(
        bytes in mutated(vec![json!([{"conversations": [{"from": "human", "value": "a b c"},
                                                        {"from": "gpt", "value": "d e"}]}])], KEYS)
    ) {
        check_dataset(&bytes, "dataset-sharegpt", DatasetFormat::Sharegpt)?;
    }
}
