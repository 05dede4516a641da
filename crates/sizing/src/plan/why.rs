//! Why a configuration serves what it serves: where the time of its steps goes at its usable
//! capacity — reading weights, reading KV, computing, communicating, the engine's fixed
//! overhead — summed over the simulated steps of that level with the roofline's own parts, so
//! the shares add up to the step times the simulation ran on.

use crate::cost::StepWork;
use crate::roofline::{PartTime, ProjectedCost};
use serde::Serialize;

/// The seconds of a level's steps by what bounds each part, and their mean step.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct StepShares {
    /// Parts bound by their reads of weights (the dense layers', the experts').
    pub weights: f64,
    /// Attention bound by its KV reads.
    pub kv: f64,
    /// Parts bound by their math (linear layers, experts, attention).
    pub compute: f64,
    /// All-reduces, all-to-alls and pipeline hand-overs.
    pub communication: f64,
    /// The engine's fixed cost per step.
    pub overhead: f64,
    /// The mean step, seconds.
    pub mean_step_s: f64,
    pub steps: usize,
}

impl StepShares {
    /// The shares of `steps` (fractions of their summed time) under `cost`.
    pub fn of(cost: &ProjectedCost, steps: &[StepWork]) -> StepShares {
        let r = &cost.roofline;
        let pp = cost.layout.pp.max(1) as f64;
        let mut s = StepShares { steps: steps.len(), ..StepShares::default() };
        for w in steps {
            let p = r.parts(w);
            for part in [p.dense, p.experts] {
                *bound(&mut s.weights, &mut s.compute, part) += pp * part.seconds();
            }
            *bound(&mut s.kv, &mut s.compute, p.attention) += pp * p.attention.seconds();
            s.communication += pp * p.communication_s + cost.hops_seconds(w.prefill_tokens + w.decode_seqs);
            s.overhead += r.eff.step_overhead_s;
        }
        let total = s.weights + s.kv + s.compute + s.communication + s.overhead;
        if total > 0.0 {
            for x in [&mut s.weights, &mut s.kv, &mut s.compute, &mut s.communication, &mut s.overhead] {
                *x /= total;
            }
            s.mean_step_s = total / steps.len() as f64;
        }
        s
    }

    /// `41 % weight reads, 35 % KV reads, 18 % compute, 6 % communication`: the shares from the
    /// largest, those under 1 % left out.
    pub fn text(&self) -> String {
        self.largest_shares(5)
    }

    /// The `n` largest shares of [`StepShares::text`].
    pub fn largest_shares(&self, n: usize) -> String {
        let mut parts = [
            (self.weights, "weight reads"),
            (self.kv, "KV reads"),
            (self.compute, "compute"),
            (self.communication, "communication"),
            (self.overhead, "fixed overhead"),
        ];
        parts.sort_by(|a, b| b.0.total_cmp(&a.0));
        let big = parts.iter().filter(|(x, _)| *x >= 0.01).take(n);
        let shown: Vec<String> = big.map(|(x, what)| format!("{:.0} % {what}", x * 100.0)).collect();
        shown.join(", ")
    }

    /// What most of a step's time goes to, in words.
    pub fn largest(&self) -> &'static str {
        let parts = [
            (self.weights, "weight reads (memory bandwidth)"),
            (self.kv, "KV reads (memory bandwidth)"),
            (self.compute, "compute (FLOP/s)"),
            (self.communication, "communication (links)"),
            (self.overhead, "the fixed overhead of a step"),
        ];
        parts.iter().max_by(|a, b| a.0.total_cmp(&b.0)).map_or("", |p| p.1)
    }
}

/// The share a part's time counts toward: its reads where they take at least as long as its
/// math, else its math.
fn bound<'a>(reads: &'a mut f64, math: &'a mut f64, p: PartTime) -> &'a mut f64 {
    if p.memory_s >= p.compute_s {
        reads
    } else {
        math
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::StepCost;
    use crate::layout::Layout;
    use crate::roofline::{DeviceLimits, Efficiencies, ModelWork, RooflineCost};
    use crate::work::{Deployment, Precision};
    use goodput_core::Catalog;

    fn cost(tp: usize) -> ProjectedCost {
        let spec = Catalog::builtin().get("llama-3.1-8b").unwrap().clone();
        let layout = Layout { tp, dp: 1, ep: 1, pp: 1 };
        let precision = Precision { weights: crate::hardware::DType::Bf16, kv: crate::hardware::DType::Bf16 };
        let deploy = Deployment { precision, layout, skew: 0.0, gpus_per_node: 8 };
        let work = ModelWork::build(&spec, &deploy).unwrap();
        // 1 TB/s, 100 TFLOP/s, 100 GB/s links.
        let device = DeviceLimits::uniform(1e12, 1e14, 1e11);
        ProjectedCost { roofline: RooflineCost { work, device, eff: Efficiencies::ideal() }, layout, network_hops: 0 }
    }

    #[test]
    fn the_shares_add_up_to_the_steps_the_simulation_priced() {
        let c = cost(2);
        let steps = [
            StepWork { decode_seqs: 1.0, decode_context: 1000.0, sampled: 1.0, ..Default::default() },
            StepWork { prefill_tokens: 2048.0, prefill_attention: 2048.0 * 1024.0, sampled: 1.0, ..Default::default() },
            StepWork { decode_seqs: 64.0, decode_context: 64.0 * 3000.0, sampled: 64.0, ..Default::default() },
        ];
        let s = StepShares::of(&c, &steps);
        let sum = s.weights + s.kv + s.compute + s.communication + s.overhead;
        assert!((sum - 1.0).abs() < 1e-12, "{s:?}");
        let priced: f64 = steps.iter().map(|w| c.step_seconds(w)).sum();
        assert!((s.mean_step_s * 3.0 - priced).abs() < 1e-12 * priced.max(1.0), "{} vs {priced}", s.mean_step_s * 3.0);
        assert!(s.communication > 0.0, "TP2 all-reduces");
    }

    #[test]
    fn a_lone_decode_reads_weights_and_a_long_prefill_computes() {
        let c = cost(1);
        // Batch 1 at a short context: 16 GB of weights read for 16 GFLOP of math.
        let decode = StepShares::of(
            &c,
            &[StepWork { decode_seqs: 1.0, decode_context: 100.0, sampled: 1.0, ..Default::default() }],
        );
        assert_eq!(decode.largest(), "weight reads (memory bandwidth)");
        let first = format!("{:.0} % weight reads", decode.weights * 100.0);
        assert!(decode.weights > 0.9 && decode.text().starts_with(&first), "{}", decode.text());
        // 8192 prompt tokens: 131 TFLOP against the same 16 GB.
        let prefill =
            StepWork { prefill_tokens: 8192.0, prefill_attention: 8192.0 * 4096.0, sampled: 1.0, ..Default::default() };
        let p = StepShares::of(&c, &[prefill]);
        assert_eq!(p.largest(), "compute (FLOP/s)");
        assert!(p.text().contains("% compute") && !p.text().contains("communication"), "{}", p.text());
    }
}
