//! Roofline step costs: what a step must at least cost on a device, from the model's shape
//! (weight and KV bytes, FLOPs), the device's bandwidth and peak FLOP/s, and, with tensor
//! parallelism, the all-reduces over its links. Efficiencies scale each floor to what an engine
//! reaches: stated defaults, or carried over from a measured profile (measured ÷ floor per term).
//!
//! Units: bytes, FLOPs, seconds. A multiply-add is 2 FLOPs.

use crate::cost::{StepCost, StepWork, Term};
use crate::hardware::{DType, Gpu};
use crate::layout::Layout;
use crate::work::Precision;
use serde::{Deserialize, Serialize};

pub use crate::layout::ShardError;
pub use crate::work::ModelWork;

/// A device's limits as the roofline uses them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeviceLimits {
    /// Memory bandwidth, bytes/s.
    pub bandwidth: f64,
    /// Peak dense FLOP/s of the non-expert linear layers' math.
    pub flops: f64,
    /// Peak FLOP/s of the routed experts' math.
    #[serde(default)]
    pub expert_flops: f64,
    /// Peak FLOP/s of attention (bf16, or fp8 with an fp8 KV cache).
    #[serde(default)]
    pub attention_flops: f64,
    /// Peak FLOP/s of the LM head, kept in bf16 whatever the weights.
    #[serde(default)]
    pub lm_head_flops: f64,
    /// Per-GPU link bandwidth within a node (unidirectional), bytes/s.
    pub link: f64,
    /// Per-GPU bandwidth to other nodes (unidirectional), bytes/s; 0 without a network.
    #[serde(default)]
    pub internode: f64,
    /// What the peaks are, in words (native or emulated).
    #[serde(default)]
    pub math: String,
}

impl DeviceLimits {
    /// One peak for everything, one link, no network: a machine measured as a whole.
    pub fn uniform(bandwidth: f64, flops: f64, link: f64) -> Self {
        Self {
            bandwidth,
            flops,
            expert_flops: flops,
            attention_flops: flops,
            lm_head_flops: flops,
            link,
            internode: 0.0,
            math: String::new(),
        }
    }

    /// `gpu`'s limits for `prec`. A weight dtype the GPU has no tensor cores for (FP8 before
    /// Hopper and Ada, FP4 before Blackwell) is refused, or with `emulate` run as vLLM's
    /// weight-only kernels do (Marlin): the weights read at their size, the math in bf16.
    pub fn of(gpu: &Gpu, prec: Precision, emulate: bool) -> Result<Self, NoTensorCores> {
        let peak = |d: DType| -> Result<(f64, bool), NoTensorCores> {
            match gpu.flops_per_s(d) {
                Some(f) => Ok((f, false)),
                None if emulate => Ok((gpu.bf16_tflops * 1e12, true)),
                None => Err(NoTensorCores { gpu: gpu.name.clone(), dtype: d }),
            }
        };
        let (dense, expert) = prec.math();
        let (flops, e1) = peak(dense)?;
        let (expert_flops, e2) = peak(expert)?;
        let attention_flops = match prec.kv {
            DType::Fp8 => gpu.flops_per_s(DType::Fp8).unwrap_or(gpu.bf16_tflops * 1e12),
            _ => gpu.bf16_tflops * 1e12,
        };
        let math = if e1 || e2 {
            format!("{} weights emulated on bf16 math", prec.weights)
        } else {
            format!("{} tensor cores", expert)
        };
        Ok(Self {
            bandwidth: gpu.bandwidth_bytes_per_s(),
            flops,
            expert_flops,
            attention_flops,
            lm_head_flops: gpu.bf16_tflops * 1e12,
            link: gpu.link_bytes_per_s(),
            internode: gpu.internode_bytes_per_s().unwrap_or(0.0),
            math,
        })
    }
}

/// A weight dtype a GPU has no tensor cores for (and `--emulate` not given).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{gpu} has no {dtype} tensor cores{}; --emulate runs {dtype} weights on bf16 math (weight-only kernels)", if .dtype.is_fp4() { " (Blackwell has)" } else { "" })]
pub struct NoTensorCores {
    pub gpu: String,
    pub dtype: DType,
}

/// The floor of each term on `dev`: seconds per unit of the term at 100 % of the device, as
/// [`RooflineCost::term_seconds`] prices it at [`Efficiencies::ideal`] (one roofline for the
/// planner's steps and a profile's floors).
pub fn term_floor(term: Term, w: &ModelWork, dev: &DeviceLimits) -> f64 {
    RooflineCost { work: w.clone(), device: dev.clone(), eff: Efficiencies::ideal() }.term_seconds(term)
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
    /// Of the network's bandwidth in an all-to-all across nodes (DeepEP's normal kernels
    /// measure 43–58 GB/s of RDMA on 400 Gb/s NICs; 0.85 of 50 GB/s is 42.5).
    #[serde(default = "internode_default")]
    pub internode: f64,
    /// Latency of one dispatch or one combine, seconds (DeepEP's low-latency kernels: tens of
    /// µs at EP8–EP64).
    #[serde(default = "a2a_latency_default")]
    pub all_to_all_latency_s: f64,
    /// Routing, permutation and launch time per MoE layer beyond its bytes and FLOPs, seconds
    /// (BLIS's per-MoE-layer overhead term).
    #[serde(default = "moe_overhead_default")]
    pub moe_layer_overhead_s: f64,
    /// Where these figures come from.
    pub source: String,
}

fn internode_default() -> f64 {
    0.85
}
fn a2a_latency_default() -> f64 {
    20e-6
}
fn moe_overhead_default() -> f64 {
    2e-6
}

impl Efficiencies {
    /// 100 % of every limit and no overheads or latencies: the floor itself.
    pub fn ideal() -> Self {
        Self {
            memory: 1.0,
            compute: 1.0,
            attention: 1.0,
            link: 1.0,
            allreduce_latency_s: 0.0,
            step_overhead_s: 0.0,
            internode: 1.0,
            all_to_all_latency_s: 0.0,
            moe_layer_overhead_s: 0.0,
            source: "the roofline at 100 %".into(),
        }
    }
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
            internode: internode_default(),
            all_to_all_latency_s: a2a_latency_default(),
            moe_layer_overhead_s: moe_overhead_default(),
            source: "stated defaults".into(),
        }
    }
}

/// The seconds of one part of a step: reading its bytes and doing its FLOPs, overlapped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct PartTime {
    pub memory_s: f64,
    pub compute_s: f64,
}

impl PartTime {
    pub fn seconds(&self) -> f64 {
        self.memory_s.max(self.compute_s)
    }
}

/// A step's time by part, on one GPU of one stage.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct StepParts {
    /// Non-expert weights and linear layers, the LM head.
    pub dense: PartTime,
    /// KV reads and attention FLOPs.
    pub attention: PartTime,
    /// Routed experts: the distinct experts' weights read, the assignments' FLOPs, and the
    /// per-layer overhead (in `compute_s`).
    pub experts: PartTime,
    /// All-reduces and all-to-alls, not overlapped with compute.
    pub communication_s: f64,
}

impl StepParts {
    pub fn seconds(&self) -> f64 {
        self.dense.seconds() + self.attention.seconds() + self.experts.seconds() + self.communication_s
    }
}

/// Roofline step cost: each part at `max(bytes / (bandwidth·e), FLOPs / (peak·e))`, the parts
/// in sequence (separate kernels), plus the collectives and the engine's overhead.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RooflineCost {
    pub work: ModelWork,
    pub device: DeviceLimits,
    pub eff: Efficiencies,
}

impl RooflineCost {
    /// The step's parts on one GPU of the slowest stage. Sliding layers see at most their
    /// window per query: decode context min(Σ context, sequences × window), prefill pairs
    /// min(Σ pairs, tokens × window) (exact once every sequence is past its window).
    pub fn parts(&self, w: &StepWork) -> StepParts {
        let tokens = w.prefill_tokens + w.decode_seqs;
        let (experts, a2a) = self.experts(tokens);
        StepParts {
            dense: self.dense(w),
            attention: self.attention(w),
            experts,
            communication_s: self.allreduce_seconds(tokens) + a2a,
        }
    }

    /// The non-expert weights and linear layers of a step doing `w`.
    fn dense(&self, w: &StepWork) -> PartTime {
        let (m, d, e) = (&self.work, &self.device, &self.eff);
        let tokens = w.prefill_tokens + w.decode_seqs;
        PartTime {
            memory_s: m.read_bytes / (d.bandwidth * e.memory),
            compute_s: m.linear_flops_per_token * tokens / (d.flops * e.compute)
                + m.lm_head_flops_per_row * w.sampled / (d.lm_head_flops * e.compute),
        }
    }

    /// The KV reads and attention FLOPs of a step doing `w`.
    fn attention(&self, w: &StepWork) -> PartTime {
        let (m, d, e) = (&self.work, &self.device, &self.eff);
        let (dc_window, pa_window) = match m.window {
            Some(win) => (w.decode_context.min(w.decode_seqs * win), w.prefill_attention.min(w.prefill_tokens * win)),
            None => (0.0, 0.0),
        };
        let kv = m.kv_bytes_per_token * (w.decode_context + w.prefill_tokens)
            + m.sliding_kv_bytes_per_token * (dc_window + w.prefill_tokens);
        let pairs = m.attention_flops_per_pair * w.prefill_attention
            + m.decode_attention_flops_per_pair * w.decode_context
            + m.sliding_attention_flops_per_pair * (pa_window + dc_window);
        PartTime { memory_s: kv / (d.bandwidth * e.memory), compute_s: pairs / (d.attention_flops * e.attention) }
    }

    /// The experts' part and their all-to-all seconds for `tokens` tokens of the group.
    fn experts(&self, tokens: f64) -> (PartTime, f64) {
        let (d, e) = (&self.device, &self.eff);
        let Some(x) = &self.work.experts else { return (PartTime::default(), 0.0) };
        if tokens <= 0.0 {
            return (PartTime::default(), 0.0);
        }
        let q: &[f64] =
            if x.routing.skew == 0.0 { &[] } else { x.hit_probabilities.get_or_init(|| x.routing.hit_probabilities()) };
        let load = x.routing.busiest_rank_of(q, tokens * x.tokens_per_token, x.ep);
        let part = PartTime {
            memory_s: x.layers * load.touched * x.bytes_per_expert / (d.bandwidth * e.memory),
            compute_s: x.layers * load.assignments * x.flops_per_assignment / (d.expert_flops * e.compute)
                + x.layers * e.moe_layer_overhead_s,
        };
        if x.all_to_all_bytes_per_destination <= 0.0 {
            return (part, 0.0);
        }
        let per_destination = tokens / x.senders * x.all_to_all_bytes_per_destination * x.layers;
        let on = per_destination * x.nvlink_destinations_per_token / (d.link * e.link);
        let off = per_destination * x.network_destinations_per_token / (d.internode.max(1.0) * e.internode);
        (part, on.max(off) + 2.0 * x.layers * e.all_to_all_latency_s)
    }

    /// Seconds in all-reduces for `tokens` tokens (ring: 2(TP−1)/TP of the bytes cross each
    /// link); `tp` is read from the work (no all-reduces without TP).
    fn allreduce_seconds(&self, tokens: f64) -> f64 {
        let m = &self.work;
        if m.allreduces_per_step == 0.0 {
            return 0.0;
        }
        let tp = m.tp.max(2) as f64;
        let ring = 2.0 * (tp - 1.0) / tp;
        let bytes = m.allreduce_bytes_per_token * tokens * ring;
        bytes / (self.device.link * self.eff.link) + m.allreduces_per_step * self.eff.allreduce_latency_s
    }

    /// The seconds one unit of `term` adds to a step, from the same parts as a step's cost: a
    /// step's weight reads (`Fixed`), a token's linear and expert math (`PrefillTokens`,
    /// `DecodeSeqs`), a query–key pair's attention math, a context token's KV read, a sampled
    /// row's LM head, and a step at k tokens (its dense and expert parts, each the slower of
    /// its reads and its math); `ExpertsTouched`: one expert's weights read in one layer.
    pub fn term_seconds(&self, term: Term) -> f64 {
        let at = |w: StepWork| self.parts(&w);
        match term {
            Term::Fixed => at(StepWork::default()).dense.memory_s,
            Term::PrefillTokens => {
                let p = at(StepWork { prefill_tokens: 1.0, ..Default::default() });
                p.dense.compute_s + p.experts.compute_s
            }
            Term::DecodeSeqs => {
                let p = at(StepWork { decode_seqs: 1.0, ..Default::default() });
                p.dense.compute_s + p.experts.compute_s
            }
            Term::PrefillAttention => at(StepWork { prefill_attention: 1.0, ..Default::default() }).attention.compute_s,
            // One context token's K/V read, whatever the batch and length.
            Term::DecodeContext | Term::SeqContext(..) | Term::BatchContext(_) | Term::LengthContext(_) => {
                at(StepWork { decode_context: 1.0, ..Default::default() }).attention.memory_s
            }
            Term::RepeatedContext => at(StepWork { decode_context: 1.0, ..Default::default() }).attention.compute_s,
            Term::Context(k) => at(StepWork { decode_context: k as f64, ..Default::default() }).attention.memory_s,
            Term::SampledRows => at(StepWork { sampled: 1.0, ..Default::default() }).dense.compute_s,
            Term::Rows(k) => at(StepWork { sampled: k as f64, ..Default::default() }).dense.compute_s,
            Term::Tokens(k) => {
                let p = at(StepWork { prefill_tokens: k as f64, ..Default::default() });
                p.dense.seconds() + p.experts.seconds()
            }
            // Beyond the same step later: no roofline of its own (0, no efficiency).
            Term::AfterPrefill(_) | Term::AfterPrefillContext(_) | Term::AfterIdle(_) | Term::AfterIdleTokens(_) => 0.0,
            Term::ExpertsTouched => self
                .work
                .experts
                .as_ref()
                .map_or(0.0, |x| x.bytes_per_expert / (self.device.bandwidth * self.eff.memory)),
        }
    }

    /// Seconds reading memory in a step doing `w`, all parts.
    pub fn memory_seconds(&self, w: &StepWork) -> f64 {
        let p = self.parts(w);
        p.dense.memory_s + p.attention.memory_s + p.experts.memory_s
    }

    /// Seconds computing in a step doing `w`, all parts.
    pub fn compute_seconds(&self, w: &StepWork) -> f64 {
        let p = self.parts(w);
        p.dense.compute_s + p.attention.compute_s + p.experts.compute_s
    }
}

/// A [`RooflineCost`] for a replica's layout: the step cost the simulator runs for one of its
/// attention groups. With pipeline stages, one step passes every stage in turn at the pace of
/// the slowest (the others idle: the bubble of unequal stages), each hand-over a hop over the
/// link; the replica runs `pp` such groups' steps at once (vLLM's virtual engines).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProjectedCost {
    pub roofline: RooflineCost,
    pub layout: Layout,
    /// Hand-overs between stages that cross nodes (the others stay on the node's links).
    #[serde(default)]
    pub network_hops: usize,
}

impl ProjectedCost {
    /// Seconds of the hand-overs between stages for `tokens` tokens.
    pub(crate) fn hops_seconds(&self, tokens: f64) -> f64 {
        let r = &self.roofline;
        let hops = self.layout.pp.saturating_sub(1);
        let network = self.network_hops.min(hops);
        let bytes = tokens * r.work.stage_bytes_per_token;
        let link = (hops - network) as f64 * bytes / r.device.link;
        let net = network as f64 * bytes / r.device.internode.max(1.0);
        link + net + hops as f64 * r.eff.allreduce_latency_s
    }
}

impl StepCost for ProjectedCost {
    fn step_seconds(&self, w: &StepWork) -> f64 {
        let r = &self.roofline;
        let stage = r.parts(w).seconds();
        let pp = self.layout.pp.max(1) as f64;
        pp * stage + self.hops_seconds(w.prefill_tokens + w.decode_seqs) + r.eff.step_overhead_s
    }
    fn gap_seconds(&self) -> f64 {
        0.0
    }
    /// Along a run only the attention part moves (the context grows): the others, computed
    /// once, are added in `step_seconds`' order, so each step's seconds are the same bits.
    fn decode_run_seconds(&self, first: &StepWork, steps: usize, each: &mut dyn FnMut(f64) -> bool) {
        let r = &self.roofline;
        let fixed = r.parts(first);
        let (dense, experts, comm) = (fixed.dense.seconds(), fixed.experts.seconds(), fixed.communication_s);
        let pp = self.layout.pp.max(1) as f64;
        let (hops, overhead) = (self.hops_seconds(first.prefill_tokens + first.decode_seqs), r.eff.step_overhead_s);
        let mut w = *first;
        for j in 0..steps {
            w.decode_context = first.decode_context + j as f64 * first.decode_seqs;
            w.decode_distinct = first.decode_distinct.map(|d| d + j as f64 * first.decode_seqs);
            let stage = dense + r.attention(&w).seconds() + experts + comm;
            if !each(pp * stage + hops + overhead) {
                return;
            }
        }
    }
}

#[cfg(test)]
#[path = "roofline/tests.rs"]
mod tests;
