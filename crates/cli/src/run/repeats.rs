//! `goodput run --repeats N`: the run (or each combination of a config's matrix) N times
//! with one seed, each repeat a run of its own under the matrix directory with the axis
//! `repeat` last; then, per combination, each level's metrics as their median over the
//! repeats and their spread (`goodput_metrics::spread`), written as `repeats.json` and
//! printed. The repeats are a matrix like any other, so `report` overlays them and `compare`
//! takes their directory as a side with the repeats as its noise.

use super::args::RunArgs;
use super::config::{Expanded, Job};
use anyhow::{anyhow, bail, Result};
use goodput_bench::command::strip;
use goodput_bench::config::run_name;
use goodput_results::matrix::{Axis, REPEAT};
use std::path::Path;

/// Each job of `e` as its repeats, when they ask for more than one: a single run becomes a
/// matrix of its repeats under its `--out`; a matrix gets the axis `repeat` last.
pub fn expand(mut e: Expanded<RunArgs>) -> Result<Expanded<RunArgs>> {
    let n = e.jobs.first().map_or(1, |j| j.args.repeats);
    if e.jobs.iter().any(|j| j.args.repeats != n) {
        bail!("repeats: one count for every run (it cannot be a matrix axis)");
    }
    if n <= 1 {
        return Ok(e);
    }
    if e.jobs.iter().any(|j| j.args.start_at.is_some()) {
        bail!("--repeats with --start-at: every repeat after the first would start late; repeat sharded runs with one --start-at each");
    }
    let (root, mut axes) = match e.matrix.take() {
        Some(m) => m,
        None => {
            let out = e.jobs[0].args.out.clone().ok_or_else(|| {
                anyhow!("--repeats {n} writes each repeat as a run of its own under --out DIR: give --out")
            })?;
            (out, Vec::new())
        }
    };
    axes.push(Axis { key: REPEAT.into(), values: (1..=n).map(|k| k.to_string()).collect() });
    // One seed for every repeat: they differ by the machine's noise, not by their prompts.
    let drawn = u64::from(rand::random::<u32>());
    let mut jobs = Vec::new();
    for job in e.jobs {
        for k in 1..=n {
            let mut values = job.values.clone();
            values.push((REPEAT.into(), k.to_string()));
            let name = run_name(jobs.len(), &values);
            let args = repeat_args(&job.args, &root.join(&name), drawn);
            jobs.push(Job { name, values, args });
        }
    }
    Ok(Expanded { jobs, matrix: Some((root, axes)), notes: e.notes, server: e.server })
}

/// One repeat of `a`: written to `dir`, with `a`'s seed or else `drawn`, and the command line
/// that reruns it alone stored with it (without `--repeats`, with its `--out` and `--seed`).
fn repeat_args(a: &RunArgs, dir: &Path, drawn: u64) -> RunArgs {
    let mut r = a.clone();
    r.repeats = 1;
    r.out = Some(dir.to_path_buf());
    let seed = *r.seed.get_or_insert(drawn);
    let command =
        a.command.clone().unwrap_or_else(|| std::env::args_os().map(|s| s.to_string_lossy().into_owned()).collect());
    let mut c = ["--repeats", "--out", "--seed", "--config"].iter().fold(command, |c, flag| strip(&c, flag));
    c.retain(|t| t != "--resume");
    if r.scenario_inline.is_some() {
        c = strip(&c, "--scenario");
        c.push(format!("--scenario={}", dir.join(goodput_results::files::SCENARIO).display()));
    }
    c.push(format!("--out={}", dir.display()));
    c.push(format!("--seed={seed}"));
    r.command = Some(c);
    r
}
