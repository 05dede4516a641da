//! The parts of a decoder block beyond Llama's, as a catalog entry or a `config.json` gives
//! them: routed experts ([`MoeSpec`]), multi-head latent attention ([`MlaSpec`]), each layer's
//! attention kind ([`LayerKind`]) and the RoPE frequency scalings ([`RopeScaling`]). Plain data
//! with its own checks; what they cost (parameters, KV bytes) is `sizes.rs`'s.

use crate::FieldError;
use serde::{Deserialize, Serialize};

/// How a router turns its logits into the experts of a token and their weights.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scoring {
    /// Softmax over all experts, then the top k (Qwen3-MoE, Mixtral). With
    /// [`MoeSpec::renormalize`] the k weights are divided by their sum, which equals a softmax
    /// over the k logits: gpt-oss's rule (top-k of the logits, then softmax) is this one.
    #[default]
    Softmax,
    /// DeepSeek-V3: sigmoid scores; `score + e_score_correction_bias` selects (groups ranked by
    /// the sum of their two best, `topk_group` of `n_group` kept, then the top k), the plain
    /// scores weigh.
    Sigmoid,
}

/// The activation of each expert's MLP.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum ExpertActivation {
    /// `silu(gate) · up`.
    #[default]
    Swiglu,
    /// gpt-oss: `gate.clamp(max = limit)`, `up.clamp(±limit)`, `(up + 1) · gate · σ(alpha · gate)`.
    ClampedSwiglu { limit: f64, alpha: f64 },
}

fn one() -> usize {
    1
}

fn unit() -> f64 {
    1.0
}

/// A mixture-of-experts MLP: which layers have it, the router and the experts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MoeSpec {
    /// Routed experts per sparse layer.
    pub num_experts: usize,
    /// Experts each token is sent to (top k).
    pub experts_per_token: usize,
    /// Intermediate size of one routed expert (the spec's `intermediate_size` is the dense
    /// layers' MLP).
    pub expert_intermediate_size: usize,
    /// Intermediate size of the shared expert every token also goes through (DeepSeek:
    /// `n_shared_experts × moe_intermediate_size`); 0 for none.
    #[serde(default)]
    pub shared_intermediate_size: usize,
    #[serde(default)]
    pub scoring: Scoring,
    /// Divide the k weights by their sum (`norm_topk_prob`).
    #[serde(default)]
    pub renormalize: bool,
    /// Expert groups (DeepSeek `n_group`) and the groups kept (`topk_group`); 1 and 1: none.
    #[serde(default = "one")]
    pub n_group: usize,
    #[serde(default = "one")]
    pub topk_group: usize,
    /// Factor on the routed experts' weights (DeepSeek `routed_scaling_factor`).
    #[serde(default = "unit")]
    pub routed_scaling_factor: f64,
    /// A bias on the router's logits (gpt-oss).
    #[serde(default)]
    pub router_bias: bool,
    /// Biases on the experts' projections (gpt-oss).
    #[serde(default)]
    pub expert_bias: bool,
    #[serde(default)]
    pub activation: ExpertActivation,
    /// The first layers that keep a dense MLP (DeepSeek `first_k_dense_replace`).
    #[serde(default)]
    pub first_dense_layers: usize,
    /// Layer `i` is sparse iff `(i + 1) % sparse_step == 0` (Qwen3-MoE `decoder_sparse_step`).
    #[serde(default = "one")]
    pub sparse_step: usize,
    /// Layers that keep a dense MLP whatever the step (Qwen3-MoE `mlp_only_layers`).
    #[serde(default)]
    pub dense_layers: Vec<usize>,
}

impl MoeSpec {
    /// Whether layer `i` routes to experts (else it has a dense MLP of `intermediate_size`).
    pub fn is_sparse(&self, i: usize) -> bool {
        i >= self.first_dense_layers && !self.dense_layers.contains(&i) && (i + 1).is_multiple_of(self.sparse_step)
    }

    /// Checks the fields against each other and the layer count; the message names the field.
    pub fn validate(&self, num_layers: usize) -> Result<(), FieldError> {
        let positive = [
            ("num_experts", self.num_experts),
            ("experts_per_token", self.experts_per_token),
            ("expert_intermediate_size", self.expert_intermediate_size),
            ("n_group", self.n_group),
            ("topk_group", self.topk_group),
            ("sparse_step", self.sparse_step),
        ];
        if let Some((f, _)) = positive.iter().find(|(_, v)| *v == 0) {
            return Err(FieldError::new(format!("moe.{f}"), format!("field `moe.{f}` must be positive")));
        }
        if let Some((f, v)) = positive
            .iter()
            .chain(&[("shared_intermediate_size", self.shared_intermediate_size)])
            .find(|(_, v)| *v > 1 << 24)
        {
            return Err(FieldError::new(format!("moe.{f}"), format!("field `moe.{f}`: {v} is beyond any model")));
        }
        if self.experts_per_token > self.num_experts {
            return Err(FieldError::new(
                "moe.experts_per_token",
                format!("field `moe.experts_per_token`: {} of {} experts", self.experts_per_token, self.num_experts),
            ));
        }
        if !self.num_experts.is_multiple_of(self.n_group) || self.topk_group > self.n_group {
            return Err(FieldError::new(
                "moe.n_group",
                format!(
                    "field `moe.n_group`: {} groups of {} experts with {} kept",
                    self.n_group, self.num_experts, self.topk_group
                ),
            ));
        }
        if self.n_group > 1 && self.experts_per_token > self.topk_group * (self.num_experts / self.n_group) {
            return Err(FieldError::new(
                "moe.topk_group",
                format!(
                    "field `moe.topk_group`: {} groups of {} experts hold fewer than the {} a token takes",
                    self.topk_group,
                    self.num_experts / self.n_group,
                    self.experts_per_token
                ),
            ));
        }
        if self.n_group > 1 && self.scoring != Scoring::Sigmoid {
            return Err(FieldError::new(
                "moe.n_group",
                "field `moe.n_group`: grouped routing is DeepSeek's, with sigmoid scoring",
            ));
        }
        if !(self.routed_scaling_factor.is_finite() && self.routed_scaling_factor > 0.0) {
            return Err(FieldError::new(
                "moe.routed_scaling_factor",
                format!("field `moe.routed_scaling_factor` must be positive, got {}", self.routed_scaling_factor),
            ));
        }
        if let ExpertActivation::ClampedSwiglu { limit, alpha } = self.activation {
            if !(limit.is_finite() && limit > 0.0 && alpha.is_finite() && alpha > 0.0) {
                return Err(FieldError::new(
                    "moe.activation",
                    format!("field `moe.activation`: limit {limit} and alpha {alpha} must be positive"),
                ));
            }
        }
        if let Some(&l) = self.dense_layers.iter().find(|&&l| l >= num_layers) {
            return Err(FieldError::new(
                "moe.dense_layers",
                format!("field `moe.dense_layers`: layer {l} of {num_layers}"),
            ));
        }
        if !(0..num_layers).any(|i| self.is_sparse(i)) {
            return Err(FieldError::new(
                "moe",
                "field `moe`: no layer is sparse (first_dense_layers, sparse_step, dense_layers)",
            ));
        }
        Ok(())
    }
}

/// DeepSeek's multi-head latent attention: queries through a low-rank `q_lora_rank`, keys and
/// values from one `kv_lora_rank` latent per token (the KV cache holds only it and the
/// `qk_rope_head_dim` RoPE key every head shares).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MlaSpec {
    /// `None`: q is one projection of the hidden state (DeepSeek-V2-Lite).
    #[serde(default)]
    pub q_lora_rank: Option<usize>,
    pub kv_lora_rank: usize,
    pub qk_nope_head_dim: usize,
    pub qk_rope_head_dim: usize,
    pub v_head_dim: usize,
}

impl MlaSpec {
    /// Values the cache holds per token and layer: the latent and the RoPE key.
    pub fn cache_width(&self) -> usize {
        self.kv_lora_rank + self.qk_rope_head_dim
    }

    pub fn validate(&self) -> Result<(), FieldError> {
        let fields = [
            ("kv_lora_rank", self.kv_lora_rank),
            ("qk_nope_head_dim", self.qk_nope_head_dim),
            ("qk_rope_head_dim", self.qk_rope_head_dim),
            ("v_head_dim", self.v_head_dim),
            ("q_lora_rank", self.q_lora_rank.unwrap_or(1)),
        ];
        for (f, v) in fields {
            if v == 0 || v > 1 << 20 {
                return Err(FieldError::new(
                    format!("mla.{f}"),
                    format!("field `mla.{f}`: {v} must be positive and at most 2^20"),
                ));
            }
        }
        if !self.qk_rope_head_dim.is_multiple_of(2) {
            return Err(FieldError::new(
                "mla.qk_rope_head_dim",
                format!("field `mla.qk_rope_head_dim`: {} must be even (RoPE rotates pairs)", self.qk_rope_head_dim),
            ));
        }
        Ok(())
    }
}

/// The attention of one layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LayerKind {
    /// Every earlier position.
    #[serde(rename = "full_attention")]
    Full,
    /// The last `sliding_window` positions (the query's own included).
    #[serde(rename = "sliding_attention")]
    Sliding,
}

/// RoPE frequency scaling (`rope_scaling` / `rope_parameters` of a config.json): Llama 3's or
/// YaRN (DeepSeek-V3, Kimi K2, gpt-oss). Fields a type does not use stay `None`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RopeScaling {
    /// `llama3` or `yarn`.
    #[serde(alias = "type")]
    pub rope_type: String,
    pub factor: f64,
    pub original_max_position_embeddings: usize,
    /// Llama 3.
    #[serde(default)]
    pub low_freq_factor: Option<f64>,
    #[serde(default)]
    pub high_freq_factor: Option<f64>,
    /// YaRN's ramp (rotations; transformers' defaults 32 and 1).
    #[serde(default)]
    pub beta_fast: Option<f64>,
    #[serde(default)]
    pub beta_slow: Option<f64>,
    /// YaRN's magnitude scaling: `attention_factor` given, else from `mscale` and
    /// `mscale_all_dim`.
    #[serde(default)]
    pub mscale: Option<f64>,
    #[serde(default)]
    pub mscale_all_dim: Option<f64>,
    #[serde(default)]
    pub attention_factor: Option<f64>,
    /// Round YaRN's correction range to whole dimensions (transformers' default true; gpt-oss
    /// false).
    #[serde(default)]
    pub truncate: Option<bool>,
}

/// YaRN's `0.1 · m · ln(s) + 1` (1 for `s ≤ 1`).
pub fn yarn_mscale(scale: f64, m: f64) -> f64 {
    if scale <= 1.0 {
        1.0
    } else {
        0.1 * m * scale.ln() + 1.0
    }
}

impl RopeScaling {
    /// The factor on cos and sin (YaRN's attention factor; 1 otherwise), as transformers'
    /// `_compute_yarn_parameters` gives it.
    pub fn attention_factor(&self) -> f64 {
        if self.rope_type != "yarn" {
            return 1.0;
        }
        if let Some(a) = self.attention_factor {
            return a;
        }
        match (self.mscale, self.mscale_all_dim) {
            (Some(m), Some(all)) if m != 0.0 && all != 0.0 => {
                yarn_mscale(self.factor, m) / yarn_mscale(self.factor, all)
            }
            _ => yarn_mscale(self.factor, 1.0),
        }
    }

    pub fn validate(&self) -> Result<(), FieldError> {
        let positive = |x: Option<f64>| x.is_none_or(|x| x.is_finite() && x > 0.0);
        if !(self.factor.is_finite() && self.factor > 0.0) || self.original_max_position_embeddings == 0 {
            return Err(FieldError::new(
                "rope_scaling",
                "field `rope_scaling`: needs factor > 0 and original_max_position_embeddings > 0",
            ));
        }
        match self.rope_type.as_str() {
            "llama3" => match (self.low_freq_factor, self.high_freq_factor) {
                (Some(lo), Some(hi)) if lo > 0.0 && hi > lo => Ok(()),
                _ => Err(FieldError::new(
                    "rope_scaling",
                    "field `rope_scaling` (llama3): needs high_freq_factor > low_freq_factor > 0",
                )),
            },
            "yarn" if [self.beta_fast, self.beta_slow, self.attention_factor].into_iter().all(positive) => Ok(()),
            "yarn" => Err(FieldError::new(
                "rope_scaling",
                "field `rope_scaling` (yarn): beta_fast, beta_slow and attention_factor must be positive",
            )),
            other => Err(FieldError::new(
                "rope_scaling.rope_type",
                format!(
                    "field `rope_scaling.rope_type`: `{other}` is not one goodput's engine implements (llama3, yarn)"
                ),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moe() -> MoeSpec {
        MoeSpec {
            num_experts: 8,
            experts_per_token: 2,
            expert_intermediate_size: 32,
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
        }
    }

    #[test]
    fn sparse_layers_follow_each_family_s_rule() {
        // DeepSeek-V3: the first three dense.
        let ds = MoeSpec { first_dense_layers: 3, ..moe() };
        assert_eq!((0..6).map(|i| ds.is_sparse(i)).collect::<Vec<_>>(), [false, false, false, true, true, true]);
        // Qwen3-MoE: every second layer, but not layer 3 (mlp_only_layers).
        let q = MoeSpec { sparse_step: 2, dense_layers: vec![3], ..moe() };
        assert_eq!((0..6).map(|i| q.is_sparse(i)).collect::<Vec<_>>(), [false, true, false, false, false, true]);
        assert!(MoeSpec { dense_layers: vec![0, 1], ..moe() }
            .validate(2)
            .unwrap_err()
            .to_string()
            .contains("no layer is sparse"));
    }

    #[test]
    fn bad_moe_and_mla_fields_are_named() {
        assert!(moe().validate(2).is_ok());
        let e = MoeSpec { experts_per_token: 9, ..moe() }.validate(2).unwrap_err();
        assert_eq!(e.field, "moe.experts_per_token", "{e}");
        let e = MoeSpec { n_group: 3, ..moe() }.validate(2).unwrap_err();
        assert!(e.to_string().contains("n_group"), "{e}");
        let e = MoeSpec { n_group: 4, topk_group: 1, scoring: Scoring::Sigmoid, experts_per_token: 3, ..moe() }
            .validate(2)
            .unwrap_err();
        assert!(e.to_string().contains("topk_group"), "{e}");
        let e = MoeSpec { n_group: 4, topk_group: 2, ..moe() }.validate(2).unwrap_err();
        assert!(e.to_string().contains("sigmoid"), "{e}");
        let e = MoeSpec { dense_layers: vec![5], ..moe() }.validate(2).unwrap_err();
        assert!(e.to_string().contains("dense_layers"), "{e}");
        let mla = MlaSpec {
            q_lora_rank: Some(0),
            kv_lora_rank: 512,
            qk_nope_head_dim: 128,
            qk_rope_head_dim: 64,
            v_head_dim: 128,
        };
        assert!(mla.validate().unwrap_err().to_string().contains("q_lora_rank"));
        assert_eq!(MlaSpec { q_lora_rank: None, ..mla }.cache_width(), 576);
    }

    #[test]
    fn yarn_attention_factor_as_transformers_computes_it() {
        let yarn = |mscale, all| RopeScaling {
            rope_type: "yarn".into(),
            factor: 32.0,
            original_max_position_embeddings: 4096,
            low_freq_factor: None,
            high_freq_factor: None,
            beta_fast: Some(32.0),
            beta_slow: Some(1.0),
            mscale,
            mscale_all_dim: all,
            attention_factor: None,
            truncate: Some(false),
        };
        // gpt-oss: no mscale keys → 0.1 ln 32 + 1.
        assert!((yarn(None, None).attention_factor() - (0.1 * 32f64.ln() + 1.0)).abs() < 1e-12);
        // DeepSeek-V3: mscale = mscale_all_dim = 1 → 1 (the softmax scale carries it instead).
        assert_eq!(yarn(Some(1.0), Some(1.0)).attention_factor(), 1.0);
        assert!(yarn(None, None).validate().is_ok());
        let e = RopeScaling { rope_type: "dynamic".into(), ..yarn(None, None) }.validate().unwrap_err();
        assert!(e.to_string().contains("`dynamic`"), "{e}");
    }
}
