//! Arguments shared by the commands that load a model and build an engine.

use anyhow::{bail, Context, Result};
use candle_core::{DType, Device};
use clap::Args;
use goodput_core::{Catalog, ModelSpec, WeightsSource};
use goodput_engine::loader::{self, ChatFormat, LoadedModel};
use goodput_engine::model_files::{self, NamedModel};
use goodput_engine::tokenizer::Tokenizer;
use goodput_engine::EngineConfig;
use goodput_metrics::slo::parse_secs;
use std::path::PathBuf;
use std::time::Duration;

/// Parses a byte size such as `2GiB`, `512MiB`, `1.5GB` or `1000000`.
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    parse_size::parse_size(s).map_err(|e| format!("`{s}` is not a size ({e}); try 2GiB or 512MiB"))
}

#[derive(Args, Debug, Clone)]
pub struct ModelArgs {
    /// Model: a catalog name (`goodput models` lists them), a directory with config.json (and
    /// safetensors, tokenizer.json), a .gguf file, or ORG/NAME in the local Hugging Face cache
    /// (never downloaded). A model named by its files runs on those files unless --weights says
    /// otherwise.
    #[arg(long, short = 'm', default_value = "tiny")]
    pub model: String,
    /// Read the catalog from this TOML file instead of the built-in one.
    #[arg(long)]
    pub catalog: Option<PathBuf>,
    /// Weights: `dummy`, `dummy:SEED`, `hf` (local Hugging Face cache, never downloaded), a
    /// directory with safetensors, or a .gguf file (`FILE.gguf:dequant` to run it in f32).
    /// Default: the files --model names, else dummy.
    #[arg(long)]
    pub weights: Option<String>,
    /// Tokenizer: a tokenizer.json, a directory holding one (with its tokenizer_config.json:
    /// chat template, special tokens), or ORG/NAME in the local Hugging Face cache. Default: the
    /// weights' own; for dummy weights the byte-level scheme (or the catalog model's tokenizer
    /// when its repository is in the local cache, for HTTP targets).
    #[arg(long)]
    pub tokenizer: Option<String>,
    /// Device: cpu, cuda, cuda:N.
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// Model dtype: f32, f16, bf16 (default: bf16 on CUDA; on CPU bf16 weights with f32
    /// activations where the CPU has avx512_bf16, else f32), or fp8: the dense layers'
    /// projections in e4m3 with per-channel scales, the rest bf16 (on CUDA the decode matmuls
    /// read the e4m3 bytes; on CPU the weights are only rounded, to measure the accuracy).
    #[arg(long)]
    pub dtype: Option<String>,
}

impl ModelArgs {
    pub fn catalog(&self) -> Result<Catalog> {
        Ok(match &self.catalog {
            Some(p) => Catalog::from_path(p)?,
            None => Catalog::builtin(),
        })
    }

    /// What --model names: the spec and its own weights.
    pub fn named(&self) -> Result<NamedModel> {
        Ok(model_files::resolve(&self.model, &self.catalog()?)?)
    }

    pub fn spec(&self) -> Result<ModelSpec> {
        Ok(self.named()?.spec)
    }

    pub fn device_dtype(&self) -> Result<(Device, DType)> {
        let device = loader::device(&self.device)?;
        let dtype = match &self.dtype {
            Some(d) => loader::parse_precision(d)?.0,
            None => loader::default_dtype(&device),
        };
        Ok((device, dtype))
    }

    /// Whether `--dtype fp8` asks for e4m3 projections.
    pub fn fp8(&self) -> bool {
        self.dtype.as_deref().is_some_and(|d| matches!(loader::parse_precision(d), Ok((_, true))))
    }

    /// Loads the model; RoPE tables cover `max_len` positions. The tokenizer is --tokenizer's,
    /// else the weights' own; dummy weights of a model named by its files run behind that
    /// model's tokenizer (and chat template), as vLLM's `--load-format dummy` does.
    pub fn load(&self, max_len: usize) -> Result<LoadedModel> {
        let named = self.named()?;
        let weights = match &self.weights {
            Some(w) => WeightsSource::parse(w)?,
            None => named.weights.clone(),
        };
        let (device, dtype) = self.device_dtype()?;
        let spec = &named.spec;
        // The tokenizer first: a wrong one is refused in a second, not after the weights load.
        let dummy = matches!(weights, WeightsSource::Dummy { .. });
        let own = if self.tokenizer.is_some() || dummy { self.own_tokenizer(&named)? } else { None };
        if let Some((tok, _)) = &own {
            model_files::check_fits(tok, spec)?;
        }
        let mut l = loader::load(spec, &weights, &device, dtype, max_len)
            .with_context(|| format!("loading model `{}` ({} weights)", spec.name, weights.kind()))?;
        if let Some(w) = quantized_on_cpu(&weights, &device) {
            eprintln!("goodput: warning: {w}");
        }
        if self.fp8() {
            let n = l.model.quantize_fp8()?;
            l.weights_origin = format!("{}; {n} projections in fp8 e4m3, per-channel scales", l.weights_origin);
        }
        if let Some((tok, chat)) = own {
            l.tokenizer = tok;
            if chat.template.is_some() || l.chat.template.is_none() {
                l.chat = chat;
            }
        }
        Ok(l)
    }

    /// --tokenizer's, else the tokenizer of the real weights `--weights` gives (a client's
    /// prompts against a server of those weights are written in their tokens), else of the
    /// files --model names; `None` for a catalog name on dummy weights.
    fn own_tokenizer(&self, named: &NamedModel) -> Result<Option<(Tokenizer, ChatFormat)>> {
        if let Some(t) = &self.tokenizer {
            return Ok(Some(model_files::load_tokenizer(t)?));
        }
        let given = self.weights.as_deref().map(WeightsSource::parse).transpose()?;
        let weights = match given {
            Some(w) if !matches!(w, WeightsSource::Dummy { .. }) => w,
            _ => named.weights.clone(),
        };
        Ok(match &weights {
            WeightsSource::Dir(d) => Some(model_files::load_tokenizer(&d.display().to_string())?),
            WeightsSource::HfCache => named.spec.hf_repo.as_deref().map(model_files::load_tokenizer).transpose()?,
            WeightsSource::Gguf { path, .. } => {
                let src = goodput_engine::weights::GgufSource::open(path, false, DType::F32, Device::Cpu)?;
                let tok =
                    Tokenizer::from_gguf(src.metadata()).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
                let chat = ChatFormat::from_gguf(src.metadata(), &tok);
                Some((tok, chat))
            }
            WeightsSource::Dummy { .. } => None,
        })
    }

    /// The tokenizer of a model served elsewhere: [`ModelArgs::own_tokenizer`], else the
    /// catalog model's in the local Hugging Face cache; `None` when there is none.
    pub fn client_tokenizer(&self) -> Result<Option<Tokenizer>> {
        let named = self.named()?;
        if let Some((tok, _)) = self.own_tokenizer(&named)? {
            return Ok(Some(tok));
        }
        Ok(match &named.spec.hf_repo {
            Some(repo) if model_files::hf_cache_file(repo, "tokenizer.json").is_some() => {
                Some(model_files::load_tokenizer(repo)?.0)
            }
            _ => None,
        })
    }
}

/// The KV memory when `--kv-memory` is not given.
pub const DEFAULT_KV_MEMORY: u64 = 1 << 30;

#[derive(Args, Debug, Clone)]
pub struct EngineArgs {
    /// KV pool size in blocks (including the reserved null block).
    #[arg(long)]
    pub kv_blocks: Option<usize>,
    /// KV pool size as memory, e.g. 2GiB (used when --kv-blocks is not given; 1GiB by
    /// default, or a projection's own pool under `--simulate`).
    #[arg(long, value_parser = parse_bytes)]
    pub kv_memory: Option<u64>,
    /// Tokens per KV block.
    #[arg(long, default_value_t = 16)]
    pub block_size: usize,
    /// Token budget of one step (prefill chunk tokens + decodes).
    #[arg(long, default_value_t = 2048)]
    pub max_num_batched_tokens: usize,
    /// Most sequences running at once.
    #[arg(long, default_value_t = 256)]
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
    /// `--kv-memory`, or its default.
    pub fn kv_memory_bytes(&self) -> u64 {
        self.kv_memory.unwrap_or(DEFAULT_KV_MEMORY)
    }

    /// Process-wide settings that must hold before a model loads (on CUDA the load times the
    /// matmul kernels by launching them): programmatic dependent launch on or off, and where
    /// long prefill chunks go.
    pub fn apply_before_load(&self) {
        goodput_engine::cuda::set_pdl(!self.no_pdl);
        goodput_engine::cuda::set_flash_prefill(!self.no_flash_prefill);
    }

    pub fn config(&self) -> Result<EngineConfig> {
        if self.block_size == 0 {
            bail!("--block-size must be at least 1");
        }
        let bounds = [
            ("--block-size", self.block_size, 1 << 12),
            ("--max-num-seqs", self.max_num_seqs, 1 << 16),
            ("--max-num-batched-tokens", self.max_num_batched_tokens, 1 << 24),
            ("--kv-blocks", self.kv_blocks.unwrap_or(0), 1 << 28),
            ("--max-model-len", self.max_model_len.unwrap_or(0), 1 << 26),
        ];
        if let Some((flag, v, max)) = bounds.into_iter().find(|&(_, v, max)| v > max) {
            bail!("{flag}: {v} is beyond what the engine takes (at most {max})");
        }
        Ok(EngineConfig {
            block_size: self.block_size,
            num_blocks: self.kv_blocks,
            kv_memory: self.kv_memory_bytes(),
            max_num_batched_tokens: self.max_num_batched_tokens,
            max_num_seqs: self.max_num_seqs,
            enable_prefix_caching: !self.no_prefix_caching,
            max_model_len: self.max_model_len,
            cpus: None,
            step_delay: self.test_step_delay,
            cuda_graphs: !self.no_cuda_graphs,
            cuda_mixed_graphs: !self.no_mixed_graphs,
            cuda_pdl: !self.no_pdl,
        })
    }
}

/// A warm-up or cool-down: a count or a time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Span {
    Count(usize),
    Time(Duration),
}

impl Span {
    pub fn count(self) -> usize {
        match self {
            Span::Count(n) => n,
            Span::Time(_) => 0,
        }
    }
    pub fn time(self) -> Duration {
        match self {
            Span::Count(_) => Duration::ZERO,
            Span::Time(d) => d,
        }
    }
    pub fn is_zero(self) -> bool {
        self.count() == 0 && self.time().is_zero()
    }
}

pub fn parse_span(s: &str) -> Result<Span, String> {
    match s.trim().parse::<usize>() {
        Ok(n) => Ok(Span::Count(n)),
        Err(_) => parse_duration(s)
            .map(Span::Time)
            .map_err(|_| format!("`{s}` is neither a count nor a duration (5, 10s, 500ms)")),
    }
}

/// CPUs to pin to.
#[derive(Clone, Debug, PartialEq)]
pub struct CpuList(pub Vec<usize>);

pub fn parse_cpus(s: &str) -> Result<CpuList, String> {
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
    Ok((users, parse_duration(d)?))
}

/// The longest duration any flag takes (a year; the run's own bounds are tighter): beyond it
/// a `Duration` cannot even hold some values (`1e300s`).
const MAX_FLAG_SECS: f64 = 366.0 * 86_400.0;

fn duration_within(s: &str, secs: Option<f64>, example: &str) -> Result<Duration, String> {
    match secs {
        Some(x) if x > MAX_FLAG_SECS => Err(format!("`{s}` is longer than a year, the longest duration goodput takes")),
        Some(x) => Duration::try_from_secs_f64(x).map_err(|_| format!("`{s}` is not a duration ({example})")),
        None => Err(format!("`{s}` is not a duration ({example})")),
    }
}

/// A duration or zero; zero needs no unit (`0`, `0s`).
pub(crate) fn parse_duration_or_zero(s: &str) -> Result<Duration, String> {
    if s.trim() == "0" {
        return Ok(Duration::ZERO);
    }
    duration_within(s, parse_secs(s).filter(|x| *x >= 0.0), "0s, 500ms")
}

/// What to say of quantized GGUF weights run on the CPU: candle's quantized matmul there is
/// far slower than the dense path the same weights take dequantized (SmolLM2-135M Q4_1, two
/// cores, 320-token prompt: prefill 14.3 s against 0.58 s in bf16, decode 17.9 against 79.8
/// tok/s), so a server on it measures the kernel, not serving. `None` for anything else.
pub(crate) fn quantized_on_cpu(weights: &WeightsSource, device: &Device) -> Option<String> {
    match weights {
        WeightsSource::Gguf { path, dequantize: false } if device.is_cpu() => Some(format!(
            "{0}: quantized GGUF weights run on the CPU through candle's quantized matmul, over 20× slower to \
             prefill than dense weights; `--weights {0}:dequant` runs them dequantized (with slightly different \
             numerics: candle also quantizes the activations)",
            path.display()
        )),
        _ => None,
    }
}

pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    duration_within(s, parse_secs(s).filter(|x| *x > 0.0), "120s, 500ms")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantized_gguf_on_the_cpu_is_said_and_nothing_else() {
        let gguf = |dequantize| WeightsSource::Gguf { path: "m.gguf".into(), dequantize };
        let w = quantized_on_cpu(&gguf(false), &Device::Cpu).unwrap();
        assert!(w.starts_with("m.gguf: quantized GGUF") && w.contains("--weights m.gguf:dequant"), "{w}");
        assert!(quantized_on_cpu(&gguf(true), &Device::Cpu).is_none());
        assert!(quantized_on_cpu(&WeightsSource::Dummy { seed: 0 }, &Device::Cpu).is_none());
    }

    #[test]
    fn friendly_values() {
        assert_eq!(parse_duration_or_zero("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration_or_zero("250ms"), Ok(Duration::from_millis(250)));
        assert!(parse_duration_or_zero("5").is_err(), "a unit for anything but zero");
        assert_eq!(parse_bytes("2GiB").unwrap(), 2 << 30);
        assert_eq!(parse_bytes("512MiB").unwrap(), 512 << 20);
        assert!(parse_bytes("lots").unwrap_err().contains("not a size"));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert!(parse_duration("1e300s").unwrap_err().contains("longer than a year"));
        assert!(parse_duration("1e308m").unwrap_err().contains("not a duration"), "∞ after scaling");
        assert!(parse_duration("0s").is_err() && parse_duration_or_zero("0s").unwrap().is_zero());
        assert!(parse_duration_or_zero("-1s").is_err() && parse_duration("NaNs").is_err());
    }
}
