//! The predicted-vs-measured charts of a run with `--predict`: each level's measured numbers
//! beside its simulated twin's, so how far the profile can be trusted reads off the page.

use super::context::{by_load, right, series, Ctx};
use super::svg::{Chart, Kind};
use goodput_results::prediction::Prediction;
use goodput_results::LevelReport;

/// Output throughput and TPOT P95, then TTFT and E2E P95: measured against predicted.
pub fn charts(cx: &Ctx, p: &Prediction) -> Vec<Chart> {
    let (m, s) = (cx.levels, p.levels.as_slice());
    let tput: fn(&LevelReport) -> Option<f64> = |l| Some(l.summary.output_throughput);
    let tpot: fn(&LevelReport) -> Option<f64> = |l| l.summary.tpot.as_ref().map(|x| x.p95);
    let ttft: fn(&LevelReport) -> Option<f64> = |l| l.summary.ttft.as_ref().map(|x| x.p95);
    let e2e: fn(&LevelReport) -> Option<f64> = |l| l.summary.e2e.as_ref().map(|x| x.p95);
    let mut first = cx.chart(
        "predicted-throughput",
        "Predicted vs measured: throughput and TPOT",
        format!(
            "measured and simulated (predicted) output tok/s on the left and TPOT P95 in ms on the right, per level; the simulation ran the identical workload on the step-cost model of {}.",
            p.profile
        ),
        "output tok/s",
        Kind::Lines,
        vec![
            series("measured output tok/s", by_load(m, 1.0, tput)),
            series("predicted output tok/s", by_load(s, 1.0, tput)),
            right("measured TPOT p95 (ms)", by_load(m, 1e3, tpot)),
            right("predicted TPOT p95 (ms)", by_load(s, 1e3, tpot)),
        ],
    );
    first.y2_label = Some("TPOT p95 ms".into());
    let second = cx.chart(
        "predicted-latency",
        "Predicted vs measured: TTFT and E2E P95",
        "measured and simulated (predicted) TTFT P95 and E2E P95 in ms, per level.".into(),
        "ms",
        Kind::Lines,
        vec![
            series("measured TTFT p95", by_load(m, 1e3, ttft)),
            series("predicted TTFT p95", by_load(s, 1e3, ttft)),
            series("measured E2E p95", by_load(m, 1e3, e2e)),
            series("predicted E2E p95", by_load(s, 1e3, e2e)),
        ],
    );
    vec![first, second]
}
