//! The model catalog (`models.toml`): architecture shapes and where real weights may be found.
//!
//! The default catalog is compiled into the binary ([`Catalog::builtin`]); another file can be
//! read with [`Catalog::from_path`]. Every entry is validated when the catalog is read, and an
//! error names the entry and the field.

use crate::FieldError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use crate::arch::{LayerKind, MlaSpec, MoeSpec, RopeScaling};

const BUILTIN: &str = include_str!("../models.toml");

#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("cannot read catalog {path}: {err}")]
    Io { path: PathBuf, err: std::io::Error },
    #[error("catalog {origin} is not valid TOML: {message}")]
    Toml { origin: String, message: String },
    #[error("catalog {origin}: unknown top-level key `{key}` (a catalog holds only [models.<name>] tables)")]
    UnknownKey { origin: String, key: String },
    #[error("catalog {origin}: no [models.<name>] table")]
    NoModels { origin: String },
    #[error("catalog {origin}: model `{model}`: {message}")]
    Entry { origin: String, model: String, message: String },
    #[error("unknown model `{name}`; the catalog has: {available}")]
    UnknownModel { name: String, available: String },
}

/// Decoder families the engine runs: the Llama block, and the blocks of 2026 (q/k norms,
/// routed experts, latent attention, sliding windows with sinks).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Architecture {
    /// Llama 2/3, SmolLM2, TinyLlama.
    Llama,
    /// Same block as Llama.
    Mistral,
    /// Llama block with biases on the q, k and v projections.
    Qwen2,
    /// Llama block with a per-head RMSNorm of q and k before RoPE.
    Qwen3,
    /// Qwen3's attention, routed experts (softmax, top k).
    Qwen3Moe,
    /// Llama's attention, eight routed experts, top 2.
    Mixtral,
    /// Multi-head latent attention, routed experts in groups (sigmoid) and a shared expert;
    /// DeepSeek-V3/R1 and Kimi K2.
    DeepseekV3,
    /// Attention with biases and sinks, alternating sliding and full layers, biased experts
    /// with a clamped SwiGLU.
    GptOss,
}

impl Architecture {
    /// The name a catalog and `config.json` use.
    pub fn name(self) -> &'static str {
        match self {
            Self::Llama => "llama",
            Self::Mistral => "mistral",
            Self::Qwen2 => "qwen2",
            Self::Qwen3 => "qwen3",
            Self::Qwen3Moe => "qwen3_moe",
            Self::Mixtral => "mixtral",
            Self::DeepseekV3 => "deepseek_v3",
            Self::GptOss => "gpt_oss",
        }
    }

    /// Whether the family routes to experts (a `moe` table is required).
    pub fn is_moe(self) -> bool {
        matches!(self, Self::Qwen3Moe | Self::Mixtral | Self::DeepseekV3 | Self::GptOss)
    }
}

/// The largest dimension a catalog entry may give (2^31: ten thousand times today's largest).
const MAX_DIM: usize = 1 << 31;
/// The largest model a catalog entry may describe: 2^50 bytes (1 PiB) of f32 weights, so every
/// size computed from a valid entry fits u64 and every tensor's element count fits usize.
const MAX_WEIGHT_BYTES: u64 = 1 << 50;

/// One catalog entry: the shape of a model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSpec {
    #[serde(skip)]
    pub name: String,
    pub architecture: Architecture,
    pub hidden_size: usize,
    pub num_layers: usize,
    pub num_heads: usize,
    pub num_kv_heads: usize,
    /// Defaults to hidden_size / num_heads.
    #[serde(default)]
    pub head_dim: Option<usize>,
    /// The dense MLP's intermediate size (of every layer, or of a MoE model's dense layers).
    pub intermediate_size: usize,
    pub vocab_size: usize,
    pub max_position_embeddings: usize,
    pub rope_theta: f64,
    pub rms_norm_eps: f64,
    pub tie_word_embeddings: bool,
    /// Biases on q/k/v (Qwen2); implied by `architecture = "qwen2"`.
    #[serde(default)]
    pub qkv_bias: bool,
    /// Biases on q, k, v and o (gpt-oss); implied by `architecture = "gpt_oss"`.
    #[serde(default)]
    pub attention_bias: bool,
    /// Per-head RMSNorm of q and k before RoPE; implied by the Qwen3 families.
    #[serde(default)]
    pub qk_norm: bool,
    /// A learned per-head logit that joins each softmax (gpt-oss); implied by `gpt_oss`.
    #[serde(default)]
    pub attention_sinks: bool,
    /// The window of sliding layers, in positions (the query's own included).
    #[serde(default)]
    pub sliding_window: Option<usize>,
    /// Each layer's attention; absent: all sliding if `sliding_window` is set, else all full.
    #[serde(default)]
    pub layer_types: Option<Vec<LayerKind>>,
    #[serde(default)]
    pub rope_scaling: Option<RopeScaling>,
    /// Routed experts; required by (and only for) the MoE families.
    #[serde(default)]
    pub moe: Option<MoeSpec>,
    /// Latent attention; required by (and only for) `deepseek_v3`.
    #[serde(default)]
    pub mla: Option<MlaSpec>,
    #[serde(default)]
    pub bos_token_id: Option<u32>,
    #[serde(default)]
    pub eos_token_id: Option<u32>,
    /// Hugging Face repository of the real weights (looked up in the local cache only).
    #[serde(default)]
    pub hf_repo: Option<String>,
    /// Where a GGUF file of the model may be found (free text).
    #[serde(default)]
    pub gguf_file: Option<String>,
}

impl ModelSpec {
    /// Query/key head dim: `head_dim`, else hidden_size / num_heads; MLA's is nope + rope.
    pub fn head_dim(&self) -> usize {
        match &self.mla {
            Some(m) => m.qk_nope_head_dim + m.qk_rope_head_dim,
            None => self.head_dim.unwrap_or(self.hidden_size / self.num_heads.max(1)),
        }
    }

    /// Dims RoPE rotates per head: all of them, or MLA's RoPE part.
    pub fn rope_dim(&self) -> usize {
        self.mla.as_ref().map_or(self.head_dim(), |m| m.qk_rope_head_dim)
    }

    /// Value head dim (MLA's `v_head_dim`, else the head dim).
    pub fn v_head_dim(&self) -> usize {
        self.mla.as_ref().map_or(self.head_dim(), |m| m.v_head_dim)
    }

    pub fn has_qkv_bias(&self) -> bool {
        self.qkv_bias || self.has_attention_bias() || self.architecture == Architecture::Qwen2
    }

    /// Biases on o too (gpt-oss).
    pub fn has_attention_bias(&self) -> bool {
        self.attention_bias || self.architecture == Architecture::GptOss
    }

    pub fn has_qk_norm(&self) -> bool {
        self.qk_norm || matches!(self.architecture, Architecture::Qwen3 | Architecture::Qwen3Moe)
    }

    pub fn has_sinks(&self) -> bool {
        self.attention_sinks || self.architecture == Architecture::GptOss
    }

    /// The attention of layer `i`.
    pub fn layer_kind(&self, i: usize) -> LayerKind {
        match (&self.layer_types, self.sliding_window) {
            (Some(t), Some(_)) => t.get(i).copied().unwrap_or(LayerKind::Full),
            (None, Some(_)) => LayerKind::Sliding,
            _ => LayerKind::Full,
        }
    }

    /// The window layer `i` attends over, if it slides.
    pub fn window(&self, i: usize) -> Option<usize> {
        (self.layer_kind(i) == LayerKind::Sliding).then_some(self.sliding_window).flatten()
    }

    /// Whether layer `i` routes to experts.
    pub fn is_sparse(&self, i: usize) -> bool {
        self.moe.as_ref().is_some_and(|m| m.is_sparse(i))
    }

    /// Checks the shape is consistent; the message names the field.
    pub fn validate(&self) -> Result<(), FieldError> {
        let positive = [
            ("hidden_size", self.hidden_size),
            ("num_layers", self.num_layers),
            ("num_heads", self.num_heads),
            ("num_kv_heads", self.num_kv_heads),
            ("intermediate_size", self.intermediate_size),
            ("vocab_size", self.vocab_size),
            ("max_position_embeddings", self.max_position_embeddings),
        ];
        for (field, v) in positive {
            if v == 0 {
                return Err(FieldError::new(field, format!("field `{field}` must be positive")));
            }
            if v > MAX_DIM {
                return Err(FieldError::new(
                    field,
                    format!("field `{field}`: {v} is beyond any model (at most {MAX_DIM})"),
                ));
            }
        }
        if let Some(d) = self.head_dim.filter(|&d| d > MAX_DIM) {
            return Err(FieldError::new(
                "head_dim",
                format!("field `head_dim`: {d} is beyond any model (at most {MAX_DIM})"),
            ));
        }
        self.validate_blocks()?;
        let f32_bytes = self.params_wide().saturating_mul(4);
        if f32_bytes > MAX_WEIGHT_BYTES as u128 {
            return Err(FieldError::new(
                "num_layers",
                format!(
                    "the shape has {} parameters, {} bytes in f32: beyond any machine (at most 2^50 bytes)",
                    self.params_wide(),
                    f32_bytes
                ),
            ));
        }
        if self.head_dim.is_none() && self.mla.is_none() && !self.hidden_size.is_multiple_of(self.num_heads) {
            return Err(FieldError::new(
                "num_heads",
                format!("field `num_heads`: {} heads do not divide hidden_size {}", self.num_heads, self.hidden_size),
            ));
        }
        if !self.rope_dim().is_multiple_of(2) || self.head_dim() == 0 {
            return Err(FieldError::new(
                "head_dim",
                format!("field `head_dim`: {} must be even and positive (RoPE rotates pairs)", self.head_dim()),
            ));
        }
        if !self.num_heads.is_multiple_of(self.num_kv_heads) {
            return Err(FieldError::new(
                "num_kv_heads",
                format!(
                    "field `num_kv_heads`: {} kv heads do not divide num_heads {}",
                    self.num_kv_heads, self.num_heads
                ),
            ));
        }
        if !(self.rope_theta.is_finite() && self.rope_theta > 0.0) {
            return Err(FieldError::new(
                "rope_theta",
                format!("field `rope_theta` must be positive, got {}", self.rope_theta),
            ));
        }
        if !(self.rms_norm_eps.is_finite() && self.rms_norm_eps > 0.0) {
            return Err(FieldError::new(
                "rms_norm_eps",
                format!("field `rms_norm_eps` must be positive, got {}", self.rms_norm_eps),
            ));
        }
        if let Some(s) = &self.rope_scaling {
            s.validate()?;
        }
        for (field, id) in [("bos_token_id", self.bos_token_id), ("eos_token_id", self.eos_token_id)] {
            if let Some(id) = id {
                if id as usize >= self.vocab_size {
                    return Err(FieldError::new(
                        field,
                        format!("field `{field}`: {id} is outside the vocabulary ({})", self.vocab_size),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The family's parts present and consistent: experts for the MoE families, latent
    /// attention for DeepSeek-V3, windows with their layer kinds.
    fn validate_blocks(&self) -> Result<(), FieldError> {
        let arch = self.architecture;
        match (&self.moe, arch.is_moe()) {
            (Some(m), true) => m.validate(self.num_layers)?,
            (None, true) => {
                return Err(FieldError::new("moe", format!("architecture `{}` needs a `moe` table", arch.name())))
            }
            (Some(_), false) => {
                return Err(FieldError::new(
                    "moe",
                    format!("field `moe`: architecture `{}` has no experts", arch.name()),
                ))
            }
            (None, false) => {}
        }
        match (&self.mla, arch == Architecture::DeepseekV3) {
            (Some(m), true) => m.validate()?,
            (None, true) => return Err(FieldError::new("mla", "architecture `deepseek_v3` needs an `mla` table")),
            (Some(_), false) => {
                return Err(FieldError::new(
                    "mla",
                    format!("field `mla`: architecture `{}` has no latent attention", arch.name()),
                ))
            }
            (None, false) => {}
        }
        if let Some(w) = self.sliding_window {
            if w == 0 || w > MAX_DIM {
                return Err(FieldError::new("sliding_window", format!("field `sliding_window`: {w} must be positive")));
            }
        }
        match &self.layer_types {
            Some(t) if t.len() != self.num_layers => Err(FieldError::new(
                "layer_types",
                format!("field `layer_types`: {} kinds for {} layers", t.len(), self.num_layers),
            )),
            Some(t) if self.sliding_window.is_none() && t.contains(&LayerKind::Sliding) => {
                Err(FieldError::new("layer_types", "field `layer_types`: sliding layers without a `sliding_window`"))
            }
            _ => Ok(()),
        }
    }
}

/// Where the weights of a run come from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WeightsSource {
    /// Seeded random tensors of the real shapes (vLLM's `--load-format dummy`).
    Dummy { seed: u64 },
    /// A directory with `config.json`, `*.safetensors` and usually `tokenizer.json`.
    Dir(PathBuf),
    /// The model's `hf_repo` in the local Hugging Face cache (never downloaded).
    HfCache,
    /// A GGUF file; `dequantize` runs it in the model dtype instead of quantized matmuls.
    Gguf { path: PathBuf, dequantize: bool },
}

/// Why a `--weights` value names no weights.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WeightsError {
    #[error("weights `{0}`: the seed after `dummy:` must be a whole number")]
    Seed(String),
    #[error("weights `{0}`: no such GGUF file")]
    NoGguf(String),
    #[error("weights `{0}`: expected `dummy`, `dummy:SEED`, `hf`, a .gguf file or a directory with safetensors")]
    Unknown(String),
}

impl WeightsSource {
    /// Parses `dummy`, `dummy:SEED`, `hf`, a `.gguf` file (`PATH` or `PATH:dequant`) or a directory.
    pub fn parse(s: &str) -> Result<Self, WeightsError> {
        if s == "dummy" {
            return Ok(Self::Dummy { seed: 0 });
        }
        if let Some(seed) = s.strip_prefix("dummy:") {
            let seed = seed.parse().map_err(|_| WeightsError::Seed(s.into()))?;
            return Ok(Self::Dummy { seed });
        }
        if s == "hf" {
            return Ok(Self::HfCache);
        }
        let (path, dequantize) = match s.strip_suffix(":dequant") {
            Some(p) => (p, true),
            None => (s, false),
        };
        let p = PathBuf::from(path);
        if path.ends_with(".gguf") {
            if !p.is_file() {
                return Err(WeightsError::NoGguf(path.into()));
            }
            return Ok(Self::Gguf { path: p, dequantize });
        }
        if p.is_dir() {
            return Ok(Self::Dir(p));
        }
        Err(WeightsError::Unknown(s.into()))
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Self::Dummy { .. } => "dummy",
            Self::Dir(_) => "safetensors",
            Self::HfCache => "hf-cache",
            Self::Gguf { dequantize: false, .. } => "gguf",
            Self::Gguf { dequantize: true, .. } => "gguf-dequantized",
        }
    }
}

/// All models of a catalog, by name (sorted).
#[derive(Clone, Debug)]
pub struct Catalog {
    pub origin: String,
    pub models: BTreeMap<String, ModelSpec>,
}

impl Catalog {
    /// The catalog compiled into the binary (the repository's `models.toml`).
    pub fn builtin() -> Self {
        Self::parse(BUILTIN, "<builtin models.toml>").expect("the builtin catalog is validated by a test")
    }

    pub fn from_path(path: &Path) -> Result<Self, CatalogError> {
        let text = crate::input::read_to_string(path, "model catalog", crate::input::MAX_WHOLE_FILE)
            .map_err(|err| CatalogError::Io { path: path.to_path_buf(), err })?;
        Self::parse(&text, &path.display().to_string())
    }

    pub fn parse(text: &str, origin: &str) -> Result<Self, CatalogError> {
        let origin = origin.to_string();
        let table: toml::Table =
            toml::from_str(text).map_err(|e| CatalogError::Toml { origin: origin.clone(), message: e.to_string() })?;
        if let Some(other) = table.keys().find(|k| *k != "models") {
            return Err(CatalogError::UnknownKey { origin, key: other.clone() });
        }
        let models = match table.get("models") {
            Some(toml::Value::Table(t)) if !t.is_empty() => t,
            _ => return Err(CatalogError::NoModels { origin }),
        };
        let mut out = BTreeMap::new();
        for (name, value) in models {
            let entry = |message: String| CatalogError::Entry { origin: origin.clone(), model: name.clone(), message };
            let mut spec: ModelSpec =
                value.clone().try_into().map_err(|e: toml::de::Error| entry(e.message().to_string()))?;
            spec.name = name.clone();
            spec.validate().map_err(|e| entry(e.message))?;
            out.insert(name.clone(), spec);
        }
        Ok(Self { origin, models: out })
    }

    pub fn get(&self, name: &str) -> Result<&ModelSpec, CatalogError> {
        self.models.get(name).ok_or_else(|| CatalogError::UnknownModel {
            name: name.to_string(),
            available: self.models.keys().cloned().collect::<Vec<_>>().join(", "),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_catalog_is_valid_and_has_the_required_models() {
        let c = Catalog::parse(BUILTIN, "builtin").unwrap();
        for m in ["tiny", "smollm2-135m", "qwen2.5-0.5b", "llama-3.2-1b", "llama-3.1-8b", "llama-3.1-70b"] {
            assert!(c.models.contains_key(m), "{m}");
        }
        assert!(c.get("qwen2.5-0.5b").unwrap().has_qkv_bias());
    }

    fn big_entry(hidden: u64, layers: u64, vocab: u64) -> String {
        format!(
            "[models.big]\narchitecture = \"llama\"\nhidden_size = {hidden}\nnum_layers = {layers}\nnum_heads = 8\n\
             num_kv_heads = 8\nintermediate_size = {hidden}\nvocab_size = {vocab}\nmax_position_embeddings = 4096\n\
             rope_theta = 10000.0\nrms_norm_eps = 1e-5\ntie_word_embeddings = false\n"
        )
    }

    #[test]
    fn shapes_whose_sizes_would_overflow_are_refused_by_name() {
        // 2^40 hidden × 2^40 vocabulary: the parameter count wraps u64 (it was then a small
        // number that passed the memory check and panicked in the dummy weights).
        for (text, needle) in [
            (big_entry(1 << 40, 1, 1 << 40), "hidden_size"),
            (big_entry(1 << 30, 1 << 30, 1 << 30), "beyond any machine"),
            (big_entry(1 << 20, 1 << 20, 32000), "beyond any machine"),
        ] {
            let e = Catalog::parse(&text, "t.toml").unwrap_err().to_string();
            assert!(e.contains(needle) && e.contains("big"), "{e}");
        }
        // The largest accepted shapes give sizes that grow with the dtype and never wrap.
        let ok = Catalog::parse(&big_entry(1 << 16, 1 << 10, 1 << 20), "t.toml").unwrap();
        let m = ok.get("big").unwrap();
        assert!(m.weight_bytes(2) < m.weight_bytes(4));
        assert_eq!(m.weight_bytes(4), m.param_count() * 4);
        let huge = ModelSpec { hidden_size: usize::MAX, num_layers: usize::MAX, ..m.clone() };
        assert_eq!(huge.weight_bytes(4), u64::MAX);
        assert_eq!(huge.kv_bytes_per_token(4), u64::MAX);
        let e = Catalog::parse("bogus = 1\n[models.x]\n", "t.toml").unwrap_err().to_string();
        assert!(e.contains("bogus"), "{e}");
    }

    #[test]
    fn parameter_counts_match_the_published_sizes() {
        let c = Catalog::builtin();
        // tiny by hand: embed 32000*256 + 4*(4*256*256 + 3*256*1024 + 2*256) + 256 + lm_head 32000*256
        let tiny = 32000 * 256 + 4 * (4 * 256 * 256 + 3 * 256 * 1024 + 2 * 256) + 256 + 32000 * 256;
        assert_eq!(c.get("tiny").unwrap().param_count(), tiny);
        // Published: SmolLM2-135M has 134,515,008 parameters; Qwen2.5-0.5B 494,032,768; Llama-3.2-1B 1,235,814,400.
        assert_eq!(c.get("smollm2-135m").unwrap().param_count(), 134_515_008);
        assert_eq!(c.get("qwen2.5-0.5b").unwrap().param_count(), 494_032_768);
        assert_eq!(c.get("llama-3.2-1b").unwrap().param_count(), 1_235_814_400);
        assert_eq!(c.get("llama-3.1-8b").unwrap().param_count(), 8_030_261_248);
        // SmolLM2: 2 (K,V) * 30 layers * 3 kv heads * 64 dims * 4 bytes
        assert_eq!(c.get("smollm2-135m").unwrap().kv_bytes_per_token(4), 2 * 30 * 3 * 64 * 4);
    }

    fn entry(extra: &str, drop: &str) -> String {
        let base = "architecture = \"llama\"\nhidden_size = 64\nnum_layers = 2\nnum_heads = 4\nnum_kv_heads = 2\n\
                    intermediate_size = 128\nvocab_size = 300\nmax_position_embeddings = 128\nrope_theta = 10000.0\n\
                    rms_norm_eps = 1e-5\ntie_word_embeddings = false\n";
        let body: String =
            base.lines().filter(|l| drop.is_empty() || !l.starts_with(drop)).map(|l| format!("{l}\n")).collect();
        format!("[models.m]\n{body}{extra}")
    }

    #[test]
    fn bad_entries_name_the_model_and_field() {
        assert!(Catalog::parse(&entry("", ""), "t").is_ok());
        let e = Catalog::parse(&entry("", "hidden_size"), "t").unwrap_err().to_string();
        assert!(e.contains("model `m`") && e.contains("hidden_size"), "{e}");
        let e = Catalog::parse(&(entry("", "num_heads") + "num_heads = 5\n"), "t").unwrap_err().to_string();
        assert!(e.contains("num_heads") && e.contains("do not divide"), "{e}");
        let e =
            Catalog::parse(&(entry("", "architecture") + "architecture = \"gpt2\"\n"), "t").unwrap_err().to_string();
        assert!(e.contains("model `m`") && e.contains("gpt2"), "{e}");
        let e = Catalog::parse(&(entry("", "num_kv_heads") + "num_kv_heads = 3\n"), "t").unwrap_err().to_string();
        assert!(e.contains("num_kv_heads"), "{e}");
        let e = Catalog::parse(&entry("colour = 1\n", ""), "t").unwrap_err().to_string();
        assert!(e.contains("colour"), "{e}");
        let e = Catalog::parse("models = [", "t").unwrap_err().to_string();
        assert!(e.contains("not valid TOML"), "{e}");
        let e = Catalog::parse("x = 1", "t").unwrap_err().to_string();
        assert!(e.contains("unknown top-level key `x`"), "{e}");
        let e = Catalog::parse("", "t").unwrap_err().to_string();
        assert!(e.contains("no [models"), "{e}");
        let e = Catalog::builtin().get("gpt-5").unwrap_err().to_string();
        assert!(e.contains("gpt-5") && e.contains("tiny"), "{e}");
    }

    #[test]
    fn weights_source_parsing() {
        assert_eq!(WeightsSource::parse("dummy").unwrap(), WeightsSource::Dummy { seed: 0 });
        assert_eq!(WeightsSource::parse("dummy:7").unwrap(), WeightsSource::Dummy { seed: 7 });
        assert!(WeightsSource::parse("dummy:x").unwrap_err().to_string().contains("whole number"));
        assert_eq!(WeightsSource::parse("hf").unwrap(), WeightsSource::HfCache);
        assert!(WeightsSource::parse("/nonexistent/m.gguf").unwrap_err().to_string().contains("no such GGUF"));
        assert!(WeightsSource::parse("/nonexistent/dir").is_err());
    }
}
