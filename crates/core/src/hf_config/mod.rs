//! A [`ModelSpec`] from a model's own `config.json` (as transformers writes it), so a model
//! runs — or is driven over HTTP — without a catalog entry: Llama, Mistral, Qwen2, Qwen3,
//! Qwen3-MoE, Mixtral, DeepSeek-V3 (and Kimi K2, which is its block), gpt-oss. `rope_theta` at
//! the top level or inside `rope_parameters` (never guessed); Llama 3 and YaRN RoPE scaling;
//! `eos_token_id` as a number or a list. A key of the family goodput does not implement is
//! refused by name.

mod families;
mod raw;

use crate::catalog::{Architecture, ModelSpec};
use crate::{FieldError, HfConfigError};
use raw::HfConfig;

/// The family of a `model_type` (or, without one, of the first `architectures` entry).
fn architecture(kind: &str) -> Result<Architecture, FieldError> {
    Ok(match kind {
        "llama" | "LlamaForCausalLM" => Architecture::Llama,
        "mistral" | "MistralForCausalLM" => Architecture::Mistral,
        "qwen2" | "Qwen2ForCausalLM" => Architecture::Qwen2,
        "qwen3" | "Qwen3ForCausalLM" => Architecture::Qwen3,
        "qwen3_moe" | "Qwen3MoeForCausalLM" => Architecture::Qwen3Moe,
        "mixtral" | "MixtralForCausalLM" => Architecture::Mixtral,
        "deepseek_v3" | "kimi_k2" | "DeepseekV3ForCausalLM" => Architecture::DeepseekV3,
        "gpt_oss" | "GptOssForCausalLM" => Architecture::GptOss,
        other => {
            return Err(FieldError::new(
                "model_type",
                format!(
                    "model_type `{other}` is not one goodput's engine runs (llama, mistral, qwen2, qwen3, \
                 qwen3_moe, mixtral, deepseek_v3, kimi_k2, gpt_oss)"
                ),
            ))
        }
    })
}

/// Refusals that hold for every family: an activation other than SiLU, biases where the
/// family has none, quantized checkpoints other than gpt-oss's MXFP4.
fn refusals(c: &HfConfig, arch: Architecture) -> Result<(), FieldError> {
    if let Some(act) = c.hidden_act.as_deref().filter(|a| *a != "silu") {
        return Err(FieldError::new("hidden_act", format!("`hidden_act` `{act}` is not supported (SiLU is)")));
    }
    if c.attention_bias && !matches!(arch, Architecture::Qwen2 | Architecture::GptOss) {
        return Err(FieldError::new(
            "attention_bias",
            "attention_bias = true (biases on every attention projection) is not supported",
        ));
    }
    if let Some(q) = &c.quantization_config {
        let method = q.get("quant_method").and_then(|m| m.as_str()).unwrap_or("?");
        if !(arch == Architecture::GptOss && method == "mxfp4") {
            return Err(FieldError::new(
                "quantization_config",
                format!(
                "`quantization_config`: `{method}` checkpoints are not supported (gpt-oss's mxfp4 is; run bf16 weights)"
            ),
            ));
        }
    }
    Ok(())
}

impl ModelSpec {
    /// The spec of the model whose `config.json` is `text`, named `name`. The message of an
    /// error names the field.
    pub fn from_hf_config(name: &str, text: &str) -> Result<ModelSpec, HfConfigError> {
        let c: HfConfig = serde_json::from_str(text)?;
        let kind = c.model_type.clone().or_else(|| c.architectures.first().cloned()).unwrap_or_default();
        let architecture = architecture(&kind)?;
        refusals(&c, architecture)?;
        let rope_theta = c.rope_theta.or_else(|| c.rope_parameters.as_ref()?.rope_theta).ok_or_else(|| {
            FieldError::new("rope_theta", "no `rope_theta` (nor `rope_parameters.rope_theta`); refusing to guess")
        })?;
        let max = c.max_position_embeddings;
        let scaling = match (&c.rope_scaling, &c.rope_parameters) {
            (Some(s), _) => s.scaling(max)?,
            (None, Some(p)) => p.scaling(max)?,
            (None, None) => None,
        };
        let moe = families::moe(&c, architecture)?;
        let mla = families::mla(&c, architecture)?;
        let (sliding_window, layer_types) = families::windows(&c, architecture)?;
        let spec = ModelSpec {
            name: name.to_string(),
            architecture,
            hidden_size: c.hidden_size,
            num_layers: c.num_hidden_layers,
            num_heads: c.num_attention_heads,
            num_kv_heads: c.num_key_value_heads.unwrap_or(c.num_attention_heads),
            head_dim: c.head_dim.filter(|&d| mla.is_none() && d * c.num_attention_heads != c.hidden_size),
            intermediate_size: c.intermediate_size,
            vocab_size: c.vocab_size,
            max_position_embeddings: max,
            rope_theta,
            rms_norm_eps: c.rms_norm_eps,
            tie_word_embeddings: c.tie_word_embeddings,
            qkv_bias: architecture == Architecture::Qwen2,
            attention_bias: architecture == Architecture::GptOss,
            qk_norm: matches!(architecture, Architecture::Qwen3 | Architecture::Qwen3Moe),
            attention_sinks: architecture == Architecture::GptOss,
            sliding_window,
            layer_types,
            rope_scaling: scaling,
            moe,
            mla,
            bos_token_id: c.bos_token_id.and_then(raw::OneOrMany::first),
            eos_token_id: c.eos_token_id.and_then(raw::OneOrMany::first),
            hf_repo: None,
            gguf_file: None,
        };
        spec.validate()?;
        Ok(spec)
    }
}

#[cfg(test)]
mod tests;
