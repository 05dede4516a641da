//! What a run found, in the few figures that answer it: usable capacity (and whether the sweep
//! bracketed it), the throughput and latencies users got there, and the SLOs that broke above
//! it. The report's headline, a matrix's summary across its runs and the overlay's table read
//! it, so that each says the same of a run.

use crate::{LoadUnit, RunSummary};
use goodput_metrics::capacity::Reach;
use goodput_metrics::interval::Confidence;
use serde::{Deserialize, Serialize};

/// A run's answer in figures.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunOutcome {
    pub load_unit: LoadUnit,
    /// Usable capacity: the highest load whose SLOs hold with confidence.
    pub usable: Option<f64>,
    /// Whether the sweep bracketed it: a level above broke (`found`), none did (`not_reached`:
    /// usable is a lower bound), or the lowest level broke (`below_lowest`).
    pub reach: Option<Reach>,
    /// The lowest and highest loads run.
    pub lowest: Option<f64>,
    pub highest: Option<f64>,
    /// At usable capacity: completed req/s, output tok/s, the median per-user tok/s, and the
    /// P95 TTFT, TPOT and E2E in seconds.
    pub request_throughput: Option<f64>,
    pub output_throughput: Option<f64>,
    pub per_user_tps_p50: Option<f64>,
    pub ttft_p95_s: Option<f64>,
    pub tpot_p95_s: Option<f64>,
    pub e2e_p95_s: Option<f64>,
    /// The first load above usable whose SLOs did not hold with confidence; there, the SLOs
    /// whose values missed their bounds (`tpot_p95`), and those whose values met them but whose
    /// 95 % intervals reach past them (not shown to hold: too few requests to tell).
    pub broke_at: Option<f64>,
    pub bound: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unsure: Vec<String>,
}

impl RunOutcome {
    pub fn of(s: &RunSummary) -> RunOutcome {
        let v = s.verdict();
        let loads = s.levels.iter().map(|l| l.summary.load);
        let at = v.usable.and_then(|u| s.level(u)).map(|l| &l.summary);
        let p95 = |get: fn(&goodput_metrics::level::LevelSummary) -> &Option<goodput_metrics::Summary>| {
            at.and_then(|x| get(x).as_ref().map(|d| d.p95))
        };
        let broke = v.first_unsure.and_then(|u| s.level(u));
        let named = |which: fn(Confidence) -> bool| {
            broke.map_or(Vec::new(), |l| {
                let these = l.summary.slos.iter().filter(|r| which(r.confidence()));
                these.map(|r| r.slo.key()).collect()
            })
        };
        let bound = named(|c| matches!(c, Confidence::Breaks | Confidence::BreaksNotSignificant));
        let unsure = named(|c| matches!(c, Confidence::HoldsNotSignificant | Confidence::NoData));
        RunOutcome {
            load_unit: s.load_unit,
            usable: v.usable,
            reach: v.reach,
            lowest: loads.clone().reduce(f64::min),
            highest: loads.reduce(f64::max),
            request_throughput: at.map(|x| x.request_throughput),
            output_throughput: at.map(|x| x.output_throughput),
            per_user_tps_p50: at.and_then(|x| x.per_user_tps.as_ref().map(|d| d.p50)),
            ttft_p95_s: p95(|x| &x.ttft),
            tpot_p95_s: p95(|x| &x.tpot),
            e2e_p95_s: p95(|x| &x.e2e),
            broke_at: v.first_unsure,
            bound,
            unsure,
        }
    }

    /// Usable capacity in words: `84 users`, `at least 256 users`, `below 1 users`, `none`.
    pub fn usable_text(&self) -> String {
        let unit = self.load_unit;
        match (self.usable, self.reach) {
            (Some(u), Some(Reach::NotReached)) => format!("at least {u} {unit}"),
            (Some(u), _) => format!("{u} {unit}"),
            (None, _) => self.lowest.map_or("none".into(), |l| format!("below {l} {unit}")),
        }
    }
}

/// Of runs (each named by a `T`), the one with the most usable capacity among those in the
/// first one's load unit (a lower bound counting as its value; the first of equals), and the
/// others that reached no limit: while there are any, which run serves the most is not settled.
pub fn most<'a, T: Copy>(runs: impl IntoIterator<Item = (T, &'a RunOutcome)>) -> Option<(T, &'a RunOutcome, Vec<T>)> {
    let runs: Vec<(T, &RunOutcome)> = runs.into_iter().collect();
    let unit = runs.first()?.1.load_unit;
    let same: Vec<&(T, &RunOutcome)> = runs.iter().filter(|(_, o)| o.load_unit == unit).collect();
    let mut best: Option<(T, &RunOutcome, f64)> = None;
    for (t, o, u) in same.iter().filter_map(|(t, o)| Some((*t, *o, o.usable?))) {
        if best.is_none_or(|b| u > b.2) {
            best = Some((t, o, u));
        }
    }
    let (winner, outcome, _) = best?;
    let open = same.iter().filter(|(_, o)| !std::ptr::eq(*o, outcome) && o.reach == Some(Reach::NotReached));
    Some((winner, outcome, open.map(|(t, _)| *t).collect()))
}

/// [`most`] in a sentence: `Most usable capacity: B (48 users).`, with what keeps it from being
/// settled; `none` where no run held its SLOs.
pub fn most_text<'a>(runs: impl IntoIterator<Item = (&'a str, &'a RunOutcome)>) -> String {
    match most(runs) {
        Some((name, o, open)) if open.is_empty() => format!("Most usable capacity: {name} ({}).", o.usable_text()),
        Some((name, o, open)) => format!(
            "Most usable capacity so far: {name} ({}); not settled: {} reached no limit (its capacity may lie above; give higher loads).",
            o.usable_text(),
            open.join(", ")
        ),
        None => "No run's SLOs were shown to hold (with 95 % confidence) at any level: none is shown usable.".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::two_levels;

    #[test]
    fn the_outcome_is_the_verdict_s_and_its_level_s() {
        let (s, _) = two_levels();
        let o = RunOutcome::of(&s);
        let v = s.verdict();
        assert_eq!(o.usable, v.usable);
        assert_eq!((o.lowest, o.highest), (Some(s.levels[0].summary.load), Some(s.levels[1].summary.load)));
        if let Some(u) = v.usable {
            let l = &s.level(u).unwrap().summary;
            assert_eq!(o.output_throughput, Some(l.output_throughput));
            assert_eq!(o.tpot_p95_s, l.tpot.as_ref().map(|d| d.p95));
        }
        assert_eq!(o.broke_at, v.first_unsure);
        assert_eq!(o.bound.is_empty() && o.unsure.is_empty(), v.first_unsure.is_none());
        let none = RunOutcome { usable: None, reach: Some(Reach::BelowLowest), lowest: Some(1.0), ..o.clone() };
        assert_eq!(none.usable_text(), format!("below 1 {}", s.load_unit));
        let open = RunOutcome { usable: Some(64.0), reach: Some(Reach::NotReached), ..o.clone() };
        assert_eq!(open.usable_text(), format!("at least 64 {}", s.load_unit));
        // The most: 96 found beats 64 reached; while 64 reached no limit, it is not settled.
        let found = RunOutcome { usable: Some(96.0), reach: Some(Reach::Found), ..o.clone() };
        let text = most_text([("a", &open), ("b", &found), ("c", &none)]);
        assert!(
            text.starts_with("Most usable capacity so far: b (96 ") && text.contains("not settled: a reached"),
            "{text}"
        );
        let found2 = RunOutcome { usable: Some(32.0), ..found.clone() };
        assert!(most_text([("a", &found2), ("b", &found)]).starts_with("Most usable capacity: b (96 "));
        assert!(most_text([("c", &none)]).ends_with("none is shown usable."));
    }
}
