//! `goodput compare A B`: two runs of the same workload (or two criterion trees) compared by
//! [`goodput_bench::compare`], the Markdown table printed and exported where asked; exit 1
//! when a gated metric regressed, 2 on an error (hyperfine's and critcmp's manners).

use anyhow::Result;
use clap::Args;
use goodput_bench::compare::{compare, CompareSpec};
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// The baseline run (a `goodput run --out` directory), or its repeats separated by commas
    /// (A1,A2,A3), or a `goodput run --repeats N` directory: the noise then includes the
    /// run-to-run drift.
    #[arg(value_delimiter = ',', num_args = 1, required = true)]
    pub a: Vec<PathBuf>,
    /// The run to judge, or its repeats.
    #[arg(value_delimiter = ',', num_args = 1, required = true)]
    pub b: Vec<PathBuf>,
    /// Metrics to compare (default: TTFT p50/p95/p99, TPOT p50/p95, ITL p95, E2E p95, queue
    /// and prefill p95, output and request throughput).
    #[arg(long, value_delimiter = ',')]
    pub metrics: Option<Vec<String>>,
    /// Exit 1 when a metric gets worse by more than this, beyond the noise:
    /// `ttft_p95=+10%,output_throughput=-5%`.
    #[arg(long)]
    pub fail_on: Option<String>,
    /// Write the comparison as Markdown here (the table printed on stdout).
    #[arg(long, alias = "markdown")]
    pub export_markdown: Option<PathBuf>,
    /// Write the comparison as JSON here: one object per level and metric.
    #[arg(long)]
    pub export_json: Option<PathBuf>,
    /// Write the comparison as CSV here: one row per level and metric.
    #[arg(long)]
    pub export_csv: Option<PathBuf>,
    /// Bootstrap resamples per metric and run.
    #[arg(long, default_value_t = 400)]
    pub bootstrap: usize,
    /// Single runs on both sides: a change counts only beyond this share of A's value (and
    /// beyond both runs' intervals) — the run-to-run drift of one machine that a single run's
    /// interval cannot show. With --repeats (or A1,A2,…) on either side, their spread is the
    /// noise instead.
    #[arg(long, value_name = "PERCENT", value_parser = parse_floor, default_value = "10%")]
    pub noise_floor: f64,
    /// Criterion trees: the baseline of A.
    #[arg(long, default_value = "base")]
    pub baseline_a: String,
    /// Criterion trees: the baseline of B.
    #[arg(long, default_value = "new")]
    pub baseline_b: String,
}

/// `10%` (or `10`) as the fraction 0.1: from 0 to 100 %.
fn parse_floor(s: &str) -> Result<f64, String> {
    let x: f64 =
        s.trim().trim_end_matches('%').trim().parse().map_err(|_| format!("`{s}` is not a percentage, e.g. 10%"))?;
    if !(0.0..=100.0).contains(&x) {
        return Err(format!("`{s}`: the noise floor is a percentage from 0 to 100"));
    }
    Ok(x / 100.0)
}

/// `goodput compare`: 0 when nothing regressed, 1 when something did (errors are 2, by the
/// binary).
pub fn run(a: CompareArgs) -> Result<i32> {
    let spec = CompareSpec {
        a: a.a,
        b: a.b,
        metrics: a.metrics,
        fail_on: a.fail_on,
        bootstrap: a.bootstrap,
        noise_floor: a.noise_floor,
        baseline_a: a.baseline_a,
        baseline_b: a.baseline_b,
    };
    let exports = (a.export_markdown, a.export_json, a.export_csv);
    judge(&spec, (exports.0.as_deref(), exports.1.as_deref(), exports.2.as_deref()))
}

/// `spec` judged, its table printed (and exported where asked): 0 when nothing regressed, 1
/// when something did.
pub fn judge(spec: &CompareSpec, (md, json, csv): (Option<&Path>, Option<&Path>, Option<&Path>)) -> Result<i32> {
    let outcome = compare(spec, &mut |line| eprintln!("{line}"))?;
    if !outcome.failures.is_empty() {
        eprintln!("regression beyond --fail-on, or a gate that cannot judge:\n  {}", outcome.failures.join("\n  "));
    }
    println!("{}", outcome.markdown);
    outcome.export(md, json, csv)?;
    Ok(if outcome.failures.is_empty() { 0 } else { 1 })
}
