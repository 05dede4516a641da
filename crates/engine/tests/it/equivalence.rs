//! The packed, paged, batched engine against the single-sequence reference with a contiguous
//! cache: same logits (max abs diff ≤ 1e-4 in f32) and the same greedy tokens, across mixed
//! prefill-chunk + decode steps, different lengths, odd chunk boundaries, prefix-cache hits,
//! preemption with recompute, and block reuse after frees.

use candle_core::{DType, Device};
use goodput_core::{Catalog, Clock, FinishReason, ModelSpec, SamplingParams};
use goodput_engine::check::reference::ReferenceRunner;
use goodput_engine::weights::{DummySource, Init, TensorSource};
use goodput_engine::{AttentionImpl, EngineConfig, EngineCore, Llama};
use std::collections::HashMap;

const TOL: f32 = 1e-4;

fn spec(qkv_bias: bool) -> ModelSpec {
    let arch = if qkv_bias { "qwen2" } else { "llama" };
    let text = format!(
        "[models.t]\narchitecture = \"{arch}\"\nhidden_size = 64\nnum_layers = 2\nnum_heads = 4\nnum_kv_heads = 2\n\
         intermediate_size = 96\nvocab_size = 300\nmax_position_embeddings = 256\nrope_theta = 10000.0\n\
         rms_norm_eps = 1e-5\ntie_word_embeddings = false\neos_token_id = 2\n"
    );
    Catalog::parse(&text, "test").unwrap().get("t").unwrap().clone()
}

/// Dummy weights, optionally claiming GGUF's interleaved RoPE layout.
struct Src(DummySource, bool);
impl TensorSource for Src {
    fn tensor(&mut self, name: &str, shape: &[usize], init: Init) -> goodput_engine::Result<candle_core::Tensor> {
        self.0.tensor(name, shape, init)
    }
    fn contains(&self, name: &str) -> bool {
        self.0.contains(name)
    }
    fn rope_interleaved(&self) -> bool {
        self.1
    }
}

fn model(spec: &ModelSpec, interleaved: bool) -> Llama {
    let mut src = Src(DummySource { seed: 7, dtype: DType::F32, device: Device::Cpu }, interleaved);
    Llama::load(spec, &mut src, spec.max_position_embeddings, &Device::Cpu, DType::F32).unwrap()
}

fn prompt(seed: u32, len: usize) -> Vec<u32> {
    (0..len as u32).map(|i| 3 + (i * 7 + seed * 13) % 290).collect()
}

struct Expect {
    tokens: Vec<u32>,
    logits: Vec<Vec<f32>>,
}

fn reference(m: &Llama, p: &[u32], n: usize) -> Expect {
    let (tokens, logits) = ReferenceRunner::new(m).generate(p, n).unwrap();
    Expect { tokens, logits }
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

/// Runs `reqs` (prompt, max_tokens) through an engine core, all queued at once, and checks
/// every request's logits and tokens against the reference. Returns the core for more checks.
fn check_engine(
    m: Llama,
    cfg: EngineConfig,
    reqs: &[(Vec<u32>, usize)],
    expect: &[Expect],
) -> (EngineCore, Vec<goodput_core::EngineRecord>) {
    let mut core = EngineCore::new(m, &cfg, Clock::new()).unwrap();
    core.logits_tap = Some(Vec::new());
    for (i, (p, n)) in reqs.iter().enumerate() {
        core.add_request(i as u64, p.clone(), SamplingParams::greedy_exact(*n), core.clock().now()).unwrap();
    }
    let mut done = core.run_to_completion().unwrap();
    done.sort_by_key(|(r, _)| r.id);
    let mut per_req: HashMap<u64, Vec<Vec<f32>>> = HashMap::new();
    for (id, row) in core.logits_tap.take().unwrap() {
        per_req.entry(id).or_default().push(row);
    }
    for (i, (rec, toks)) in done.iter().enumerate() {
        assert_eq!(toks, &expect[i].tokens, "request {i}: greedy tokens differ from the reference");
        let got = &per_req[&(i as u64)];
        // After a preemption the recompute samples again only the token not yet sampled, so
        // there is exactly one row per generated token.
        assert_eq!(got.len(), expect[i].logits.len(), "request {i}");
        for (j, (a, b)) in got.iter().zip(&expect[i].logits).enumerate() {
            let d = max_diff(a, b);
            assert!(d <= TOL, "request {i} token {j}: max abs logit diff {d}");
        }
        assert_eq!(rec.finish_reason, FinishReason::Length);
    }
    let pool = core.scheduler().pool();
    assert_eq!(pool.num_free_blocks(), pool.usable_blocks(), "all blocks are free after the run");
    pool.check_invariants().unwrap();
    drop(pool);
    (core, done.into_iter().map(|(r, _)| r).collect())
}

fn workload() -> Vec<(Vec<u32>, usize)> {
    vec![(prompt(1, 5), 9), (prompt(2, 17), 6), (prompt(3, 33), 12), (prompt(4, 64), 4), (prompt(5, 1), 7)]
}

#[test]
fn mixed_chunked_batches_match_the_reference() {
    for (bias, interleaved) in [(false, false), (true, false), (false, true)] {
        let s = spec(bias);
        let m = model(&s, interleaved);
        let reqs = workload();
        let expect: Vec<Expect> = reqs.iter().map(|(p, n)| reference(&m, p, *n)).collect();
        // Block size 4 and a budget of 23 tokens: prefill chunks end at odd places, mixed
        // with decodes. A budget of 200: every prompt in one step.
        for budget in [23, 200] {
            let cfg = EngineConfig {
                block_size: 4,
                num_blocks: Some(200),
                max_num_batched_tokens: budget,
                enable_prefix_caching: false,
                ..Default::default()
            };
            let m = model(&s, interleaved);
            check_engine(m, cfg, &reqs, &expect);
        }
    }
}

#[test]
fn gather_path_matches_the_kernel_path() {
    let s = spec(false);
    let mut m = model(&s, false);
    let reqs = workload();
    let expect: Vec<Expect> = reqs.iter().map(|(p, n)| reference(&m, p, *n)).collect();
    m.attention = AttentionImpl::Gather;
    let cfg = EngineConfig { block_size: 8, num_blocks: Some(100), max_num_batched_tokens: 40, ..Default::default() };
    check_engine(m, cfg, &reqs, &expect);
}

#[test]
fn preemption_and_recompute_keep_outputs() {
    let s = spec(false);
    let m = model(&s, false);
    let reqs: Vec<(Vec<u32>, usize)> = (0..6).map(|i| (prompt(i, 10 + i as usize * 3), 20)).collect();
    let expect: Vec<Expect> = reqs.iter().map(|(p, n)| reference(&m, p, *n)).collect();
    // 24 usable blocks of 4 tokens: 6 requests growing to ~45 tokens each cannot all fit.
    let cfg = EngineConfig {
        block_size: 4,
        num_blocks: Some(25),
        max_num_batched_tokens: 64,
        enable_prefix_caching: false,
        ..Default::default()
    };
    let (_, recs) = check_engine(m, cfg, &reqs, &expect);
    let preemptions: u32 = recs.iter().map(|r| r.preemptions).sum();
    assert!(preemptions > 0, "the pool is small enough to force preemptions");
}

#[test]
fn prefix_cache_hits_and_block_reuse_keep_outputs() {
    let s = spec(false);
    let m = model(&s, false);
    let shared = prompt(9, 40);
    let mut with_tail = shared.clone();
    with_tail.extend(prompt(10, 7));
    let reqs = [(shared.clone(), 5), (with_tail.clone(), 5)];
    let expect: Vec<Expect> = reqs.iter().map(|(p, n)| reference(&m, p, *n)).collect();
    let cfg = EngineConfig { block_size: 8, num_blocks: Some(40), max_num_batched_tokens: 512, ..Default::default() };
    let mut core = EngineCore::new(m, &cfg, Clock::new()).unwrap();
    // First request alone fills the cache; the second then hits its 5 full blocks... minus the cap.
    for round in 0..3 {
        for (i, (p, n)) in reqs.iter().enumerate() {
            core.logits_tap = Some(Vec::new());
            core.add_request(i as u64, p.clone(), SamplingParams::greedy_exact(*n), core.clock().now()).unwrap();
            let done = core.run_to_completion().unwrap();
            let (rec, toks) = &done[0];
            assert_eq!(toks, &expect[i].tokens, "round {round} request {i}");
            for (a, b) in core.logits_tap.take().unwrap().iter().zip(&expect[i].logits) {
                assert!(max_diff(&a.1, b) <= TOL);
            }
            if round > 0 || i == 1 {
                assert!(rec.cached_tokens >= 32, "round {round} request {i}: {} cached", rec.cached_tokens);
            }
        }
    }
    let pool = core.scheduler().pool();
    assert_eq!(pool.num_free_blocks(), pool.usable_blocks());
}

#[test]
fn greedy_output_does_not_depend_on_neighbours() {
    let s = spec(false);
    let m = model(&s, false);
    let target = (prompt(42, 21), 10);
    let cfg = EngineConfig { block_size: 4, num_blocks: Some(300), max_num_batched_tokens: 16, ..Default::default() };
    let mut core = EngineCore::new(m, &cfg, Clock::new()).unwrap();
    core.add_request(0, target.0.clone(), SamplingParams::greedy_exact(target.1), core.clock().now()).unwrap();
    let alone = core.run_to_completion().unwrap()[0].1.clone();
    core.add_request(1, target.0.clone(), SamplingParams::greedy_exact(target.1), core.clock().now()).unwrap();
    for i in 0..7 {
        core.add_request(
            10 + i,
            prompt(i as u32, 3 + 5 * i as usize),
            SamplingParams::greedy_exact(15),
            core.clock().now(),
        )
        .unwrap();
    }
    let done = core.run_to_completion().unwrap();
    let crowded = &done.iter().find(|(r, _)| r.id == 1).unwrap().1;
    assert_eq!(&alone, crowded);
}
