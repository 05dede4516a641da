//! A soak on the console: its windows, and whether capacity held.

use super::new;
use crate::text::num;
use goodput_metrics::interval::Interval;
use goodput_metrics::soak::{Degraded, Soak};
use goodput_results::LoadUnit;

/// `23.1 [21.0–25.9]` in ms, `-` without a value.
fn p95(v: Option<f64>, i: Option<Interval>) -> String {
    match (v, i) {
        (Some(v), Some(i)) => format!("{:.1} [{}]", v * 1e3, i.text(1e3, 1)),
        (v, _) => num(v.map(|v| v * 1e3), 1),
    }
}

/// The verdict in words: held, or from when it degraded and by what.
pub fn verdict(s: &Soak, unit: LoadUnit) -> String {
    let head = format!("{} {unit} for {:.0} s in {} windows", s.load, s.duration_s, s.windows.len());
    match &s.degraded {
        None => format!("{head}: capacity held in every window (every SLO held; no P95 rose beyond its interval and 20 % over the first window's)"),
        Some(Degraded { window, at_s, what, .. }) if what == "slos" => {
            format!("{head}: capacity degraded from window {} (at {at_s:.0} s), where the SLOs broke", window + 1)
        }
        Some(d) => format!(
            "{head}: capacity degraded from window {} (at {:.0} s): {} rose from {:.1} ms to {:.1} ms, beyond both intervals",
            d.window + 1,
            d.at_s,
            d.what,
            d.first * 1e3,
            d.then * 1e3
        ),
    }
}

/// The soak's table, one row per window, under its verdict.
pub fn soak(s: &Soak, unit: LoadUnit) -> String {
    let mut t = new(&[
        "window (s)",
        "n",
        "ok",
        "errors",
        "retries",
        "TTFT p95 (ms)",
        "TPOT p95 (ms)",
        "E2E p95 (ms)",
        "out tok/s",
        "KV max",
        "preempt",
        "SLOs",
    ]);
    for w in &s.windows {
        t.add_row(vec![
            format!("{:.0}–{:.0}", w.start_s, w.end_s),
            w.requests.to_string(),
            w.completed.to_string(),
            w.errors.to_string(),
            w.retries.to_string(),
            p95(w.ttft_p95, w.ttft_p95_interval),
            p95(w.tpot_p95, w.tpot_p95_interval),
            p95(w.e2e_p95, w.e2e_p95_interval),
            format!("{:.0}", w.output_throughput),
            w.kv_max.map_or("-".into(), |k| format!("{:.0} %", k * 100.0)),
            w.preemptions.map_or("-".into(), |p| p.to_string()),
            (if w.slos_hold { "hold" } else { "broken" }).into(),
        ]);
    }
    format!("Soak: {} (P95s with 95 % intervals)\n{t}", verdict(s, unit))
}
