//! engine-check's console output (`goodput_engine::check` runs it): the greedy comparison, the
//! logits' agreement and the kernels against the CPU f32 engine, with the verdict; and the
//! rounding study's table.

use crate::console as table;
use goodput_engine::check::device::Report;
use goodput_engine::check::study::SchemeResult;
use std::fmt::Write;

/// A line into the text (writing into a `String` cannot fail).
macro_rules! line {
    ($o:expr, $($t:tt)*) => {{
        let _ = writeln!($o, $($t)*);
    }};
}

/// The device check: its greedy table, first differences, the logits' agreement, the
/// kernels, and the verdict.
pub fn text(r: &Report) -> String {
    let o = &mut String::new();
    let mut t = table::new(&["greedy at f32", "requests", "equal ids", "preemptions", "prefix-hit tokens"]);
    for g in &r.greedy {
        t.add_row(vec![
            g.scenario.to_string(),
            g.requests.to_string(),
            g.equal.to_string(),
            g.preemptions.to_string(),
            g.prefix_hit_tokens.to_string(),
        ]);
    }
    line!(o, "{} on {} against CPU f32\n{t}", r.model, r.device);
    for g in r.greedy.iter().filter_map(|g| g.first_difference.as_ref()) {
        line!(o, "  first difference: {g}");
    }
    if let Some(g) = &r.graphs_vs_eager {
        line!(
            o,
            "{} at the logits' dtype: {} of {} requests with equal ids (reported, not judged){}",
            g.scenario,
            g.equal,
            g.requests,
            g.first_difference.as_ref().map_or(String::new(), |d| format!("; first difference: {d}"))
        );
    }
    for l in &r.logits {
        line!(o,
            "logits at {} vs CPU f32, {} teacher-forced positions ({}): top-1 agreement {:.2} %, max |Δ| {:.4}, mean |Δ| {:.5}, max |Δ logprob| of f32's top-1 {:.4}",
            l.dtype,
            l.positions,
            l.sequences,
            l.top1_agreement * 100.0,
            l.max_abs_diff,
            l.mean_abs_diff,
            l.max_logprob_diff
        );
        if let (Some(n), Some(top1)) = (l.routed_alike, l.top1_routed_alike) {
            line!(o,
                "  routed alike (the same experts as f32 in every sparse layer): {n} of {} positions, top-1 agreement there {:.2} % (the check's figure)",
                l.positions,
                top1 * 100.0
            );
        }
    }
    for k in &r.kernels {
        line!(
            o,
            "kernel check: {} — max |Δ| {:.3e} (tolerance {:.0e}): {}",
            k.name,
            k.max_abs_diff,
            k.tolerance,
            if k.passed { "ok" } else { "FAILED" }
        );
    }
    line!(o, "engine-check: {}", if r.passed { "passed" } else { "FAILED" });
    std::mem::take(o)
}

/// The rounding study's table: each scheme's top-1 agreement and largest difference from f32.
pub fn rounding(model: &str, results: &[SchemeResult]) -> String {
    let mut t = table::new(&["rounded to bf16", "sequences", "positions", "top-1 vs f32", "max |Δ|"]);
    for r in results {
        t.add_row(vec![
            r.scheme.to_string(),
            r.sequences.to_string(),
            r.positions.to_string(),
            format!("{:.2} %", r.top1_agreement * 100.0),
            format!("{:.4}", r.max_abs_diff),
        ]);
    }
    format!("{model}: bf16 rounding points against f32 on the same weights (CPU, dense reference)\n{t}")
}
