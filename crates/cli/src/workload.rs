//! `goodput run`'s dataset and trace flags, read into the library's workload spec.

use anyhow::{bail, Result};
use goodput_bench::workload::DatasetSpec;
use goodput_workload::{DatasetFormat, DatasetOptions, Trace, TraceFormat, TraceOptions};
use std::path::PathBuf;
use std::sync::Arc;

#[derive(clap::Args, Debug, Clone, Default)]
pub struct DatasetArgs {
    /// Prompts from a dataset file instead of --scenario's synthetic ones: ShareGPT JSON (the
    /// first human turn, the reply's length as output length) or JSONL (`prompt` or `messages`,
    /// optional `output_tokens`). Lengths are measured with the model's tokenizer (--tokenizer).
    #[arg(long, value_name = "FILE", conflicts_with = "scenario")]
    pub dataset: Option<PathBuf>,
    /// The dataset's layout: sharegpt, jsonl, or auto (JSONL when it starts with `{`).
    #[arg(long, default_value = "auto", value_parser = ["sharegpt", "jsonl", "auto"], requires = "dataset")]
    pub dataset_format: String,
    /// Dataset: every request asks for this many output tokens (default: the reply's length,
    /// or the line's `output_tokens`).
    #[arg(long, requires = "dataset")]
    pub dataset_output_tokens: Option<usize>,
    /// Dataset: leave out prompts shorter than this many tokens.
    #[arg(long, default_value_t = 4, requires = "dataset")]
    pub dataset_min_input: usize,
    /// Dataset: leave out prompts longer than this many tokens (beyond the model's context
    /// they are always left out).
    #[arg(long, requires = "dataset")]
    pub dataset_max_input: Option<usize>,
    /// Dataset: replay whole conversations as sessions, each turn sent with its history
    /// (closed loop; --requests counts conversations).
    #[arg(long, requires = "dataset")]
    pub dataset_sessions: bool,
}

#[derive(clap::Args, Debug, Clone, Default)]
pub struct TraceArgs {
    /// Replay a trace: requests open loop at its times, with its lengths. Mooncake JSONL
    /// (`timestamp` ms, `input_length`, `output_length`, `hash_ids`: equal ids are equal
    /// prompt blocks, so prefix sharing is replayed) or the Azure LLM inference trace CSV
    /// (`TIMESTAMP`, `ContextTokens`, `GeneratedTokens`). One level per --trace-speedup.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["scenario", "dataset", "rate", "burst", "stages"])]
    pub trace: Option<PathBuf>,
    /// The trace's layout: mooncake, azure, or auto (azure when its header names TIMESTAMP).
    #[arg(long, default_value = "auto", value_parser = ["mooncake", "azure", "auto"], requires = "trace")]
    pub trace_format: String,
    /// Replay this many times faster (a level each: 1,2,4).
    #[arg(long, value_delimiter = ',', default_value = "1", requires = "trace")]
    pub trace_speedup: Vec<f64>,
    /// The part of the trace to replay, in seconds from its first request: FROM..TO, FROM..
    /// or ..TO (e.g. 600..1200 or ..300s).
    #[arg(long, value_parser = goodput_bench::workload::parse_window, requires = "trace")]
    pub trace_window: Option<(f64, Option<f64>)>,
    /// Prompt tokens per hash id of a Mooncake trace.
    #[arg(long, default_value_t = 512, requires = "trace")]
    pub trace_block_size: usize,
}

/// `--trace`, read and cut to its window: `None` without one.
pub fn read_trace(a: &TraceArgs, max_len: usize, seed: u64) -> Result<Option<Arc<Trace>>> {
    let Some(path) = &a.trace else { return Ok(None) };
    if a.trace_speedup.is_empty() || a.trace_speedup.iter().any(|x| !(x.is_finite() && (0.001..=10_000.0).contains(x)))
    {
        bail!("--trace-speedup: every speedup must be a number from 0.001 to 10000, got {:?}", a.trace_speedup);
    }
    let format = match a.trace_format.as_str() {
        "mooncake" => TraceFormat::Mooncake,
        "azure" => TraceFormat::Azure,
        _ => TraceFormat::Auto,
    };
    let options = TraceOptions { window: a.trace_window.unwrap_or((0.0, None)), block_size: a.trace_block_size };
    Ok(Some(goodput_bench::workload::read_trace(path, format, options, max_len, seed)?))
}

/// `--dataset`, read and checked: `None` without one.
pub fn read_dataset(a: &DatasetArgs, open_loop: bool) -> Result<Option<DatasetSpec>> {
    let Some(path) = &a.dataset else { return Ok(None) };
    if a.dataset_sessions && open_loop {
        bail!("--dataset-sessions run closed-loop: use --concurrency, not --rate");
    }
    if a.dataset_output_tokens == Some(0) {
        bail!("--dataset-output-tokens must be at least 1");
    }
    let format = match a.dataset_format.as_str() {
        "sharegpt" => DatasetFormat::Sharegpt,
        "jsonl" => DatasetFormat::Jsonl,
        _ => DatasetFormat::Auto,
    };
    let options = DatasetOptions {
        output_tokens: a.dataset_output_tokens,
        min_input: a.dataset_min_input,
        max_input: a.dataset_max_input,
        sessions: a.dataset_sessions,
    };
    Ok(Some(DatasetSpec::read(path, format, options)?))
}
