//! `goodput report RESULTS_DIR -o report.html`: the page of a run (`goodput_report::html`),
//! read through `goodput_results`' typed reader; `goodput report A B C… -o page.html`, or a
//! config matrix's directory (its `index.json`), overlays many runs on one page.

use anyhow::{bail, Result};
use clap::Args;
use goodput_report::html::overlay::Labeled;
use goodput_results::matrix::MatrixIndex;
use std::path::PathBuf;

pub use goodput_report::html::write;

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// `goodput run --out` directories, or a config matrix's directory (`goodput run --config`
    /// with a `[matrix]`: its runs from `index.json`). One run: its own page; more: one page
    /// overlaying them (capacity curves, TTFT/TPOT P95, the Pareto frontier of throughput per
    /// GPU against tokens per second per user, a table of their verdicts).
    #[arg(required = true, num_args = 1..)]
    pub dirs: Vec<PathBuf>,
    /// Where to write the page (default: DIR/report.html for one directory; needed for more).
    #[arg(long, short = 'o')]
    pub out: Option<PathBuf>,
    /// GPUs behind each run, for the Pareto chart's throughput per GPU (1).
    #[arg(long, default_value_t = 1.0)]
    pub gpus: f64,
}

pub fn run(a: ReportArgs) -> Result<()> {
    if !(a.gpus.is_finite() && a.gpus > 0.0) {
        bail!("--gpus must be a positive number, got {}", a.gpus);
    }
    let runs = goodput_bench::runs::labeled(&a.dirs, &mut |w| eprintln!("warning: {w}"))?;
    if let [(_, r)] = &runs[..] {
        if MatrixIndex::read(&a.dirs[0])?.is_none() {
            let out = a.out.clone().unwrap_or_else(|| r.dir.join(goodput_results::files::REPORT));
            write(r, &out)?;
            eprintln!("report: {}", out.display());
            return Ok(());
        }
    }
    let out = match (&a.out, &a.dirs[..]) {
        (Some(o), _) => o.clone(),
        (None, [one]) => one.join(goodput_results::files::REPORT),
        _ => bail!("-o PAGE.html: where to write the page of {} runs", runs.len()),
    };
    let labeled: Vec<Labeled> =
        runs.iter().map(|(label, r)| Labeled { label: label.clone(), summary: &r.summary }).collect();
    goodput_report::html::write_overlay(&labeled, a.gpus, &out)?;
    eprintln!("report: {} runs on {}", runs.len(), out.display());
    Ok(())
}
