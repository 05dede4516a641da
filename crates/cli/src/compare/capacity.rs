//! The two sides' capacities held against each other ([`contradiction`]): `run` and
//! `capacity`, or two days' runs of one setup, that cannot both be right are flagged, with
//! what the machine was doing at the level that broke.

use goodput_metrics::capacity::{contradiction, LevelOutcome};
use goodput_results::RunSummary;
use std::path::PathBuf;

/// A side's summaries that can be read (a run killed before its first level has none).
fn summaries(dirs: &[PathBuf]) -> Vec<(PathBuf, RunSummary)> {
    dirs.iter().filter_map(|d| Some((d.clone(), goodput_results::read_summary(d).ok()?))).collect()
}

/// The first contradiction between a run of A and a run of B, as a Markdown paragraph; `None`
/// when every pair agrees (or a side has no summary).
pub fn check(dirs_a: &[PathBuf], dirs_b: &[PathBuf]) -> Option<String> {
    let (sa, sb) = (summaries(dirs_a), summaries(dirs_b));
    let outcomes = |s: &RunSummary| -> Vec<LevelOutcome> { s.levels.iter().map(|l| l.outcome()).collect() };
    for (da, a) in &sa {
        for (db, b) in &sb {
            let Some(c) = contradiction(&outcomes(a), &outcomes(b)) else { continue };
            let ((held, hd), (broke, bd)) = if c.held_by == 0 { ((a, da), (b, db)) } else { ((b, db), (a, da)) };
            let (hn, bn) = if c.held_by == 0 { ("A", "B") } else { ("B", "A") };
            let unit = held.load_unit;
            let machine = broke
                .levels
                .iter()
                .find(|l| l.summary.load == c.broke_at)
                .and_then(|l| l.machine.as_ref())
                .map(|m| m.busy().iter().map(ToString::to_string).collect::<Vec<_>>())
                .filter(|b| !b.is_empty())
                .map_or(String::new(), |b| format!(" ({bn}'s machine was busy there: {})", b.join("; ")));
            // Results written before intervals were judged as counted.
            let judged = held.levels.iter().flat_map(|l| &l.summary.slos).all(|s| s.confidence.is_some());
            let how = if judged { "with 95 % confidence" } else { "as counted (results without intervals)" };
            return Some(format!(
                "> **Capacities contradict:** {hn} (`{}`) held every SLO {how} up to {} {unit} (its usable capacity), where {bn} (`{}`) broke at {} {unit}{machine}. Both cannot be right: the machine or the target changed between the runs, so neither capacity stands alone — rerun both with --repeats, on a quiet machine.\n\n",
                hd.display(),
                c.usable,
                bd.display(),
                c.broke_at,
            ));
        }
    }
    None
}
