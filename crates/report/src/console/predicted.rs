//! Predicted against measured on the console, level by level.

use super::new;
use crate::prediction::{capacity_agreement, compare};
use goodput_results::prediction::Prediction;
use goodput_results::{LoadUnit, RunSummary};

/// Predicted against measured, per level: each metric of
/// [`crate::prediction::compare`] as `measured → predicted (error)`, then the usable
/// capacity of both and the simulation's speed.
pub fn prediction(s: &RunSummary, p: &Prediction, unit: LoadUnit) -> String {
    let shown = [
        "output_throughput",
        "ttft_p50",
        "ttft_p95",
        "tpot_p50",
        "tpot_p95",
        "e2e_p95",
        "engine_wait_p95",
        "kv_block_usage_max",
    ];
    let mut header = vec![format!("load ({unit})")];
    header.extend(shown.iter().map(|m| m.to_string()));
    let mut t = new(&header.iter().map(String::as_str).collect::<Vec<_>>());
    for m in &s.levels {
        let Some(twin) = p.level(m.summary.load) else { continue };
        let rows = compare(m, twin);
        let mut cells = vec![m.summary.load.to_string()];
        for name in shown {
            let Some(c) = rows.iter().find(|c| c.metric == name) else { continue };
            let v = |x: Option<f64>| match (x, c.unit.as_str()) {
                (Some(x), "s") => format!("{:.1}", x * 1e3),
                (Some(x), "fraction") => format!("{:.0}%", x * 100.0),
                (Some(x), _) => format!("{x:.0}"),
                (None, _) => "-".into(),
            };
            let beyond = if c.beyond == Some(true) { " !" } else { "" };
            let err = c.error().map_or(String::new(), |e| format!(" ({:+.0}%{beyond})", e * 100.0));
            cells.push(format!("{} → {}{err}", v(c.measured), v(c.predicted)));
        }
        t.add_row(cells);
    }
    let (measured, predicted, agree) = capacity_agreement(s, p);
    let cap = |x: Option<f64>| x.map_or("none".to_string(), |x| format!("{x} {unit}"));
    format!(
        "Predicted against measured (measured → predicted; times in ms; ! the prediction outside the measured 95 % interval: beyond this run's noise), profile {}\n{t}\nusable capacity: measured {}, predicted {} ({}); simulation {:.0} steps/s, {:.0}× real time",
        p.profile,
        cap(measured),
        cap(predicted),
        if agree { "the same level or the next" } else { "disagree" },
        p.steps_per_s,
        p.speedup
    )
}
