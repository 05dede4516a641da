//! The predicted-vs-measured charts of a run with `--predict`: each level's measured numbers
//! beside its simulated twin's, so how far the profile can be trusted reads off the page.

use super::charts::{right, series, Ctx};
use crate::chart::{Chart, Kind};
use goodput_results::prediction::Prediction;
use goodput_results::LevelReport;

fn points(levels: &[LevelReport], scale: f64, get: fn(&LevelReport) -> Option<f64>) -> Vec<(f64, f64)> {
    levels.iter().filter_map(|l| Some((l.summary.load, get(l)? * scale))).collect()
}

/// Output throughput and TPOT P95, then TTFT and E2E P95: measured against predicted.
pub(super) fn charts(cx: &Ctx, p: &Prediction) -> Vec<Chart> {
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
            series("measured output tok/s", points(m, 1.0, tput)),
            series("predicted output tok/s", points(s, 1.0, tput)),
            right("measured TPOT p95 (ms)", points(m, 1e3, tpot)),
            right("predicted TPOT p95 (ms)", points(s, 1e3, tpot)),
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
            series("measured TTFT p95", points(m, 1e3, ttft)),
            series("predicted TTFT p95", points(s, 1e3, ttft)),
            series("measured E2E p95", points(m, 1e3, e2e)),
            series("predicted E2E p95", points(s, 1e3, e2e)),
        ],
    );
    vec![first, second]
}
