//! What a [`ModelSpec`] costs: parameters (total, and active per token for routed experts),
//! weight bytes, and KV bytes per token by the kind of layer that holds them (full attention,
//! sliding windows, MLA's latent). All in u128 internally and saturating, so a size computed
//! from any shape never wraps.

use crate::arch::{LayerKind, Scoring};
use crate::catalog::ModelSpec;
use serde::Serialize;

/// Parameters of a model by part, summed over its layers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Params {
    pub embedding: u64,
    /// Attention projections, their biases, q/k norms and sinks.
    pub attention: u64,
    /// The dense MLPs (every layer of a dense model; a MoE model's dense layers).
    pub dense_mlp: u64,
    /// Routers (weights, biases, DeepSeek's correction bias).
    pub router: u64,
    /// Every routed expert of every sparse layer.
    pub routed_experts: u64,
    /// The routed experts one token goes through (`experts_per_token` per sparse layer).
    pub active_routed_experts: u64,
    pub shared_experts: u64,
    /// RMSNorm weights (the layers' two and the final one).
    pub norms: u64,
    /// 0 with tied embeddings.
    pub lm_head: u64,
}

/// KV bytes one token occupies, by the kind of layer holding them, summed over those layers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct KvPerToken {
    /// Full-attention layers: K and V of every position.
    pub full: u64,
    /// Sliding layers: K and V, kept only for the last `sliding_window` positions.
    pub sliding: u64,
    /// MLA layers: the latent and the RoPE key of every position.
    pub latent: u64,
}

impl KvPerToken {
    pub fn total(&self) -> u64 {
        self.full.saturating_add(self.sliding).saturating_add(self.latent)
    }
}

fn sum(xs: &[u128]) -> u128 {
    xs.iter().fold(0u128, |a, &b| a.saturating_add(b))
}

fn mul(xs: &[usize]) -> u128 {
    xs.iter().fold(1u128, |a, &b| a.saturating_mul(b as u128))
}

fn narrow(x: u128) -> u64 {
    u64::try_from(x).unwrap_or(u64::MAX)
}

impl ModelSpec {
    /// Attention parameters of one layer.
    fn attention_params(&self) -> u128 {
        let (h, nh) = (self.hidden_size, self.num_heads);
        if let Some(m) = &self.mla {
            let qk = m.qk_nope_head_dim + m.qk_rope_head_dim;
            let q = match m.q_lora_rank {
                Some(r) => sum(&[mul(&[h, r]), r as u128, mul(&[r, nh, qk])]),
                None => mul(&[h, nh, qk]),
            };
            let kv_a = sum(&[mul(&[h, m.cache_width()]), m.kv_lora_rank as u128]);
            let kv_b = mul(&[m.kv_lora_rank, nh, m.qk_nope_head_dim + m.v_head_dim]);
            return sum(&[q, kv_a, kv_b, mul(&[nh, m.v_head_dim, h])]);
        }
        let d = self.head_dim();
        let (q, kv) = (mul(&[nh, d]), mul(&[self.num_kv_heads, d]));
        let bias = if self.has_qkv_bias() { sum(&[q, kv, kv]) } else { 0 };
        let o_bias = if self.has_attention_bias() { h as u128 } else { 0 };
        let norms = if self.has_qk_norm() { 2 * d as u128 } else { 0 };
        let sinks = if self.has_sinks() { nh as u128 } else { 0 };
        sum(&[
            mul(&[h, nh, d]),
            2u128.saturating_mul(mul(&[h, self.num_kv_heads, d])),
            mul(&[nh, d, h]),
            bias,
            o_bias,
            norms,
            sinks,
        ])
    }

    /// Parameters of one routed expert (its three projections and their biases).
    pub fn expert_params(&self) -> u64 {
        let Some(m) = &self.moe else { return 0 };
        let (h, i) = (self.hidden_size, m.expert_intermediate_size);
        let bias = if m.expert_bias { (2 * i + h) as u128 } else { 0 };
        narrow(sum(&[3u128.saturating_mul(mul(&[h, i])), bias]))
    }

    /// Layers with routed experts.
    pub fn sparse_layers(&self) -> usize {
        let Some(m) = &self.moe else { return 0 };
        // Layers i in first..L with (i + 1) a multiple of the step, less the listed dense ones
        // among them: counted, not iterated (a shape may claim 2^31 layers).
        let step = m.sparse_step.max(1);
        let multiples = |n: usize| n / step;
        let stepped = multiples(self.num_layers).saturating_sub(multiples(m.first_dense_layers.min(self.num_layers)));
        let mut listed = m.dense_layers.clone();
        listed.sort_unstable();
        listed.dedup();
        let by_step = |i: usize| i < self.num_layers && i >= m.first_dense_layers && (i + 1).is_multiple_of(step);
        stepped - listed.iter().filter(|&&i| by_step(i)).count()
    }

    /// Parameters by part.
    pub fn params(&self) -> Params {
        let (h, layers) = (self.hidden_size, self.num_layers);
        let sparse = self.sparse_layers();
        let dense = layers - sparse;
        let per_layers = |n: usize, x: u128| narrow(x.saturating_mul(n as u128));
        let (router, routed, active, shared) = match &self.moe {
            Some(m) => {
                let extra = usize::from(m.router_bias) + usize::from(m.scoring == Scoring::Sigmoid);
                let router = mul(&[m.num_experts, h]).saturating_add(mul(&[m.num_experts, extra]));
                let expert = self.expert_params() as u128;
                (
                    router,
                    expert.saturating_mul(m.num_experts as u128),
                    expert.saturating_mul(m.experts_per_token as u128),
                    3u128.saturating_mul(mul(&[h, m.shared_intermediate_size])),
                )
            }
            None => (0, 0, 0, 0),
        };
        Params {
            embedding: narrow(mul(&[self.vocab_size, h])),
            attention: per_layers(layers, self.attention_params()),
            dense_mlp: per_layers(dense, 3u128.saturating_mul(mul(&[h, self.intermediate_size]))),
            router: per_layers(sparse, router),
            routed_experts: per_layers(sparse, routed),
            active_routed_experts: per_layers(sparse, active),
            shared_experts: per_layers(sparse, shared),
            norms: narrow(mul(&[layers, 2, h]).saturating_add(h as u128)),
            lm_head: if self.tie_word_embeddings { 0 } else { narrow(mul(&[self.vocab_size, h])) },
        }
    }

    /// Every parameter, in u128 (saturating).
    pub(crate) fn params_wide(&self) -> u128 {
        let p = self.params();
        let parts =
            [p.embedding, p.attention, p.dense_mlp, p.router, p.routed_experts, p.shared_experts, p.norms, p.lm_head];
        sum(&parts.map(u128::from))
    }

    /// Parameters of the model; saturates at `u64::MAX` for shapes [`ModelSpec::validate`]
    /// refuses, so a size computed from it never wraps to a small number.
    pub fn param_count(&self) -> u64 {
        narrow(self.params_wide())
    }

    /// Parameters one token's forward uses: all but the routed experts it is not sent to
    /// (the embedding table included, as Mixtral's 12.9 B and DeepSeek-V3's 37 B count it;
    /// OpenAI's 3.6 B for gpt-oss-20b leaves the embedding out).
    pub fn active_param_count(&self) -> u64 {
        let p = self.params();
        narrow(
            self.params_wide()
                .saturating_sub(u128::from(p.routed_experts))
                .saturating_add(u128::from(p.active_routed_experts)),
        )
    }

    /// Bytes of the weights at `dtype_bytes` per parameter (saturating, as `param_count`).
    pub fn weight_bytes(&self, dtype_bytes: usize) -> u64 {
        narrow(self.params_wide().saturating_mul(dtype_bytes as u128))
    }

    /// KV values one token occupies in one layer: MLA's latent and RoPE key, else K and V of
    /// every KV head.
    pub fn kv_values_per_layer(&self) -> u128 {
        match &self.mla {
            Some(m) => m.cache_width() as u128,
            None => mul(&[2, self.num_kv_heads, self.head_dim()]),
        }
    }

    /// Bytes one token occupies in each kind of layer, summed over the layers of that kind.
    pub fn kv_per_token(&self, dtype_bytes: usize) -> KvPerToken {
        let per_layer = self.kv_values_per_layer().saturating_mul(dtype_bytes as u128);
        let count = |kind: LayerKind| match &self.layer_types {
            Some(t) if self.sliding_window.is_some() => t.iter().filter(|&&k| k == kind).count(),
            _ => usize::from(self.layer_kind(0) == kind) * self.num_layers,
        };
        let bytes = |n: usize| narrow(per_layer.saturating_mul(n as u128));
        match self.mla {
            Some(_) => KvPerToken { latent: bytes(self.num_layers), ..KvPerToken::default() },
            None => {
                KvPerToken { full: bytes(count(LayerKind::Full)), sliding: bytes(count(LayerKind::Sliding)), latent: 0 }
            }
        }
    }

    /// Bytes of K and V (or latent) one token occupies across all layers (saturating): what a
    /// token costs while every layer still holds it.
    pub fn kv_bytes_per_token(&self, dtype_bytes: usize) -> u64 {
        self.kv_per_token(dtype_bytes).total()
    }

    /// Bytes the KV cache of one sequence of `context` positions holds: full and latent layers
    /// every position, sliding layers only their window.
    pub fn kv_bytes_for_context(&self, context: usize, dtype_bytes: usize) -> u64 {
        let kv = self.kv_per_token(dtype_bytes);
        let window = self.sliding_window.unwrap_or(context).min(context);
        let wide = |b: u64, n: usize| u128::from(b).saturating_mul(n as u128);
        narrow(sum(&[wide(kv.full, context), wide(kv.latent, context), wide(kv.sliding, window)]))
    }
}

/// Layers that share one block table in the paged KV pool: the same kind (full, or one
/// sliding window) and as many layers as every other group, so one pool block holds the same
/// bytes whichever group owns it (vLLM's hybrid KV-cache manager: a gpt-oss block holds 12
/// sliding layers' K/V for a sliding group's table, or 12 full layers' for a full one).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KvGroup {
    /// The window its layers attend over; `None` for full attention (and MLA's latent).
    pub window: Option<usize>,
    /// Its layers, ascending. The `j`-th of them uses the pool's `j`-th tensor.
    pub layers: Vec<usize>,
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

impl ModelSpec {
    /// The model's KV-cache groups, ordered by their first layer. Layers of one kind are cut
    /// into groups of `g` = the gcd of the kinds' layer counts: a uniform model is one group
    /// of all its layers; gpt-oss (12 sliding + 12 full) is two groups of 12.
    pub fn kv_groups(&self) -> Vec<KvGroup> {
        let mut kinds: Vec<(Option<usize>, Vec<usize>)> = Vec::new();
        for l in 0..self.num_layers {
            let w = self.window(l);
            match kinds.iter_mut().find(|(k, _)| *k == w) {
                Some((_, layers)) => layers.push(l),
                None => kinds.push((w, vec![l])),
            }
        }
        let size = self.kv_group_size();
        let mut groups: Vec<KvGroup> = kinds
            .iter()
            .flat_map(|(w, ls)| ls.chunks(size).map(|c| KvGroup { window: *w, layers: c.to_vec() }))
            .collect();
        groups.sort_by_key(|g| g.layers[0]);
        groups
    }

    /// Layers per KV-cache group: the gcd of the layer counts of each kind (all the layers of a
    /// uniform model, counted without walking them).
    pub fn kv_group_size(&self) -> usize {
        match &self.layer_types {
            Some(t) if self.sliding_window.is_some() => {
                let sliding = t.iter().filter(|&&k| k == LayerKind::Sliding).count();
                gcd(sliding, t.len() - sliding).max(1)
            }
            _ => self.num_layers.max(1),
        }
    }

    /// Bytes one block of `block_size` slots takes in the pool: the K/V (or latent) of one
    /// group's layers for `block_size` tokens.
    pub fn kv_block_bytes(&self, block_size: usize, dtype_bytes: usize) -> u64 {
        let layers = self.kv_group_size();
        let per_layer = self.kv_values_per_layer().saturating_mul(dtype_bytes as u128);
        narrow(per_layer.saturating_mul(layers as u128).saturating_mul(block_size as u128))
    }
}
/// Bytes in the largest binary unit that keeps the number ≥ 1.
pub fn format_bytes(b: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut x = b as f64;
    let mut u = 0;
    while x >= 1024.0 && u + 1 < units.len() {
        x /= 1024.0;
        u += 1;
    }
    format!("{x:.1} {}", units[u])
}
