//! Where a model comes from and how its engine is set up, as plain values: [`ModelSource`]
//! (a catalog name or files, the weights, the tokenizer, the device and dtype) loads the
//! model; [`EngineOptions`] checks the engine's settings into an [`EngineConfig`]. The
//! command line's `--model …` and `--kv-blocks …` flags are turned into these once; every
//! program that embeds goodput builds them directly.

use crate::error::EngineError;
use crate::loader::{self, ChatFormat, LoadedModel};
use crate::model_files::{self, NamedModel};
use crate::tokenizer::Tokenizer;
use crate::EngineConfig;
use candle_core::{DType, Device};
use goodput_core::{Catalog, CatalogError, ModelSpec, WeightsError, WeightsSource};
use std::path::PathBuf;
use std::time::Duration;

/// What failed while naming or loading a model, or checking the engine's settings.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    #[error(transparent)]
    Weights(#[from] WeightsError),
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The weights named were found but did not load.
    #[error("loading model `{model}` ({kind} weights)")]
    Load {
        model: String,
        kind: &'static str,
        #[source]
        cause: EngineError,
    },
    /// An engine setting out of what the engine takes (the flag's name in the message).
    #[error("{0}")]
    Setting(String),
}

/// A model to load: `--model`, `--catalog`, `--weights`, `--tokenizer`, `--device`, `--dtype`.
#[derive(Clone, Debug)]
pub struct ModelSource {
    /// A catalog name, a directory with config.json, a .gguf file, or ORG/NAME in the local
    /// Hugging Face cache.
    pub model: String,
    /// A catalog TOML file instead of the built-in catalog.
    pub catalog: Option<PathBuf>,
    /// `dummy`, `dummy:SEED`, `hf`, a directory, a .gguf (`:dequant`); `None`: the files
    /// `model` names, else dummy.
    pub weights: Option<String>,
    /// A tokenizer.json, a directory holding one, or ORG/NAME in the local cache.
    pub tokenizer: Option<String>,
    /// cpu, cuda, cuda:N.
    pub device: String,
    /// f32, f16, bf16 or fp8; `None`: the device's default.
    pub dtype: Option<String>,
}

impl ModelSource {
    /// `model` (a catalog name, a directory, a .gguf file or ORG/NAME) on the CPU at the
    /// device's default dtype, its own weights (dummy for a catalog name) and tokenizer.
    pub fn new(model: impl Into<String>) -> Self {
        ModelSource {
            model: model.into(),
            catalog: None,
            weights: None,
            tokenizer: None,
            device: "cpu".into(),
            dtype: None,
        }
    }

    pub fn catalog(&self) -> Result<Catalog, SourceError> {
        Ok(match &self.catalog {
            Some(p) => Catalog::from_path(p)?,
            None => Catalog::builtin(),
        })
    }

    /// What `model` names: the spec and its own weights.
    pub fn named(&self) -> Result<NamedModel, SourceError> {
        Ok(model_files::resolve(&self.model, &self.catalog()?)?)
    }

    pub fn spec(&self) -> Result<ModelSpec, SourceError> {
        Ok(self.named()?.spec)
    }

    pub fn device_dtype(&self) -> Result<(Device, DType), SourceError> {
        let device = loader::device(&self.device)?;
        let dtype = match &self.dtype {
            Some(d) => loader::parse_precision(d)?.0,
            None => loader::default_dtype(&device),
        };
        Ok((device, dtype))
    }

    /// Whether the model runs on the CPU (`--device cpu`).
    pub fn on_cpu(&self) -> bool {
        self.device == "cpu"
    }

    /// Whether `dtype` asks for e4m3 projections (`fp8`).
    pub fn fp8(&self) -> bool {
        self.dtype.as_deref().is_some_and(|d| matches!(loader::parse_precision(d), Ok((_, true))))
    }

    /// Loads the model; RoPE tables cover `max_len` positions. The tokenizer is `tokenizer`'s,
    /// else the weights' own; dummy weights of a model named by its files run behind that
    /// model's tokenizer (and chat template), as vLLM's `--load-format dummy` does. What the
    /// caller should be told of the weights (quantized GGUF on the CPU) is in `warnings`.
    pub fn load(&self, max_len: usize, warnings: &mut Vec<String>) -> Result<LoadedModel, SourceError> {
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
        let mut l = loader::load(spec, &weights, &device, dtype, max_len).map_err(|cause| SourceError::Load {
            model: spec.name.clone(),
            kind: weights.kind(),
            cause,
        })?;
        warnings.extend(quantized_on_cpu(&weights, &device));
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

    /// `tokenizer`'s, else the tokenizer of the real weights `weights` gives (a client's
    /// prompts against a server of those weights are written in their tokens), else of the
    /// files `model` names; `None` for a catalog name on dummy weights.
    fn own_tokenizer(&self, named: &NamedModel) -> Result<Option<(Tokenizer, ChatFormat)>, SourceError> {
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
                let src = crate::weights::GgufSource::open(path, false, DType::F32, Device::Cpu)?;
                let tok = Tokenizer::from_gguf(src.metadata())
                    .map_err(|e| EngineError::TokenizerFile { path: path.clone(), reason: e.to_string() })?;
                let chat = ChatFormat::from_gguf(src.metadata(), &tok);
                Some((tok, chat))
            }
            WeightsSource::Dummy { .. } => None,
        })
    }

    /// The tokenizer of a model served elsewhere: the model's own (as [`ModelSource::load`]
    /// picks it), else the catalog model's in the local Hugging Face cache; `None` when there
    /// is none.
    pub fn client_tokenizer(&self) -> Result<Option<Tokenizer>, SourceError> {
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

/// What to say of quantized GGUF weights run on the CPU: candle's quantized matmul there is
/// far slower than the dense path the same weights take dequantized (SmolLM2-135M Q4_1, two
/// cores, 320-token prompt: prefill 14.3 s against 0.58 s in bf16, decode 17.9 against 79.8
/// tok/s), so a server on it measures the kernel, not serving. `None` for anything else.
pub fn quantized_on_cpu(weights: &WeightsSource, device: &Device) -> Option<String> {
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

/// The KV memory when none is given.
pub const DEFAULT_KV_MEMORY: u64 = 1 << 30;

/// The engine's settings as given (`--kv-blocks`, `--block-size`, …), before they are checked
/// into an [`EngineConfig`].
#[derive(Clone, Debug)]
pub struct EngineOptions {
    /// KV pool size in blocks (including the reserved null block).
    pub kv_blocks: Option<usize>,
    /// KV pool size as memory (used when `kv_blocks` is not given; [`DEFAULT_KV_MEMORY`]).
    pub kv_memory: Option<u64>,
    pub block_size: usize,
    pub max_num_batched_tokens: usize,
    /// `--max-prefill-tokens`; `None`: by device (`EngineConfig::prefill_cap`).
    pub max_prefill_tokens: Option<usize>,
    pub max_num_seqs: usize,
    pub max_model_len: Option<usize>,
    pub prefix_caching: bool,
    pub cuda_graphs: bool,
    pub mixed_graphs: bool,
    pub flash_prefill: bool,
    pub pdl: bool,
    /// Sleep this long before every step (a deliberately slowed engine, for tests).
    pub step_delay: Duration,
}

impl EngineOptions {
    /// `kv_memory`, or its default.
    pub fn kv_memory_bytes(&self) -> u64 {
        self.kv_memory.unwrap_or(DEFAULT_KV_MEMORY)
    }

    /// Process-wide settings that must hold before a model loads (on CUDA the load times the
    /// matmul kernels by launching them): programmatic dependent launch on or off, and where
    /// long prefill chunks go.
    pub fn apply_before_load(&self) {
        crate::cuda::set_pdl(self.pdl);
        crate::cuda::set_flash_prefill(self.flash_prefill);
    }

    /// The checked configuration; a setting beyond what the engine takes is refused by its
    /// flag's name.
    pub fn config(&self) -> Result<EngineConfig, SourceError> {
        if self.block_size == 0 {
            return Err(SourceError::Setting("--block-size must be at least 1".into()));
        }
        if self.max_prefill_tokens == Some(0) {
            return Err(SourceError::Setting("--max-prefill-tokens must be at least 1".into()));
        }
        let bounds = [
            ("--block-size", self.block_size, 1 << 12),
            ("--max-num-seqs", self.max_num_seqs, 1 << 16),
            ("--max-num-batched-tokens", self.max_num_batched_tokens, 1 << 24),
            ("--max-prefill-tokens", self.max_prefill_tokens.unwrap_or(0), 1 << 24),
            ("--kv-blocks", self.kv_blocks.unwrap_or(0), 1 << 28),
            ("--max-model-len", self.max_model_len.unwrap_or(0), 1 << 26),
        ];
        if let Some((flag, v, max)) = bounds.into_iter().find(|&(_, v, max)| v > max) {
            return Err(SourceError::Setting(format!("{flag}: {v} is beyond what the engine takes (at most {max})")));
        }
        Ok(EngineConfig {
            block_size: self.block_size,
            num_blocks: self.kv_blocks,
            kv_memory: self.kv_memory_bytes(),
            max_num_batched_tokens: self.max_num_batched_tokens,
            max_prefill_tokens: self.max_prefill_tokens,
            max_num_seqs: self.max_num_seqs,
            enable_prefix_caching: self.prefix_caching,
            max_model_len: self.max_model_len,
            cpus: None,
            step_delay: self.step_delay,
            cuda_graphs: self.cuda_graphs,
            cuda_mixed_graphs: self.mixed_graphs,
            cuda_pdl: self.pdl,
        })
    }
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
    fn settings_beyond_the_engine_are_refused_by_flag() {
        let o = EngineOptions {
            kv_blocks: None,
            kv_memory: None,
            block_size: 16,
            max_num_batched_tokens: 2048,
            max_prefill_tokens: None,
            max_num_seqs: 256,
            max_model_len: None,
            prefix_caching: true,
            cuda_graphs: true,
            mixed_graphs: true,
            flash_prefill: true,
            pdl: true,
            step_delay: Duration::ZERO,
        };
        let c = o.config().unwrap();
        assert_eq!((c.block_size, c.kv_memory, c.enable_prefix_caching), (16, DEFAULT_KV_MEMORY, true));
        let zero = EngineOptions { block_size: 0, ..o.clone() };
        assert!(matches!(zero.config(), Err(SourceError::Setting(m)) if m.contains("--block-size")));
        let no_prefill = EngineOptions { max_prefill_tokens: Some(0), ..o.clone() };
        assert!(
            matches!(no_prefill.config(), Err(SourceError::Setting(m)) if m.contains("--max-prefill-tokens must be at least 1"))
        );
        let huge = EngineOptions { max_prefill_tokens: Some(1 << 25), ..o.clone() };
        assert!(matches!(huge.config(), Err(SourceError::Setting(m)) if m.contains("--max-prefill-tokens: 33554432")));
        let big = EngineOptions { max_num_seqs: 1 << 17, ..o };
        assert!(matches!(big.config(), Err(SourceError::Setting(m)) if m.contains("--max-num-seqs: 131072")));
    }
}
