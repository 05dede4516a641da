//! What `goodput compare` says of the runs beside its table: two sides whose capacities
//! cannot both be right ([`contradiction`]), and levels measured on a busy machine ([`busy`]),
//! each as a Markdown paragraph from the runs' summaries.

use goodput_metrics::capacity::LevelOutcome;
use goodput_results::RunSummary;
use std::path::PathBuf;

/// The first contradiction between a run of A and a run of B, as a Markdown paragraph; `None`
/// when every pair agrees (or a side has no summary).
pub fn contradiction(sa: &[(PathBuf, RunSummary)], sb: &[(PathBuf, RunSummary)]) -> Option<String> {
    let outcomes = |s: &RunSummary| -> Vec<LevelOutcome> { s.levels.iter().map(|l| l.outcome()).collect() };
    for (da, a) in sa {
        for (db, b) in sb {
            let Some(c) = goodput_metrics::capacity::contradiction(&outcomes(a), &outcomes(b)) else { continue };
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

/// The levels of `runs` measured on a busy or drifting machine, as a Markdown paragraph
/// naming `side`; `None` when every level was quiet.
pub fn busy(side: &str, runs: &[(PathBuf, RunSummary)]) -> Option<String> {
    let flagged: Vec<String> = runs
        .iter()
        .flat_map(|(d, s)| {
            let unit = s.load_unit;
            s.levels
                .iter()
                .filter_map(|l| {
                    let why: Vec<String> = l.machine.as_ref()?.busy().iter().map(ToString::to_string).collect();
                    (!why.is_empty())
                        .then(|| format!("`{}` at {} {unit} ({})", d.display(), l.summary.load, why.join("; ")))
                })
                .collect::<Vec<_>>()
        })
        .collect();
    (!flagged.is_empty()).then(|| {
        format!(
            "> **Busy machine ({side}):** {}. A change at those levels may be the machine's, not the code's: rerun on a quiet machine, or give repeats (the noise becomes their spread).\n\n",
            flagged.join(", ")
        )
    })
}
