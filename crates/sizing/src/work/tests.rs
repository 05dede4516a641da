use super::*;
use goodput_core::Catalog;

fn model(name: &str) -> ModelSpec {
    Catalog::builtin().get(name).unwrap().clone()
}

fn deploy(weights: DType, kv: DType, tp: usize, dp: usize, ep: usize, pp: usize) -> Deployment {
    Deployment { precision: Precision { weights, kv }, layout: Layout { tp, dp, ep, pp }, skew: 0.0, gpus_per_node: 8 }
}

#[test]
fn deepseek_v3_latent_kv_is_70272_bytes_a_token_on_every_gpu_of_a_tp_group() {
    let m = model("deepseek-v3");
    // 61 layers × (512 latent + 64 RoPE key) × 2 bytes = 70 272 B, not divided by TP.
    for tp in [1, 8] {
        let w = ModelWork::build(&m, &deploy(DType::Bf16, DType::Bf16, tp, 1, 1, 1)).unwrap();
        assert_eq!(w.kv_bytes_per_token, 70_272.0, "TP{tp}");
        assert_eq!(w.sliding_kv_bytes_per_token, 0.0);
    }
    // Attention per pair, per layer: prefill expands K/V, 2·128·(128 + 64 + 128); decode
    // attends over the latent, 2·128·(2·512 + 64).
    let w = ModelWork::build(&m, &deploy(DType::Fp8, DType::Bf16, 8, 1, 8, 1)).unwrap();
    assert_eq!(w.attention_flops_per_pair, 2.0 * 16.0 * 320.0 * 61.0);
    assert_eq!(w.decode_attention_flops_per_pair, 2.0 * 16.0 * 1088.0 * 61.0);
}

#[test]
fn deepseek_v3_expert_bytes_from_one_token_to_every_expert() {
    let m = model("deepseek-v3");
    let w = ModelWork::build(&m, &deploy(DType::Fp8, DType::Bf16, 8, 1, 8, 1)).unwrap();
    let x = w.experts.clone().unwrap();
    // One expert: 3 · 7168 · 2048 = 44 040 192 FP8 bytes, whole on its rank (expert TP 1).
    assert_eq!(x.bytes_per_expert, 44_040_192.0);
    assert_eq!(x.layers, 58.0, "61 layers less the first 3 dense");
    // B = 1: a rank's 32 experts are each hit with 8/256: one expert per layer.
    let one = x.routing.busiest_rank(1.0, 8);
    assert!((one.touched * x.layers * x.bytes_per_expert - 58.0 * 44_040_192.0).abs() < 1.0);
    // B → ∞: all 32 experts of every layer, 58 · 32 · 44 040 192 = 81.7 GB, the rank's share.
    let all = x.routing.busiest_rank(1e9, 8);
    assert!((all.touched * x.layers * x.bytes_per_expert - 81_738_596_352.0).abs() < 1e3);
    // What a GPU holds: those experts and its share of the rest.
    assert!(w.weight_bytes > 81.7e9 && w.weight_bytes < 90e9, "{}", w.weight_bytes);
}

#[test]
fn deepseek_v3_all_to_all_bytes_of_one_step_at_ep8() {
    let m = model("deepseek-v3");
    // Wide EP: 8 GPUs, attention DP 8, EP 8, each GPU its own tokens.
    let w = ModelWork::build(&m, &deploy(DType::Fp8, DType::Bf16, 1, 8, 8, 1)).unwrap();
    let x = w.experts.clone().unwrap();
    // 3.175 other ranks per token (group-limited routing, see routing's tests); 7168 bytes
    // out in FP8 and 2 · 7168 back in bf16 per destination and layer.
    assert!((x.nvlink_destinations_per_token - 3.175_385).abs() < 1e-5);
    assert_eq!(x.all_to_all_bytes_per_destination, 3.0 * 7168.0);
    assert_eq!((x.senders, x.tokens_per_token, x.network_destinations_per_token), (1.0, 8.0, 0.0));
    // A decode step of 128 sequences per GPU: 128 · 3.175385 · 21 504 · 58 = 507 MB.
    let bytes = 128.0 * x.nvlink_destinations_per_token * x.all_to_all_bytes_per_destination * x.layers;
    assert!((bytes - 506_948_000.0).abs() < 1e5, "{bytes}");
    // No TP: no all-reduce; the MoE layers combine by all-to-all.
    assert_eq!(w.allreduces_per_step, 0.0);
    // EP 16 over two nodes of 4 groups each. The token keeps h of the other node's groups
    // with C(4,h)·C(4,4−h)/C(8,4) = 1, 16, 36, 16, 1 in 70, and then misses them with
    // C(128 − 32h, 8)/C(128, 8) = 1, 0.092747, 0.0030959, 0.0000074, 0: it reaches the other
    // node with 1 − 0.037079 = 0.962921. The network carries it there once; NVLink carries
    // it to the ranks of its own node it reaches.
    let two = ModelWork::build(&m, &deploy(DType::Fp8, DType::Bf16, 1, 16, 16, 1)).unwrap();
    let x = two.experts.unwrap();
    let other = x.routing.remote_ranks_per_token(2);
    assert!((other - 0.962_921).abs() < 1e-6, "{other}");
    assert_eq!(x.network_destinations_per_token, other);
    let hit = x.routing.remote_ranks_per_token(16) / 15.0;
    assert!((x.nvlink_destinations_per_token - 7.0 * hit).abs() < 1e-12);
}

#[test]
fn gpt_oss_120b_keeps_sliding_layers_to_their_window() {
    let m = model("gpt-oss-120b");
    let w = ModelWork::build(&m, &deploy(DType::Mxfp4, DType::Bf16, 1, 1, 1, 1)).unwrap();
    // 18 full and 18 sliding layers; each 2 · 8 KV heads · 64 · 2 bytes = 2048 B a token.
    assert_eq!(w.kv_bytes_per_token, 18.0 * 2048.0);
    assert_eq!(w.sliding_kv_bytes_per_token, 18.0 * 2048.0);
    assert_eq!(w.window, Some(128.0));
    // A 2000-token sequence: 18 · 2048 · 2000 + 18 · 2048 · 128 = 78.4 MB (not 147 MB).
    assert_eq!(m.kv_bytes_for_context(2000, 2), 78_446_592);
    // Experts in MXFP4: 3 · 2880 · 2880 weights (+ biases) at 4.25 bits.
    let x = w.experts.unwrap();
    assert_eq!(x.bytes_per_expert, m.expert_params() as f64 * 0.53125);
    assert!(w.weight_bytes > 60e9 && w.weight_bytes < 66e9, "{}", w.weight_bytes);
}

#[test]
fn qwen3_235b_a22b_activates_22_billion_parameters() {
    let m = model("qwen3-235b-a22b");
    // Per layer: attention q, o 4096·64·128 each, k, v 4096·4·128 each, q/k norms 2·128 =
    // 71 303 424; router 128·4096 = 524 288; 8 of 128 experts at 3·4096·1536 = 150 994 944;
    // two norms 8192. 94 layers: 20 946 099 712. Embedding and LM head 2·151 936·4096 =
    // 1 244 659 712, the final norm 4096: 22 190 763 520.
    assert_eq!(m.active_param_count(), 22_190_763_520);
}

#[test]
fn pipeline_stages_hold_their_share_and_hand_the_hidden_state_on() {
    let m = model("llama-3.1-70b");
    let one = ModelWork::build(&m, &deploy(DType::Bf16, DType::Bf16, 4, 1, 1, 1)).unwrap();
    let two = ModelWork::build(&m, &deploy(DType::Bf16, DType::Bf16, 4, 1, 1, 2)).unwrap();
    // 80 layers in two stages of 40: half the KV and layer weights per GPU.
    assert_eq!(two.kv_bytes_per_token * 2.0, one.kv_bytes_per_token);
    assert_eq!((two.stages, two.stage_bytes_per_token), (2, 2.0 * 8192.0));
    assert!(two.weight_bytes < 0.55 * one.weight_bytes, "{} vs {}", two.weight_bytes, one.weight_bytes);
}

#[test]
fn layouts_that_cannot_be_are_refused_by_name() {
    let oss = model("gpt-oss-120b");
    let e = ModelWork::build(&oss, &deploy(DType::Mxfp4, DType::Bf16, 1, 6, 6, 1)).unwrap_err();
    assert!(matches!(e, ShardError::Experts { ep: 6, experts: 128, .. }), "{e}");
    assert!(e.to_string().contains("EP 6 does not divide"), "{e}");
    let e = ModelWork::build(&oss, &deploy(DType::Mxfp4, DType::Bf16, 1, 4, 8, 1)).unwrap_err();
    assert!(matches!(e, ShardError::EpGpus { .. }), "{e}");
    let llama = model("llama-3.1-8b");
    let e = ModelWork::build(&llama, &deploy(DType::Bf16, DType::Bf16, 1, 2, 2, 1)).unwrap_err();
    assert!(matches!(e, ShardError::NoExperts { .. }), "{e}");
    let e = ModelWork::build(&llama, &deploy(DType::Bf16, DType::Bf16, 16, 1, 1, 1)).unwrap_err();
    assert!(matches!(e, ShardError::TpAcrossNodes { tp: 16, per_node: 8 }), "{e}");
    let e = ModelWork::build(&llama, &deploy(DType::Bf16, DType::Bf16, 1, 1, 1, 33)).unwrap_err();
    assert!(matches!(e, ShardError::Stages { .. }), "{e}");
    // TP 4 fits a node of 8 twice; TP 6 would leave a group across two nodes.
    let e = ModelWork::build(&model("qwen3-235b-a22b"), &deploy(DType::Fp8, DType::Fp8, 6, 2, 1, 1)).unwrap_err();
    assert!(matches!(e, ShardError::Heads { .. } | ShardError::TpAcrossNodes { .. }), "{e}");
    // Stages of 6 GPUs on nodes of 8: the second stage would straddle them.
    let e = ModelWork::build(&llama, &deploy(DType::Bf16, DType::Bf16, 2, 3, 1, 2)).unwrap_err();
    assert!(matches!(e, ShardError::StageAcrossNodes { gpus: 6, per_node: 8 }), "{e}");
}
