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

use anyhow::{bail, Result};
use goodput_bench::run::interrupt;
use goodput_bench::run::{EXIT_INTERRUPTED, EXIT_OK};
use goodput_results::matrix::{Axis, MatrixIndex, MatrixRun, INDEX_FORMAT};
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
    let max_users = a.max_users.unwrap_or(256);
    if max_users == 0 || max_users > goodput_bench::run::spec::MAX_USERS {
        bail!("--max-users must be between 1 and {}, got {max_users}", goodput_bench::run::spec::MAX_USERS);
    }
    a.concurrency =
        std::iter::successors(Some(1usize), |&u| u.checked_mul(2)).take_while(|&u| u <= max_users).collect();
    if a.concurrency.last() != Some(&max_users) {
        a.concurrency.push(max_users);
    }
    (a.stop_at_first_failure, a.search) = (true, false);
    run(a)
}

/// `goodput run` from the command line: with `--config`, the file's run or matrix (`matches`
/// are `run`'s, to tell which flags the command line set); with `--repeats N`, the run or
/// each combination N times, then their spread; else [`run`].
pub fn main(a: RunArgs, matches: Option<&clap::ArgMatches>) -> Result<i32> {
    let file = a.config.clone();
    let expanded = match (&file, matches) {
        (Some(path), Some(matches)) => {
            let argv: Vec<String> = std::env::args_os().map(|a| a.to_string_lossy().into_owned()).collect();
            config::expand(path, &config::CommandLine::of(matches, &argv))?
        }
        _ => config::Expanded {
            jobs: vec![config::Job { name: String::new(), values: Vec::new(), args: a }],
            matrix: None,
        },
    };
    let expanded = repeats::expand(expanded)?;
    match expanded.matrix {
        None => run(expanded.jobs.into_iter().next().expect("a run expands to one job").args),
        Some((root, axes)) => run_matrix(file.as_deref(), &root, axes, expanded.jobs),
    }
}

/// Refuses a matrix directory that holds another matrix (unless every run overwrites) or
/// files that are not a matrix's, then creates it; an overwritten matrix's spread goes, and
/// so do its runs that the new matrix does not write again (`names`: the new runs'
/// directories), so no old run lies beside the new index.
fn matrix_dir(root: &Path, overwrite: bool, names: &[&str]) -> Result<()> {
    let shown = root.display();
    if let Some(old) = MatrixIndex::read(root)? {
        if !overwrite {
            bail!("{shown}: holds a matrix's runs (index.json); choose another out, or give overwrite = true (--overwrite) to replace them");
        }
        let own = |d: &Path| matches!(d.components().collect::<Vec<_>>()[..], [std::path::Component::Normal(_)]);
        for run in old.runs.iter().filter(|r| own(&r.dir) && !names.iter().any(|n| Path::new(n) == r.dir)) {
            let dir = root.join(&run.dir);
            // Only a run's own files go; a directory holding anything else stays, said so.
            match goodput_results::files::check_out_dir(&dir, true) {
                Ok(()) => std::fs::remove_dir_all(&dir).or_else(|e| match e.kind() {
                    std::io::ErrorKind::NotFound => Ok(()),
                    _ => Err(e),
                })?,
                Err(e) => eprintln!("warning: the old matrix's run {} is left in place: {e}", dir.display()),
            }
        }
    } else if std::fs::read_dir(root).is_ok_and(|mut d| d.next().is_some()) {
        bail!("{shown}: not empty and not a matrix's directory (no index.json); a matrix or --repeats writes its runs under an empty --out");
    }
    match std::fs::remove_file(root.join(goodput_results::repeats::REPEATS)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => bail!("{shown}: {e}"),
        _ => {}
    }
    std::fs::create_dir_all(root).map_err(|e| anyhow::anyhow!("{shown}: {e}"))
}

/// A matrix (a config file's, or `--repeats`): each run in turn under `root`, `index.json`
/// rewritten after each. A run that fails is recorded with its error and the next one runs;
/// an interrupt ends the matrix. Repeats end with their spread. Exits with the first non-zero
/// status of a run (130 when interrupted).
fn run_matrix(config: Option<&Path>, root: &Path, axes: Vec<Axis>, jobs: Vec<config::Job>) -> Result<i32> {
    if jobs
        .iter()
        .any(|j| j.args.export_json.is_some() || j.args.export_csv.is_some() || j.args.export_markdown.is_some())
    {
        bail!("--export-json, --export-csv and --export-markdown name one file, which each run of a matrix or of --repeats would overwrite; every run writes its summary and tables in its own directory under {}", root.display());
    }
    let names: Vec<&str> = jobs.iter().map(|j| j.name.as_str()).collect();
    matrix_dir(root, jobs.iter().all(|j| j.args.overwrite), &names)?;
    let json = jobs.first().is_some_and(|j| j.args.json);
    let mut index = MatrixIndex { format: INDEX_FORMAT, config: config.map(Path::to_path_buf), axes, runs: Vec::new() };
    // Written before the first run, so a matrix killed during it is still one (and reruns).
    index.write(root)?;
    let (n, stop) = (jobs.len(), interrupt::install());
    let mut status = EXIT_OK;
    for (i, job) in jobs.into_iter().enumerate() {
        eprintln!("matrix: run {} of {n}: {}", i + 1, job.name);
        let (exit, error) = match run_until(job.args, stop.clone()) {
            Ok(code) => (code, None),
            Err(e) => {
                eprintln!("error: the matrix's run {}: {e:#}", job.name);
                (1, Some(format!("{e:#}")))
            }
        };
        index.runs.push(MatrixRun { dir: job.name.clone().into(), name: job.name, values: job.values, exit, error });
        index.write(root)?;
        if status == EXIT_OK {
            status = exit;
        }
        if stop.raised() {
            status = EXIT_INTERRUPTED;
            break;
        }
    }
    if index.repeated() {
        match goodput_bench::repeats::summarize(root, &index).and_then(|s| Ok(s.write(root).map(|()| s)?)) {
            Ok(spread) => {
                let table = goodput_report::console::repeats(&spread);
                if json {
                    eprintln!("{table}");
                } else {
                    println!("{table}");
                }
            }
            Err(e) => eprintln!("error: the repeats' spread: {e:#} (the runs themselves are written)"),
        }
    }
    eprintln!(
        "matrix: {} of {n} runs in {} (their index: {}{})",
        index.runs.len(),
        root.display(),
        root.join(goodput_results::matrix::INDEX).display(),
        if index.repeated() {
            format!(", their spread: {}", root.join(goodput_results::repeats::REPEATS).display())
        } else {
            String::new()
        }
    );
    Ok(status)
}

/// `goodput run`: the arguments checked into a spec, the rig set up, the levels run one by one (each written
/// as it finishes), refinement levels added, then the tables, the conclusion and the report.
/// Returns the exit status: [`EXIT_OK`], [`goodput_bench::run::EXIT_NOTHING_COMPLETED`] or [`EXIT_INTERRUPTED`].
pub fn run(a: RunArgs) -> Result<i32> {
    run_until(a, interrupt::install())
}

/// [`run`], stopped by `stop`.
fn run_until(a: RunArgs, stop: Stop) -> Result<i32> {
    let (spec, shown) = spec::run_spec(a)?;
    let bar = view::Bar::new(spec.quiet);
    let outcome = goodput_bench::run::run(&spec, stop, &bar)?;
    view::show(&spec, &shown, &outcome)
}
