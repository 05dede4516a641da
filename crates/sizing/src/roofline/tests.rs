use super::*;
use crate::hardware::{DType, HardwareCatalog};
use goodput_core::{Catalog, ModelSpec};

fn llama8b() -> ModelSpec {
    Catalog::builtin().get("llama-3.1-8b").unwrap().clone()
}

fn h100() -> DeviceLimits {
    let g = HardwareCatalog::builtin().get("h100-sxm").unwrap().clone();
    DeviceLimits::uniform(g.bandwidth_bytes_per_s(), g.flops_per_s(DType::Bf16).unwrap(), g.link_bytes_per_s())
}

#[test]
fn llama_3_1_8b_on_h100_by_hand() {
    let w = ModelWork::of(&llama8b(), 2.0, 1).unwrap();
    // Per layer: q, o 4096² each; k, v 4096·1024 each; MLP 3·4096·14336; 2 norms of 4096:
    // 218 112 000 parameters. 32 layers + embedding and LM head (128256·4096 each, untied) +
    // final norm = 8 030 261 248 parameters = 16.06 GB in bf16.
    assert_eq!(w.weight_bytes, 16_060_522_496.0);
    // K and V: 2 · 32 layers · 8 KV heads · 128 · 2 bytes = 128 KiB per token.
    assert_eq!(w.kv_bytes_per_token, 131_072.0);
    // All weights ÷ bandwidth: 16.06 GB / 3.35 TB/s = 4.794 ms, the usual decode floor at
    // batch 1. A step reads all but the untied embedding table (it gathers one row per
    // token): 16.06 GB − 128256·4096·2 B = 15.01 GB, so the floor used is 4.481 ms.
    assert!((w.weight_bytes / h100().bandwidth - 4.794e-3).abs() < 1e-6);
    assert_eq!(w.read_bytes, 16_060_522_496.0 - 1_050_673_152.0);
    let floor = term_floor(Term::Fixed, &w, &h100());
    assert!((floor - 4.481e-3).abs() < 1e-6, "{floor}");
    // Linear FLOPs per token: 2 · 32 · (218 112 000 − 8192); LM head 2 · 128256 · 4096.
    assert_eq!(w.linear_flops_per_token, 2.0 * 32.0 * 218_103_808.0);
    assert_eq!(w.lm_head_flops_per_row, 2.0 * 128_256.0 * 4096.0);
    // QKᵀ and PV: 4 FLOPs · 32 heads · 128 dims per pair per layer.
    assert_eq!(w.attention_flops_per_pair, 4.0 * 32.0 * 32.0 * 128.0);
    assert_eq!((w.allreduce_bytes_per_token, w.allreduces_per_step), (0.0, 0.0));
}

#[test]
fn tensor_parallelism_shards_weights_and_kv_and_adds_all_reduces() {
    let m = llama8b();
    let one = ModelWork::of(&m, 2.0, 1).unwrap();
    let two = ModelWork::of(&m, 2.0, 2).unwrap();
    // Everything halves but the norms (2 per layer and the final one, replicated).
    let norms = (2.0 * 32.0 + 1.0) * 4096.0 * 2.0;
    assert!(((two.weight_bytes - norms) * 2.0 - (one.weight_bytes - norms)).abs() < 1.0);
    assert_eq!(two.kv_bytes_per_token, one.kv_bytes_per_token / 2.0);
    assert_eq!(two.allreduces_per_step, 64.0);
    // 16 ways: 8 KV heads are replicated, one per GPU, and so are their k and v projections.
    let sixteen = ModelWork::of(&m, 2.0, 16).unwrap();
    assert_eq!(sixteen.kv_bytes_per_token, 2.0 * 32.0 * 128.0 * 2.0);
    let per_layer = (2.0 * 4096.0 * 4096.0 + 3.0 * 4096.0 * 14336.0) / 16.0 + 2.0 * 4096.0 * 128.0 + 2.0 * 4096.0;
    assert_eq!(sixteen.linear_flops_per_token, 2.0 * 32.0 * (per_layer - 2.0 * 4096.0));
    assert!(matches!(ModelWork::of(&m, 2.0, 3), Err(ShardError::Heads { tp: 3, heads: 32, .. })));
    assert!(matches!(ModelWork::of(&m, 2.0, 0), Err(ShardError::Zero)));
    let msg = ModelWork::of(&m, 2.0, 3).unwrap_err().to_string();
    assert!(msg.contains("TP 3") && msg.contains("32 attention heads"), "{msg}");
}

#[test]
fn a_projected_step_is_bound_by_memory_at_small_batch_and_by_compute_when_large() {
    let cost = ProjectedCost {
        roofline: RooflineCost {
            work: ModelWork::of(&llama8b(), 2.0, 1).unwrap(),
            device: h100(),
            eff: Efficiencies { step_overhead_s: 0.0, ..Efficiencies::default() },
        },
        layout: Layout::tp(1),
        network_hops: 0,
    };
    let decode = StepWork { decode_seqs: 1.0, decode_context: 1000.0, sampled: 1.0, ..Default::default() };
    // (15.01 GB read + 1000 · 128 KiB) / (3.35 TB/s · 0.8)
    let want = (15_009_849_344.0 + 131_072_000.0) / (3.35e12 * 0.8);
    assert!((cost.step_seconds(&decode) - want).abs() < 1e-9);
    // 8192 prompt tokens: 8192 · 27.9 GFLOP / (989 TFLOP/s · 0.6) ≫ the weights' 6 ms.
    let prefill = StepWork {
        prefill_tokens: 8192.0,
        prefill_attention: 8192.0 * 8193.0 / 2.0,
        sampled: 1.0,
        ..Default::default()
    };
    let r = &cost.roofline;
    assert!(r.compute_seconds(&prefill) > r.memory_seconds(&prefill));
    let p = r.parts(&prefill);
    assert!(p.dense.compute_s > p.dense.memory_s && p.attention.compute_s > p.attention.memory_s);
    assert_eq!(cost.step_seconds(&prefill), r.compute_seconds(&prefill));
}

#[test]
fn a_decode_run_costs_each_step_to_the_bit() {
    // Dense at TP 2 over two stages; experts and sliding windows (past the window midway).
    let gpt_oss = Catalog::builtin().get("gpt-oss-20b").unwrap().clone();
    for (model, tp, pp) in [(llama8b(), 2, 2), (gpt_oss, 1, 1)] {
        let cost = ProjectedCost {
            roofline: RooflineCost {
                work: ModelWork::of(&model, 2.0, tp).unwrap(),
                device: h100(),
                eff: Efficiencies::default(),
            },
            layout: Layout { pp, ..Layout::tp(tp) },
            network_hops: 0,
        };
        let first = StepWork { decode_seqs: 3.0, decode_context: 200.0, sampled: 3.0, ..Default::default() };
        let mut run = Vec::new();
        cost.decode_run_seconds(&first, 200, &mut |s| {
            run.push(s);
            run.len() < 150
        });
        assert_eq!(run.len(), 150, "the run stops when told");
        for (j, got) in run.iter().enumerate() {
            let w = StepWork { decode_context: 200.0 + j as f64 * 3.0, ..first };
            assert_eq!(got.to_bits(), cost.step_seconds(&w).to_bits(), "{}: step {j}", model.name);
        }
        assert!(run[149] > run[0], "the context's reads grow");
    }
}

/// A profile's floors and the planner's steps are one roofline: each term's floor is what a
/// unit of it adds to a step priced at 100 % of the device.
#[test]
fn the_floors_are_the_step_costs_parts_at_100_percent() {
    let (w, d) = (ModelWork::of(&llama8b(), 2.0, 1).unwrap(), h100());
    let floor = |t| term_floor(t, &w, &d);
    assert_eq!(floor(Term::Fixed), w.read_bytes / d.bandwidth);
    assert_eq!(floor(Term::PrefillTokens), w.linear_flops_per_token / d.flops);
    assert_eq!(floor(Term::DecodeSeqs), floor(Term::PrefillTokens));
    assert_eq!(floor(Term::PrefillAttention), w.attention_flops_per_pair / d.attention_flops);
    assert_eq!(floor(Term::DecodeContext), w.kv_bytes_per_token / d.bandwidth);
    assert_eq!(floor(Term::SampledRows), w.lm_head_flops_per_row / d.lm_head_flops);
    assert!((floor(Term::Rows(4)) - 4.0 * floor(Term::SampledRows)).abs() < 1e-15);
    // A step at k tokens: the weights' read until the math of k tokens takes longer.
    let k = |k: u32| (w.read_bytes / d.bandwidth).max(k as f64 * w.linear_flops_per_token / d.flops);
    assert_eq!(floor(Term::Tokens(8)), k(8));
    assert_eq!(floor(Term::Tokens(4096)), k(4096));
    assert!(floor(Term::Tokens(4096)) > floor(Term::Fixed), "compute-bound at 4096 tokens");
    assert_eq!(floor(Term::ExpertsTouched), 0.0, "a dense model touches no expert");
    // The same figure as a step priced at 100 %: a decode step of one sequence at context 1.
    let cost = ProjectedCost {
        roofline: RooflineCost { work: w.clone(), device: d.clone(), eff: Efficiencies::ideal() },
        layout: Layout { tp: 1, dp: 1, ep: 1, pp: 1 },
        network_hops: 0,
    };
    let one = StepWork { decode_seqs: 1.0, decode_context: 1.0, ..Default::default() };
    let step = cost.step_seconds(&one);
    let parts = (w.read_bytes + w.kv_bytes_per_token) / d.bandwidth;
    assert!((step - parts).abs() < 1e-12, "{step} against {parts}");
}
