//! The twin's accuracy over several checked runs (`goodput plan --check DIR…`): the answer
//! first (per family, the MAPE of each headline metric beside the measurement's own noise and
//! whether the capacities agree), then each level's errors, then the steps priced by kind.

use super::new;
use goodput_results::accuracy::{AccuracyReport, FamilyAccuracy, MetricAccuracy};

/// The headline metrics, with their column names.
const HEADLINE: [(&str, &str); 4] =
    [("output_throughput", "output tok/s"), ("ttft_p95", "TTFT P95"), ("tpot_p95", "TPOT P95"), ("e2e_p95", "E2E P95")];

fn pct(x: f64) -> String {
    format!("{:.0} %", x * 100.0)
}

fn find<'a>(f: &'a FamilyAccuracy, metric: &str) -> Option<&'a MetricAccuracy> {
    f.metrics.iter().find(|m| m.metric == metric)
}

/// `12 % (noise 4 %, 2/4 beyond)`: the MAPE, the median run-to-run spread (with repeats),
/// and the levels whose error is beyond the noise.
fn cell(m: &MetricAccuracy) -> String {
    let Some(mape) = m.mape else { return "-".into() };
    let with_error = m.levels.iter().filter(|l| l.error.is_some()).count();
    let noise = m.spread.map_or(String::new(), |s| format!("noise {}, ", pct(s)));
    format!("{} ({noise}{}/{with_error} beyond)", pct(mape), m.beyond)
}

/// The answer: one row per family.
fn summary(r: &AccuracyReport) -> String {
    let mut header = vec!["family", "loads", "runs"];
    header.extend(HEADLINE.iter().map(|(_, name)| *name));
    header.push("capacity");
    let mut t = new(&header);
    for f in &r.families {
        let loads: Vec<String> =
            f.metrics.first().map(|m| m.levels.iter().map(|l| format!("{}", l.load)).collect()).unwrap_or_default();
        let mut row = vec![f.family.clone(), format!("{} {}", loads.join(", "), f.load_unit), f.runs.to_string()];
        row.extend(HEADLINE.iter().map(|(m, _)| find(f, m).map_or("-".into(), cell)));
        let agree = f.capacity.iter().filter(|c| c.agree).count();
        row.push(format!("agrees in {agree} of {}", f.capacity.len()));
        t.add_row(row);
    }
    t.to_string()
}

/// Each family's levels: the headline metrics' errors, `!` where beyond the noise.
fn levels(r: &AccuracyReport) -> String {
    let mut header = vec!["family", "load"];
    header.extend(HEADLINE.iter().map(|(_, name)| *name));
    let mut t = new(&header);
    for f in &r.families {
        let Some(first) = f.metrics.first() else { continue };
        for l in &first.levels {
            let mut row = vec![f.family.clone(), format!("{} {}", l.load, f.load_unit)];
            for (m, _) in HEADLINE {
                let level = find(f, m).and_then(|m| m.levels.iter().find(|x| x.load == l.load));
                row.push(match level {
                    Some(x) if x.error.is_none() && x.stopped > 0 => "stopped".into(),
                    Some(x) => x.error.map_or("-".into(), |e| {
                        format!("{:+.0} %{}", e * 100.0, if x.beyond == Some(true) { " !" } else { "" })
                    }),
                    None => "-".into(),
                });
            }
            t.add_row(row);
        }
    }
    t.to_string()
}

/// The levels some run stopped early over-saturated, which the errors leave out: `None` when
/// there are none.
fn stopped(r: &AccuracyReport) -> Option<String> {
    let mut out = Vec::new();
    for f in &r.families {
        let Some(first) = f.metrics.first() else { continue };
        for l in first.levels.iter().filter(|l| l.stopped > 0) {
            out.push(format!("{} at {} {} ({} of {} runs)", f.family, l.load, f.load_unit, l.stopped, f.runs));
        }
    }
    (!out.is_empty()).then(|| {
        format!(
            "Not compared: levels whose measurement stopped early, the queue growing without bound (their numbers are a transient cut where the guard fired, not a load's): {}.",
            out.join("; ")
        )
    })
}

/// Each family's steps priced by kind.
fn steps(r: &AccuracyReport) -> String {
    let mut t = new(&["family", "kind", "steps", "Σ measured ÷ Σ priced"]);
    for f in &r.families {
        for k in &f.steps {
            let ratio = k.ratio().map_or("-".into(), |x| format!("{x:.3}"));
            t.add_row(vec![f.family.clone(), k.kind.clone(), k.steps.to_string(), ratio]);
        }
    }
    t.to_string()
}

/// The accuracy report on the console.
pub fn accuracy(r: &AccuracyReport) -> String {
    let mut out = format!(
        "The twin against the measurement, profile {}: MAPE over each family's levels (predicted ÷ measured − 1, median over its runs), the measurement's run-to-run spread, levels beyond it\n{}",
        r.profile,
        summary(r)
    );
    if let Some(line) = stopped(r) {
        out.push_str(&format!("\n{line}"));
    }
    out.push_str(&format!(
        "\nErrors per level (! beyond the run-to-run spread, or with one run outside the measured 95 % interval)\n{}",
        levels(r)
    ));
    if r.families.iter().any(|f| !f.steps.is_empty()) {
        out.push_str(&format!("\nThe runs' steps against the profile's price (> 1: slower than priced)\n{}", steps(r)));
    }
    out
}
