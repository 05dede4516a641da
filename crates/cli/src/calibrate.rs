//! `goodput calibrate`: the HTTP client measured against a mock server with a known schedule
//! ([`goodput_bench::calibrate`]), then its table, its floor and its verdict printed.

use anyhow::{Context, Result};
use clap::Args;
use goodput_bench::calibrate::{calibrate, CalibrateSpec, CalibrationLevel, BOUND_CHUNK_P99_S, BOUND_TTFT_P50_S};
use goodput_bench::progress::Lines;
use goodput_metrics::Summary;
use goodput_report::console as table;
use goodput_report::text::{ms, num};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct CalibrateArgs {
    /// Concurrent streams per level.
    #[arg(long, value_delimiter = ',', default_value = "100,1000")]
    pub concurrency: Vec<usize>,
    /// The mock's time to first token.
    #[arg(long, default_value = "200ms", value_parser = crate::args::parse_duration)]
    pub ttft: Duration,
    /// The mock's interval between tokens.
    #[arg(long, default_value = "20ms", value_parser = crate::args::parse_duration)]
    pub itl: Duration,
    /// Tokens per response.
    #[arg(long, default_value_t = 50)]
    pub tokens: usize,
    /// Requests each stream sends one after the other.
    #[arg(long, default_value_t = 2)]
    pub requests_per_stream: usize,
    /// Write the results as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Start the streams spread over one inter-token interval instead of all at once, so
    /// their tokens interleave evenly (a steady load) rather than arriving in one burst per
    /// interval (the worst case, the default).
    #[arg(long)]
    pub stagger: bool,
    /// Pin the client (this thread) to these CPUs, e.g. `1`; two or more CPUs: a worker pool,
    /// one pinned worker per CPU.
    #[arg(long, value_parser = crate::args::parse_cpus)]
    pub client_cpus: Option<crate::args::CpuList>,
    /// Pin the mock server's thread to these CPUs, e.g. `0`.
    #[arg(long, value_parser = crate::args::parse_cpus)]
    pub mock_cpus: Option<crate::args::CpuList>,
    /// After each level, the same streams read as bare bytes on this thread (a hand-written
    /// HTTP/1.1 request, the response read to its last chunk, nothing parsed): the kernel's
    /// and the runtime's cost per token, the floor under any client here.
    #[arg(long)]
    pub floor: bool,
    /// Read the streams through hyper (reqwest), as every request was before goodput's own
    /// HTTP/1.1 path for measured requests: the two side by side.
    #[arg(long)]
    pub hyper: bool,
}

pub fn run(a: CalibrateArgs) -> Result<()> {
    let spec = CalibrateSpec {
        concurrency: a.concurrency.clone(),
        ttft: a.ttft,
        itl: a.itl,
        tokens: a.tokens,
        requests_per_stream: a.requests_per_stream,
        stagger: a.stagger,
        client_cpus: a.client_cpus.clone().map(|c| c.0),
        mock_cpus: a.mock_cpus.clone().map(|c| c.0),
        floor: a.floor,
        hyper: a.hyper,
    };
    let c = calibrate(&spec, &Lines { quiet: false })?;
    print_levels(&a, &c.levels);
    print_floor(&c.levels);
    println!("{}", per_core(&c.levels, c.cores));
    if let Some(p) = &a.json {
        std::fs::write(p, serde_json::to_vec_pretty(&c.levels)?).with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(())
}

/// `--floor`: each level's floor beside the client's cost.
fn print_floor(levels: &[CalibrationLevel]) {
    for l in levels {
        let Some(f) = &l.floor else { continue };
        println!(
            "Floor at {} streams (bare reads, this thread): chunk delay p50 {} ms, p99 {} ms; {:.1} µs/token (user {:.1}, kernel {:.1}), {:.2} reads/token; the client costs {:.1} µs/token above it",
            l.streams,
            num(ms(&f.chunk_delay, |x| x.p50), 3),
            num(ms(&f.chunk_delay, |x| x.p99), 3),
            f.cpu_per_token_s * 1e6,
            f.user_per_token_s * 1e6,
            f.kernel_per_token_s * 1e6,
            f.reads_per_token,
            (l.user_per_token_s + l.kernel_per_token_s - f.cpu_per_token_s) * 1e6
        );
    }
}

fn print_levels(a: &CalibrateArgs, levels: &[CalibrationLevel]) {
    let mut t = table::new(&[
        "streams",
        "requests",
        "failed",
        "tokens",
        "chunk delay p50",
        "p99",
        "max",
        "TTFT error p50",
        "p99",
        "of it mock late p50",
        "ITL error p99",
        "client CPU/token",
        "user",
        "kernel",
        "cores / 1000 streams",
        "client CPU share",
        "mock CPU/chunk",
        "mock busy",
        "wall",
    ]);
    let ms3 = |s: &Option<Summary>, f: fn(&Summary) -> f64| num(ms(s, f), 3);
    for l in levels {
        t.add_row(vec![
            l.streams.to_string(),
            l.requests.to_string(),
            l.failed.to_string(),
            l.tokens.to_string(),
            ms3(&l.chunk_delay, |x| x.p50),
            ms3(&l.chunk_delay, |x| x.p99),
            ms3(&l.chunk_delay, |x| x.max),
            ms3(&l.ttft_error, |x| x.p50),
            ms3(&l.ttft_error, |x| x.p99),
            ms3(&l.mock_late, |x| x.p50),
            ms3(&l.itl_error, |x| x.p99),
            format!("{:.1} µs", l.cpu_per_token_s * 1e6),
            format!("{:.1} µs", l.user_per_token_s * 1e6),
            format!("{:.1} µs", l.kernel_per_token_s * 1e6),
            format!("{:.2}", l.cpu_per_stream * 1000.0),
            format!("{:.0} %", l.cpu_share * 100.0),
            format!("{:.1} µs", l.mock_cpu_per_token_s * 1e6),
            format!("{:.0} %", l.mock_busy * 100.0),
            format!("{:.1} s", l.wall_s),
        ]);
    }
    println!(
        "Client calibration against a mock server (TTFT {:?}, ITL {:?}, {} tokens; streams {}; times in ms; chunk delay = client read − mock write)\n{t}",
        a.ttft,
        a.itl,
        a.tokens,
        if a.stagger { "staggered over one ITL" } else { "started at once, their tokens in one burst per ITL" }
    );
}

/// The calibration's verdict: streams per client core within the bound, and why a broken
/// bound may not be the client's ([`goodput_report::calibrate::per_core`]).
fn per_core(levels: &[CalibrationLevel], cores: usize) -> String {
    let bound = format!(
        "chunk delay p99 ≤ {} ms and TTFT error p50 ≤ {} ms (less the mock's own lateness)",
        BOUND_CHUNK_P99_S * 1e3,
        BOUND_TTFT_P50_S * 1e3
    );
    let seen: Vec<goodput_report::calibrate::Seen> = levels
        .iter()
        .map(|l| goodput_report::calibrate::Seen {
            streams: l.streams,
            within_bound: l.within_bound,
            cpu_share: l.cpu_share,
            cpu_per_stream: l.cpu_per_stream,
            machine: l.machine.as_ref(),
        })
        .collect();
    goodput_report::calibrate::per_core(&seen, cores, &bound)
}
