//! The report's headline: the answer in a box above everything else — usable capacity (or
//! "at least", or "below", where the sweep did not bracket it), the SLOs that break above it,
//! the throughput and per-user speed there, and what ran, against what, when
//! ([`goodput_results::outcome::RunOutcome`], as a matrix's summary says it).

use super::escape;
use goodput_results::outcome::RunOutcome;
use goodput_results::RunSummary;

/// The headline as words: its title and its lines, each plain text.
pub fn lines(s: &RunSummary) -> (String, Vec<String>) {
    if s.levels.is_empty() {
        return ("No level ran".into(), Vec::new());
    }
    let o = RunOutcome::of(s);
    let unit = s.load_unit;
    let mut out = Vec::new();
    let ms = |x: Option<f64>| x.map_or("-".into(), |v| format!("{:.0} ms", v * 1e3));
    if let (Some(rps), Some(tps)) = (o.request_throughput, o.output_throughput) {
        let user = o.per_user_tps_p50.map_or(String::new(), |u| format!(", {u:.1} tok/s per user (median)"));
        out.push(format!(
            "There: {rps:.2} req/s, {tps:.0} output tok/s{user}; TTFT p95 {}, TPOT p95 {}, E2E p95 {}",
            ms(o.ttft_p95_s),
            ms(o.tpot_p95_s),
            ms(o.e2e_p95_s)
        ));
    }
    if let Some(at) = o.broke_at {
        if !o.bound.is_empty() {
            out.push(format!("Bound by {} at {at} {unit}", o.bound.join(", ")));
        }
        if !o.unsure.is_empty() {
            out.push(format!(
                "At {at} {unit}, {} not shown to hold: their values meet the bounds, their 95 % intervals reach past them (more requests narrow them)",
                o.unsure.join(", ")
            ));
        }
    } else {
        out.push(format!("No SLO broke up to {} {unit}", o.highest.unwrap_or(0.0)));
    }
    let when = s.clock.as_ref().map_or(String::new(), |c| {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_nanos(c.origin_unix_ns);
        format!(", {}", humantime::format_rfc3339_seconds(t))
    });
    out.push(format!("{} on {}, {}, target {}{when}", s.model, s.device, s.workload.name, s.target));
    (format!("Usable capacity: {}", o.usable_text()), out)
}

/// The headline as HTML.
pub fn html(s: &RunSummary) -> String {
    let (title, lines) = lines(s);
    let body: String = lines.iter().map(|l| format!("<div>{}</div>", escape(l))).collect();
    format!("<div class=\"headline\" id=\"headline\"><div class=\"big\">{}</div>{body}</div>\n", escape(&title))
}
