//! Predicted beside measured: the simulated twin of every measured level (the same workload,
//! seed and settings, run on the simulated engine of a profile), and the comparison of the
//! two, defined once here for the console, the report and `goodput plan --check`.

use crate::summary::{LevelReport, RunSummary};
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
        self.capacity = RunSummary::verdict_of(&self.levels);
    }
}

/// One metric, measured and predicted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Compared {
    /// The metric contract's name with its statistic (`output_throughput`, `ttft_p95`, …).
    pub metric: String,
    /// Unit of both values (`tok/s`, `s`, `fraction`).
    pub unit: String,
    pub measured: Option<f64>,
    pub predicted: Option<f64>,
}

impl Compared {
    /// predicted ÷ measured − 1; `None` when either is missing or the measurement is 0.
    pub fn error(&self) -> Option<f64> {
        let (m, p) = (self.measured?, self.predicted?);
        (m != 0.0 && m.is_finite() && p.is_finite()).then(|| p / m - 1.0)
    }
}

/// The metrics a prediction is judged on, for one level: output throughput, TTFT, TPOT and
/// E2E at P50 and P95, queue time P95 and the KV peak.
pub fn compare(measured: &LevelReport, predicted: &LevelReport) -> Vec<Compared> {
    let row = |metric: &str, unit: &str, f: &dyn Fn(&LevelReport) -> Option<f64>| Compared {
        metric: metric.into(),
        unit: unit.into(),
        measured: f(measured),
        predicted: f(predicted),
    };
    vec![
        row("output_throughput", "tok/s", &|l| Some(l.summary.output_throughput)),
        row("ttft_p50", "s", &|l| l.summary.ttft.as_ref().map(|s| s.p50)),
        row("ttft_p95", "s", &|l| l.summary.ttft.as_ref().map(|s| s.p95)),
        row("tpot_p50", "s", &|l| l.summary.tpot.as_ref().map(|s| s.p50)),
        row("tpot_p95", "s", &|l| l.summary.tpot.as_ref().map(|s| s.p95)),
        row("e2e_p50", "s", &|l| l.summary.e2e.as_ref().map(|s| s.p50)),
        row("e2e_p95", "s", &|l| l.summary.e2e.as_ref().map(|s| s.p95)),
        row("queue_time_p95", "s", &|l| l.summary.queue_time.as_ref().map(|s| s.p95)),
        row("engine_wait_p95", "s", &|l| l.summary.engine_wait.as_ref().map(|s| s.p95)),
        row("kv_block_usage_max", "fraction", &|l| Some(l.engine.kv_block_usage_max)),
    ]
}

/// Usable capacity measured and predicted, and whether they agree: the same level, or
/// neighbours in the measured levels (within one refinement step).
pub fn capacity_agreement(summary: &RunSummary, prediction: &Prediction) -> (Option<f64>, Option<f64>, bool) {
    let measured = summary.verdict().usable;
    let predicted = prediction.capacity.usable;
    let loads: Vec<f64> = summary.levels.iter().map(|l| l.summary.load).collect();
    let index = |x: Option<f64>| x.and_then(|x| loads.iter().position(|&l| l == x));
    let agree = match (index(measured), index(predicted)) {
        (Some(a), Some(b)) => a.abs_diff(b) <= 1,
        (None, None) => true,
        _ => false,
    };
    (measured, predicted, agree)
}
