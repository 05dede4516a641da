//! `goodput run`'s lengths, dataset and trace flags, read into the library's workload spec.

use anyhow::Result;
use goodput_bench::workload::DatasetSpec;
use goodput_workload::lengths::{parse_length, Lengths};
use goodput_workload::scenario::LengthDist;
use goodput_workload::{DatasetFormat, DatasetOptions, Trace, TraceFormat, TraceOptions};
use std::path::PathBuf;
use std::sync::Arc;

/// A single-request workload given by its lengths, in place of a scenario file.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct LengthArgs {
    /// Prompt tokens: N, MEAN±SD or MIN..MAX.
    ///
    /// Tokens in each prompt, in place of --scenario: N, MEAN±SD (or MEAN+-SD: normal, within
    /// three deviations) or MIN..MAX (uniform). vLLM: --random-input-len.
    #[arg(long, visible_alias = "random-input-len", value_name = "LEN", value_parser = parse_length)]
    #[arg(requires = "output_len", conflicts_with = "scenario")]
    pub input_len: Option<LengthDist>,
    /// Output tokens: N, MEAN±SD or MIN..MAX.
    ///
    /// Tokens each response is asked for (max_tokens, with ignore_eos): N, MEAN±SD or
    /// MIN..MAX. vLLM: --random-output-len.
    #[arg(long, visible_alias = "random-output-len", value_name = "LEN", value_parser = parse_length)]
    #[arg(requires = "input_len")]
    pub output_len: Option<LengthDist>,
    /// A fixed --input-len or --output-len L drawn uniformly from L×(1−R) to L×(1+R), R from 0
    /// to below 1, as vLLM's random dataset draws it. vLLM: --random-range-ratio.
    #[arg(long, visible_alias = "random-range-ratio", value_name = "R", requires = "input_len")]
    pub range_ratio: Option<f64>,
    /// Tokens of a prefix every prompt shares.
    ///
    /// Tokens every prompt starts with, the same in each (a prefix the server's cache can
    /// hold), before its --input-len tokens. vLLM: --random-prefix-len.
    #[arg(long, visible_alias = "random-prefix-len", value_name = "N", default_value_t = 0, requires = "input_len")]
    pub prefix_len: usize,
}

impl LengthArgs {
    pub fn lengths(&self) -> Result<Option<Lengths>> {
        let (i, o) = (self.input_len.as_ref(), self.output_len.as_ref());
        Ok(Lengths::from_flags(i, o, self.range_ratio, self.prefix_len)?)
    }
}

#[derive(clap::Args, Debug, Clone, Default)]
pub struct DatasetArgs {
    /// Prompts from a ShareGPT or JSONL file.
    ///
    /// Prompts from a dataset file instead of --scenario's synthetic ones: ShareGPT JSON (the
    /// first human turn, the reply's length as output length) or JSONL (`prompt` or `messages`,
    /// optional `output_tokens`). Lengths are measured with the model's tokenizer (--tokenizer).
    #[arg(long, value_name = "FILE", conflicts_with = "scenario")]
    pub dataset: Option<PathBuf>,
    /// The dataset's layout: sharegpt, jsonl, or auto (JSONL when it starts with `{`).
    #[arg(long, default_value = "auto", requires = "dataset")]
    pub dataset_format: DatasetFormat,
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
    /// Replay a Mooncake or Azure trace at its times.
    ///
    /// Replay a trace: requests open loop at its times, with its lengths. Mooncake JSONL
    /// (`timestamp` ms, `input_length`, `output_length`, `hash_ids`: equal ids are equal
    /// prompt blocks, so prefix sharing is replayed) or the Azure LLM inference trace CSV
    /// (`TIMESTAMP`, `ContextTokens`, `GeneratedTokens`). One level per --trace-speedup.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["scenario", "dataset", "rate", "rate_of_limit", "burst", "stages"])]
    pub trace: Option<PathBuf>,
    /// The trace's layout: mooncake, azure, or auto (azure when its header names TIMESTAMP).
    #[arg(long, default_value = "auto", requires = "trace")]
    pub trace_format: TraceFormat,
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
    let options = TraceOptions { window: a.trace_window.unwrap_or((0.0, None)), block_size: a.trace_block_size };
    Ok(Some(goodput_bench::workload::read_trace(path, a.trace_format, options, max_len, seed)?))
}

/// `--dataset`, read and checked: `None` without one.
pub fn read_dataset(a: &DatasetArgs, open_loop: bool) -> Result<Option<DatasetSpec>> {
    let Some(path) = &a.dataset else { return Ok(None) };
    let options = DatasetOptions {
        output_tokens: a.dataset_output_tokens,
        min_input: a.dataset_min_input,
        max_input: a.dataset_max_input,
        sessions: a.dataset_sessions,
    };
    Ok(Some(DatasetSpec::read(path, a.dataset_format, options, open_loop)?))
}
