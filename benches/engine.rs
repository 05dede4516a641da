//! Engine step costs: attention (paged kernel, gather path, contiguous cache) at decode and
//! prefill shapes of SmolLM2, and whole decode and prefill steps of the `tiny` model.
//!
//! `cargo bench --bench engine` (add `-- attention_decode` to run one group).

use candle_core::{DType, Device, Tensor};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use goodput_core::{Catalog, Clock, FinishReason, SamplingParams};
use goodput_engine::paged_attention::{
    contiguous_attention, gather_attention, paged_attention, paged_attention_kernel, write_kv, AttnMeta,
};
use goodput_engine::weights::DummySource;
use goodput_engine::{EngineConfig, EngineCore, Llama};
use std::time::Duration;

/// SmolLM2-135M attention: 9 query heads, 3 KV heads, head dim 64.
const HQ: usize = 9;
const HKV: usize = 3;
const D: usize = 64;
const BS: usize = 16;

fn rand(shape: (usize, usize, usize)) -> Tensor {
    Tensor::randn(0f32, 1.0, shape, &Device::Cpu).unwrap()
}

/// A pool holding one sequence of `ctx` tokens in scattered blocks; returns pools, the block
/// table and the contiguous K/V.
fn setup(ctx: usize) -> (Tensor, Tensor, Vec<u32>, Tensor, Tensor) {
    let nb = ctx.div_ceil(BS) * 2 + 1;
    let k_pool = Tensor::zeros((nb * BS, HKV, D), DType::F32, &Device::Cpu).unwrap();
    let v_pool = k_pool.zeros_like().unwrap();
    // Every other block, backwards: nothing is contiguous by accident.
    let table: Vec<u32> = (0..ctx.div_ceil(BS) as u32).map(|i| nb as u32 - 1 - 2 * i).collect();
    let (k, v) = (rand((ctx, HKV, D)), rand((ctx, HKV, D)));
    let mut fill = AttnMeta::new(BS);
    fill.push(ctx, ctx, &table);
    write_kv(&k_pool, &v_pool, &k, &v, &fill).unwrap();
    (k_pool, v_pool, table, k, v)
}

fn attention(c: &mut Criterion) {
    let scale = 1.0 / (D as f32).sqrt();
    let mut g = c.benchmark_group("attention_decode");
    g.sample_size(20).warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(2));
    for ctx in [128usize, 512, 2048] {
        let (kp, vp, table, k, v) = setup(ctx);
        let mut meta = AttnMeta::new(BS);
        meta.push(1, ctx, &table);
        let q = rand((1, HQ, D));
        g.bench_with_input(BenchmarkId::new("paged", ctx), &ctx, |b, _| {
            b.iter(|| paged_attention(&q, &kp, &vp, &meta, scale).unwrap())
        });
        g.bench_with_input(BenchmarkId::new("gather", ctx), &ctx, |b, _| {
            b.iter(|| gather_attention(&q, &kp, &vp, &meta, scale).unwrap())
        });
        g.bench_with_input(BenchmarkId::new("contiguous", ctx), &ctx, |b, _| {
            b.iter(|| contiguous_attention(&q, &k, &v, scale).unwrap().contiguous().unwrap())
        });
    }
    g.finish();
    let mut g = c.benchmark_group("attention_prefill");
    g.sample_size(10).warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(3));
    for ctx in [128usize, 512, 2048] {
        let (kp, vp, table, k, v) = setup(ctx);
        let mut meta = AttnMeta::new(BS);
        meta.push(ctx, ctx, &table);
        let q = rand((ctx, HQ, D));
        g.bench_with_input(BenchmarkId::new("kernel", ctx), &ctx, |b, _| {
            b.iter(|| paged_attention_kernel(&q, &kp, &vp, &meta, scale).unwrap())
        });
        g.bench_with_input(BenchmarkId::new("gather", ctx), &ctx, |b, _| {
            b.iter(|| gather_attention(&q, &kp, &vp, &meta, scale).unwrap())
        });
        g.bench_with_input(BenchmarkId::new("contiguous", ctx), &ctx, |b, _| {
            b.iter(|| contiguous_attention(&q, &k, &v, scale).unwrap().contiguous().unwrap())
        });
    }
    g.finish();
}

fn decode_steps(c: &mut Criterion) {
    let spec = Catalog::builtin().get("tiny").unwrap().clone();
    let mut g = c.benchmark_group("decode_step_tiny");
    g.sample_size(20).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(3));
    for batch in [1usize, 4, 16] {
        let mut src = DummySource { seed: 0, dtype: DType::F32, device: Device::Cpu };
        let model = Llama::load(&spec, &mut src, 2048, &Device::Cpu, DType::F32).unwrap();
        let cfg = EngineConfig { num_blocks: Some(2048), enable_prefix_caching: false, ..Default::default() };
        let mut core = EngineCore::new(model, &cfg, Clock::new()).unwrap();
        g.bench_with_input(BenchmarkId::from_parameter(batch), &batch, |b, &batch| {
            b.iter_custom(|iters| {
                // Requests long enough for every timed step to be a pure decode of `batch`.
                for i in 0..batch {
                    let prompt: Vec<u32> = (0..128).map(|t| 3 + ((t * 31 + i * 7) % 30000) as u32).collect();
                    let now = core.clock().now();
                    core.add_request(i as u64, prompt, SamplingParams::greedy_exact(iters as usize + 2), now).unwrap();
                }
                core.step().unwrap(); // prefill
                let t = std::time::Instant::now();
                for _ in 0..iters {
                    core.step().unwrap();
                }
                let dt = t.elapsed();
                core.abort_all(FinishReason::Abort);
                dt
            })
        });
    }
    g.finish();
}

fn prefill_steps(c: &mut Criterion) {
    let spec = Catalog::builtin().get("tiny").unwrap().clone();
    let mut src = DummySource { seed: 0, dtype: DType::F32, device: Device::Cpu };
    let model = Llama::load(&spec, &mut src, 2048, &Device::Cpu, DType::F32).unwrap();
    let cfg = EngineConfig { num_blocks: Some(256), enable_prefix_caching: false, ..Default::default() };
    let mut core = EngineCore::new(model, &cfg, Clock::new()).unwrap();
    let mut g = c.benchmark_group("prefill_step_tiny");
    g.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(3));
    for len in [128usize, 512] {
        let mut seed = 0u64;
        g.bench_with_input(BenchmarkId::from_parameter(len), &len, |b, &len| {
            b.iter(|| {
                // A fresh prompt each time; one token sampled, so the request ends with the step.
                seed += 1;
                let prompt: Vec<u32> = (0..len as u64).map(|t| 3 + ((t * 131 + seed * 7919) % 30000) as u32).collect();
                let now = core.clock().now();
                core.add_request(seed, prompt, SamplingParams::greedy_exact(1), now).unwrap();
                core.step().unwrap().unwrap()
            })
        });
    }
    g.finish();
}

criterion_group!(benches, attention, decode_steps, prefill_steps);
criterion_main!(benches);
