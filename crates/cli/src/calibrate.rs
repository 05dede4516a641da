//! `goodput calibrate`: the HTTP client measured against a mock server with a known schedule
//! ([`goodput_bench::calibrate`]), then its table, its floor and its verdict printed.

use anyhow::{Context, Result};
use clap::Args;
use goodput_bench::calibrate::{calibrate, CalibrateSpec};
use goodput_bench::progress::Lines;
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
    use goodput_report::calibrate as text;
    println!("{}", text::levels(&c.levels, (a.ttft, a.itl, a.tokens), a.stagger));
    text::floors(&c.levels).iter().for_each(|line| println!("{line}"));
    println!("{}", text::verdict(&c.levels, c.cores));
    if let Some(p) = &a.json {
        std::fs::write(p, serde_json::to_vec_pretty(&c.levels)?).with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(())
}
