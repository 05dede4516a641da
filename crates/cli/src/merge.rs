//! `goodput merge DIR… --out RUN`: the shards of a run split over processes or machines
//! (`goodput run --shard i/N`) merged by the library ([`goodput_bench::merge`]) into one run,
//! then its tables, shards and conclusion shown.

use anyhow::{Context, Result};
use goodput_bench::merge::{merge, MergeSpec};
use goodput_report::columns::Output;
use goodput_report::console as table;
use goodput_report::Conclusion;
use goodput_results::RunSummary;
use std::path::PathBuf;

/// `goodput merge`'s arguments.
#[derive(clap::Args, Debug)]
pub struct MergeArgs {
    /// The shards' results directories (`goodput run --shard i/N --out DIR`): every shard of
    /// each level, the levels of one sweep (`results/*`).
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// The merged run's directory: summary, records, conclusion, as `goodput run --out`
    /// writes them.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Replace a run already in --out.
    #[arg(long)]
    pub overwrite: bool,
    /// Also write report.html into --out.
    #[arg(long)]
    pub report: bool,
    /// Print the merged summary on stdout as JSON (one line); the tables go to stderr.
    #[arg(long)]
    pub json: bool,
}

/// Merges the shards; exits as `goodput run` does (3 when a level measured no completed
/// request).
pub fn run(a: MergeArgs) -> Result<i32> {
    let spec = MergeSpec { dirs: a.dirs, out: a.out, overwrite: a.overwrite, report: a.report };
    let m = merge(&spec)?;
    m.warnings.iter().for_each(|w| eprintln!("{w}"));
    say(&m.summary, a.json)?;
    if let Some(page) = &m.report {
        eprintln!("report in {}", page.display());
    }
    eprintln!("merged run in {}", spec.out.display());
    Ok(m.exit)
}

/// The tables, the shards and the conclusion (on stderr with `--json`, whose line is stdout's).
fn say(s: &RunSummary, json: bool) -> Result<()> {
    crate::run::print_blocks(&table::run(s, None, None, &Conclusion::of(s).render(), Output::Compact), json);
    if json {
        println!("{}", serde_json::to_string(s).context("the merged summary as JSON")?);
    }
    Ok(())
}
