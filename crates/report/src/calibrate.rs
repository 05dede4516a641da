//! `goodput calibrate`'s verdict, in words: the streams per client core within the bound, and why a
//! bound that broke may not be the client's (its cores idle there, or the machine busy).

use goodput_metrics::machine::MachineLoad;

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
