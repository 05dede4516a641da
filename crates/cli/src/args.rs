//! Arguments shared by the commands that load a model and build an engine.

use clap::Args;
pub use goodput_bench::run::spec::Span;
use goodput_engine::source::{EngineOptions, ModelSource};
pub use goodput_metrics::slo::{parse_duration, parse_duration_or_zero};
use std::path::PathBuf;
use std::time::Duration;

/// Parses a byte size such as `2GiB`, `512MiB`, `1.5GB` or `1000000`.
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    parse_size::parse_size(s).map_err(|e| format!("`{s}` is not a size ({e}); try 2GiB or 512MiB"))
}

#[derive(Args, Debug, Clone)]
pub struct ModelArgs {
    /// Model: a catalog name, a directory, a .gguf file or ORG/NAME.
    ///
    /// Model: a catalog name (`goodput models` lists them), a directory with config.json (and
    /// safetensors, tokenizer.json), a .gguf file, or ORG/NAME in the local Hugging Face cache
    /// (never downloaded). A model named by its files runs on those files unless --weights says
    /// otherwise.
    #[arg(long, short = 'm', default_value = "tiny")]
    pub model: String,
    /// Read the catalog from this TOML file instead of the built-in one.
    #[arg(long)]
    pub catalog: Option<PathBuf>,
    /// Weights: dummy, dummy:SEED, hf, a directory or a .gguf file.
    ///
    /// Weights: `dummy`, `dummy:SEED`, `hf` (local Hugging Face cache, never downloaded), a
    /// directory with safetensors, or a .gguf file (`FILE.gguf:dequant` to run it in f32).
    /// Default: the files --model names, else dummy.
    #[arg(long)]
    pub weights: Option<String>,
    /// Tokenizer: a tokenizer.json, its directory, or ORG/NAME.
    ///
    /// Tokenizer: a tokenizer.json, a directory holding one (with its tokenizer_config.json:
    /// chat template, special tokens), or ORG/NAME in the local Hugging Face cache. Default: the
    /// weights' own; for dummy weights the byte-level scheme (or the catalog model's tokenizer
    /// when its repository is in the local cache, for HTTP targets).
    #[arg(long)]
    pub tokenizer: Option<String>,
    /// Device: cpu, cuda, cuda:N.
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// Dtype: f32, f16, bf16 or fp8.
    ///
    /// Model dtype: f32, f16, bf16 (default: bf16 on CUDA; on CPU bf16 weights with f32
    /// activations where the CPU has avx512_bf16, else f32), or fp8: the dense layers'
    /// projections in e4m3 with per-channel scales, the rest bf16 (on CUDA the decode matmuls
    /// read the e4m3 bytes; on CPU the weights are only rounded, to measure the accuracy).
    #[arg(long)]
    pub dtype: Option<String>,
}

impl ModelArgs {
    /// The model these flags name, as the library takes it.
    pub fn source(&self) -> ModelSource {
        ModelSource {
            model: self.model.clone(),
            catalog: self.catalog.clone(),
            weights: self.weights.clone(),
            tokenizer: self.tokenizer.clone(),
            device: self.device.clone(),
            dtype: self.dtype.clone(),
        }
    }
}

#[derive(Args, Debug, Clone)]
pub struct EngineArgs {
    /// KV pool size in blocks (including the reserved null block).
    #[arg(long)]
    pub kv_blocks: Option<usize>,
    /// KV cache size, e.g. 2GiB (default 1GiB).
    ///
    /// KV pool size as memory, e.g. 2GiB (used when --kv-blocks is not given; 1GiB by
    /// default, or a projection's own pool under `--simulate`).
    #[arg(long, value_name = "SIZE", value_parser = parse_bytes)]
    pub kv_memory: Option<u64>,
    /// Tokens per KV block.
    #[arg(long, default_value_t = 16)]
    pub block_size: usize,
    /// Tokens one engine step holds at most.
    ///
    /// Token budget of one step (prefill chunk tokens + decodes).
    #[arg(long, value_name = "N", default_value_t = 2048)]
    pub max_num_batched_tokens: usize,
    /// Prefill tokens past which a step starts no further prompt (default: 512 on the CPU, none on CUDA).
    ///
    /// The first prompt of a step always starts (chunked by --max-num-batched-tokens); others
    /// join only while the step's prefill tokens are below N. On a CPU, whose prefill time
    /// grows with its tokens whatever the batch, a second long prompt in a step only delays
    /// the first one's first token. A value at least --max-num-batched-tokens lets prompts join
    /// while the budget lasts.
    #[arg(long, value_name = "N")]
    pub max_prefill_tokens: Option<usize>,
    /// Most sequences running at once.
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub max_num_seqs: usize,
    /// Longest sequence (prompt + output); default: the model's context.
    #[arg(long)]
    pub max_model_len: Option<usize>,
    /// Turn the prefix cache off.
    #[arg(long)]
    pub no_prefix_caching: bool,
    /// On CUDA: run every step eagerly instead of replaying steps from CUDA graphs.
    #[arg(long)]
    pub no_cuda_graphs: bool,
    /// On CUDA: replay only decode steps from CUDA graphs; steps with prefill chunks run
    /// eagerly.
    #[arg(long)]
    pub no_mixed_graphs: bool,
    /// On CUDA: long prefill chunks through cuBLAS (matmul, causal softmax, matmul) instead of
    /// the tensor-core prefill kernel.
    #[arg(long)]
    pub no_flash_prefill: bool,
    /// On CUDA: launch every kernel after the previous one has finished, instead of with
    /// programmatic dependent launch (overlapping each kernel's start with the previous one's
    /// end).
    #[arg(long)]
    pub no_pdl: bool,
    /// Test-only: sleep this long before every engine step (a deliberately slowed engine).
    #[arg(long, hide = true, value_parser = crate::args::parse_duration_or_zero, default_value = "0s")]
    pub test_step_delay: std::time::Duration,
}

impl EngineArgs {
    /// The engine's settings these flags give, as the library takes them.
    pub fn options(&self) -> EngineOptions {
        EngineOptions {
            kv_blocks: self.kv_blocks,
            kv_memory: self.kv_memory,
            block_size: self.block_size,
            max_num_batched_tokens: self.max_num_batched_tokens,
            max_prefill_tokens: self.max_prefill_tokens,
            max_num_seqs: self.max_num_seqs,
            max_model_len: self.max_model_len,
            prefix_caching: !self.no_prefix_caching,
            cuda_graphs: !self.no_cuda_graphs,
            mixed_graphs: !self.no_mixed_graphs,
            flash_prefill: !self.no_flash_prefill,
            pdl: !self.no_pdl,
            step_delay: self.test_step_delay,
        }
    }
}

/// CPUs to pin to.
#[derive(Clone, Debug, PartialEq)]
pub struct CpuList(pub Vec<usize>);

pub fn parse_cpus(s: &str) -> Result<CpuList, goodput_core::ValueError> {
    goodput_engine::affinity::parse_cpu_list(s).map(CpuList)
}

pub fn parse_stage(s: &str) -> Result<(usize, Duration), String> {
    let (users, d) = s.split_once('x').ok_or_else(|| format!("stage `{s}`: expected USERSxDURATION, e.g. 10x2m"))?;
    let users: usize = users
        .trim()
        .parse()
        .ok()
        .filter(|&u| u > 0)
        .ok_or_else(|| format!("stage `{s}`: `{users}` is not a positive number of users"))?;
    Ok((users, parse_duration(d).map_err(|e| format!("stage `{s}`: {e}"))?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use goodput_metrics::slo::DurationError;

    #[test]
    fn friendly_values() {
        assert_eq!(parse_duration_or_zero("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration_or_zero("250ms"), Ok(Duration::from_millis(250)));
        assert!(parse_duration_or_zero("5").is_err(), "a unit for anything but zero");
        assert_eq!(parse_bytes("2GiB").unwrap(), 2 << 30);
        assert_eq!(parse_bytes("512MiB").unwrap(), 512 << 20);
        assert!(parse_bytes("lots").unwrap_err().contains("not a size"));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("1e300s"), Err(DurationError::TooLong("1e300s".into())));
        assert!(matches!(parse_duration("1e308m"), Err(DurationError::NotADuration { .. })), "∞ after scaling");
        assert!(parse_duration("0s").is_err() && parse_duration_or_zero("0s").unwrap().is_zero());
        assert!(parse_duration_or_zero("-1s").is_err() && parse_duration("NaNs").is_err());
    }
}
