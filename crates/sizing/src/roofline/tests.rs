use super::*;
use crate::hardware::{DType, HardwareCatalog};
use goodput_core::Catalog;

fn llama8b() -> ModelSpec {
    Catalog::builtin().get("llama-3.1-8b").unwrap().clone()
}

fn h100() -> DeviceLimits {
    let g = HardwareCatalog::builtin().get("h100-sxm").unwrap().clone();
    DeviceLimits {
        bandwidth: g.bandwidth_bytes_per_s(),
        flops: g.flops_per_s(DType::Bf16).unwrap(),
        link: g.link_bytes_per_s(),
    }
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
    // Decode floor at batch 1: 16.06 GB / 3.35 TB/s = 4.794 ms.
    let floor = term_floor(Term::Fixed, &w, &h100());
    assert!((floor - 4.794e-3).abs() < 1e-6, "{floor}");
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
    // The embedding (untied) is replicated; the rest halves.
    let embed = 128_256.0 * 4096.0 * 2.0;
    assert!(((two.weight_bytes - embed) * 2.0 - (one.weight_bytes - embed) - 4096.0 * 2.0 * 65.0).abs() < 1.0);
    assert_eq!(two.kv_bytes_per_token, one.kv_bytes_per_token / 2.0);
    assert_eq!(two.allreduces_per_step, 64.0);
    // 16 ways: 8 KV heads are replicated, one per GPU.
    let sixteen = ModelWork::of(&m, 2.0, 16).unwrap();
    assert_eq!(sixteen.kv_bytes_per_token, 2.0 * 32.0 * 128.0 * 2.0);
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
        tp: 1,
    };
    let decode = StepWork { decode_seqs: 1.0, decode_context: 1000.0, sampled: 1.0, ..Default::default() };
    // (16.06 GB + 1000 · 128 KiB) / (3.35 TB/s · 0.8)
    let want = (16_060_522_496.0 + 131_072_000.0) / (3.35e12 * 0.8);
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
    assert_eq!(cost.step_seconds(&prefill), r.compute_seconds(&prefill));
}
