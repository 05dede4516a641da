//! The families of 2026 against transformers: tiny random models built and run by
//! `scripts/make-ref-models.py` (transformers 5.24, f32, eager), checked in under
//! `tests/fixtures/ref-models/`, with teacher-forced logits and 32 greedy ids per prompt. The
//! engine loads each directory as a user's `--model DIR` would, and must give the same logits
//! (≤ 1e-4) and the same greedy ids alone, batched with chunked prefills, with prefix-cache
//! hits and with preemption; the dense single-sequence reference must agree too. bf16 top-1
//! agreement is printed.

use candle_core::{DType, Device};
use goodput_core::{Clock, ModelSpec, SamplingParams};
use goodput_engine::check::reference::ReferenceRunner;
use goodput_engine::kv_cache::KvCache;
use goodput_engine::weights::SafetensorsSource;
use goodput_engine::{EngineConfig, EngineCore, Llama, StepBatch};
use std::path::{Path, PathBuf};

const TOL: f32 = 1e-4;
const FAMILIES: [&str; 7] =
    ["qwen3", "qwen3_moe", "qwen3_moe_fused", "mixtral", "deepseek_v3", "gpt_oss", "gpt_oss_mxfp4"];

fn dir(family: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/ref-models").join(family)
}

fn load(family: &str, dtype: DType) -> Llama {
    let d = dir(family);
    let text = std::fs::read_to_string(d.join("config.json")).unwrap();
    let spec = ModelSpec::from_hf_config(family, &text).unwrap_or_else(|e| panic!("{family}: {e}"));
    let mut src = SafetensorsSource::open(&[d.join("model.safetensors")], dtype, Device::Cpu).unwrap();
    Llama::load(&spec, &mut src, 256, &Device::Cpu, dtype).unwrap_or_else(|e| panic!("{family}: {e}"))
}

struct Case {
    prompt: Vec<u32>,
    greedy: Vec<u32>,
    /// `(prompt + greedy, vocab)`.
    logits: Vec<Vec<f32>>,
}

fn cases(family: &str) -> Vec<Case> {
    let r = candle_core::safetensors::load(dir(family).join("reference.safetensors"), &Device::Cpu).unwrap();
    let ids = |k: &str| -> Vec<u32> { r[k].to_vec1::<i64>().unwrap().into_iter().map(|x| x as u32).collect() };
    (0..3)
        .map(|i| Case {
            prompt: ids(&format!("prompt_{i}")),
            greedy: ids(&format!("greedy_{i}")),
            logits: r[&format!("logits_{i}")].to_vec2::<f32>().unwrap(),
        })
        .collect()
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

fn argmax(x: &[f32]) -> u32 {
    x.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map_or(0, |(i, _)| i as u32)
}

/// One packed prefill over `tokens` with every row sampled: the teacher-forced logits.
fn teacher_forced(m: &Llama, tokens: &[u32]) -> Vec<Vec<f32>> {
    let bs = 4;
    let (kv, tables) = KvCache::for_one_sequence(&m.spec, tokens.len(), bs, m.dtype, &Device::Cpu).unwrap();
    let mut batch = StepBatch::new(bs);
    batch.push(tokens, 0, &tables, true);
    batch.sample_rows = (0..tokens.len() as u32).collect();
    Llama::logits_rows(&m.forward(&batch, &kv).unwrap()).unwrap()
}

/// Every prompt's greedy ids from one engine core, all queued at once.
fn engine_greedy(m: Llama, cfg: &EngineConfig, cases: &[&Case]) -> (Vec<Vec<u32>>, u32) {
    let mut core = EngineCore::new(m, cfg, Clock::new()).unwrap();
    for (i, c) in cases.iter().enumerate() {
        core.add_request(i as u64, c.prompt.clone(), SamplingParams::greedy_exact(32), core.clock().now()).unwrap();
    }
    let mut done = core.run_to_completion().unwrap();
    done.sort_by_key(|(r, _)| r.id);
    let pool = core.scheduler().pool();
    assert_eq!(pool.num_free_blocks(), pool.usable_blocks(), "all blocks are free after the run");
    pool.check_invariants().unwrap();
    let preempted = done.iter().map(|(r, _)| r.preemptions).sum();
    (done.into_iter().map(|(_, t)| t).collect(), preempted)
}

#[test]
fn every_family_matches_transformers_logits_in_f32() {
    for family in FAMILIES {
        let m = load(family, DType::F32);
        for (i, c) in cases(family).iter().enumerate() {
            let seq: Vec<u32> = c.prompt.iter().chain(&c.greedy).copied().collect();
            let got = teacher_forced(&m, &seq);
            let worst = got.iter().zip(&c.logits).map(|(a, b)| max_diff(a, b)).fold(0.0, f32::max);
            assert!(worst <= TOL, "{family} prompt {i}: engine logits off by {worst}");
            println!("{family} prompt {i}: engine max |Δ logit| {worst:.2e}");
            let reference = ReferenceRunner::new(&m).forward_all(&seq).unwrap();
            let worst = reference.iter().zip(&c.logits).map(|(a, b)| max_diff(a, b)).fold(0.0, f32::max);
            assert!(worst <= TOL, "{family} prompt {i}: reference logits off by {worst}");
            let ids: Vec<u32> = got[c.prompt.len() - 1..seq.len() - 1].iter().map(|r| argmax(r)).collect();
            assert_eq!(ids, c.greedy, "{family} prompt {i}: teacher-forced argmax");
        }
    }
}

#[test]
fn every_family_generates_transformers_greedy_ids_alone_batched_cached_and_preempted() {
    for family in FAMILIES {
        let cases = cases(family);
        let want: Vec<Vec<u32>> = cases.iter().map(|c| c.greedy.clone()).collect();
        let all: Vec<&Case> = cases.iter().collect();
        for (i, c) in cases.iter().enumerate() {
            let cfg = EngineConfig { block_size: 4, num_blocks: Some(64), ..Default::default() };
            let (got, _) = engine_greedy(load(family, DType::F32), &cfg, &[c]);
            assert_eq!(got[0], want[i], "{family} prompt {i} alone");
        }
        // Batched, prefills chunked at odd places (a budget of 7 tokens), block size 4.
        let cfg = EngineConfig {
            block_size: 4,
            num_blocks: Some(80),
            max_num_batched_tokens: 7,
            enable_prefix_caching: false,
            ..Default::default()
        };
        assert_eq!(engine_greedy(load(family, DType::F32), &cfg, &all).0, want, "{family} batched");
        // A pool too small for all three at full length: preemption and recompute (gpt-oss's
        // sliding group needs blocks of its own: a recompute of 52 positions holds 13 of them).
        let blocks = if load(family, DType::F32).spec.kv_groups().len() > 1 { 28 } else { 20 };
        let cfg = EngineConfig {
            block_size: 4,
            num_blocks: Some(blocks),
            enable_prefix_caching: false,
            ..Default::default()
        };
        let (got, preempted) = engine_greedy(load(family, DType::F32), &cfg, &all);
        assert_eq!(got, want, "{family} with preemption");
        assert!(preempted > 0, "{family}: the pool forces preemption");
        // The same request twice on one core: the second hits the prefix cache.
        let cfg = EngineConfig { block_size: 4, num_blocks: Some(64), ..Default::default() };
        let mut core = EngineCore::new(load(family, DType::F32), &cfg, Clock::new()).unwrap();
        for round in 0..2 {
            core.add_request(round, cases[2].prompt.clone(), SamplingParams::greedy_exact(32), core.clock().now())
                .unwrap();
            let done = core.run_to_completion().unwrap();
            assert_eq!(done[0].1, want[2], "{family} round {round}");
            if round == 1 {
                assert!(done[0].0.cached_tokens >= 16, "{family}: {} cached", done[0].0.cached_tokens);
            }
        }
    }
}

/// gpt-oss's sliding layers (window 8) keep only the blocks their window sees while its full
/// layers keep every one, and the step records say so by kind.
#[test]
fn sliding_layers_hold_only_their_window_in_the_pool() {
    let m = load("gpt_oss", DType::F32);
    assert_eq!(m.spec.kv_groups().iter().map(|g| g.window).collect::<Vec<_>>(), [Some(8), None]);
    let cfg = EngineConfig { block_size: 4, num_blocks: Some(64), enable_prefix_caching: false, ..Default::default() };
    let mut core = EngineCore::new(m, &cfg, Clock::new()).unwrap();
    let prompt = cases("gpt_oss")[2].prompt.clone();
    core.add_request(0, prompt.clone(), SamplingParams::greedy_exact(32), core.clock().now()).unwrap();
    let mut ctx = prompt.len();
    while let Some(step) = core.step().unwrap() {
        let by_kind = step.record.kv_by_kind.expect("a hybrid model reports KV by kind");
        assert_eq!(by_kind.full + by_kind.sliding, step.record.blocks_used);
        if step.update.finished.is_empty() {
            // The next query (at `ctx`) sees ctx-7..=ctx: at most 3 blocks of 4 hold that.
            assert_eq!(by_kind.full, ctx.div_ceil(4), "full layers keep every position");
            assert!(by_kind.sliding <= 3, "sliding layers hold {} blocks at context {ctx}", by_kind.sliding);
            ctx += 1;
        }
    }
    assert_eq!(core.scheduler().blocks_used(), 0);
}

/// bf16 weights (f32 activations on CPU): how often the teacher-forced top-1 is
/// transformers' f32 top-1. Printed for the note; held above 90 %.
#[test]
fn bf16_top1_agreement_per_family() {
    for family in FAMILIES {
        let m = load(family, DType::BF16);
        let (mut same, mut all) = (0, 0);
        for c in cases(family) {
            let seq: Vec<u32> = c.prompt.iter().chain(&c.greedy).copied().collect();
            for (a, b) in teacher_forced(&m, &seq).iter().zip(&c.logits) {
                same += usize::from(argmax(a) == argmax(b));
                all += 1;
            }
        }
        let share = same as f64 / all as f64;
        println!("bf16 top-1 agreement {family}: {same}/{all} ({:.1} %)", 100.0 * share);
        assert!(share >= 0.9, "{family}: bf16 top-1 agreement {share}");
    }
}

/// A family's tensor of the wrong shape is an error naming it.
#[test]
fn a_missing_or_misshapen_expert_tensor_is_named() {
    let d = dir("mixtral");
    let spec = ModelSpec::from_hf_config("m", &std::fs::read_to_string(d.join("config.json")).unwrap()).unwrap();
    let mut wrong = spec.clone();
    wrong.moe.as_mut().unwrap().expert_intermediate_size += 1;
    let mut src = SafetensorsSource::open(&[d.join("model.safetensors")], DType::F32, Device::Cpu).unwrap();
    let e = Llama::load(&wrong, &mut src, 64, &Device::Cpu, DType::F32).err().unwrap().to_string();
    assert!(e.contains("block_sparse_moe.experts.0.w1.weight"), "{e}");
}
