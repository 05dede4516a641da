//! `goodput calibrate`'s table, its floors, and its verdict in words: the streams per client core within the bound, and why a
//! bound that broke may not be the client's (its cores idle there, or the machine busy).

use crate::console as table;
use crate::text::{ms, num};
use goodput_metrics::machine::MachineLoad;
use goodput_metrics::Summary;
use goodput_results::calibration::{CalibrationLevel, BOUND_CHUNK_P99_S, BOUND_TTFT_P50_S};
use std::time::Duration;

/// What the verdict needs of one calibration level.
pub struct Seen<'a> {
    pub streams: usize,
    pub within_bound: bool,
    /// The client's CPU ÷ (its cores × wall time), and its CPU per stream (cores).
    pub cpu_share: f64,
    pub cpu_per_stream: f64,
    pub machine: Option<&'a MachineLoad>,
}

/// The streams per client core within `bound` ([`bound_line`]), then why a broken bound may
/// not be the client's: its cores were far from busy there, or the machine was busy.
pub fn per_core(levels: &[Seen], cores: usize, bound: &str) -> String {
    let mut out = bound_line(levels, cores, bound);
    let mut sorted: Vec<&Seen> = levels.iter().collect();
    sorted.sort_by_key(|l| l.streams);
    if let Some(b) = sorted.iter().find(|l| !l.within_bound).filter(|b| b.cpu_share < 0.5) {
        out.push_str(&format!(
            ". At {} streams the client used only {:.0} % of its cores ({:.2} cores per 1000 streams), so the delays that broke the bound are not its CPU's: the machine, the mock or the network stack",
            b.streams,
            b.cpu_share * 100.0,
            b.cpu_per_stream * 1000.0
        ));
    }
    let busy: Vec<String> = sorted
        .iter()
        .filter_map(|l| Some((l.streams, l.machine?.busy())))
        .filter(|(_, why)| !why.is_empty())
        .map(|(n, why)| format!("{n} streams: {}", why.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")))
        .collect();
    if !busy.is_empty() {
        out.push_str(&format!(
            ". Caution: the machine was busy ({}), so this figure may not reproduce; calibrate on a quiet machine",
            busy.join(", ")
        ));
    }
    out
}

/// The streams per client core within `bound`: the most of the levels run that kept within
/// it (and the first level above that did not), over the client's cores.
fn bound_line(levels: &[Seen], cores: usize, bound: &str) -> String {
    let mut sorted: Vec<&Seen> = levels.iter().collect();
    sorted.sort_by_key(|l| l.streams);
    let kept = sorted.iter().take_while(|l| l.within_bound).last();
    let broke = sorted.iter().find(|l| !l.within_bound);
    let on = if cores == 1 { "one core".to_string() } else { format!("{cores} cores") };
    match (kept, broke) {
        (Some(k), None) => format!(
            "Streams per client core within {bound}: at least {:.0} ({} streams on {on}, the most run; try more)",
            k.streams as f64 / cores as f64,
            k.streams
        ),
        (Some(k), Some(b)) => format!(
            "Streams per client core within {bound}: {:.0} ({} streams on {on} kept to it, {} did not)",
            k.streams as f64 / cores as f64,
            k.streams,
            b.streams
        ),
        (None, _) => format!(
            "Streams per client core within {bound}: fewer than the fewest run ({} on {on})",
            sorted.first().map_or(0, |l| l.streams)
        ),
    }
}

/// `--floor`: each level's floor beside the client's cost, a line each.
pub fn floors(levels: &[CalibrationLevel]) -> Vec<String> {
    let mut out = Vec::new();
    for l in levels {
        let Some(f) = &l.floor else { continue };
        out.push(format!(
            "Floor at {} streams (bare reads, this thread): chunk delay p50 {} ms, p99 {} ms; {:.1} µs/token (user {:.1}, kernel {:.1}), {:.2} reads/token; the client costs {:.1} µs/token above it",
            l.streams,
            num(ms(&f.chunk_delay, |x| x.p50), 3),
            num(ms(&f.chunk_delay, |x| x.p99), 3),
            f.cpu_per_token_s * 1e6,
            f.user_per_token_s * 1e6,
            f.kernel_per_token_s * 1e6,
            f.reads_per_token,
            (l.user_per_token_s + l.kernel_per_token_s - f.cpu_per_token_s) * 1e6
        ));
    }
    out
}

/// The levels' table under its heading: the mock's schedule (`ttft`, `itl`, `tokens` per
/// response) and whether the streams started staggered.
pub fn levels(levels: &[CalibrationLevel], (ttft, itl, tokens): (Duration, Duration, usize), stagger: bool) -> String {
    let mut t = table::new(&[
        "streams",
        "requests",
        "failed",
        "tokens",
        "chunk delay p50",
        "p99",
        "max",
        "TTFT error p50",
        "p99",
        "of it mock late p50",
        "ITL error p99",
        "client CPU/token",
        "user",
        "kernel",
        "cores / 1000 streams",
        "client CPU share",
        "mock CPU/chunk",
        "mock busy",
        "wall",
    ]);
    let ms3 = |s: &Option<Summary>, f: fn(&Summary) -> f64| num(ms(s, f), 3);
    for l in levels {
        t.add_row(vec![
            l.streams.to_string(),
            l.requests.to_string(),
            l.failed.to_string(),
            l.tokens.to_string(),
            ms3(&l.chunk_delay, |x| x.p50),
            ms3(&l.chunk_delay, |x| x.p99),
            ms3(&l.chunk_delay, |x| x.max),
            ms3(&l.ttft_error, |x| x.p50),
            ms3(&l.ttft_error, |x| x.p99),
            ms3(&l.mock_late, |x| x.p50),
            ms3(&l.itl_error, |x| x.p99),
            format!("{:.1} µs", l.cpu_per_token_s * 1e6),
            format!("{:.1} µs", l.user_per_token_s * 1e6),
            format!("{:.1} µs", l.kernel_per_token_s * 1e6),
            format!("{:.2}", l.cpu_per_stream * 1000.0),
            format!("{:.0} %", l.cpu_share * 100.0),
            format!("{:.1} µs", l.mock_cpu_per_token_s * 1e6),
            format!("{:.0} %", l.mock_busy * 100.0),
            format!("{:.1} s", l.wall_s),
        ]);
    }
    format!(
        "Client calibration against a mock server (TTFT {ttft:?}, ITL {itl:?}, {tokens} tokens; streams {}; times in ms; chunk delay = client read − mock write)\n{t}",
        if stagger { "staggered over one ITL" } else { "started at once, their tokens in one burst per ITL" }
    )
}

/// The calibration's verdict: streams per client core within the bound, and why a broken
/// bound may not be the client's ([`per_core`]).
pub fn verdict(levels: &[CalibrationLevel], cores: usize) -> String {
    let bound = format!(
        "chunk delay p99 ≤ {} ms and TTFT error p50 ≤ {} ms (less the mock's own lateness)",
        BOUND_CHUNK_P99_S * 1e3,
        BOUND_TTFT_P50_S * 1e3
    );
    let seen: Vec<Seen> = levels
        .iter()
        .map(|l| Seen {
            streams: l.streams,
            within_bound: l.within_bound,
            cpu_share: l.cpu_share,
            cpu_per_stream: l.cpu_per_stream,
            machine: l.machine.as_ref(),
        })
        .collect();
    per_core(&seen, cores, &bound)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn level(streams: usize, within_bound: bool) -> Seen<'static> {
        Seen { streams, within_bound, cpu_share: 0.9, cpu_per_stream: 5e-4, machine: None }
    }

    #[test]
    fn streams_per_core_are_the_most_that_kept_to_the_bound() {
        let levels = [level(2000, false), level(500, true), level(1000, true)];
        let line = per_core(&levels, 2, "B");
        assert!(line.contains("within B: 500 (1000 streams on 2 cores kept to it, 2000 did not)"), "{line}");
        assert!(per_core(&levels[1..], 1, "B").contains("at least 1000 (1000 streams on one core, the most run"));
        assert!(per_core(&levels[..1], 1, "B").contains("fewer than the fewest run (2000 on one core)"));
        // The contradiction: "fewer than 50 per core" at 0.2 cores per 1000 streams.
        let busy = MachineLoad { cpus: 2, other_cores: 1.2, ..Default::default() };
        let idle = Seen { cpu_share: 0.1, cpu_per_stream: 2e-4, machine: Some(&busy), ..level(100, false) };
        let line = per_core(&[idle], 2, "B");
        assert!(line.contains("used only 10 % of its cores (0.20 cores per 1000 streams)"), "{line}");
        assert!(
            line.contains("the machine was busy (100 streams: other processes kept 1.20 of 2 cores busy"),
            "{line}"
        );
    }
}
