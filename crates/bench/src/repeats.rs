//! The spread of repeated runs (`goodput run --repeats N`): per combination of a matrix,
//! each level's metrics as their median over the repeats and their spread
//! (`goodput_metrics::spread`), written as `repeats.json`.

use crate::runs::RunsError;
use goodput_metrics::compare::{Key, DEFAULT_KEYS};
use goodput_metrics::spread::{over_repeats, Spread};
use goodput_results::matrix::{Group, MatrixIndex};
use goodput_results::repeats::{GroupSpread, LevelSpread, MetricSpread, RepeatsFile, REPEATS_FORMAT};
use std::path::{Path, PathBuf};

/// The spread over the repeats of each combination in `index` (the matrix directory `root`).
pub fn summarize(root: &Path, index: &MatrixIndex) -> Result<RepeatsFile, RunsError> {
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
fn group(root: &Path, g: &Group<'_>, keys: &[Key]) -> Result<Option<GroupSpread>, RunsError> {
    let finished: Vec<PathBuf> = g.runs.iter().filter(|r| r.finished()).map(|r| r.dir.clone()).collect();
    let unfinished = g.runs.iter().filter(|r| !r.finished()).map(|r| r.dir.clone()).collect();
    if finished.is_empty() {
        return Ok(None);
    }
    let summaries =
        finished.iter().map(|d| goodput_results::read_summary(&root.join(d))).collect::<Result<Vec<_>, _>>()?;
    let loaded = finished.iter().map(|d| crate::runs::load_run(&root.join(d))).collect::<Result<Vec<_>, _>>()?;
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
