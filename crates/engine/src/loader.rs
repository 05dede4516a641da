//! Building a runnable model from a catalog entry and a weights source: dummy, a safetensors
//! directory, the local Hugging Face cache (offline), or a GGUF file. Real weights are checked
//! against the catalog entry's shape before anything runs.

use crate::error::{EngineError, Mismatch, Result};
use crate::model::Llama;
use crate::tokenizer::{self, Tokenizer};
use crate::weights::{check_hf_config, mem_available, DummySource, GgufSource, SafetensorsSource, TensorSource};
use candle_core::{DType, Device};
use goodput_core::{ModelSpec, WeightsSource};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// A model ready to run, with its tokenizer.
pub struct LoadedModel {
    pub model: Llama,
    pub tokenizer: Tokenizer,
    /// `dummy`, `safetensors`, `hf-cache`, `gguf`, `gguf-dequantized`.
    pub weights_kind: &'static str,
    /// Where the weights came from (path or description).
    pub weights_origin: String,
    /// The chat template shipped with the weights, and the special tokens templates name.
    pub chat: ChatFormat,
    pub load_secs: f64,
}

impl LoadedModel {
    /// The weights in words: their kind and where they came from (`safetensors (/models/x)`),
    /// or the origin alone where it names its kind already (`dummy (seed 0)`).
    pub fn weights_text(&self) -> String {
        if self.weights_origin.starts_with(self.weights_kind) {
            self.weights_origin.clone()
        } else {
            format!("{} ({})", self.weights_kind, self.weights_origin)
        }
    }
}

/// What a chat template needs from the model: the template (Jinja) and the text of its
/// beginning- and end-of-sequence tokens (Llama 3's templates start with `{{ bos_token }}`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChatFormat {
    pub template: Option<String>,
    pub bos_token: String,
    pub eos_token: String,
}

impl ChatFormat {
    /// From a `tokenizer_config.json`: `chat_template` (a string, or a list of named
    /// templates: the `default` one), `bos_token` and `eos_token` (a string or an object
    /// with `content`).
    pub fn from_tokenizer_config(v: &serde_json::Value) -> Self {
        let token = |k: &str| {
            let t = v.get(k);
            t.and_then(|t| t.as_str().or_else(|| t.get("content")?.as_str())).unwrap_or_default().to_string()
        };
        let template = match v.get("chat_template") {
            Some(serde_json::Value::String(s)) => Some(s.clone()),
            Some(serde_json::Value::Array(named)) => named
                .iter()
                .find(|t| t.get("name").and_then(|n| n.as_str()) == Some("default"))
                .and_then(|t| t.get("template")?.as_str().map(str::to_string)),
            _ => None,
        };
        ChatFormat { template, bos_token: token("bos_token"), eos_token: token("eos_token") }
    }

    /// From GGUF metadata: the template, and the tokens of its bos and eos ids.
    pub fn from_gguf(
        md: &std::collections::HashMap<String, candle_core::quantized::gguf_file::Value>,
        tok: &Tokenizer,
    ) -> Self {
        let (eos, bos) = tokenizer::gguf_special_ids(md);
        let text = |id: Option<u32>| id.and_then(|i| tok.id_to_token(i)).unwrap_or_default();
        ChatFormat { template: tokenizer::gguf_chat_template(md), bos_token: text(bos), eos_token: text(eos) }
    }
}

/// `cpu`, `cuda` or `cuda:N`.
pub fn device(name: &str) -> Result<Device> {
    let unknown_device = |expected| EngineError::Unknown { what: "device", value: name.into(), expected };
    match name {
        "cpu" => Ok(Device::Cpu),
        _ if name == "cuda" || name.starts_with("cuda:") => {
            let ordinal = match name.strip_prefix("cuda:") {
                Some(n) => n.parse().map_err(|_| unknown_device("cuda:N"))?,
                None => 0,
            };
            if !candle_core::utils::cuda_is_available() {
                return Err(EngineError::NoCuda(name.into()));
            }
            Ok(Device::new_cuda(ordinal)?)
        }
        _ => Err(unknown_device("cpu, cuda or cuda:N")),
    }
}

/// The dtype a device runs fastest in: bf16 on CUDA; on CPU bf16 weights (f32 activations)
/// where the CPU has `avx512_bf16`, f32 elsewhere.
pub fn default_dtype(device: &Device) -> DType {
    if !device.is_cpu() || cpu_has_avx512_bf16() {
        DType::BF16
    } else {
        DType::F32
    }
}

/// Whether this CPU has the AVX-512 bf16 dot products (`vdpbf16ps`).
pub fn cpu_has_avx512_bf16() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx512bf16") && std::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// `f32`, `f16`, `bf16`.
pub fn parse_dtype(s: &str) -> Result<DType> {
    match s {
        "f32" => Ok(DType::F32),
        "f16" => Ok(DType::F16),
        "bf16" => Ok(DType::BF16),
        _ => Err(EngineError::Unknown { what: "dtype", value: s.into(), expected: "f32, f16 or bf16" }),
    }
}

/// `--dtype`: the model's dtype, and whether its dense projections go to e4m3 (`fp8`: bf16
/// for everything else, [`crate::fp8`]).
pub fn parse_precision(s: &str) -> Result<(DType, bool)> {
    match s {
        "fp8" => Ok((DType::BF16, true)),
        "f32" | "f16" | "bf16" => Ok((parse_dtype(s)?, false)),
        _ => Err(EngineError::Unknown { what: "dtype", value: s.into(), expected: "f32, f16, bf16 or fp8" }),
    }
}

/// Bytes the weights take once loaded, as the kernels that will run them hold them: gpt-oss's
/// routed experts stay MXFP4 (4.25 bits a weight: a nibble, and a scale byte per 32),
/// everything else in `dtype`; with `packs` (bf16 on a CPU with AVX-512 BF16) every
/// projection also keeps a copy packed for `vdpbf16ps` (2 bytes a weight: the LM head, the
/// attention and MLP projections, the experts the engine multiplies densely), and the largest
/// of them is copied twice more while it is packed (its bf16 values read out, then as bits).
fn loaded_bytes(spec: &ModelSpec, dtype: DType, packs: bool) -> u64 {
    let p = spec.params();
    let gpt_oss = spec.architecture == goodput_core::Architecture::GptOss;
    let mut all = spec.weight_bytes(dtype.size_in_bytes());
    if gpt_oss {
        all = all - p.routed_experts * dtype.size_in_bytes() as u64 + p.routed_experts * 17 / 32;
    }
    if !packs {
        return all;
    }
    let head = (spec.vocab_size as u64).saturating_mul(spec.hidden_size as u64);
    let experts = if gpt_oss { 0 } else { p.routed_experts };
    let packed = [p.attention, p.dense_mlp, p.router, p.shared_experts, experts, head]
        .iter()
        .fold(0u64, |a, &b| a.saturating_add(b));
    let fused_mlp = 2u64.saturating_mul(spec.hidden_size as u64).saturating_mul(spec.intermediate_size as u64);
    let largest = head.max(fused_mlp);
    all.saturating_add(packed.saturating_mul(2)).saturating_add(largest.saturating_mul(4))
}

/// Whether bf16 weights on `device` get the packed copy of [`loaded_bytes`].
fn packs(dtype: DType, device: &Device) -> bool {
    dtype == DType::BF16 && device.is_cpu() && crate::cpu::bf16_dot::available()
}

fn check_fits(spec: &ModelSpec, dtype: DType, device: &Device) -> Result<()> {
    let packed = packs(dtype, device);
    let bytes = loaded_bytes(spec, dtype, packed);
    if let (true, Some(avail)) = (device.is_cpu(), mem_available()) {
        if bytes > avail {
            let how = if packed {
                " (with the copy packed for AVX-512 BF16's vdpbf16ps; --dtype f32 holds less)"
            } else {
                ""
            };
            return Err(EngineError::Memory {
                what: format!("model `{}`", spec.name),
                detail: format!(" of weights in {dtype:?}{how}"),
                needs_gib: bytes as f64 / (1u64 << 30) as f64,
                available_gib: avail as f64 / (1u64 << 30) as f64,
            });
        }
    }
    Ok(())
}

fn dir_tokenizer(dir: &Path, spec: &ModelSpec) -> Result<Tokenizer> {
    let path = dir.join("tokenizer.json");
    if path.is_file() {
        Ok(Tokenizer::from_file(&path)?)
    } else {
        Ok(Tokenizer::try_byte_level(spec.vocab_size)?)
    }
}

/// Loads `spec` from `weights` onto `device`; RoPE tables cover `max_len` positions.
pub fn load(
    spec: &ModelSpec,
    weights: &WeightsSource,
    device: &Device,
    dtype: DType,
    max_len: usize,
) -> Result<LoadedModel> {
    let t0 = Instant::now();
    let (model, tokenizer, origin, chat) = match weights {
        WeightsSource::Dummy { seed } => {
            check_fits(spec, dtype, device)?;
            let mut src = DummySource { seed: *seed, dtype, device: device.clone() };
            let model = Llama::load(spec, &mut src, max_len, device, dtype)?;
            let tok = Tokenizer::try_byte_level(spec.vocab_size)?;
            (model, tok, format!("dummy (seed {seed})"), ChatFormat::default())
        }
        WeightsSource::Dir(dir) => load_dir(spec, dir, device, dtype, max_len)?,
        WeightsSource::HfCache => {
            let repo = spec.hf_repo.clone().ok_or_else(|| EngineError::NoRepo(spec.name.clone()))?;
            let cache = hf_hub::Cache::from_env();
            let cr = cache.model(repo.clone());
            let config = cr
                .get("config.json")
                .ok_or_else(|| EngineError::NotCached { repo: repo.clone(), cache: cache.path().clone() })?;
            let dir = config.parent().map(Path::to_path_buf).unwrap_or_default();
            load_dir(spec, &dir, device, dtype, max_len)?
        }
        WeightsSource::Gguf { path, dequantize } => {
            let mut src = GgufSource::open(path, *dequantize, dtype, device.clone())?;
            check_gguf_shape(spec, &src, path)?;
            let md = src.metadata().clone();
            let tok = Tokenizer::from_gguf(&md)
                .map_err(|e| EngineError::TokenizerFile { path: path.clone(), reason: e.to_string() })?;
            let chat = ChatFormat::from_gguf(&md, &tok);
            let model = Llama::load(spec, &mut src, max_len, device, dtype)?;
            (model, tok, path.display().to_string(), chat)
        }
    };
    Ok(LoadedModel {
        model,
        tokenizer,
        weights_kind: weights.kind(),
        weights_origin: origin,
        chat,
        load_secs: t0.elapsed().as_secs_f64(),
    })
}

type Loaded = (Llama, Tokenizer, String, ChatFormat);

fn load_dir(spec: &ModelSpec, dir: &Path, device: &Device, dtype: DType, max_len: usize) -> Result<Loaded> {
    let config = dir.join("config.json");
    if config.is_file() {
        check_hf_config(spec, &config)?;
    }
    // The tokenizer before the weights: a broken one is refused before gigabytes are read.
    let tok = dir_tokenizer(dir, spec)?;
    let files: Vec<PathBuf> = SafetensorsSource::files_in(dir)?;
    let mut src = SafetensorsSource::open(&files, dtype, device.clone())?;
    check_fits(spec, dtype, device)?;
    let model = Llama::load(spec, &mut src as &mut dyn TensorSource, max_len, device, dtype)?;
    let chat = goodput_core::input::read_text(dir.join("tokenizer_config.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .map_or_else(ChatFormat::default, |v| ChatFormat::from_tokenizer_config(&v));
    // Newer transformers save the template in a file of its own.
    let template = chat.template.or_else(|| goodput_core::input::read_text(dir.join("chat_template.jinja")).ok());
    let chat = ChatFormat { template, ..chat };
    Ok((model, tok, dir.display().to_string(), chat))
}

fn check_gguf_shape(spec: &ModelSpec, src: &GgufSource, path: &Path) -> Result<()> {
    let checks = [
        ("embedding_length", src.md_u32("embedding_length"), spec.hidden_size),
        ("block_count", src.md_u32("block_count"), spec.num_layers),
        ("attention.head_count", src.md_u32("attention.head_count"), spec.num_heads),
        ("attention.head_count_kv", src.md_u32("attention.head_count_kv"), spec.num_kv_heads),
        ("feed_forward_length", src.md_u32("feed_forward_length"), spec.intermediate_size),
    ];
    for (key, got, want) in checks {
        match got {
            Some(g) if g as usize == want => {}
            Some(g) => {
                return Err(Mismatch {
                    path: path.to_path_buf(),
                    field: format!("{}.{key}", src.arch()),
                    found: g.to_string(),
                    model: spec.name.clone(),
                    expected: want.to_string(),
                }
                .into())
            }
            None => {
                let problem = format!("GGUF metadata lacks `{}.{key}`", src.arch());
                return Err(EngineError::ModelConfig { path: path.to_path_buf(), problem });
            }
        }
    }
    if let Some(theta) = src.md_f32("rope.freq_base") {
        if ((theta as f64) - spec.rope_theta).abs() > spec.rope_theta * 1e-6 {
            return Err(Mismatch {
                path: path.to_path_buf(),
                field: "rope.freq_base".into(),
                found: theta.to_string(),
                model: spec.name.clone(),
                expected: spec.rope_theta.to_string(),
            }
            .into());
        }
    }
    Ok(())
}

/// The accelerator's name as its driver reports it (`NVIDIA H200`); `None` on the CPU.
pub fn device_name(device: &Device) -> Option<String> {
    crate::cuda::device_name(device)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn chat_format_from_a_tokenizer_config() {
        let v = json!({
            "bos_token": {"content": "<|begin_of_text|>", "lstrip": false},
            "eos_token": "<|eot_id|>",
            "chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}],
        });
        let f = ChatFormat::from_tokenizer_config(&v);
        assert_eq!(
            f,
            ChatFormat {
                template: Some("D".into()),
                bos_token: "<|begin_of_text|>".into(),
                eos_token: "<|eot_id|>".into()
            }
        );
        let plain = ChatFormat::from_tokenizer_config(&json!({"chat_template": "X", "bos_token": null}));
        assert_eq!((plain.template.as_deref(), plain.bos_token.as_str()), (Some("X"), ""));
    }

    #[test]
    fn byte_level_ids_have_spellings() {
        let t = Tokenizer::byte_level(300);
        assert_eq!(t.id_to_token(1).as_deref(), Some("<s>"));
        assert_eq!(t.id_to_token(t.token_to_id("A").unwrap()).as_deref(), Some("<0x41>"));
        assert_eq!(t.id_to_token(299), None);
    }

    /// bf16 on a CPU with AVX-512 BF16 counts the packed copy (2 bytes a projection weight)
    /// and the largest weight's transient copies: more than f32 for a model whose LM head
    /// is large, as measured (a 0.5 B model peaked at 2.45 GB in bf16 against 2.05 GB in f32).
    #[test]
    fn the_packed_copy_is_counted() {
        let spec = goodput_core::Catalog::builtin().get("qwen2.5-0.5b").unwrap().clone();
        let (plain, packed, f32) = (
            loaded_bytes(&spec, DType::BF16, false),
            loaded_bytes(&spec, DType::BF16, true),
            loaded_bytes(&spec, DType::F32, false),
        );
        assert_eq!(plain * 2, f32);
        let head = spec.vocab_size as u64 * spec.hidden_size as u64;
        assert!(
            packed > f32
                && packed
                    >= plain + 2 * (spec.param_count() - spec.params().embedding - spec.params().norms) + 4 * head,
            "{packed}"
        );
    }
}
