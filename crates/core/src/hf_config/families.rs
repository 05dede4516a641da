//! The family-specific parts of a `config.json`: experts, latent attention, windows and RoPE
//! scaling, each with the keys its family's transformers config uses. A value goodput's engine
//! does not implement is refused by name, never dropped.

use super::raw::{HfConfig, RopeParameters};
use crate::arch::{ExpertActivation, LayerKind, MlaSpec, MoeSpec, RopeScaling, Scoring};
use crate::catalog::Architecture;
use crate::FieldError;

fn need<T: Copy>(x: Option<T>, key: &str, arch: Architecture) -> Result<T, FieldError> {
    x.ok_or_else(|| FieldError::new(key, format!("`{key}` is missing ({} configs have it)", arch.name())))
}

/// The experts of a MoE family's config (`None` for dense families).
pub(crate) fn moe(c: &HfConfig, arch: Architecture) -> Result<Option<MoeSpec>, FieldError> {
    let base = |experts: Option<usize>, key: &str, size: usize| -> Result<MoeSpec, FieldError> {
        Ok(MoeSpec {
            num_experts: need(experts, key, arch)?,
            experts_per_token: need(c.num_experts_per_tok.or(c.experts_per_token), "num_experts_per_tok", arch)?,
            expert_intermediate_size: size,
            shared_intermediate_size: 0,
            scoring: Scoring::Softmax,
            renormalize: true,
            n_group: 1,
            topk_group: 1,
            routed_scaling_factor: 1.0,
            router_bias: false,
            expert_bias: false,
            activation: ExpertActivation::Swiglu,
            first_dense_layers: 0,
            sparse_step: 1,
            dense_layers: vec![],
        })
    };
    Ok(Some(match arch {
        Architecture::Qwen3Moe => {
            if c.shared_expert_intermediate_size.unwrap_or(0) > 0 {
                return Err(FieldError::new(
                    "shared_expert_intermediate_size",
                    "`shared_expert_intermediate_size`: Qwen3-MoE has no shared expert",
                ));
            }
            MoeSpec {
                renormalize: c.norm_topk_prob.unwrap_or(false),
                sparse_step: c.decoder_sparse_step.unwrap_or(1),
                dense_layers: c.mlp_only_layers.clone().unwrap_or_default(),
                ..base(
                    c.num_experts.or(c.num_local_experts),
                    "num_experts",
                    need(c.moe_intermediate_size, "moe_intermediate_size", arch)?,
                )?
            }
        }
        Architecture::Mixtral => base(c.num_local_experts, "num_local_experts", c.intermediate_size)?,
        Architecture::GptOss => MoeSpec {
            router_bias: true,
            expert_bias: true,
            activation: ExpertActivation::ClampedSwiglu { limit: c.swiglu_limit.unwrap_or(7.0), alpha: 1.702 },
            ..base(c.num_local_experts, "num_local_experts", c.intermediate_size)?
        },
        Architecture::DeepseekV3 => deepseek_moe(c, base(c.n_routed_experts, "n_routed_experts", 0)?)?,
        _ => return Ok(None),
    }))
}

/// DeepSeek-V3's router (`noaux_tc`: sigmoid, grouped, a correction bias) and shared experts.
fn deepseek_moe(c: &HfConfig, base: MoeSpec) -> Result<MoeSpec, FieldError> {
    let arch = Architecture::DeepseekV3;
    if let Some(f) = c.scoring_func.as_deref().filter(|f| *f != "sigmoid") {
        return Err(FieldError::new(
            "scoring_func",
            format!("`scoring_func` `{f}` is not one goodput's engine implements (sigmoid)"),
        ));
    }
    if let Some(m) = c.topk_method.as_deref().filter(|m| *m != "noaux_tc") {
        return Err(FieldError::new(
            "topk_method",
            format!("`topk_method` `{m}` is not one goodput's engine implements (noaux_tc)"),
        ));
    }
    if let Some(f) = c.moe_layer_freq.filter(|&f| f != 1) {
        return Err(FieldError::new(
            "moe_layer_freq",
            format!("`moe_layer_freq` {f} is not supported (DeepSeek-V3 and Kimi K2 have 1)"),
        ));
    }
    let size = need(c.moe_intermediate_size, "moe_intermediate_size", arch)?;
    Ok(MoeSpec {
        expert_intermediate_size: size,
        shared_intermediate_size: size * c.n_shared_experts.unwrap_or(0),
        scoring: Scoring::Sigmoid,
        renormalize: c.norm_topk_prob.unwrap_or(false),
        n_group: c.n_group.unwrap_or(1),
        topk_group: c.topk_group.unwrap_or(1),
        routed_scaling_factor: c.routed_scaling_factor.unwrap_or(1.0),
        first_dense_layers: c.first_k_dense_replace.unwrap_or(0),
        ..base
    })
}

/// DeepSeek-V3's latent attention.
pub(crate) fn mla(c: &HfConfig, arch: Architecture) -> Result<Option<MlaSpec>, FieldError> {
    if arch != Architecture::DeepseekV3 {
        return Ok(None);
    }
    if c.rope_interleave == Some(false) {
        return Err(FieldError::new(
            "rope_interleave",
            "`rope_interleave` false is not supported (DeepSeek-V3 rotates interleaved pairs)",
        ));
    }
    Ok(Some(MlaSpec {
        q_lora_rank: c.q_lora_rank,
        kv_lora_rank: need(c.kv_lora_rank, "kv_lora_rank", arch)?,
        qk_nope_head_dim: need(c.qk_nope_head_dim, "qk_nope_head_dim", arch)?,
        qk_rope_head_dim: need(c.qk_rope_head_dim, "qk_rope_head_dim", arch)?,
        v_head_dim: need(c.v_head_dim, "v_head_dim", arch)?,
    }))
}

/// The window and each layer's kind: gpt-oss's `layer_types`, Mistral's window on every layer,
/// none for Qwen3 unless `use_sliding_window` (refused: its `max_window_layers` rule is not
/// implemented).
pub(crate) fn windows(c: &HfConfig, arch: Architecture) -> Result<(Option<usize>, Option<Vec<LayerKind>>), FieldError> {
    let kinds = match &c.layer_types {
        Some(t) => Some(
            t.iter()
                .map(|k| match k.as_str() {
                    "full_attention" => Ok(LayerKind::Full),
                    "sliding_attention" => Ok(LayerKind::Sliding),
                    other => Err(FieldError::new(
                        "layer_types",
                        format!("`layer_types`: `{other}` is not a layer kind goodput's engine runs"),
                    )),
                })
                .collect::<Result<Vec<_>, _>>()?,
        ),
        None => None,
    };
    match arch {
        Architecture::Qwen2 | Architecture::Qwen3 | Architecture::Qwen3Moe => {
            if c.use_sliding_window == Some(true) {
                return Err(FieldError::new(
                    "use_sliding_window",
                    "`use_sliding_window` true is not supported (Qwen's max_window_layers rule)",
                ));
            }
            Ok((None, None))
        }
        Architecture::GptOss => {
            let w = need(c.sliding_window, "sliding_window", arch)?;
            let kinds = kinds.unwrap_or_else(|| {
                (0..c.num_hidden_layers)
                    .map(|i| if i % 2 == 0 { LayerKind::Sliding } else { LayerKind::Full })
                    .collect()
            });
            Ok((Some(w), Some(kinds)))
        }
        Architecture::Llama | Architecture::DeepseekV3 => Ok((None, None)),
        Architecture::Mistral | Architecture::Mixtral => {
            Ok((c.sliding_window, kinds.filter(|_| c.sliding_window.is_some())))
        }
    }
}

impl RopeParameters {
    /// Llama 3 or YaRN scaling, none for `default`; other kinds are refused by name.
    pub(crate) fn scaling(&self, max_positions: usize) -> Result<Option<RopeScaling>, FieldError> {
        let kind = match self.rope_type.as_deref() {
            None | Some("default") => return Ok(None),
            Some(k @ ("llama3" | "yarn")) => k,
            Some(other) => {
                return Err(FieldError::new(
                    "rope_scaling",
                    format!(
                    "rope_scaling type `{other}` is not one goodput's engine implements (default, llama3 and yarn are)"
                ),
                ))
            }
        };
        let factor = self
            .factor
            .ok_or_else(|| FieldError::new("rope_scaling", format!("rope_scaling ({kind}) has no `factor`")))?;
        let original = match (kind, self.original_max_position_embeddings) {
            (_, Some(o)) => o,
            ("yarn", None) => max_positions,
            _ => {
                return Err(FieldError::new(
                    "rope_scaling",
                    "rope_scaling (llama3) has no `original_max_position_embeddings`",
                ))
            }
        };
        if kind == "llama3" {
            for (k, v) in [("low_freq_factor", self.low_freq_factor), ("high_freq_factor", self.high_freq_factor)] {
                if v.is_none() {
                    return Err(FieldError::new("rope_scaling", format!("rope_scaling (llama3) has no `{k}`")));
                }
            }
        }
        Ok(Some(RopeScaling {
            rope_type: kind.into(),
            factor,
            original_max_position_embeddings: original,
            low_freq_factor: self.low_freq_factor,
            high_freq_factor: self.high_freq_factor,
            beta_fast: self.beta_fast,
            beta_slow: self.beta_slow,
            mscale: self.mscale,
            mscale_all_dim: self.mscale_all_dim,
            attention_factor: self.attention_factor,
            truncate: self.truncate,
        }))
    }
}
