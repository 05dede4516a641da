//! `goodput run` and `goodput capacity`: the [`args`] (and a config file's runs, [`config`],
//! and `--repeats`, [`repeats`]) consumed once into the library's checked [`goodput_bench::RunSpec`]
//! ([`spec`]), one call of [`goodput_bench::run::run`] per run with the terminal's [`view`],
//! and the matrix of a config file or of repeats run by run. Only these commands read the
//! arguments; the benchmark itself is `goodput-bench`'s.

mod args;
mod config;
mod repeats;
mod spec;
mod view;

pub use args::{parse_run, CapacityArgs, RunArgs};
pub use spec::run_spec;
pub use view::{print_blocks, Bar};

use anyhow::{bail, Result};
use goodput_bench::matrix::MatrixSpec;
use goodput_bench::progress::Lines;
use goodput_bench::run::interrupt;
use goodput_results::matrix::Axis;
use goodput_workload::Stop;
use std::path::Path;

/// `goodput capacity`: levels 1, 2, 4, … users up to `--max-users`, stopping at the first
/// level whose SLOs break, then `--refine` bisection steps.
pub fn capacity(c: CapacityArgs) -> Result<i32> {
    let mut a = c.run;
    if a.config.is_some() {
        bail!("--config: a config file is `goodput run --config FILE`'s; `capacity` takes flags");
    }
    if a.repeats > 1 {
        bail!("--repeats: `capacity` bisects on what it measures, so its repeats would search different levels; repeat a fixed sweep with `goodput run --concurrency 1,2,4,… --stop-at-first-failure --repeats N`");
    }
    if a.rate.is_some() || a.stages.is_some() || a.duration.is_some() {
        bail!("goodput capacity searches over users with --requests per level; drop --rate, --stages and --duration");
    }
    if a.trace.trace.is_some() {
        bail!("goodput capacity searches over users; a trace sends at its own times: use `run --trace F --trace-speedup 1,2,4`");
    }
    a.concurrency = goodput_bench::run::spec::capacity_levels(a.max_users)?;
    (a.stop_at_first_failure, a.search) = (true, false);
    run(a)
}

/// `goodput run` from the command line: with `--config`, the file's run or matrix (`matches`
/// are `run`'s, to tell which flags the command line set); with `--repeats N`, the run or
/// each combination N times, then their spread; else [`run`].
pub fn main(a: RunArgs, matches: Option<&clap::ArgMatches>) -> Result<i32> {
    let (file, dry_run) = (a.config.clone(), a.dry_run);
    let expanded = match (&file, matches) {
        (Some(path), Some(matches)) => {
            let argv: Vec<String> = std::env::args_os().map(|a| a.to_string_lossy().into_owned()).collect();
            config::expand(path, &config::command_line(matches, &argv))?
        }
        _ => config::Expanded::one(a),
    };
    let expanded = repeats::expand(expanded)?
        .servers(|a| (a.server.as_deref(), a.target.contains("://").then_some(a.target.as_str())))
        .map_err(anyhow::Error::msg)?;
    if dry_run {
        let command = |(a, _): &(RunArgs, _)| a.command.clone().unwrap_or_else(|| std::env::args().collect());
        println!("{}", expanded.dry_run(command, |(_, s)| s.as_ref().map(|s| s.command.clone())));
        return Ok(0);
    }
    let stop = interrupt::install();
    match expanded.matrix {
        None => {
            let (a, server) = expanded.jobs.into_iter().next().expect("a run expands to one job").args;
            if a.resume {
                bail!("--resume resumes a matrix's runs (a config's [matrix], --repeats); this is one run");
            }
            let gate = a.baseline.clone().zip(a.out.clone()).zip(a.fail_on.clone());
            let code = served(a, server.as_ref(), &stop)?;
            match gate {
                Some(((baseline, out), fail_on)) if code == 0 => gate_against(baseline, out, fail_on),
                _ => Ok(code),
            }
        }
        Some((root, axes)) => run_matrix(file.as_deref(), &root, axes, expanded.jobs, stop),
    }
}

/// A run (stopped by `stop`) with the server it launches, when it launches one.
/// The run's arguments are checked before the server starts: a mistake costs no start.
fn served(a: RunArgs, server: Option<&goodput_bench::launch::Server>, stop: &Stop) -> Result<i32> {
    let (out, lines) = (a.out.clone(), Lines { quiet: a.quiet });
    let (spec, shown) = spec::run_spec(a)?;
    let run = || view::show(&shown, &goodput_bench::run::run(&spec, stop.clone(), &view::Bar::new(spec.quiet))?);
    Ok(goodput_bench::launch::around(server, out.as_deref(), stop, &lines, run)?)
}

/// A run of a matrix with the server it launches.
type Served = config::Job<(RunArgs, Option<goodput_bench::launch::Server>)>;

/// A config file's matrix (or the repeats) run by run through [`goodput_bench::matrix`], then
/// the repeats' spread printed.
fn run_matrix(config: Option<&Path>, root: &Path, axes: Vec<Axis>, jobs: Vec<Served>, stop: Stop) -> Result<i32> {
    let exports = |a: &RunArgs| a.export_json.is_some() || a.export_csv.is_some() || a.export_markdown.is_some();
    if jobs.iter().any(|j| exports(&j.args.0)) {
        bail!("--export-json, --export-csv and --export-markdown name one file, which each run of a matrix or of --repeats would overwrite; every run writes its summary and tables in its own directory under {}", root.display());
    }
    let json = jobs.first().is_some_and(|j| j.args.0.json);
    let overwrite = jobs.iter().all(|j| j.args.0.overwrite);
    let (n, resume) = (jobs.len(), jobs.iter().any(|j| j.args.0.resume));
    let spec = MatrixSpec { root, config, axes, overwrite, resume };
    let run = |(a, server): (RunArgs, Option<_>)| served(a, server.as_ref(), &stop);
    let seed = |(a, _): &(RunArgs, Option<_>)| a.seed;
    let done = goodput_bench::matrix::run(spec, jobs, &stop, &Lines { quiet: false }, seed, run)?;
    print_blocks(&done.tables(), json);
    eprintln!("{}", done.footer(root, n));
    Ok(done.status)
}

/// `--baseline`: the finished run in `out` against the baseline, as `goodput compare` judges
/// it with its defaults; 1 when a `--fail-on` metric regressed beyond the noise.
fn gate_against(baseline: std::path::PathBuf, out: std::path::PathBuf, fail_on: String) -> Result<i32> {
    let spec = goodput_bench::compare::CompareSpec::gate(baseline, out, fail_on);
    let code = crate::compare::judge(&spec, (None, None, None))?;
    eprintln!("gate against the baseline: {}", if code == 0 { "PASS" } else { "FAIL" });
    Ok(code)
}

pub fn run(a: RunArgs) -> Result<i32> {
    served(a, None, &interrupt::install())
}
