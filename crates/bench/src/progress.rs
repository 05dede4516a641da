//! What a run tells as it goes, as events through [`Progress`]: its lines (progress and
//! warnings), the levels it holds, each level's start with its live view, and its end. The
//! command line draws them as a progress bar; [`Lines`] writes them to stderr as they come,
//! for a program that embeds the benchmark and for logs.

use crate::run::live::Live;

/// A view of a run in progress. Every method is called from the sweep's own thread.
pub trait Progress {
    /// A line for the person watching: progress, which a quiet view leaves out, or a warning
    /// or a note on what the run is (`warning`), which it always shows.
    fn line(&self, line: &str, warning: bool);
    /// The sweep holds `total` levels so far (refinement and a search add levels as it goes;
    /// a capacity search that stops drops the rest).
    fn levels(&self, total: usize);
    /// A level starts: `label` ("64 users"); `live`, where [`Progress::draws_live`], is fed
    /// as its requests end.
    fn level_started(&self, label: &str, live: Option<&Live>);
    /// Whether the view draws a live line for a level (the requests feed one only then).
    fn draws_live(&self) -> bool;
    /// A level finished.
    fn level_finished(&self);
    /// The sweep has ended: whatever the view draws is cleared.
    fn finish(&self);
}

/// Every line on stderr as it comes (progress lines unless `quiet`), no live view.
#[derive(Clone, Copy, Debug, Default)]
pub struct Lines {
    pub quiet: bool,
}

impl Progress for Lines {
    fn line(&self, line: &str, warning: bool) {
        if warning || !self.quiet {
            eprintln!("{line}");
        }
    }
    fn levels(&self, _: usize) {}
    fn level_started(&self, _: &str, _: Option<&Live>) {}
    fn draws_live(&self) -> bool {
        false
    }
    fn level_finished(&self) {}
    fn finish(&self) {}
}
