//! The sizing simulator's speed: simulated engine steps per second of the plain driver (the
//! real scheduler, a step cost, 2 000 open-loop requests of short-qa lengths at a rate that
//! keeps 30–60 sequences running). Criterion reports it as elements (steps) per second. The
//! step costs: a dense linear profile; a mixture of experts' fitted profile (qwen3-30b-a3b's
//! 128 experts, the expected expert reads of every step); DeepSeek-V3's roofline projection on
//! 8 × H200 (TP8·EP8, FP8), routed uniformly and with a power-law skew (the busiest rank
//! summed over 256 experts each step); and fleets of eight replicas behind round-robin,
//! least-loaded and cache-aware routers (the same requests at 8× the rate).
//!
//! `cargo bench --bench simulator`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use goodput_core::Catalog;
use goodput_core::{SamplingParams, Stamp};
use goodput_scheduler::{NewRequest, SchedulerConfig};
use goodput_sizing::cost::{ExpertShape, LinearCost, StepCost, Term};
use goodput_sizing::fleet::router::{Policy, Router};
use goodput_sizing::fleet::{drive_fleet, Fleet};
use goodput_sizing::hardware::{DType, HardwareCatalog};
use goodput_sizing::layout::Layout;
use goodput_sizing::roofline::{DeviceLimits, Efficiencies, ModelWork, ProjectedCost, RooflineCost};
use goodput_sizing::sim::{run_arrivals, SimEngine, Timed};
use goodput_sizing::work::{Deployment, Precision};
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

fn engine(cost: Arc<dyn StepCost>) -> SimEngine {
    let cfg = SchedulerConfig { num_blocks: 8192, max_model_len: 4096, ..SchedulerConfig::default() };
    SimEngine::new(cfg, cost).unwrap()
}

/// The tiny model's CPU profile, roughly: 2 ms per step, 160 µs per prefill token, …
fn dense() -> Arc<dyn StepCost> {
    Arc::new(LinearCost::classic([2e-3, 1.6e-4, 2.6e-7, 0.0, 1.2e-6, 6e-4], 4e-5))
}

/// A fitted MoE profile: the classic terms and 20 µs per expert read.
fn moe_fitted() -> Arc<dyn StepCost> {
    let spec = Catalog::builtin().get("qwen3-30b-a3b").unwrap().clone();
    let mut terms = Term::ALL.to_vec();
    terms.push(Term::ExpertsTouched);
    let cost = LinearCost::new(terms, vec![2e-3, 1.6e-4, 2.6e-7, 0.0, 1.2e-6, 6e-4, 2e-5], 4e-5);
    Arc::new(cost.with_experts(ExpertShape::of(&spec)))
}

/// DeepSeek-V3 on 8 × H200, TP8·EP8, FP8, as `goodput plan` prices it.
fn moe_projected(skew: f64) -> Arc<dyn StepCost> {
    let spec = Catalog::builtin().get("deepseek-v3").unwrap().clone();
    let gpu = HardwareCatalog::builtin().get("h200").unwrap().clone();
    let precision = Precision { weights: DType::Fp8, kv: DType::Fp8 };
    let layout = Layout { tp: 8, dp: 1, ep: 8, pp: 1 };
    let work = ModelWork::build(&spec, &Deployment { precision, layout, skew, gpus_per_node: 8 }).unwrap();
    let device = DeviceLimits::of(&gpu, precision, false).unwrap();
    let roofline = RooflineCost { work, device, eff: Efficiencies::default() };
    Arc::new(ProjectedCost { roofline, layout, network_hops: 0 })
}

/// A named step cost of the bench.
type Named = (&'static str, fn() -> Arc<dyn StepCost>);

fn simulator(c: &mut Criterion) {
    let mut g = c.benchmark_group("simulator");
    g.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(5));
    let costs: [Named; 4] = [
        ("short_qa_2000_requests_steps", dense),
        ("moe_fitted_2000_requests_steps", moe_fitted),
        ("moe_projected_deepseek_v3_h200_steps", || moe_projected(0.0)),
        ("moe_projected_skewed_deepseek_v3_h200_steps", || moe_projected(0.8)),
    ];
    for (name, cost) in costs {
        let steps = run_arrivals(&mut engine(cost()), workload()).steps.len() as u64;
        g.throughput(Throughput::Elements(steps));
        g.bench_function(name, |b| {
            b.iter(|| std::hint::black_box(run_arrivals(&mut engine(cost()), workload()).steps.len()))
        });
    }
    // Eight replicas behind each router, the same 2 000 requests at 8× the rate.
    let fast = || -> Vec<(Stamp, NewRequest)> {
        workload()
            .into_iter()
            .map(|(at, mut r)| {
                r.arrival = Stamp(at.0 / 8);
                (Stamp(at.0 / 8), r)
            })
            .collect()
    };
    for policy in [Policy::RoundRobin, Policy::LeastLoaded, Policy::cache_aware()] {
        let run = || {
            let engines = (0..8).map(|_| engine(dense())).collect();
            let mut f = Fleet::new(engines, Router::new(policy.clone(), 8, 0), Duration::from_secs(1));
            drive_fleet(&mut f, &mut Timed::new(fast()))
        };
        let steps: u64 = run().replicas.iter().map(|r| r.steps.len() as u64).sum();
        g.throughput(Throughput::Elements(steps));
        g.bench_function(format!("fleet_8_replicas_{}_steps", policy.name()), |b| {
            b.iter(|| std::hint::black_box(run().routed.len()))
        });
    }
    g.finish();
}

criterion_group!(benches, simulator);
criterion_main!(benches);
