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
    let held = match &s.degraded {
        None => {
            let unsure = s.windows.iter().filter(|w| w.requests > 0 && !w.slos_surely_hold).count();
            let how = if unsure == 0 {
                "every SLO held with 95 % confidence".to_string()
            } else {
                format!(
                    "every SLO held by value, in {unsure} of {} windows not significantly: too few requests per window for a percentile's interval (a P95 needs 72)",
                    s.windows.len()
                )
            };
            format!("{head}: capacity held in every window ({how}; no P95 rose beyond its interval and 20 % over the first window's)")
        }
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
    };
    format!("{held}{}", grew(s))
}

/// The target's figures that rose over the soak, as a sentence's tail (empty when none did).
fn grew(s: &Soak) -> String {
    let named: Vec<String> = s
        .grew
        .iter()
        .map(|g| match g.what.as_str() {
            "rss_bytes" => format!("memory {:.0} → {:.0} MiB", g.first / MIB, g.last / MIB),
            "open_fds" => format!("open file descriptors {:.0} → {:.0}", g.first, g.last),
            _ => format!("connections {:.0} → {:.0}", g.first, g.last),
        })
        .collect();
    if named.is_empty() {
        String::new()
    } else {
        format!(
            "; the target's {} rose from the first window to the last at a steady load (a leak shows there before it shows in latency)",
            named.join(", ")
        )
    }
}

const MIB: f64 = 1024.0 * 1024.0;

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
        "RSS (MiB)",
        "fds",
        "conns",
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
            w.rss_max_bytes.map_or("-".into(), |b| format!("{:.0}", b / MIB)),
            w.open_fds_max.map_or("-".into(), |x| format!("{x:.0}")),
            w.connections_max.map_or("-".into(), |x| format!("{x:.0}")),
            (match (w.slos_hold, w.slos_surely_hold) {
                (true, true) => "hold",
                (true, false) => "hold, n.s.",
                (false, _) => "broken",
            })
            .into(),
        ]);
    }
    format!("Soak: {} (P95s with 95 % intervals)\n{t}", verdict(s, unit))
}
