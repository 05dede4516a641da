//! A [`ModelSpec`] from a model's own `config.json` (as transformers writes it), so a model
//! runs — or is driven over HTTP — without a catalog entry. Llama, Mistral and Qwen2 configs;
//! `rope_theta` at the top level or inside `rope_parameters` (never guessed); Llama 3 RoPE
//! scaling; `eos_token_id` as a number or a list.

use crate::catalog::{Architecture, ModelSpec, RopeScaling};
use serde::Deserialize;

/// The fields of `config.json` a spec is built from; others are ignored.
#[derive(Deserialize)]
struct HfConfig {
    #[serde(default)]
    model_type: Option<String>,
    #[serde(default)]
    architectures: Vec<String>,
    hidden_size: usize,
    num_hidden_layers: usize,
    num_attention_heads: usize,
    #[serde(default)]
    num_key_value_heads: Option<usize>,
    #[serde(default)]
    head_dim: Option<usize>,
    intermediate_size: usize,
    vocab_size: usize,
    max_position_embeddings: usize,
    #[serde(default)]
    rope_theta: Option<f64>,
    #[serde(default)]
    rope_parameters: Option<RopeParameters>,
    rms_norm_eps: f64,
    #[serde(default)]
    tie_word_embeddings: bool,
    #[serde(default)]
    rope_scaling: Option<RopeParameters>,
    #[serde(default)]
    attention_bias: bool,
    #[serde(default)]
    bos_token_id: Option<OneOrMany>,
    #[serde(default)]
    eos_token_id: Option<OneOrMany>,
}

/// `rope_scaling`, or the newer `rope_parameters` (which also holds `rope_theta`).
#[derive(Deserialize)]
struct RopeParameters {
    #[serde(default)]
    rope_theta: Option<f64>,
    #[serde(default, alias = "type")]
    rope_type: Option<String>,
    #[serde(default)]
    factor: Option<f64>,
    #[serde(default)]
    low_freq_factor: Option<f64>,
    #[serde(default)]
    high_freq_factor: Option<f64>,
    #[serde(default)]
    original_max_position_embeddings: Option<usize>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(u32),
    Many(Vec<u32>),
}

impl OneOrMany {
    fn first(self) -> Option<u32> {
        match self {
            OneOrMany::One(x) => Some(x),
            OneOrMany::Many(v) => v.first().copied(),
        }
    }
}

impl RopeParameters {
    /// Llama 3 scaling, none for `default`; other kinds are refused by name.
    fn scaling(&self) -> Result<Option<RopeScaling>, String> {
        match self.rope_type.as_deref() {
            None | Some("default") => Ok(None),
            Some("llama3") => {
                let need = |x: Option<f64>, k: &str| x.ok_or(format!("rope_scaling (llama3) has no `{k}`"));
                Ok(Some(RopeScaling {
                    rope_type: "llama3".into(),
                    factor: need(self.factor, "factor")?,
                    low_freq_factor: need(self.low_freq_factor, "low_freq_factor")?,
                    high_freq_factor: need(self.high_freq_factor, "high_freq_factor")?,
                    original_max_position_embeddings: self
                        .original_max_position_embeddings
                        .ok_or("rope_scaling (llama3) has no `original_max_position_embeddings`")?,
                }))
            }
            Some(other) => Err(format!(
                "rope_scaling type `{other}` is not one goodput's engine implements (default and llama3 are)"
            )),
        }
    }
}

impl ModelSpec {
    /// The spec of the model whose `config.json` is `text`, named `name`. The message of an
    /// error names the field.
    pub fn from_hf_config(name: &str, text: &str) -> Result<ModelSpec, String> {
        let c: HfConfig = serde_json::from_str(text).map_err(|e| format!("config.json: {e}"))?;
        let kind = c.model_type.clone().or_else(|| c.architectures.first().cloned()).unwrap_or_default();
        let architecture = match kind.as_str() {
            "llama" | "LlamaForCausalLM" => Architecture::Llama,
            "mistral" | "MistralForCausalLM" => Architecture::Mistral,
            "qwen2" | "Qwen2ForCausalLM" => Architecture::Qwen2,
            other => {
                return Err(format!(
                    "config.json: model_type `{other}` is not one goodput's engine runs (llama, mistral, qwen2)"
                ))
            }
        };
        if c.attention_bias && architecture != Architecture::Qwen2 {
            return Err(
                "config.json: attention_bias = true (biases on every attention projection) is not supported".into()
            );
        }
        let rope_theta = c
            .rope_theta
            .or_else(|| c.rope_parameters.as_ref()?.rope_theta)
            .ok_or("config.json: no `rope_theta` (nor `rope_parameters.rope_theta`); refusing to guess".to_string())?;
        let scaling = match (&c.rope_scaling, &c.rope_parameters) {
            (Some(s), _) => s.scaling()?,
            (None, Some(p)) => p.scaling()?,
            (None, None) => None,
        };
        let spec = ModelSpec {
            name: name.to_string(),
            architecture,
            hidden_size: c.hidden_size,
            num_layers: c.num_hidden_layers,
            num_heads: c.num_attention_heads,
            num_kv_heads: c.num_key_value_heads.unwrap_or(c.num_attention_heads),
            head_dim: c.head_dim.filter(|&d| d * c.num_attention_heads != c.hidden_size),
            intermediate_size: c.intermediate_size,
            vocab_size: c.vocab_size,
            max_position_embeddings: c.max_position_embeddings,
            rope_theta,
            rms_norm_eps: c.rms_norm_eps,
            tie_word_embeddings: c.tie_word_embeddings,
            qkv_bias: architecture == Architecture::Qwen2,
            rope_scaling: scaling,
            bos_token_id: c.bos_token_id.and_then(OneOrMany::first),
            eos_token_id: c.eos_token_id.and_then(OneOrMany::first),
            hf_repo: None,
            gguf_file: None,
        };
        spec.validate().map_err(|e| format!("config.json: {e}"))?;
        Ok(spec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Catalog;

    /// Llama 3.1 8B's config.json as transformers writes it.
    const LLAMA31_8B: &str = r#"{
      "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
      "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "hidden_act": "silu",
      "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
      "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
      "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
      "pretraining_tp": 1, "rms_norm_eps": 1e-05,
      "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                       "original_max_position_embeddings": 8192, "rope_type": "llama3"},
      "rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
      "transformers_version": "4.43.0.dev0", "use_cache": true, "vocab_size": 128256
    }"#;

    #[test]
    fn llama_3_1_8b_from_its_config_is_the_catalog_s_shape() {
        let from_config = ModelSpec::from_hf_config("meta-llama/Llama-3.1-8B-Instruct", LLAMA31_8B).unwrap();
        let catalog = Catalog::builtin().get("llama-3.1-8b").unwrap().clone();
        let shape = |s: &ModelSpec| (s.param_count(), s.kv_bytes_per_token(2), s.head_dim(), s.rope_scaling.clone());
        assert_eq!(shape(&from_config), shape(&catalog));
        assert_eq!((from_config.bos_token_id, from_config.eos_token_id), (Some(128000), Some(128001)));
        assert_eq!(from_config.name, "meta-llama/Llama-3.1-8B-Instruct");
    }

    #[test]
    fn rope_theta_inside_rope_parameters_and_refusals_by_name() {
        let nested = r#"{"model_type":"llama","hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4,
            "intermediate_size":128,"vocab_size":300,"max_position_embeddings":512,"rms_norm_eps":1e-5,
            "rope_parameters":{"rope_theta":100000.0,"rope_type":"default"},"tie_word_embeddings":true}"#;
        let s = ModelSpec::from_hf_config("t", nested).unwrap();
        assert_eq!((s.rope_theta, s.tie_word_embeddings, s.num_kv_heads), (100000.0, true, 4));
        let no_theta = nested.replace(r#""rope_theta":100000.0,"#, "");
        assert!(ModelSpec::from_hf_config("t", &no_theta).unwrap_err().contains("refusing to guess"));
        let gpt2 = nested.replace(r#""model_type":"llama""#, r#""model_type":"gpt2""#);
        assert!(ModelSpec::from_hf_config("t", &gpt2).unwrap_err().contains("`gpt2`"));
        let yarn = nested.replace(r#""rope_type":"default""#, r#""rope_type":"yarn""#);
        assert!(ModelSpec::from_hf_config("t", &yarn).unwrap_err().contains("`yarn`"));
        let missing = nested.replace(r#""hidden_size":64,"#, "");
        assert!(ModelSpec::from_hf_config("t", &missing).unwrap_err().contains("hidden_size"));
        let bad_heads = nested.replace(r#""num_attention_heads":4"#, r#""num_attention_heads":3"#);
        assert!(ModelSpec::from_hf_config("t", &bad_heads).unwrap_err().contains("config.json"));
    }
}
