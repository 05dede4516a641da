//! The simulated twin's accuracy over several measured runs (`goodput plan --check DIR… --profile
//! P --json FILE`): per scenario family (a run directory, or a `--repeats` matrix of one) and
//! metric, each level's error with the measurement's run-to-run spread, the MAPE over the
//! levels, whether the usable capacities agree, and the runs' steps priced by the profile by
//! kind. The errors and spreads are `goodput_metrics::accuracy`'s and `spread`'s.

use serde::{Deserialize, Serialize};

/// The accuracy of one profile over the families checked.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AccuracyReport {
    /// The profile the twins were simulated with.
    pub profile: String,
    pub families: Vec<FamilyAccuracy>,
}

/// One family: its runs (repeats of one workload) and each metric's errors.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FamilyAccuracy {
    /// The directory's name (`long-gen-bursty`).
    pub family: String,
    /// The workload as the runs describe it.
    pub workload: String,
    /// `users`, `req/s`, …
    pub load_unit: String,
    /// Runs checked (repeats of the same workload).
    pub runs: usize,
    pub metrics: Vec<MetricAccuracy>,
    /// Usable capacity per run: measured, predicted, and whether they agree (the same level
    /// or the next).
    pub capacity: Vec<CapacityCheck>,
    /// The runs' steps priced by the profile, by kind, over every run of the family.
    pub steps: Vec<KindPrice>,
}

/// One metric of a family.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MetricAccuracy {
    /// The metric contract's name with its statistic (`tpot_p95`).
    pub metric: String,
    pub levels: Vec<LevelAccuracy>,
    /// Mean |error| over the levels with one (fraction).
    pub mape: Option<f64>,
    /// Median over the levels of the measurement's relative run-to-run spread (`None` with
    /// one run: a single run shows its noise as its intervals, per level).
    pub spread: Option<f64>,
    /// Levels whose error is beyond the noise.
    pub beyond: usize,
}

/// One level of a metric: the measurement over the repeats and the twin's error.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LevelAccuracy {
    pub load: f64,
    /// Median over the runs of the measured value.
    pub measured: Option<f64>,
    /// Median over the runs of the predicted value.
    pub predicted: Option<f64>,
    /// Median over the runs of each run's predicted ÷ measured − 1.
    pub error: Option<f64>,
    /// The measurement's relative spread over the runs ((max − min) ÷ median); `None` with
    /// one run.
    pub spread: Option<f64>,
    /// Whether the error is beyond the noise (the spread, or with one run the measured
    /// value's 95 % interval); `None` when neither is known.
    pub beyond: Option<bool>,
    /// Runs whose measurement of this level stopped early, the queue growing without bound:
    /// not compared (their numbers are those of a transient cut where the guard fired).
    #[serde(default)]
    pub stopped: usize,
}

/// One run's usable capacity, measured and predicted.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CapacityCheck {
    pub measured: Option<f64>,
    pub predicted: Option<f64>,
    pub agree: bool,
}

/// One kind of step over a family's runs: measured periods against the profile's price.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct KindPrice {
    /// `decode ×1–4`, `decode ×5–16`, `decode ×17+`, `mixed`, `prefill`.
    pub kind: String,
    pub steps: usize,
    /// Σ measured step periods, seconds.
    pub measured_s: f64,
    /// Σ the profile's price of the same steps, seconds.
    pub priced_s: f64,
}

impl AccuracyReport {
    /// Writes the report as pretty JSON, whole ([`crate::files::write_json`]).
    pub fn write(&self, path: &std::path::Path) -> Result<(), crate::ResultsError> {
        let dir = path.parent().unwrap_or(std::path::Path::new(""));
        let name = path.file_name().map_or_else(|| path.to_string_lossy(), |n| n.to_string_lossy());
        crate::files::write_json(dir, &name, self)
    }
}

impl KindPrice {
    /// Σ measured ÷ Σ priced (> 1: the steps took longer than the profile says).
    pub fn ratio(&self) -> Option<f64> {
        (self.priced_s > 0.0).then(|| self.measured_s / self.priced_s)
    }
}
