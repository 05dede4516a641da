//! The cost of the intervals every level now carries (issue 48), side by side: the
//! moving-block bootstrap over time of a throughput (1000 resamples of 200 bins, the events of
//! a level binned once) against the request bootstrap it replaced for rates (1000 resamples
//! of the records, the throughput recomputed from each), and the order-statistic interval of a
//! P95 (exact binomial ranks) against a sort of the same samples, for levels of 100, 1000 and
//! 10,000 requests.
//!
//! `cargo bench --bench intervals`.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use goodput_core::{ClientRecord, RecordBuilder, Stamp};
use goodput_metrics::compare::{bootstrap, Key};
use goodput_metrics::interval::{block_bootstrap, percentile_interval, BINS};
use std::time::Duration;

/// `n` requests over 30 s, each 200 ms with 20 tokens.
fn records(n: u64) -> Vec<ClientRecord> {
    let ms = |x: u64| Stamp(x * 1_000_000);
    (0..n)
        .map(|i| {
            let t0 = i * 30_000 / n;
            RecordBuilder::new(i)
                .intended(ms(t0))
                .input(10)
                .end(ms(t0 + 200))
                .tokens_at((0..20).map(|k| ms(t0 + 10 * k)))
                .build()
        })
        .collect()
}

fn intervals(c: &mut Criterion) {
    let mut g = c.benchmark_group("interval");
    g.sample_size(20).warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(2));
    for n in [100u64, 1000, 10_000] {
        let recs = records(n);
        let refs: Vec<&ClientRecord> = recs.iter().collect();
        g.bench_with_input(BenchmarkId::new("time_blocks_request_throughput", n), &refs, |b, refs| {
            b.iter(|| bootstrap(refs, Key::RequestThroughput, 1000, 1))
        });
        let ends: Vec<(f64, f64)> = recs.iter().map(|r| (r.end.as_secs(), 1.0)).collect();
        g.bench_with_input(BenchmarkId::new("time_blocks_binned_only", n), &ends, |b, ends| {
            b.iter(|| block_bootstrap(ends.iter().copied(), 30.5, BINS / 40, 1000, 1))
        });
        g.bench_with_input(BenchmarkId::new("requests_resampled_ttft_p95", n), &refs, |b, refs| {
            b.iter(|| bootstrap(refs, Key::parse("ttft_p95").unwrap(), 1000, 1))
        });
        let ttft: Vec<f64> = (0..n).map(|i| (i * 7919 % 1000) as f64).collect();
        g.bench_with_input(BenchmarkId::new("order_statistic_p95", n), &ttft, |b, x| {
            b.iter(|| percentile_interval(x, 95.0))
        });
        g.bench_with_input(BenchmarkId::new("sort_only", n), &ttft, |b, x| {
            b.iter(|| {
                let mut v = x.clone();
                v.sort_by(f64::total_cmp);
                v
            })
        });
    }
    g.finish();
}

criterion_group!(benches, intervals);
criterion_main!(benches);
