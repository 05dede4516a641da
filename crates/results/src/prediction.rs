//! Predicted beside measured: the simulated twin of every measured level (the same workload,
//! seed and settings, run on the simulated engine of a profile), as `summary.json`
//! (`prediction`) and `prediction.json` store it. Comparing the two is presentation:
//! `goodput_report::prediction`.

use crate::level::{verdict_of, LevelReport};
use goodput_metrics::capacity::Verdict;
use serde::{Deserialize, Serialize};

/// The simulated twins of a run's levels.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Prediction {
    /// The path of the profile they were simulated with.
    pub profile: String,
    /// One simulated level per measured level, by load ascending.
    pub levels: Vec<LevelReport>,
    /// The capacity verdict over the simulated levels.
    pub capacity: Verdict,
    /// Simulated engine steps per second of wall time, over every level.
    pub steps_per_s: f64,
    /// Simulated seconds (the levels' measured windows) per second of wall time.
    pub speedup: f64,
}

impl Prediction {
    /// The twin of the measured level at `load`.
    pub fn level(&self, load: f64) -> Option<&LevelReport> {
        self.levels.iter().find(|l| l.summary.load == load)
    }

    /// Adds a simulated level (by load ascending) and recomputes the verdict.
    pub fn push_level(&mut self, level: LevelReport) {
        self.levels.push(level);
        self.levels.sort_by(|x, y| x.summary.load.total_cmp(&y.summary.load));
        self.capacity = verdict_of(&self.levels);
    }
}

/// What a `--simulate` run cost: engine steps and seconds of measured windows simulated, in
/// wall seconds.
#[derive(Clone, Copy, Debug)]
pub struct Simulation {
    pub steps: usize,
    pub simulated_s: f64,
    pub wall_s: f64,
}
