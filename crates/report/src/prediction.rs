//! Predicted beside measured, compared: the metrics a prediction is judged on per level, and
//! whether the usable capacities agree — defined once for the console's table (the run's and
//! `goodput plan --check`'s). The simulated twin itself is stored by `goodput_results::prediction`.

use goodput_results::prediction::Prediction;
use goodput_results::{LevelReport, RunSummary};
use serde::{Deserialize, Serialize};

/// One metric, measured and predicted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Compared {
    /// The metric contract's name with its statistic (`output_throughput`, `ttft_p95`, …).
    pub metric: String,
    /// Unit of both values (`tok/s`, `s`, `fraction`).
    pub unit: String,
    pub measured: Option<f64>,
    pub predicted: Option<f64>,
    /// Whether the prediction lies outside the measured value's 95 % interval (the noise of
    /// one run); `None` for a metric without one.
    #[serde(default)]
    pub beyond: Option<bool>,
}

impl Compared {
    /// predicted ÷ measured − 1; `None` when either is missing or the measurement is 0.
    pub fn error(&self) -> Option<f64> {
        goodput_metrics::accuracy::prediction_error(self.measured, self.predicted)
    }
}

/// The metrics a prediction is judged on, for one level: output throughput, TTFT, TPOT and
/// E2E at P50 and P95, queue time P95 and the KV peak.
pub fn compare(measured: &LevelReport, predicted: &LevelReport) -> Vec<Compared> {
    let row = |metric: &str, unit: &str, f: &dyn Fn(&LevelReport) -> Option<f64>| {
        let p = f(predicted);
        let interval = interval(measured, metric);
        Compared {
            metric: metric.into(),
            unit: unit.into(),
            measured: f(measured),
            predicted: p,
            beyond: p.and_then(|p| goodput_metrics::accuracy::outside_interval(p, interval.as_ref())),
        }
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

/// The measured level's 95 % interval of `metric`, where the level has one.
pub fn interval(l: &LevelReport, metric: &str) -> Option<goodput_metrics::interval::Interval> {
    let i = l.summary.intervals.as_ref()?;
    match metric {
        "output_throughput" => i.output_throughput,
        "ttft_p95" => i.ttft_p95,
        "tpot_p95" => i.tpot_p95,
        "e2e_p95" => i.e2e_p95,
        _ => None,
    }
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
