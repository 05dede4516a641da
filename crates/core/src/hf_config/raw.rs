//! The fields of a `config.json` goodput reads, as transformers writes them for each family it
//! runs; others are ignored. Plain data: what they mean is `mod.rs`'s and `families.rs`'s.

use serde::Deserialize;

#[derive(Deserialize)]
pub(crate) struct HfConfig {
    #[serde(default)]
    pub model_type: Option<String>,
    #[serde(default)]
    pub architectures: Vec<String>,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    #[serde(default)]
    pub num_key_value_heads: Option<usize>,
    #[serde(default)]
    pub head_dim: Option<usize>,
    pub intermediate_size: usize,
    pub vocab_size: usize,
    pub max_position_embeddings: usize,
    #[serde(default)]
    pub rope_theta: Option<f64>,
    #[serde(default)]
    pub rope_parameters: Option<RopeParameters>,
    pub rms_norm_eps: f64,
    #[serde(default)]
    pub tie_word_embeddings: bool,
    #[serde(default)]
    pub rope_scaling: Option<RopeParameters>,
    #[serde(default)]
    pub attention_bias: bool,
    #[serde(default)]
    pub hidden_act: Option<String>,
    #[serde(default)]
    pub bos_token_id: Option<OneOrMany>,
    #[serde(default)]
    pub eos_token_id: Option<OneOrMany>,
    // Sliding windows (Mistral, Qwen3's `use_sliding_window`, gpt-oss's `layer_types`).
    #[serde(default)]
    pub sliding_window: Option<usize>,
    #[serde(default)]
    pub use_sliding_window: Option<bool>,
    #[serde(default)]
    pub layer_types: Option<Vec<String>>,
    // Experts: Qwen3-MoE `num_experts`, Mixtral/gpt-oss `num_local_experts`, DeepSeek
    // `n_routed_experts`.
    #[serde(default)]
    pub num_experts: Option<usize>,
    #[serde(default)]
    pub num_local_experts: Option<usize>,
    #[serde(default)]
    pub n_routed_experts: Option<usize>,
    #[serde(default)]
    pub num_experts_per_tok: Option<usize>,
    #[serde(default)]
    pub experts_per_token: Option<usize>,
    #[serde(default)]
    pub moe_intermediate_size: Option<usize>,
    #[serde(default)]
    pub shared_expert_intermediate_size: Option<usize>,
    #[serde(default)]
    pub n_shared_experts: Option<usize>,
    #[serde(default)]
    pub norm_topk_prob: Option<bool>,
    #[serde(default)]
    pub decoder_sparse_step: Option<usize>,
    #[serde(default)]
    pub mlp_only_layers: Option<Vec<usize>>,
    #[serde(default)]
    pub first_k_dense_replace: Option<usize>,
    #[serde(default)]
    pub moe_layer_freq: Option<usize>,
    #[serde(default)]
    pub n_group: Option<usize>,
    #[serde(default)]
    pub topk_group: Option<usize>,
    #[serde(default)]
    pub routed_scaling_factor: Option<f64>,
    #[serde(default)]
    pub scoring_func: Option<String>,
    #[serde(default)]
    pub topk_method: Option<String>,
    #[serde(default)]
    pub swiglu_limit: Option<f64>,
    // Latent attention.
    #[serde(default)]
    pub q_lora_rank: Option<usize>,
    #[serde(default)]
    pub kv_lora_rank: Option<usize>,
    #[serde(default)]
    pub qk_nope_head_dim: Option<usize>,
    #[serde(default)]
    pub qk_rope_head_dim: Option<usize>,
    #[serde(default)]
    pub v_head_dim: Option<usize>,
    #[serde(default)]
    pub rope_interleave: Option<bool>,
    #[serde(default)]
    pub quantization_config: Option<serde_json::Value>,
}

/// `rope_scaling`, or the newer `rope_parameters` (which also holds `rope_theta`).
#[derive(Deserialize)]
pub(crate) struct RopeParameters {
    #[serde(default)]
    pub rope_theta: Option<f64>,
    #[serde(default, alias = "type")]
    pub rope_type: Option<String>,
    #[serde(default)]
    pub factor: Option<f64>,
    #[serde(default)]
    pub low_freq_factor: Option<f64>,
    #[serde(default)]
    pub high_freq_factor: Option<f64>,
    #[serde(default)]
    pub original_max_position_embeddings: Option<usize>,
    #[serde(default)]
    pub beta_fast: Option<f64>,
    #[serde(default)]
    pub beta_slow: Option<f64>,
    #[serde(default)]
    pub mscale: Option<f64>,
    #[serde(default)]
    pub mscale_all_dim: Option<f64>,
    #[serde(default)]
    pub attention_factor: Option<f64>,
    #[serde(default)]
    pub truncate: Option<bool>,
}

#[derive(Deserialize)]
#[serde(untagged)]
pub(crate) enum OneOrMany {
    One(u32),
    Many(Vec<u32>),
}

impl OneOrMany {
    pub fn first(self) -> Option<u32> {
        match self {
            OneOrMany::One(x) => Some(x),
            OneOrMany::Many(v) => v.first().copied(),
        }
    }
}
