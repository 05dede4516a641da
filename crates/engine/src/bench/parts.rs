//! Where a benchmarked step's time goes: its layers' projections, attention, dense MLPs and
//! MoE layers, the LM head (timed by the engine on the CPU, `Llama::time_parts`) and the rest
//! of the step.

use crate::PartTimes;
use serde::{Deserialize, Serialize};

/// The median over a row's timed steps of each part, in seconds.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PartsRow {
    /// The attention layers' q|k|v and o products (`PartTimes::projections_s`).
    #[serde(default)]
    pub projections_s: f64,
    /// Norm, RoPE, KV write and attention itself.
    pub attention_s: f64,
    pub dense_mlp_s: f64,
    pub moe_s: f64,
    /// Final norm and LM head.
    #[serde(default)]
    pub lm_head_s: f64,
    /// Step time less the parts: embedding, scheduling and sampling.
    pub rest_s: f64,
    /// MoE models: bytes of the routed experts the step read over the time of its MoE
    /// layers (decode rows).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moe_gbytes_per_s: Option<f64>,
}

/// The median (linear between the two middle samples; 0 without samples).
fn median(xs: Vec<f64>) -> f64 {
    goodput_metrics::stats::percentile(&xs, 50.0).unwrap_or(0.0)
}

impl PartsRow {
    /// The medians of `steps` (each step's time and its parts); `None` when no step was timed
    /// by parts (a GPU step). `expert_bytes`: the routed experts' bytes a step read, mean.
    pub fn of(steps: &[(f64, PartTimes)], expert_bytes: Option<f64>) -> Option<PartsRow> {
        if steps.is_empty() {
            return None;
        }
        let part = |f: &dyn Fn(&PartTimes) -> f64| median(steps.iter().map(|(_, p)| f(p)).collect());
        let moe_s = part(&|p| p.moe_s);
        let parts = |p: &PartTimes| p.projections_s + p.attention_s + p.dense_mlp_s + p.moe_s + p.lm_head_s;
        Some(PartsRow {
            projections_s: part(&|p| p.projections_s),
            attention_s: part(&|p| p.attention_s),
            dense_mlp_s: part(&|p| p.dense_mlp_s),
            moe_s,
            lm_head_s: part(&|p| p.lm_head_s),
            rest_s: median(steps.iter().map(|(t, p)| t - parts(p)).collect()),
            moe_gbytes_per_s: expert_bytes.filter(|_| moe_s > 0.0).map(|b| b / moe_s / 1e9),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_of_each_part_and_the_rest() {
        let p = |a, d, m| PartTimes { projections_s: 0.05, attention_s: a, dense_mlp_s: d, moe_s: m, lm_head_s: 0.05 };
        let steps = [(1.0, p(0.2, 0.1, 0.5)), (2.0, p(0.4, 0.1, 1.0)), (1.5, p(0.3, 0.1, 0.9))];
        let r = PartsRow::of(&steps, Some(1.8e9)).unwrap();
        assert_eq!((r.attention_s, r.dense_mlp_s, r.moe_s), (0.3, 0.1, 0.9));
        assert_eq!((r.projections_s, r.lm_head_s), (0.05, 0.05));
        // Rests 1.0 − 0.9, 2.0 − 1.6, 1.5 − 1.4: 0.1, 0.4, 0.1, median 0.1. 1.8 GB over 0.9 s
        // of MoE layers: 2 GB/s.
        assert!((r.rest_s - 0.1).abs() < 1e-12);
        assert!((r.moe_gbytes_per_s.unwrap() - 2.0).abs() < 1e-12);
        assert!(PartsRow::of(&[], None).is_none());
        assert_eq!(PartsRow::of(&[(1.0, p(0.4, 0.5, 0.0))], Some(1e9)).unwrap().moe_gbytes_per_s, None);
    }
}
