//! The sizing simulator's speed: simulated engine steps per second of the plain driver (the
//! real scheduler, a linear step cost, 2 000 open-loop requests of short-qa lengths at a rate
//! that keeps 30–60 sequences running). Criterion reports it as elements (steps) per second.
//!
//! `cargo bench --bench simulator`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use goodput_core::{SamplingParams, Stamp};
use goodput_scheduler::{NewRequest, SchedulerConfig};
use goodput_sizing::cost::LinearCost;
use goodput_sizing::sim::{run_arrivals, SimEngine};
use std::sync::Arc;
use std::time::Duration;

fn workload() -> Vec<(Stamp, NewRequest)> {
    (0..2000u64)
        .map(|i| {
            let at = Stamp(i * 25_000_000); // 40 req/s
            let len = 50 + (i * 37 % 150) as usize;
            let prompt = (0..len).map(|t| 3 + ((t as u64 * 31 + i * 7) % 30_000) as u32).collect();
            let params = SamplingParams::greedy_exact(50 + (i * 13 % 50) as usize);
            (at, NewRequest { id: i, prompt, params, arrival: at })
        })
        .collect()
}

fn engine() -> SimEngine {
    let cfg = SchedulerConfig { num_blocks: 8192, max_model_len: 4096, ..SchedulerConfig::default() };
    // The tiny model's CPU profile, roughly: 2 ms per step, 160 µs per prefill token, …
    let cost = LinearCost::classic([2e-3, 1.6e-4, 2.6e-7, 0.0, 1.2e-6, 6e-4], 4e-5);
    SimEngine::new(cfg, Arc::new(cost)).unwrap()
}

fn simulator(c: &mut Criterion) {
    let steps = run_arrivals(&mut engine(), workload()).steps.len() as u64;
    let mut g = c.benchmark_group("simulator");
    g.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(5));
    g.throughput(Throughput::Elements(steps));
    g.bench_function("short_qa_2000_requests_steps", |b| {
        b.iter(|| std::hint::black_box(run_arrivals(&mut engine(), workload()).steps.len()))
    });
    g.finish();
}

criterion_group!(benches, simulator);
criterion_main!(benches);
