//! A step-cost profile's text (`goodput_bench::profile` fits it): its terms with their
//! intervals and their place against the machine's roofline, the fit's quality; and step
//! files priced by a profile.

use crate::console as table;
use goodput_sizing::cost::Term;
use goodput_sizing::price::Priced;
use goodput_sizing::profile::Profile;
use std::fmt::Write;
use std::path::Path;

/// A line into the text (writing into a `String` cannot fail).
macro_rules! line {
    ($o:expr, $($t:tt)*) => {{
        let _ = writeln!($o, $($t)*);
    }};
}

/// The fitted terms, their intervals and their place against the roofline, and the fit's
/// quality (`gap`: the median gap between busy steps).
pub fn text(p: &Profile, gap: f64) -> String {
    let o = &mut String::new();
    let mut t = table::new(&["term", "per", "coefficient", "95 % interval", "floor", "of roofline"]);
    for f in p.fit.terms.iter().filter(|f| !matches!(f.term, Term::SeqContext(..))) {
        let floor = p.roofline.as_ref().and_then(|r| r.terms.iter().find(|x| x.term == f.term));
        t.add_row(vec![
            f.term.name(),
            f.term.unit().to_string(),
            match (f.measured, f.coefficient > 0.0) {
                (true, _) => secs(f.coefficient),
                (false, true) => format!("{} (interpolated, not measured)", secs(f.coefficient)),
                (false, false) => "not measured".into(),
            },
            if f.measured { format!("{} – {}", secs(f.lo), secs(f.hi)) } else { String::new() },
            floor.map_or(String::new(), |x| secs(x.floor_s)),
            floor
                .and_then(|x| x.efficiency)
                .map_or(String::new(), |e| format!("{:.1} % ({})", e * 100.0, floor.map_or("", |x| x.bound.as_str()))),
        ]);
    }
    let r = &p.fit.residuals;
    line!(o, "Step-cost model of {} ({}, {}), {}\n{t}", p.model, p.dtype, p.fingerprint.device, p.source);
    if let Some(grid) = seq_grid(p) {
        line!(o, "decode attention per context token (ns), by decode batch (rows) and context per sequence (columns); * interpolated from the measured cells\n{grid}");
    }
    for c in &p.selection {
        line!(
            o,
            "decode attention as {}: held-out |error| mean {:.1} %, P50 {:.1} %, P90 {:.1} % over {} steps{}",
            c.name,
            c.held_out.mean * 100.0,
            c.held_out.p50 * 100.0,
            c.held_out.p90 * 100.0,
            c.held_out.steps,
            if c.chosen { " (chosen: the smaller held-out error)" } else { "" }
        );
    }
    line!(o,
        "R² {:.4} over {} step periods (start to the next start while busy); |relative residual| P50 {:.1} %, P90 {:.1} %, P99 {:.1} %, median bias {:+.1} %; median gap between busy steps {}",
        p.fit.r2,
        p.fit.samples,
        r.p50 * 100.0,
        r.p90 * 100.0,
        r.p99 * 100.0,
        r.bias * 100.0,
        secs(gap)
    );
    if !r.bands.is_empty() {
        let each: Vec<String> = r
            .bands
            .iter()
            .map(|b| {
                let q = |i: usize| b.ratios.get(i).copied().unwrap_or(f64::NAN);
                format!(
                    "from {} ({} steps) P10 {:.2}, P90 {:.2}, P99 {:.2}",
                    secs(b.from_s),
                    b.steps,
                    q(10),
                    q(90),
                    q(99)
                )
            })
            .collect();
        line!(
            o,
            "measured ÷ predicted step time by predicted length, what the twin draws each step from: {}",
            each.join("; ")
        );
    }
    if let Some(m) = &p.roofline {
        let pct = |x: Option<f64>| x.map_or("-".to_string(), |x| format!("{:.0} %", x * 100.0));
        line!(o,
            "roofline: {:.1} GB/s, {:.1} GFLOP/s ({}); a one-token decode step reaches {} of weights ÷ bandwidth (MBU), a token of the largest batches {} of its FLOPs ÷ FLOP/s (MFU)",
            m.bandwidth / 1e9,
            m.flops / 1e9,
            m.how,
            pct(m.memory_efficiency),
            pct(m.compute_efficiency)
        );
    }
    std::mem::take(o)
}

/// The decode-attention table's cells as a grid, `None` without them.
fn seq_grid(p: &Profile) -> Option<String> {
    let cells: Vec<(u32, u32, f64, bool)> = p
        .fit
        .terms
        .iter()
        .filter_map(|f| match f.term {
            Term::SeqContext(b, c) => Some((b, c, f.coefficient, f.measured)),
            _ => None,
        })
        .collect();
    if cells.is_empty() {
        return None;
    }
    let mut batches: Vec<u32> = cells.iter().map(|c| c.0).collect();
    let mut contexts: Vec<u32> = cells.iter().map(|c| c.1).collect();
    batches.sort_unstable();
    batches.dedup();
    contexts.sort_unstable();
    contexts.dedup();
    let mut header = vec!["batch".to_string()];
    header.extend(contexts.iter().map(|c| c.to_string()));
    let mut t = table::new(&header.iter().map(String::as_str).collect::<Vec<_>>());
    for b in batches {
        let mut row = vec![b.to_string()];
        for &c in &contexts {
            row.push(
                cells
                    .iter()
                    .find(|x| x.0 == b && x.1 == c)
                    .map_or(String::new(), |x| format!("{:.1}{}", x.2 * 1e9, if x.3 { "" } else { "*" })),
            );
        }
        t.add_row(row);
    }
    Some(t.to_string())
}

/// Seconds in the unit that reads best (s, ms, µs, ns).
pub fn secs(s: f64) -> String {
    let a = s.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1.0 {
        format!("{s:.3} s")
    } else if a >= 1e-3 {
        format!("{:.3} ms", s * 1e3)
    } else if a >= 1e-6 {
        format!("{:.3} µs", s * 1e6)
    } else {
        format!("{:.3} ns", s * 1e9)
    }
}

/// Steps priced by the profile at `profile`: what each file's engine did, then by kind of
/// step its periods against their price.
pub fn priced(all: &[Priced], profile: &Path) -> String {
    let pct =
        |a: usize, b: usize| if b == 0 { "-".to_string() } else { format!("{:.1} %", a as f64 * 100.0 / b as f64) };
    let mut t = table::new(&[
        "steps of",
        "steps",
        "busy",
        "priced",
        "busy ÷ priced",
        "prefill tokens",
        "mixed steps",
        "preempted",
        "prefix hits",
        "mean seqs",
    ]);
    for x in all {
        t.add_row(vec![
            x.file.clone(),
            x.steps.to_string(),
            secs(x.busy_s),
            secs(x.priced_s),
            format!("{:.3}", x.busy_s / x.priced_s),
            x.prefill_tokens.to_string(),
            x.mixed_steps.to_string(),
            x.preemptions.to_string(),
            pct(x.prefix_hit_tokens, x.prefix_query_tokens),
            format!("{:.2}", x.mean_seqs),
        ]);
    }
    let head =
        format!("Steps priced by {} (a step's period: start to the next start while busy)\n{t}", profile.display());
    let mut k = table::new(&["steps of", "kind", "steps", "period P50", "÷ price P50", "P10 – P90", "Σ ÷ Σ price"]);
    for x in all {
        for kind in &x.kinds {
            k.add_row(vec![
                x.file.clone(),
                kind.kind.clone(),
                kind.steps.to_string(),
                secs(kind.period_p50_s),
                format!("{:.3}", kind.ratio_p50),
                format!("{:.3} – {:.3}", kind.ratio_p10, kind.ratio_p90),
                format!("{:.3}", kind.ratio_total),
            ]);
        }
    }
    format!("{head}\n{k}")
}
