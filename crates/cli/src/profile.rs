//! `goodput profile`: its arguments consumed once into [`ProfileSpec`], the profile fitted
//! (or steps priced) by [`goodput_bench::profile`], and shown through
//! `goodput_report::profile`; the grid's progress on one overwritten line.

use crate::args::{CpuList, EngineArgs, ModelArgs};
use anyhow::Result;
use clap::Args;
use goodput_bench::profile::{ProfileSpec, Profiled};
use goodput_bench::progress::Progress;
use goodput_bench::run::live::Live;
use std::cell::Cell;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct ProfileArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Pin the engine to these CPUs (as `run --engine-cpus`; a profile is only valid for runs
    /// pinned the same way).
    #[arg(long, value_parser = crate::args::parse_cpus)]
    pub engine_cpus: Option<CpuList>,
    /// Pin the thread that submits the grid's requests and follows their tokens (as `run
    /// --harness-cpus`; left unpinned, it wakes for every token on the engine's CPUs too and
    /// slows the steps it measures).
    #[arg(long, value_parser = crate::args::parse_cpus)]
    pub harness_cpus: Option<CpuList>,
    /// Where to write the profile.
    #[arg(long, short = 'o', default_value = "profile.json")]
    pub out: PathBuf,
    /// Fit the steps of this run (its steps.jsonl) instead of measuring the grid.
    #[arg(long, value_name = "RUN_DIR")]
    pub from: Option<PathBuf>,
    /// Fit these files of step records (`serve --steps`: a replica's steps under its real
    /// load, several replicas' together) instead of measuring the grid; the engine settings
    /// are the flags given here, as the replicas were started with.
    #[arg(long, value_name = "FILE", value_delimiter = ',', num_args = 1.., conflicts_with_all = ["from", "from_bench"])]
    pub from_steps: Vec<PathBuf>,
    /// Fit the rows of these `engine-bench --json` files (a GPU's, measured elsewhere)
    /// instead of measuring the grid.
    #[arg(long, value_name = "FILE", value_delimiter = ',', num_args = 1.., conflicts_with = "from")]
    pub from_bench: Vec<PathBuf>,
    /// Time spent measuring the grid (whole probes; the fit uses every round begun).
    #[arg(long, value_parser = crate::args::parse_duration, default_value = "60s")]
    pub time: Duration,
    /// An earlier profile to check for drift (default: the file at --out, if any).
    #[arg(long)]
    pub baseline: Option<PathBuf>,
    /// Bootstrap resamples for the coefficient intervals.
    #[arg(long, default_value_t = 200)]
    pub bootstrap: usize,
    /// Seed of the grid's prompts and order, and of the bootstrap.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Also write the measured steps the fit used (JSON lines of step records).
    #[arg(long, value_name = "FILE")]
    pub save_steps: Option<PathBuf>,
    /// Skip measuring this machine's bandwidth and FLOP/s (no roofline column).
    #[arg(long)]
    pub no_roofline: bool,
    /// No progress on stderr.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// Instead of fitting: price the `--from-steps` files' steps by this profile and print,
    /// per file, what its engine did and its step periods against their price, by kind of
    /// step (a run's replicas beside a simulation's from `plan --trace --steps-out`).
    #[arg(long, value_name = "PROFILE", requires = "from_steps")]
    pub price_with: Option<PathBuf>,
    /// `--price-with`: also write the tables as JSON here.
    #[arg(long, requires = "price_with")]
    pub json: Option<PathBuf>,
    /// The decode-attention term: `auto` (the default) fits whichever of `table` (a table over
    /// Σ decode context), `batch+length` (a table over the decode batch plus one over the
    /// context per sequence) and `seq` (one table over both) has the smallest held-out error
    /// on the steps (each shape predicted by a fit without it); `linear` is one linear term,
    /// as profiles before the tables were fitted.
    #[arg(long, hide = true, default_value = "auto", value_parser = ["auto", "table", "batch+length", "seq", "linear"])]
    pub context_term: String,
    /// The sampled-rows term: one linear term (the default), or a table over the rows a step
    /// samples (as profiles before were fitted: for comparing the two on the same steps). In
    /// every decode probe a step samples as many rows as it has tokens, so a rows table is not
    /// identified beside the tokens table: the fit split decode cost between the two at random
    /// (smollm2 on an AVX2 CPU: rows@3 42 ms, rows@4 6 ms) and mispriced a run's mixed steps
    /// by 5–9 %, which the linear term prices within 2 %; tiny's accuracy table is the same
    /// with either (docs/sizing.md).
    #[arg(long, hide = true, default_value = "linear", value_parser = ["table", "linear"])]
    pub rows_term: String,
}

impl ProfileArgs {
    /// The profiling these flags ask for.
    fn spec(&self) -> ProfileSpec {
        let cpus = |c: &Option<CpuList>| c.as_ref().map(|c| c.0.clone());
        ProfileSpec {
            model: self.model.source(),
            engine: self.engine.options(),
            engine_cpus: cpus(&self.engine_cpus),
            harness_cpus: cpus(&self.harness_cpus),
            out: self.out.clone(),
            from: self.from.clone(),
            from_steps: self.from_steps.clone(),
            from_bench: self.from_bench.clone(),
            time: self.time,
            baseline: self.baseline.clone(),
            bootstrap: self.bootstrap,
            seed: self.seed,
            save_steps: self.save_steps.clone(),
            roofline: !self.no_roofline,
            price_with: self.price_with.clone(),
            context_term: self.context_term.clone(),
            rows_term: self.rows_term.clone(),
        }
    }
}

/// The grid's progress on stderr: lines as they come (progress lines unless `--quiet`), the
/// probe running on one line overwritten in place.
struct Steps {
    quiet: bool,
    stepped: Cell<bool>,
}

impl Progress for Steps {
    fn line(&self, line: &str, warning: bool) {
        if warning || !self.quiet {
            eprintln!("{line}");
        }
    }
    fn levels(&self, _: usize) {}
    fn level_started(&self, label: &str, _: Option<&Live>) {
        if !self.quiet {
            eprint!("\rprofile: {label}   ");
            self.stepped.set(true);
        }
    }
    fn draws_live(&self) -> bool {
        false
    }
    fn level_finished(&self) {}
    fn finish(&self) {
        if self.stepped.take() {
            eprintln!();
        }
    }
}

pub fn run(a: ProfileArgs) -> Result<()> {
    let progress = Steps { quiet: a.quiet, stepped: Cell::new(false) };
    match goodput_bench::profile::profile(&a.spec(), &progress)? {
        Profiled::Fitted { profile, gap, drift, bench_rows } => {
            print!("{}", goodput_report::profile::text(&profile, gap));
            drift.iter().for_each(|line| eprintln!("warning: drift from the earlier profile: {line}"));
            match bench_rows {
                Some(n) => println!(
                    "profile written to {} (fitted from {n} bench rows: a thin sample of shapes)",
                    a.out.display()
                ),
                None => println!("profile written to {}", a.out.display()),
            }
        }
        Profiled::Priced(all) => {
            let profile = a.price_with.as_deref().unwrap_or(std::path::Path::new(""));
            println!("{}", goodput_report::profile::priced(&all, profile));
            if let Some(out) = &a.json {
                std::fs::write(out, serde_json::to_string_pretty(&all)? + "\n")
                    .map_err(|e| anyhow::anyhow!("writing {}: {e}", out.display()))?;
            }
        }
    }
    Ok(())
}
