//! The machine under each side's levels: a comparison whose runs were measured while other
//! processes kept the machine busy (or its speed drifted) says so beside its verdicts, since
//! a change it reports there may be the machine's, not the code's.

use goodput_results::RunSummary;
use std::path::PathBuf;

/// The levels of `dirs` measured on a busy or drifting machine, as a Markdown paragraph
/// naming `side`; `None` when every level was quiet (or no summary can be read).
pub fn busy(side: &str, dirs: &[PathBuf]) -> Option<String> {
    let flagged: Vec<String> = dirs
        .iter()
        .filter_map(|d| Some((d, goodput_results::read_summary(d).ok()?)))
        .flat_map(|(d, s): (&PathBuf, RunSummary)| {
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
