//! The engine's bookkeeping without a model: scheduling, block allocation and stamping per
//! step at 256 running sequences with a fake runner, and the block pool's operations.
//!
//! `cargo bench --bench scheduler`. Compare with the decode step time of `engine-bench` at the
//! same batch to get the share of a step spent outside the model.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use goodput_core::{SamplingParams, Stamp};
use goodput_scheduler::{BlockPool, NewRequest, Scheduler, SchedulerConfig};
use std::time::{Duration, Instant};

fn scheduler(c: &mut Criterion) {
    let mut g = c.benchmark_group("scheduler_step");
    g.sample_size(30).warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(2));
    // `hybrid`: gpt-oss's KV-cache groups, one sliding (window 128) and one full.
    for (seqs, caching, hybrid) in [(256usize, false, false), (256, true, false), (64, false, false), (256, true, true)]
    {
        let name = format!(
            "{seqs}_seqs{}{}",
            if caching { "_prefix_cache" } else { "" },
            if hybrid { "_sliding_and_full" } else { "" }
        );
        let group_windows = if hybrid { vec![Some(128), None] } else { vec![None] };
        g.bench_function(BenchmarkId::new("decode", name), |b| {
            b.iter_custom(|iters| {
                let cfg = SchedulerConfig {
                    max_num_batched_tokens: 8192,
                    max_prefill_tokens: None,
                    max_num_seqs: seqs,
                    num_blocks: group_windows.len() * seqs * (128 + iters as usize + 16).div_ceil(16) + 8,
                    block_size: 16,
                    enable_prefix_caching: caching,
                    max_model_len: 1 << 20,
                    eos_token_id: Some(2),
                    group_windows: group_windows.clone(),
                };
                let mut s = Scheduler::new(cfg).unwrap();
                for id in 0..seqs as u64 {
                    let prompt: Vec<u32> = (0..128).map(|t| 3 + ((t as u64 * 31 + id * 7) % 30000) as u32).collect();
                    let req = NewRequest {
                        id,
                        prompt,
                        params: SamplingParams::greedy_exact(iters as usize + 2),
                        arrival: Stamp(0),
                    };
                    s.add(req, Stamp(0)).unwrap();
                }
                // Prefill (untimed), then every timed step is one decode token for every sequence.
                let out = s.schedule(Stamp(1));
                let sampled: Vec<Option<u32>> = out.seqs.iter().map(|q| q.samples.then_some(7)).collect();
                s.update(&out, &sampled, Stamp(2));
                let mut sampled = vec![Some(5u32); seqs];
                let t = Instant::now();
                for i in 0..iters {
                    let out = s.schedule(Stamp(10 + i));
                    sampled.iter_mut().for_each(|x| *x = Some(3 + (i % 1000) as u32));
                    let upd = s.update(&out, &sampled[..out.seqs.len()], Stamp(11 + i));
                    std::hint::black_box((&upd.tokens, s.tokens_held()));
                }
                t.elapsed()
            })
        });
    }
    g.finish();
}

fn block_pool(c: &mut Criterion) {
    let mut g = c.benchmark_group("block_pool");
    g.sample_size(30).warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(2));
    g.bench_function("allocate_free_16_blocks", |b| {
        let mut p = BlockPool::new(4096, 16, true).unwrap();
        b.iter(|| {
            let blocks = p.allocate(16).unwrap();
            p.free(&blocks);
        })
    });
    g.finish();
}

criterion_group!(benches, scheduler, block_pool);
criterion_main!(benches);
