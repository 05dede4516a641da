//! Engine step costs: attention (paged kernel over f32 and bf16 pools, gather path, contiguous
//! cache) at decode and prefill shapes of SmolLM2; the bf16-weight matmul against the f32 one
//! (its `vdpbf16ps` path and its f32-activation panels at 512 rows, where the CPU has AVX-512
//! BF16) and candle's bf16 matmul at SmolLM2's shapes; the packed prefill product on AMX tiles
//! against `vdpbf16ps`; whole decode and prefill steps of the `tiny`
//! model in f32 and bf16; the sampler (greedy, temperature, top-k, top-p).
//!
//! `cargo bench --bench engine` (add `-- attention_decode` to run one group).

use candle_core::{DType, Device, Tensor};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use goodput_core::{Catalog, Clock, FinishReason, SamplingParams};
use goodput_engine::attention::{contiguous_attention, gather_attention, paged_attention, write_kv, AttnOpts};
use goodput_engine::cpu::paged_attention::paged_attention_kernel;
use goodput_engine::cpu::{amx, bf16, bf16_dot, skinny};
use goodput_engine::kv_cache::AttnMeta;
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
    setup_dtype(ctx, DType::F32)
}

fn setup_dtype(ctx: usize, dtype: DType) -> (Tensor, Tensor, Vec<u32>, Tensor, Tensor) {
    let nb = ctx.div_ceil(BS) * 2 + 1;
    let k_pool = Tensor::zeros((nb * BS, HKV, D), dtype, &Device::Cpu).unwrap();
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
    let scale = &AttnOpts::scaled(1.0 / (D as f32).sqrt());
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
        let (kb, vb, table_b, _, _) = setup_dtype(ctx, DType::BF16);
        let mut meta_b = AttnMeta::new(BS);
        meta_b.push(1, ctx, &table_b);
        g.bench_with_input(BenchmarkId::new("paged_bf16", ctx), &ctx, |b, _| {
            b.iter(|| paged_attention(&q, &kb, &vb, &meta_b, scale).unwrap())
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
        let (kb, vb, table_b, _, _) = setup_dtype(ctx, DType::BF16);
        let mut meta_b = AttnMeta::new(BS);
        meta_b.push(ctx, ctx, &table_b);
        g.bench_with_input(BenchmarkId::new("kernel_bf16", ctx), &ctx, |b, _| {
            b.iter(|| paged_attention_kernel(&q, &kb, &vb, &meta_b, scale).unwrap())
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

/// A decode step's attention at batch 16: one layer's pool re-read (cache-hot), and 30 layers'
/// pools one after the other (cold, as a step reads them).
fn attention_decode_batch(c: &mut Criterion) {
    // A decode step's attention at batch 16 (each sequence 137 positions, as engine-bench's
    // decode rows): one query row per sequence over its own blocks.
    let scale = &AttnOpts::scaled(1.0 / (D as f32).sqrt());
    let mut g = c.benchmark_group("attention_decode_batch");
    g.sample_size(30).warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(3));
    for (dtype, name) in [(DType::F32, "paged"), (DType::BF16, "paged_bf16")] {
        let (batch, ctx) = (16usize, 137usize);
        let per = ctx.div_ceil(BS);
        let k_pool = Tensor::zeros((batch * per * BS + BS, HKV, D), dtype, &Device::Cpu).unwrap();
        let v_pool = k_pool.zeros_like().unwrap();
        let (mut meta, mut fill) = (AttnMeta::new(BS), AttnMeta::new(BS));
        for s in 0..batch {
            let table: Vec<u32> = (0..per).map(|b| (1 + b * batch + s) as u32).collect();
            meta.push(1, ctx, &table);
            fill.push(ctx, ctx, &table);
        }
        let kv = |_| rand((batch * ctx, HKV, D)).to_dtype(dtype).unwrap();
        write_kv(&k_pool, &v_pool, &kv(0), &kv(1), &fill).unwrap();
        let q = rand((batch, HQ, D));
        g.bench_function(BenchmarkId::new(name, batch), |b| {
            b.iter(|| paged_attention(&q, &k_pool, &v_pool, &meta, scale).unwrap())
        });
    }
    // The same over 30 layers' pools, one after the other, as a decode step of SmolLM2 reads
    // them (each pool cold in the caches when its turn comes; each sequence's blocks
    // consecutive, as the scheduler hands them out), at short and long contexts (1024: 12 MB
    // of K/V per layer, streamed from memory).
    for ctx in [137usize, 1024] {
        attention_decode_cold(&mut g, ctx);
    }
    g.finish();
}

/// [`attention_decode_batch`]'s 30 cold layers at `ctx` positions per sequence.
fn attention_decode_cold(g: &mut criterion::BenchmarkGroup<criterion::measurement::WallTime>, ctx: usize) {
    let scale = &AttnOpts::scaled(1.0 / (D as f32).sqrt());
    let (batch, layers) = (16usize, 30usize);
    let per = ctx.div_ceil(BS);
    let blocks = batch * per + 1;
    let (mut meta, mut fill) = (AttnMeta::new(BS), AttnMeta::new(BS));
    for s in 0..batch {
        let table: Vec<u32> = (0..per).map(|b| (1 + s * per + b) as u32).collect();
        meta.push(1, ctx, &table);
        fill.push(ctx, ctx, &table);
    }
    let pools: Vec<(Tensor, Tensor)> = (0..layers)
        .map(|_| {
            let k = Tensor::zeros((blocks * BS, HKV, D), DType::BF16, &Device::Cpu).unwrap();
            let v = k.zeros_like().unwrap();
            let kv = || rand((batch * ctx, HKV, D)).to_dtype(DType::BF16).unwrap();
            write_kv(&k, &v, &kv(), &kv(), &fill).unwrap();
            (k, v)
        })
        .collect();
    let q = rand((batch, HQ, D));
    let name = if ctx == 137 {
        "paged_bf16_30_layers_cold".to_string()
    } else {
        format!("paged_bf16_30_layers_cold_ctx{ctx}")
    };
    g.bench_function(BenchmarkId::new(name, batch), |b| {
        b.iter(|| {
            for (k, v) in &pools {
                paged_attention(&q, k, v, &meta, scale).unwrap();
            }
        })
    });
}

/// `x · Wᵀ` at SmolLM2-135M's shapes (gate/up 1536 × 576, down 576 × 1536, LM head
/// 49152 × 576) for decode-sized and prefill-sized `x`: f32 weights (the few-rows kernel or
/// candle's gemm, as the engine picks), bf16 weights through goodput's kernel, and candle's own
/// bf16 matmul. Throughput is weight bytes (decode rows) or FLOPs as elements (512 rows).
/// The packed bf16 product at SmolLM2's prefill shapes (gate|up, down, q|k|v at 1024 rows;
/// gate|up at 128 and 16) on AMX tiles against `vdpbf16ps`, where the CPU has them.
/// Throughput is FLOPs as elements.
fn prefill_matmul(c: &mut Criterion) {
    if !bf16_dot::available() {
        return;
    }
    let mut g = c.benchmark_group("prefill_matmul");
    g.sample_size(10).warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(2));
    for (m, k, n) in
        [(1024usize, 576usize, 3072usize), (1024, 1536, 576), (1024, 576, 960), (128, 576, 3072), (16, 576, 3072)]
    {
        let x: Vec<f32> = (0..m * k).map(|i| ((i * 7919) % 1000) as f32 / 1000.0 - 0.5).collect();
        let w: Vec<u16> =
            (0..n * k).map(|i| ((((i * 104729) % 997) as f32 / 997.0 - 0.5).to_bits() >> 16) as u16).collect();
        let p = bf16_dot::Packed::new(&w, n, k);
        g.throughput(Throughput::Elements((2 * m * k * n) as u64));
        let shape = format!("{m}x{k}x{n}");
        g.bench_function(BenchmarkId::new("vdpbf16ps", &shape), |b| {
            b.iter(|| bf16_dot::matmul_packed_on(&x, &p, m, false))
        });
        if amx::takes(m, k) {
            g.bench_function(BenchmarkId::new("amx", &shape), |b| {
                b.iter(|| bf16_dot::matmul_packed_on(&x, &p, m, true))
            });
        }
    }
    g.finish();
}

fn matmul(c: &mut Criterion) {
    let mut g = c.benchmark_group("matmul_smollm2");
    g.sample_size(10).warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(2));
    for (name, n, k) in [("gate_up", 1536usize, 576usize), ("down", 576, 1536), ("lm_head", 49152, 576)] {
        let w32 = Tensor::randn(0f32, 0.05, (n, k), &Device::Cpu).unwrap();
        let wb = w32.to_dtype(DType::BF16).unwrap();
        for m in [1usize, 4, 16, 512] {
            if name == "lm_head" && m == 512 {
                continue; // the LM head only sees sampled rows
            }
            let x = Tensor::randn(0f32, 1.0, (m, k), &Device::Cpu).unwrap();
            let xb = x.to_dtype(DType::BF16).unwrap();
            let id = |path: &str| BenchmarkId::new(format!("{name}/{path}"), m);
            for bf16_weights in [false, true] {
                let bytes = (n * k * if bf16_weights { 2 } else { 4 }) as u64;
                g.throughput(if m <= 16 {
                    Throughput::Bytes(bytes)
                } else {
                    Throughput::Elements((2 * m * n * k) as u64)
                });
                if bf16_weights {
                    g.bench_function(id("bf16"), |b| b.iter(|| bf16::matmul_t(&x, &wb).unwrap().unwrap()));
                    if m > bf16::SKINNY_ROWS && bf16_dot::available() {
                        // The auto path above is vdpbf16ps here; the f32-activation panels too.
                        g.bench_function(id("bf16_panels"), |b| {
                            b.iter(|| bf16::matmul_t_via(&x, &wb, bf16::Path::Panels).unwrap().unwrap())
                        });
                    }
                    g.bench_function(id("candle_bf16"), |b| b.iter(|| xb.matmul(&wb.t().unwrap()).unwrap()));
                } else {
                    g.bench_function(id("f32"), |b| {
                        b.iter(|| match skinny::matmul_t(&x, &w32).unwrap() {
                            Some(y) => y,
                            None => x.matmul(&w32.t().unwrap()).unwrap(),
                        })
                    });
                }
            }
        }
    }
    g.finish();
}

/// gpt-oss-20b's expert gate|up (5760 × 2880): MXFP4 read in place against the same weights
/// dequantized to bf16 (goodput's bf16 kernels) and f32, at decode and prefill row counts.
/// Bytes per call are each format's own: 4.25, 16 and 32 bits a weight.
fn mxfp4(c: &mut Criterion) {
    use goodput_engine::cpu::mxfp4::Mxfp4Matrix;
    let mut g = c.benchmark_group("mxfp4_gpt_oss_expert");
    g.sample_size(10).warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(2));
    let (n, k) = (5760usize, 2880usize);
    let mut x = 0x2545F4914F6CDD1Du64;
    let mut byte = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x as u8
    };
    let blocks: Vec<u8> = (0..n * k / 2).map(|_| byte()).collect();
    let scales: Vec<u8> = (0..n * k / 32).map(|_| 119 + byte() % 3).collect();
    let mx = Mxfp4Matrix::new(n, k, blocks, scales).unwrap();
    let mut dense = vec![0f32; n * k];
    for (j, row) in dense.chunks_mut(k).enumerate() {
        mx.decode_row(j, row);
    }
    let w32 = Tensor::from_vec(dense, (n, k), &Device::Cpu).unwrap();
    let wb = w32.to_dtype(DType::BF16).unwrap();
    for m in [1usize, 4, 8, 12, 64] {
        let xt = Tensor::randn(0f32, 1.0, (m, k), &Device::Cpu).unwrap();
        let xs = xt.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        g.throughput(Throughput::Elements((n * k) as u64));
        g.bench_with_input(BenchmarkId::new("mxfp4_in_place", m), &m, |b, &m| b.iter(|| mx.matmul_t(&xs, m)));
        g.bench_with_input(BenchmarkId::new("bf16", m), &m, |b, _| {
            b.iter(|| bf16::matmul_t(&xt, &wb).unwrap().unwrap())
        });
        g.bench_with_input(BenchmarkId::new("f32", m), &m, |b, _| {
            b.iter(|| match skinny::matmul_t(&xt, &w32).unwrap() {
                Some(y) => y,
                None => xt.matmul(&w32.t().unwrap()).unwrap(),
            })
        });
    }
    g.finish();
}

fn decode_steps(c: &mut Criterion) {
    let spec = Catalog::builtin().get("tiny").unwrap().clone();
    let mut g = c.benchmark_group("decode_step_tiny");
    g.sample_size(20).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(3));
    for (dtype, batch) in [DType::F32, DType::BF16].into_iter().flat_map(|d| [1usize, 4, 16].map(|b| (d, b))) {
        let mut src = DummySource { seed: 0, dtype, device: Device::Cpu };
        let model = Llama::load(&spec, &mut src, 2048, &Device::Cpu, dtype).unwrap();
        let cfg = EngineConfig { num_blocks: Some(2048), enable_prefix_caching: false, ..Default::default() };
        let mut core = EngineCore::new(model, &cfg, Clock::new()).unwrap();
        g.bench_with_input(BenchmarkId::new(format!("{dtype:?}"), batch), &batch, |b, &batch| {
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
    let mut g = c.benchmark_group("prefill_step_tiny");
    g.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(3));
    for (dtype, len) in [DType::F32, DType::BF16].into_iter().flat_map(|d| [128usize, 512].map(|l| (d, l))) {
        let mut src = DummySource { seed: 0, dtype, device: Device::Cpu };
        let model = Llama::load(&spec, &mut src, 2048, &Device::Cpu, dtype).unwrap();
        let cfg = EngineConfig { num_blocks: Some(256), enable_prefix_caching: false, ..Default::default() };
        let mut core = EngineCore::new(model, &cfg, Clock::new()).unwrap();
        let mut seed = 0u64;
        g.bench_with_input(BenchmarkId::new(format!("{dtype:?}"), len), &len, |b, &len| {
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

/// Choosing one token from a row of logits (the tiny model's 32,000 ids, SmolLM2's 49,152):
/// greedy, temperature 1 over every id (the OpenAI default a client gets when it sends no
/// temperature), top-k 50, top-p 0.95.
fn sampling(c: &mut Criterion) {
    use goodput_engine::sampler::Sampler;
    let mut g = c.benchmark_group("sampler");
    g.sample_size(30).warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(2));
    for vocab in [32_000usize, 49_152] {
        let logits: Vec<f32> = Tensor::randn(0f32, 2.0, vocab, &Device::Cpu).unwrap().to_vec1().unwrap();
        g.throughput(Throughput::Elements(vocab as u64));
        for (name, p) in [
            ("greedy", SamplingParams::default()),
            ("temperature-1", SamplingParams { temperature: 1.0, ..Default::default() }),
            ("top-k-50", SamplingParams { temperature: 1.0, top_k: 50, ..Default::default() }),
            ("top-p-0.95", SamplingParams { temperature: 1.0, top_p: 0.95, ..Default::default() }),
        ] {
            let mut s = Sampler::new(&p);
            g.bench_with_input(BenchmarkId::new(name, vocab), &vocab, |b, _| b.iter(|| s.sample(&logits)));
        }
        // The baseline the sampler replaced: tempered logits with their ids, the whole row
        // sorted, softmax, then the draw (what a temperature-1 request cost before).
        let mut row: Vec<(f32, u32)> = Vec::with_capacity(vocab);
        g.bench_with_input(BenchmarkId::new("sort-the-row-baseline", vocab), &vocab, |b, _| {
            b.iter(|| {
                row.clear();
                row.extend(logits.iter().enumerate().map(|(i, &l)| (l, i as u32)));
                row.sort_unstable_by(|a, b| b.0.total_cmp(&a.0));
                let max = row[0].0;
                let sum: f32 = row
                    .iter_mut()
                    .map(|x| {
                        x.0 = (x.0 - max).exp();
                        x.0
                    })
                    .sum();
                let mut r = 0.5 * sum;
                row.iter()
                    .find(|x| {
                        r -= x.0;
                        r <= 0.0
                    })
                    .map_or(0, |x| x.1)
            })
        });
    }
    g.finish();
}

criterion_group!(
    benches,
    attention,
    attention_decode_batch,
    matmul,
    prefill_matmul,
    mxfp4,
    decode_steps,
    prefill_steps,
    sampling
);
criterion_main!(benches);
