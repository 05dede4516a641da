//! What one step asks of one GPU: the weight bytes it holds and reads, the KV bytes per token
//! by kind of layer, the FLOPs per token and per query-key pair, the experts' share, and the
//! collectives, for a (model, precision, layout). The GPU is one of the slowest pipeline
//! stage: ⌈L / pp⌉ layers, as many of them sparse as the model has, and the LM head.
//!
//! Units: bytes, FLOPs. A multiply-add is 2 FLOPs.

use crate::hardware::DType;
use crate::layout::{Layout, ShardError};
use crate::routing::Routing;
use goodput_core::ModelSpec;
use serde::{Deserialize, Serialize};

/// Weights and KV cache in their element types.
///
/// - `bf16`/`fp16`/`f32`: every weight in it.
/// - `fp8`: every linear layer of the blocks in FP8 (vLLM's and TensorRT-LLM's FP8
///   checkpoints), the embedding, LM head, norms and routers in bf16.
/// - `mxfp4`: the routed experts (a dense model's MLPs) in MXFP4, everything else bf16, as
///   gpt-oss is published.
/// - `nvfp4`: every linear layer of the blocks in NVFP4 (ModelOpt's NVFP4 checkpoints), the
///   rest bf16.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Precision {
    pub weights: DType,
    /// bf16, fp16 or fp8 (per-tensor scales).
    pub kv: DType,
}

impl Precision {
    /// Bytes per weight of the attention projections, dense MLPs, shared experts and routed
    /// experts; and of the rest (embedding, LM head, norms, routers).
    fn bytes(&self) -> (f64, f64, f64) {
        let wide = if self.weights == DType::F32 { 4.0 } else { 2.0 };
        match self.weights {
            DType::Mxfp4 => (2.0, DType::Mxfp4.bytes(), wide),
            w => (w.bytes(), w.bytes(), wide),
        }
    }

    /// The dtype whose peak the non-expert linear layers run at, and the experts'.
    pub fn math(&self) -> (DType, DType) {
        match self.weights {
            DType::Mxfp4 => (DType::Bf16, DType::Mxfp4),
            w => (w, w),
        }
    }

    /// Bytes of one KV element.
    pub fn kv_bytes(&self) -> f64 {
        self.kv.bytes()
    }
}

/// The routed experts' share of a step, for one GPU.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExpertWork {
    pub routing: Routing,
    pub ep: usize,
    /// Sparse layers on the slowest stage.
    pub layers: f64,
    /// Bytes of one expert's slice on one GPU.
    pub bytes_per_expert: f64,
    /// FLOPs of one token through one expert's slice.
    pub flops_per_assignment: f64,
    /// Tokens the experts see per token of the simulated attention group (DP: all groups'
    /// tokens go through the same experts).
    pub tokens_per_token: f64,
    /// Bytes one GPU sends per token and destination GPU in each sparse layer's dispatch
    /// (FP8, as DeepEP) and combine (bf16); 0 when no all-to-all runs (EP 1, DP 1).
    pub all_to_all_bytes_per_destination: f64,
    /// Destination GPUs per token on the sender's node, other than itself: the EP ranks of
    /// the node the token reaches, each its expert-TP slices.
    pub nvlink_destinations_per_token: f64,
    /// Other nodes per token: DeepEP sends a token once to each node it reaches and forwards
    /// it there over NVLink, so the network carries nodes, not ranks (DeepSeek's routing keeps
    /// a token to at most 4 nodes' experts).
    pub network_destinations_per_token: f64,
    /// GPUs sharing one attention group's tokens for the dispatch (TP).
    pub senders: f64,
    /// The skewed routing's per-expert hit probabilities, computed on first use (every step
    /// of a simulation reads them).
    #[serde(skip)]
    pub hit_probabilities: std::sync::OnceLock<Vec<f64>>,
}

/// Per-token and per-step work of a model on one GPU.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelWork {
    /// Weight bytes each GPU holds (its shard, the embedding table replicated).
    pub weight_bytes: f64,
    /// Non-expert weight bytes each GPU reads every step: all but an untied embedding table,
    /// of which a step gathers only its tokens' rows (for an untied 8B Llama the usual
    /// "weights ÷ bandwidth" floor is ~7 % too high; for a tiny model with a large
    /// vocabulary, 40 %).
    pub read_bytes: f64,
    /// KV bytes one token occupies on each GPU in the full-attention (or latent) layers.
    pub kv_bytes_per_token: f64,
    /// KV bytes one token occupies in the sliding-window layers, while within the window.
    #[serde(default)]
    pub sliding_kv_bytes_per_token: f64,
    /// The sliding layers' window.
    #[serde(default)]
    pub window: Option<f64>,
    /// FLOPs of the non-expert linear layers for one token (attention projections, dense
    /// MLPs, shared experts, routers).
    pub linear_flops_per_token: f64,
    /// FLOPs of attention for one query-key pair across the full (or latent) layers, as
    /// prefill computes it (QKᵀ and PV; MLA with its keys and values expanded).
    pub attention_flops_per_pair: f64,
    /// The same for a decode query: MLA absorbs the up-projections and attends over the
    /// latent (kv_lora_rank + rope per head for QKᵀ, kv_lora_rank for PV).
    #[serde(default)]
    pub decode_attention_flops_per_pair: f64,
    /// The same across the sliding layers (pairs within the window only).
    #[serde(default)]
    pub sliding_attention_flops_per_pair: f64,
    /// FLOPs of the LM head for one sampled row.
    pub lm_head_flops_per_row: f64,
    /// Bytes of activations all-reduced per token per step, 0 without TP.
    pub allreduce_bytes_per_token: f64,
    /// All-reduces per step, 0 without TP.
    pub allreduces_per_step: f64,
    /// GPUs of a TP group (the ring of the all-reduces).
    #[serde(default = "one")]
    pub tp: usize,
    #[serde(default)]
    pub experts: Option<ExpertWork>,
    /// Pipeline stages; this work is one GPU of the slowest.
    #[serde(default = "one")]
    pub stages: usize,
    /// Bytes per token handed to the next stage (the hidden state, bf16).
    #[serde(default)]
    pub stage_bytes_per_token: f64,
}

fn one() -> usize {
    1
}

/// What is deployed: the precision, the layout, the routing skew and the node size.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Deployment {
    pub precision: Precision,
    pub layout: Layout,
    /// Power-law exponent of expert popularity (0: uniform routing).
    pub skew: f64,
    /// GPUs of one node (the all-to-all crosses the network beyond them).
    pub gpus_per_node: usize,
}

impl ModelWork {
    /// Every weight and KV element at `bytes`, split `tp` ways: a model on one machine, as
    /// `goodput profile` prices its roofline.
    pub fn of(m: &ModelSpec, bytes: f64, tp: usize) -> Result<Self, ShardError> {
        let bf16 = Precision { weights: DType::Bf16, kv: DType::Bf16 };
        // One machine: a node of exactly its GPUs.
        let d = Deployment { precision: bf16, layout: Layout::tp(tp), skew: 0.0, gpus_per_node: tp.max(1) };
        let mut w = Self::build(m, &d)?;
        let s = bytes / 2.0;
        for x in [&mut w.weight_bytes, &mut w.read_bytes, &mut w.kv_bytes_per_token, &mut w.sliding_kv_bytes_per_token]
        {
            *x *= s;
        }
        if let Some(e) = &mut w.experts {
            e.bytes_per_expert *= s;
        }
        Ok(w)
    }

    /// The work of `m` as deployed.
    /// Sharding follows vLLM: heads, MLP columns, the LM head and the embedding split `tp`
    /// ways; KV heads split, or replicated when fewer than `tp`; MLA's latent cache and its
    /// down-projection replicated on every GPU of the TP group.
    pub fn build(m: &ModelSpec, d: &Deployment) -> Result<Self, ShardError> {
        let (prec, layout) = (d.precision, d.layout);
        layout.check(m, d.gpus_per_node, true)?;
        let p = m.params();
        let (h, l) = (m.hidden_size as f64, m.num_layers as f64);
        let t = layout.tp as f64;
        let stage_layers = m.num_layers.div_ceil(layout.pp) as f64;
        let sparse = m.sparse_layers().min(stage_layers as usize) as f64;
        let dense_layers = stage_layers - sparse;
        let (b_linear, b_expert, b_wide) = prec.bytes();
        let kvb = prec.kv_bytes();
        // Attention: the part every GPU of a TP group holds whole, and the rest split.
        let attention_layer = p.attention as f64 / l;
        let (kept, kept_share) = match &m.mla {
            // vLLM's fused q_a/kv_a down-projection (and its norms) is replicated.
            Some(mla) => {
                let q_a = mla.q_lora_rank.map_or(0.0, |r| (h + 1.0) * r as f64);
                (h * mla.cache_width() as f64 + mla.kv_lora_rank as f64 + q_a, 1.0)
            }
            None => {
                let kv = m.num_kv_heads as f64;
                let kv_proj = 2.0 * h * kv * m.head_dim() as f64 * if m.has_qkv_bias() { 1.0 + 1.0 / h } else { 1.0 };
                (kv_proj, (kv / t).max(1.0) / kv)
            }
        };
        let attention_gpu = (attention_layer - kept) / t + kept * kept_share;
        let dense_mlp_layer =
            if m.num_layers > m.sparse_layers() { p.dense_mlp as f64 / (l - m.sparse_layers() as f64) } else { 0.0 };
        let sparse_all = m.sparse_layers().max(1) as f64;
        let (shared_layer, router_layer) = (p.shared_experts as f64 / sparse_all, p.router as f64 / sparse_all);
        let norms = p.norms as f64 * stage_layers / l;
        let linear_params = stage_layers * attention_gpu
            + dense_layers * dense_mlp_layer / t
            + sparse * (shared_layer / t + router_layer);
        let lm_head = m.vocab_size as f64 * h / t;
        let embed = if m.tie_word_embeddings { 0.0 } else { lm_head };
        // The dense part in its dtypes: attention and MLPs at the linear dtype (the MLPs at
        // the expert dtype under MXFP4: a dense model's "experts"), routers and norms wide.
        let mlp_bytes = if m.moe.is_none() { b_expert } else { b_linear };
        let dense_read = stage_layers * attention_gpu * b_linear
            + (dense_layers * dense_mlp_layer / t + sparse * shared_layer / t) * mlp_bytes
            + sparse * router_layer * b_wide
            + norms * b_wide
            + lm_head * b_wide;
        let embed_held = if layout.pp == 1 { embed } else { 0.0_f64.max(embed - lm_head) };
        let experts = expert_work(m, d, sparse, b_expert);
        let expert_held = experts.as_ref().map_or(0.0, |e| e.bytes_per_expert * e.layers * e.routing.experts as f64)
            / layout.ep.max(1) as f64;
        let (kv_full, kv_sliding, pair_prefill, pair_decode, pair_sliding) = attention(m, &layout, kvb, stage_layers);
        let allreduces = if layout.tp > 1 {
            // After attention in every layer; after the MLP where no all-to-all combines it.
            let moe_by_a2a = experts.as_ref().is_some_and(|e| e.all_to_all_bytes_per_destination > 0.0);
            stage_layers + if moe_by_a2a { dense_layers } else { stage_layers }
        } else {
            0.0
        };
        Ok(Self {
            weight_bytes: dense_read + embed_held * b_wide + expert_held,
            read_bytes: dense_read,
            kv_bytes_per_token: kv_full,
            sliding_kv_bytes_per_token: kv_sliding,
            window: m.sliding_window.filter(|_| kv_sliding > 0.0).map(|w| w as f64),
            linear_flops_per_token: 2.0 * linear_params,
            attention_flops_per_pair: pair_prefill,
            decode_attention_flops_per_pair: pair_decode,
            sliding_attention_flops_per_pair: pair_sliding,
            lm_head_flops_per_row: 2.0 * lm_head,
            allreduce_bytes_per_token: if layout.tp > 1 { allreduces * h * 2.0 } else { 0.0 },
            allreduces_per_step: allreduces,
            tp: layout.tp,
            experts,
            stages: layout.pp,
            stage_bytes_per_token: if layout.pp > 1 { 2.0 * h } else { 0.0 },
        })
    }
}

/// KV bytes per token (full or latent layers, sliding layers) and attention FLOPs per pair
/// (prefill, decode, sliding) of one GPU of the stage.
fn attention(m: &ModelSpec, layout: &Layout, kvb: f64, stage_layers: f64) -> (f64, f64, f64, f64, f64) {
    let t = layout.tp as f64;
    let share = stage_layers / m.num_layers as f64;
    let heads = m.num_heads as f64 / t;
    let kv = m.kv_per_token(1);
    if let Some(mla) = &m.mla {
        // The latent is the same for every head: each GPU of the TP group holds all of it.
        let full = kv.latent as f64 * kvb * share;
        let (nope, rope, v, r) =
            (mla.qk_nope_head_dim as f64, mla.qk_rope_head_dim as f64, mla.v_head_dim as f64, mla.kv_lora_rank as f64);
        let prefill = 2.0 * heads * (nope + rope + v) * stage_layers;
        let decode = 2.0 * heads * (2.0 * r + rope) * stage_layers;
        return (full, 0.0, prefill, decode, 0.0);
    }
    let kv_heads = m.num_kv_heads as f64;
    let per_gpu = (kv_heads / t).max(1.0) / kv_heads;
    let full = kv.full as f64 * kvb * per_gpu * share;
    let sliding = kv.sliding as f64 * kvb * per_gpu * share;
    let d = m.head_dim() as f64;
    let layers_of = |bytes: u64| if kv.total() == 0 { 0.0 } else { bytes as f64 / kv.total() as f64 * stage_layers };
    let pair = |layers: f64| 4.0 * heads * d * layers;
    let (full_layers, sliding_layers) = (layers_of(kv.full), layers_of(kv.sliding));
    (full, sliding, pair(full_layers), pair(full_layers), pair(sliding_layers))
}

/// The experts' share, or `None` for a dense model.
fn expert_work(m: &ModelSpec, d: &Deployment, sparse: f64, bytes: f64) -> Option<ExpertWork> {
    let moe = m.moe.as_ref()?;
    let (layout, skew) = (&d.layout, d.skew);
    let routing = Routing {
        experts: moe.num_experts,
        top_k: moe.experts_per_token,
        skew,
        groups: moe.n_group,
        groups_kept: moe.topk_group,
    };
    let etp = layout.expert_tp() as f64;
    let g = layout.stage_gpus();
    let a2a = layout.ep > 1 || layout.dp > 1;
    let per_node = d.gpus_per_node.max(1);
    let nodes = g.div_ceil(per_node);
    let (nvlink, network) = if !a2a {
        (0.0, 0.0)
    } else if layout.ep == 1 {
        // Experts sliced over every GPU of the stage: each token to all of them.
        ((g.min(per_node) - 1) as f64, (nodes - 1) as f64)
    } else {
        // A given other rank is reached as often as any: remote ranks ÷ other ranks. Each EP
        // rank is `etp` GPUs, the sender's own rank's other slices included.
        let remote = routing.remote_ranks_per_token(layout.ep);
        let hit = remote / (layout.ep - 1) as f64;
        if layout.ep >= nodes {
            let ranks_here = (layout.ep / nodes) as f64;
            let nvlink = (ranks_here - 1.0) * hit * etp + (etp - 1.0) * hit;
            (nvlink, if nodes > 1 { routing.remote_ranks_per_token(nodes) } else { 0.0 })
        } else {
            // Fewer ranks than nodes: a rank's slices fill whole nodes, its own node's other
            // GPUs among them; each rank reached is every one of its nodes.
            let per_rank = (nodes / layout.ep) as f64;
            ((per_node.min(g) - 1) as f64 * hit, remote * per_rank + (per_rank - 1.0) * hit)
        }
    };
    Some(ExpertWork {
        routing,
        ep: layout.ep,
        layers: sparse,
        bytes_per_expert: m.expert_params() as f64 * bytes / etp,
        flops_per_assignment: 2.0 * m.expert_params() as f64 / etp,
        tokens_per_token: layout.dp as f64,
        all_to_all_bytes_per_destination: if a2a { m.hidden_size as f64 * (1.0 + 2.0) } else { 0.0 },
        nvlink_destinations_per_token: nvlink,
        network_destinations_per_token: network,
        senders: layout.tp as f64,
        hit_probabilities: std::sync::OnceLock::new(),
    })
}

#[cfg(test)]
#[path = "work/tests.rs"]
mod tests;
