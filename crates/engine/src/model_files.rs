//! A model named by its files instead of a catalog entry: a directory with `config.json`, a
//! GGUF file, or a repository in the local Hugging Face cache; and a tokenizer named apart
//! from the weights (`--tokenizer`), so dummy weights can run behind a real tokenizer as
//! vLLM's `--load-format dummy` does. Nothing is downloaded.

use crate::error::{EngineError, Result};
use crate::loader::ChatFormat;
use crate::tokenizer::{self, Tokenizer};
use crate::weights::GgufSource;
use candle_core::{DType, Device};
use goodput_core::catalog::Architecture;
use goodput_core::{Catalog, ModelSpec, WeightsSource};
use std::path::{Path, PathBuf};

/// What `--model` named: the spec, and the weights its files are (dummy for a catalog name).
#[derive(Clone, Debug)]
pub struct NamedModel {
    pub spec: ModelSpec,
    pub weights: WeightsSource,
    /// Where the spec came from, for messages: `catalog`, a path, or `hf-cache ORG/NAME`.
    pub origin: String,
}

/// Resolves `--model`: a catalog name, a directory with `config.json`, a `.gguf` file, or
/// `ORG/NAME` with its `config.json` in the local Hugging Face cache, in that order.
pub fn resolve(name: &str, catalog: &Catalog) -> Result<NamedModel> {
    let not_in_catalog = match catalog.get(name) {
        Ok(spec) => {
            let weights = WeightsSource::Dummy { seed: 0 };
            return Ok(NamedModel { spec: spec.clone(), weights, origin: "catalog".into() });
        }
        Err(e) => e,
    };
    let path = Path::new(name);
    if path.is_dir() {
        let config = path.join("config.json");
        let text = goodput_core::input::read_text(&config).map_err(|e| {
            EngineError::file("model config", &config, format!("{e} (a model directory needs config.json)"))
        })?;
        let base = path.canonicalize().ok().and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()));
        let spec = ModelSpec::from_hf_config(&base.unwrap_or_else(|| name.to_string()), &text)
            .map_err(|e| EngineError::ModelConfig { path: config.clone(), problem: e.to_string() })?;
        return Ok(NamedModel {
            spec,
            weights: WeightsSource::Dir(path.to_path_buf()),
            origin: path.display().to_string(),
        });
    }
    if path.is_file() && name.ends_with(".gguf") {
        let spec = spec_from_gguf(path)?;
        let weights = WeightsSource::Gguf { path: path.to_path_buf(), dequantize: false };
        return Ok(NamedModel { spec, weights, origin: path.display().to_string() });
    }
    if let Some(config) = hf_cache_file(name, "config.json") {
        let text =
            goodput_core::input::read_text(&config).map_err(|e| EngineError::file("model config", &config, e))?;
        let mut spec = ModelSpec::from_hf_config(name, &text)
            .map_err(|e| EngineError::ModelConfig { path: config.clone(), problem: e.to_string() })?;
        spec.hf_repo = Some(name.to_string());
        return Ok(NamedModel { spec, weights: WeightsSource::HfCache, origin: format!("hf-cache {name}") });
    }
    Err(EngineError::NoModel {
        name: name.into(),
        not_in_catalog: not_in_catalog.to_string(),
        cache: hf_hub::Cache::from_env().path().clone(),
    })
}

/// `file` of repository `repo` in the local Hugging Face cache, if it is there.
pub fn hf_cache_file(repo: &str, file: &str) -> Option<PathBuf> {
    if !repo.contains('/') || repo.starts_with('/') || repo.starts_with('.') {
        return None;
    }
    hf_hub::Cache::from_env().model(repo.to_string()).get(file)
}

/// The spec of a GGUF file from its metadata (llama.cpp's `{arch}.*` keys), named after it.
pub fn spec_from_gguf(path: &Path) -> Result<ModelSpec> {
    let src = GgufSource::open(path, false, DType::F32, Device::Cpu)?;
    let arch = src.arch();
    let architecture = match arch.as_str() {
        "llama" => Architecture::Llama,
        "qwen2" => Architecture::Qwen2,
        other => return Err(EngineError::Architecture { path: path.into(), arch: other.into() }),
    };
    let need = |key: &str| {
        src.md_u32(key).map(|v| v as usize).ok_or_else(|| EngineError::ModelConfig {
            path: path.into(),
            problem: format!("GGUF metadata lacks `{arch}.{key}`"),
        })
    };
    let md = src.metadata();
    let vocab = match md.get(tokenizer::keys::TOKENS).and_then(|v| v.to_vec().ok()) {
        Some(tokens) => tokens.len(),
        None => need("vocab_size")?,
    };
    let (hidden, heads) = (need("embedding_length")?, need("attention.head_count")?);
    let head_dim = src.md_u32("attention.key_length").map(|d| d as usize).filter(|&d| d * heads != hidden);
    let (eos, bos) = tokenizer::gguf_special_ids(md);
    let name = path.file_stem().map_or_else(|| "gguf".into(), |s| s.to_string_lossy().into_owned());
    let spec = ModelSpec {
        name,
        architecture,
        hidden_size: hidden,
        num_layers: need("block_count")?,
        num_heads: heads,
        num_kv_heads: src.md_u32("attention.head_count_kv").map_or(heads, |v| v as usize),
        head_dim,
        intermediate_size: need("feed_forward_length")?,
        vocab_size: vocab,
        max_position_embeddings: need("context_length")?,
        // llama.cpp's own default when a file has none.
        rope_theta: src.md_f32("rope.freq_base").map_or(10_000.0, f64::from),
        rms_norm_eps: src.md_f32("attention.layer_norm_rms_epsilon").map_or(1e-5, f64::from),
        tie_word_embeddings: !src.has_tensor("output.weight"),
        qkv_bias: architecture == Architecture::Qwen2,
        attention_bias: false,
        qk_norm: false,
        attention_sinks: false,
        sliding_window: None,
        layer_types: None,
        rope_scaling: None,
        moe: None,
        mla: None,
        bos_token_id: bos,
        eos_token_id: eos,
        hf_repo: None,
        gguf_file: Some(path.display().to_string()),
    };
    spec.validate().map_err(|e| EngineError::ModelConfig { path: path.into(), problem: e.to_string() })?;
    Ok(spec)
}

/// `--tokenizer`: a `tokenizer.json`, a directory holding one, or `ORG/NAME` in the local
/// Hugging Face cache; with the chat template and special tokens of the `tokenizer_config.json`
/// beside it, where there is one.
pub fn load_tokenizer(arg: &str) -> Result<(Tokenizer, ChatFormat)> {
    let path = Path::new(arg);
    let file = if path.is_file() {
        path.to_path_buf()
    } else if path.is_dir() {
        path.join("tokenizer.json")
    } else if let Some(f) = hf_cache_file(arg, "tokenizer.json") {
        f
    } else {
        return Err(EngineError::NoTokenizer(arg.into()));
    };
    let tok = Tokenizer::from_file(&file)?;
    let config = file.with_file_name("tokenizer_config.json");
    let chat = goodput_core::input::read_text(&config)
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .map_or_else(ChatFormat::default, |v| ChatFormat::from_tokenizer_config(&v));
    let template =
        chat.template.or_else(|| goodput_core::input::read_text(file.with_file_name("chat_template.jinja")).ok());
    Ok((tok, ChatFormat { template, ..chat }))
}

/// Checks a tokenizer's ids fit the model's embedding (a tokenizer of a larger vocabulary
/// would send ids the model has no row for).
pub fn check_fits(tok: &Tokenizer, spec: &ModelSpec) -> Result<()> {
    if tok.vocab_size() > spec.vocab_size {
        return Err(EngineError::TokenizerTooLarge {
            tokens: tok.vocab_size(),
            model: spec.name.clone(),
            vocab: spec.vocab_size,
        });
    }
    Ok(())
}
