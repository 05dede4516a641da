//! `goodput run --repeats N`: the run (or each combination of a config's matrix) N times
//! with one seed, each repeat a run of its own under the matrix directory with the axis
//! `repeat` last; then, per combination, each level's metrics as their median over the
//! repeats and their spread (`goodput_metrics::spread`), written as `repeats.json` and
//! printed. The repeats are a matrix like any other, so `report` overlays them and `compare`
//! takes their directory as a side with the repeats as its noise.

use super::args::RunArgs;
use super::config::{run_name, strip, Expanded, Job};
use anyhow::{anyhow, bail, Result};
use goodput_metrics::compare::{Key, DEFAULT_KEYS};
use goodput_metrics::spread::{over_repeats, Spread};
use goodput_results::matrix::{Axis, Group, MatrixIndex, REPEAT};
use goodput_results::repeats::{GroupSpread, LevelSpread, MetricSpread, RepeatsFile, REPEATS_FORMAT};
use std::path::{Path, PathBuf};

/// Each job of `e` as its repeats, when they ask for more than one: a single run becomes a
/// matrix of its repeats under its `--out`; a matrix gets the axis `repeat` last.
pub fn expand(mut e: Expanded) -> Result<Expanded> {
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
    Ok(Expanded { jobs, matrix: Some((root, axes)) })
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
    if r.scenario_inline.is_some() {
        c = strip(&c, "--scenario");
        c.push(format!("--scenario={}", dir.join(goodput_results::files::SCENARIO).display()));
    }
    c.push(format!("--out={}", dir.display()));
    c.push(format!("--seed={seed}"));
    r.command = Some(c);
    r
}

/// The spread over the repeats of each combination in `index` (the matrix directory `root`).
pub fn summarize(root: &Path, index: &MatrixIndex) -> Result<RepeatsFile> {
    let keys: Vec<Key> = DEFAULT_KEYS.iter().map(|k| Key::parse(k).expect("the default keys parse")).collect();
    let mut groups = Vec::new();
    for g in index.groups() {
        if let Some(s) = group(root, &g, &keys)? {
            groups.push(s);
        }
    }
    Ok(RepeatsFile { format: REPEATS_FORMAT, keys: keys.iter().map(Key::name).collect(), groups })
}

/// One combination's spread; `None` when none of its repeats finished.
fn group(root: &Path, g: &Group<'_>, keys: &[Key]) -> Result<Option<GroupSpread>> {
    let finished: Vec<PathBuf> = g.runs.iter().filter(|r| r.finished()).map(|r| r.dir.clone()).collect();
    let unfinished = g.runs.iter().filter(|r| !r.finished()).map(|r| r.dir.clone()).collect();
    if finished.is_empty() {
        return Ok(None);
    }
    let summaries =
        finished.iter().map(|d| goodput_results::read_summary(&root.join(d))).collect::<Result<Vec<_>, _>>()?;
    let loaded = finished.iter().map(|d| crate::runs::load_run(&root.join(d))).collect::<Result<Vec<_>>>()?;
    let runs: Vec<_> = loaded.into_iter().map(|(levels, _)| levels).collect();
    let (levels, not_shared) = levels(&runs, keys);
    let capacity = |f: fn(&goodput_metrics::capacity::Verdict) -> Option<f64>| -> Vec<Option<f64>> {
        summaries.iter().map(|s| s.capacity.as_ref().and_then(f)).collect()
    };
    let (usable, limit) = (capacity(|v| v.usable), capacity(|v| v.limit));
    let spread = |v: &[Option<f64>]| Spread::of(&v.iter().flatten().copied().collect::<Vec<_>>());
    Ok(Some(GroupSpread {
        values: g.values.clone(),
        seed: summaries[0].seed,
        unit: summaries[0].load_unit,
        usable_spread: spread(&usable),
        limit_spread: spread(&limit),
        usable,
        limit,
        runs: finished,
        unfinished,
        levels,
        not_shared,
    }))
}

type Levels = std::collections::BTreeMap<String, Vec<goodput_core::ClientRecord>>;

/// The levels every repeat ran, by load ascending, each key's spread over them; and the levels
/// some repeats ran and others did not, in words.
fn levels(runs: &[Levels], keys: &[Key]) -> (Vec<LevelSpread>, Vec<String>) {
    let all: std::collections::BTreeSet<&String> = runs.iter().flat_map(|r| r.keys()).collect();
    let (mut out, mut not_shared) = (Vec::new(), Vec::new());
    for load in all {
        let ran: Vec<String> =
            runs.iter().enumerate().filter(|(_, r)| r.contains_key(load)).map(|(i, _)| format!("#{}", i + 1)).collect();
        if ran.len() < runs.len() {
            not_shared.push(format!("load {load} ran in repeats {} only", ran.join(", ")));
            continue;
        }
        let records: Vec<Vec<&goodput_core::ClientRecord>> = runs.iter().map(|r| r[load].iter().collect()).collect();
        let metrics = over_repeats(&records, keys)
            .into_iter()
            .map(|k| MetricSpread { key: k.key.name(), values: k.values, spread: k.spread })
            .collect();
        out.push(LevelSpread { load: load.parse().unwrap_or(f64::NAN), metrics });
    }
    out.sort_by(|a, b| a.load.total_cmp(&b.load));
    (out, not_shared)
}
