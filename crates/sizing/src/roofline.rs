//! Roofline step costs: what a step must at least cost on a device, from the model's shape
//! (weight and KV bytes, FLOPs), the device's bandwidth and peak FLOP/s, and, with tensor
//! parallelism, the all-reduces over its links. Efficiencies scale each floor to what an engine
//! reaches: stated defaults, or carried over from a measured profile (measured ÷ floor per term).
//!
//! Units: bytes, FLOPs, seconds. A multiply-add is 2 FLOPs.

use crate::cost::{StepCost, StepWork, Term};
use crate::error::SizingError;
use goodput_core::ModelSpec;
use serde::{Deserialize, Serialize};

/// Per-token and per-step work of a model, for one GPU of a tensor-parallel group of `tp`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelWork {
    /// Weight bytes each GPU holds (its shard, the embedding table replicated).
    pub weight_bytes: f64,
    /// Weight bytes each GPU reads every step: all but an untied embedding table, of which a
    /// step gathers only its tokens' rows (for an untied 8B Llama the usual "weights ÷
    /// bandwidth" floor is ~7 % too high; for a tiny model with a large vocabulary, 40 %).
    pub read_bytes: f64,
    /// KV bytes one token of context occupies on each GPU (all layers, K and V).
    pub kv_bytes_per_token: f64,
    /// FLOPs of the linear layers for one token (attention projections and MLP).
    pub linear_flops_per_token: f64,
    /// FLOPs of attention for one query-key pair across all layers (QKᵀ and PV).
    pub attention_flops_per_pair: f64,
    /// FLOPs of the LM head for one sampled row.
    pub lm_head_flops_per_row: f64,
    /// Bytes of activations all-reduced per token per step (2 per layer), 0 without TP.
    pub allreduce_bytes_per_token: f64,
    /// All-reduces per step (2 per layer), 0 without TP.
    pub allreduces_per_step: f64,
}

/// Why a model cannot be split `tp` ways.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ShardError {
    #[error("tensor parallelism must be at least 1")]
    Zero,
    #[error("TP {tp} does not divide {model}'s {heads} attention heads")]
    Heads { model: String, tp: usize, heads: usize },
    #[error("TP {tp} does not divide {model}'s {kv} KV heads (nor do the KV heads divide it, to replicate them)")]
    KvHeads { model: String, tp: usize, kv: usize },
}

impl ModelWork {
    /// The work of `m` at `bytes` per weight and per KV element, sharded over `tp` GPUs the way
    /// vLLM does it (heads, MLP columns, the LM head and the embedding split; KV heads split,
    /// or replicated when fewer than `tp`).
    pub fn of(m: &ModelSpec, bytes: f64, tp: usize) -> Result<Self, ShardError> {
        if tp == 0 {
            return Err(ShardError::Zero);
        }
        if !m.num_heads.is_multiple_of(tp) {
            return Err(ShardError::Heads { model: m.name.clone(), tp, heads: m.num_heads });
        }
        if !m.num_kv_heads.is_multiple_of(tp) && !tp.is_multiple_of(m.num_kv_heads) {
            return Err(ShardError::KvHeads { model: m.name.clone(), tp, kv: m.num_kv_heads });
        }
        let (h, d, l) = (m.hidden_size as f64, m.head_dim() as f64, m.num_layers as f64);
        let (q, kv_heads) = (m.num_heads as f64 * d, m.num_kv_heads as f64);
        let i = m.intermediate_size as f64;
        let v = m.vocab_size as f64;
        let t = tp as f64;
        // KV heads split, or one whole head per GPU when there are fewer heads than GPUs.
        let kv_per_gpu = (kv_heads / t).max(1.0);
        // Per layer: q and o projections (h×q each) and the MLP (3 × h×i) split t ways; k and
        // v (h × d per KV head each) for this GPU's KV heads; two norms replicated.
        let layer_params = (2.0 * h * q + 3.0 * h * i) / t + 2.0 * h * kv_per_gpu * d + 2.0 * h;
        let lm_head = v * h / t;
        // The embedding is split by vocabulary as the LM head is (vLLM's
        // VocabParallelEmbedding), or is the LM head itself when tied.
        let embed = if m.tie_word_embeddings { 0.0 } else { v * h / t };
        let read = l * layer_params + lm_head + h;
        Ok(Self {
            weight_bytes: (read + embed) * bytes,
            read_bytes: read * bytes,
            kv_bytes_per_token: 2.0 * l * kv_per_gpu * d * bytes,
            linear_flops_per_token: 2.0 * l * (layer_params - 2.0 * h),
            attention_flops_per_pair: 4.0 * l * (m.num_heads as f64 / t) * d,
            lm_head_flops_per_row: 2.0 * lm_head,
            allreduce_bytes_per_token: if tp > 1 { 2.0 * l * h * bytes } else { 0.0 },
            allreduces_per_step: if tp > 1 { 2.0 * l } else { 0.0 },
        })
    }
}

/// A device's limits as the roofline uses them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeviceLimits {
    /// Memory bandwidth, bytes/s.
    pub bandwidth: f64,
    /// Peak dense FLOP/s at the dtype.
    pub flops: f64,
    /// Per-GPU link bandwidth for all-reduce (unidirectional), bytes/s.
    pub link: f64,
}

/// The floor of each term on `dev`: seconds per unit of the term at 100 % of the device.
pub fn term_floor(term: Term, w: &ModelWork, dev: &DeviceLimits) -> f64 {
    match term {
        Term::Fixed => w.read_bytes / dev.bandwidth,
        Term::PrefillTokens | Term::DecodeSeqs => w.linear_flops_per_token / dev.flops,
        Term::PrefillAttention => w.attention_flops_per_pair / dev.flops,
        Term::DecodeContext => w.kv_bytes_per_token / dev.bandwidth,
        Term::SampledRows => w.lm_head_flops_per_row / dev.flops,
        // A step at k tokens reads every weight and computes k tokens' linear layers.
        Term::Tokens(k) => (w.read_bytes / dev.bandwidth).max(k as f64 * w.linear_flops_per_token / dev.flops),
        Term::Rows(k) => k as f64 * w.lm_head_flops_per_row / dev.flops,
    }
}

/// The fractions of the floor an engine reaches.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Efficiencies {
    /// Of memory bandwidth (weights and KV reads): vLLM and TensorRT-LLM decode reach
    /// 70–85 % of HBM bandwidth at small batch.
    pub memory: f64,
    /// Of peak dense FLOP/s in the linear layers (prefill MFU of 50–70 % is usual).
    pub compute: f64,
    /// Of peak FLOP/s in attention (flash attention reaches 50–75 % on H100 at long contexts).
    pub attention: f64,
    /// Of link bandwidth in all-reduce (NCCL ring bus bandwidth is 70–80 % of the link).
    pub link: f64,
    /// Latency of one all-reduce, seconds (NCCL small-message latency on NVLink, ~10 µs).
    pub allreduce_latency_s: f64,
    /// The engine's own time per step beyond the roofline (scheduling, sampling, launch).
    pub step_overhead_s: f64,
    /// Where these figures come from.
    pub source: String,
}

impl Default for Efficiencies {
    fn default() -> Self {
        Self {
            memory: 0.80,
            compute: 0.60,
            attention: 0.50,
            link: 0.75,
            allreduce_latency_s: 10e-6,
            step_overhead_s: 1e-3,
            source: "stated defaults".into(),
        }
    }
}

/// Roofline step cost: `max(bytes / (bandwidth·e), FLOPs / (peak·e)) + all-reduce + overhead`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RooflineCost {
    pub work: ModelWork,
    pub device: DeviceLimits,
    pub eff: Efficiencies,
}

impl RooflineCost {
    /// Seconds reading memory in a step doing `w`.
    pub fn memory_seconds(&self, w: &StepWork) -> f64 {
        let bytes = self.work.read_bytes + self.work.kv_bytes_per_token * (w.decode_context + w.prefill_tokens);
        bytes / (self.device.bandwidth * self.eff.memory)
    }

    /// Seconds computing in a step doing `w`.
    pub fn compute_seconds(&self, w: &StepWork) -> f64 {
        let m = &self.work;
        let linear =
            m.linear_flops_per_token * (w.prefill_tokens + w.decode_seqs) + m.lm_head_flops_per_row * w.sampled;
        let attention = m.attention_flops_per_pair * (w.prefill_attention + w.decode_context);
        linear / (self.device.flops * self.eff.compute) + attention / (self.device.flops * self.eff.attention)
    }

    /// Seconds in all-reduces in a step doing `w` (ring: 2(TP−1)/TP of the bytes cross each link).
    pub fn allreduce_seconds(&self, w: &StepWork, tp: usize) -> f64 {
        if tp <= 1 {
            return 0.0;
        }
        let ring = 2.0 * (tp as f64 - 1.0) / tp as f64;
        let tokens = w.prefill_tokens + w.decode_seqs;
        let bytes = self.work.allreduce_bytes_per_token * tokens * ring;
        bytes / (self.device.link * self.eff.link) + self.work.allreduces_per_step * self.eff.allreduce_latency_s
    }
}

/// A [`RooflineCost`] for a TP group: the step cost the simulator runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProjectedCost {
    pub roofline: RooflineCost,
    pub tp: usize,
}

impl StepCost for ProjectedCost {
    fn step_seconds(&self, w: &StepWork) -> f64 {
        let r = &self.roofline;
        r.memory_seconds(w).max(r.compute_seconds(w)) + r.allreduce_seconds(w, self.tp) + r.eff.step_overhead_s
    }
    fn gap_seconds(&self) -> f64 {
        0.0
    }
}

/// Efficiencies carried over from a measured profile: its decode step's and its large
/// batches' measured ÷ roofline ratios ([`crate::profile::MachineRoofline`]) for memory and
/// compute, its prefill attention's for attention. Links cannot be measured on one device, nor
/// a GPU engine's per-step overhead on a CPU: their defaults stay.
pub fn calibrated(p: &crate::profile::Profile) -> Result<Efficiencies, SizingError> {
    let r = p.roofline.as_ref().ok_or(SizingError::NoRoofline)?;
    let ok = |e: Option<f64>, what: &'static str| {
        e.filter(|e| e.is_finite() && *e > 0.0).ok_or(SizingError::NotMeasured { what })
    };
    let d = Efficiencies::default();
    Ok(Efficiencies {
        memory: ok(r.memory_efficiency, "a one-token decode step")?.min(1.0),
        compute: ok(r.compute_efficiency, "large batches")?.min(1.0),
        attention: r
            .efficiency(Term::PrefillAttention)
            .filter(|e| e.is_finite() && *e > 0.0)
            .unwrap_or(d.attention)
            .min(1.0),
        source: format!("calibrated from the profile of {} on {} ({})", p.model, p.fingerprint.cpu, p.source),
        ..d
    })
}

#[cfg(test)]
#[path = "roofline/tests.rs"]
mod tests;
