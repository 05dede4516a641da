//! The simulated twin's accuracy over several checked runs (`goodput plan --check DIR…`): runs
//! grouped into families (a directory of repeats, or one run), each metric's error per level
//! with the measurement's run-to-run spread beside it, the MAPE over the levels, the usable
//! capacities, and the runs' steps priced by the profile by kind. The definitions are
//! `goodput_metrics::accuracy`'s; the report is `goodput_results::accuracy`'s.

use goodput_metrics::accuracy::{beyond_spread, mape, prediction_error};
use goodput_metrics::spread::Spread;
use goodput_metrics::stats::percentile;
use goodput_results::accuracy::{
    AccuracyReport, CapacityCheck, FamilyAccuracy, KindPrice, LevelAccuracy, MetricAccuracy,
};
use goodput_results::prediction::Prediction;
use goodput_results::RunSummary;
use goodput_sizing::price::{Priced, StepClass};

/// The metrics a family is judged on.
pub const METRICS: [&str; 7] =
    ["output_throughput", "ttft_p50", "ttft_p95", "tpot_p50", "tpot_p95", "e2e_p50", "e2e_p95"];

/// One run checked against its twin.
pub struct CheckedRun {
    /// The family it belongs to (its repeats share one).
    pub family: String,
    pub measured: RunSummary,
    pub prediction: Prediction,
    /// Its steps priced by the profile (`None` when the run kept no steps).
    pub priced: Option<Priced>,
}

/// The accuracy of `profile`'s twins over `runs`, family by family in the order they come.
pub fn report(profile: &str, runs: &[CheckedRun]) -> AccuracyReport {
    let mut names: Vec<&str> = Vec::new();
    for r in runs {
        if !names.contains(&r.family.as_str()) {
            names.push(&r.family);
        }
    }
    let families = names
        .into_iter()
        .map(|name| family(name, &runs.iter().filter(|r| r.family == name).collect::<Vec<_>>()))
        .collect();
    AccuracyReport { profile: profile.into(), families }
}

fn family(name: &str, runs: &[&CheckedRun]) -> FamilyAccuracy {
    let first = &runs[0].measured;
    let mut loads: Vec<f64> = runs.iter().flat_map(|r| r.measured.levels.iter().map(|l| l.summary.load)).collect();
    loads.sort_by(f64::total_cmp);
    loads.dedup();
    let metrics = METRICS.iter().map(|m| metric(m, &loads, runs)).collect();
    let capacity = runs
        .iter()
        .map(|r| {
            let (measured, predicted, agree) =
                goodput_report::prediction::capacity_agreement(&r.measured, &r.prediction);
            CapacityCheck { measured, predicted, agree }
        })
        .collect();
    FamilyAccuracy {
        family: name.into(),
        workload: first.workload.description.clone(),
        load_unit: first.load_unit.as_str().into(),
        runs: runs.len(),
        metrics,
        capacity,
        steps: kinds(runs),
    }
}

fn metric(name: &str, loads: &[f64], runs: &[&CheckedRun]) -> MetricAccuracy {
    let levels: Vec<LevelAccuracy> = loads.iter().filter_map(|&load| level(name, load, runs)).collect();
    let errors: Vec<f64> = levels.iter().filter_map(|l| l.error).collect();
    let spreads: Vec<f64> = levels.iter().filter_map(|l| l.spread).collect();
    MetricAccuracy {
        metric: name.into(),
        mape: mape(&errors),
        spread: percentile(&spreads, 50.0),
        beyond: levels.iter().filter(|l| l.beyond == Some(true)).count(),
        levels,
    }
}

/// The metric at one load over the runs that measured it and simulated its twin; a run whose
/// level stopped early over-saturated is counted, not compared.
fn level(name: &str, load: f64, runs: &[&CheckedRun]) -> Option<LevelAccuracy> {
    let mut measured = Vec::new();
    let mut predicted = Vec::new();
    let mut errors = Vec::new();
    let mut outside = Vec::new();
    let mut stopped = 0;
    for r in runs {
        let Some(m) = r.measured.levels.iter().find(|l| l.summary.load == load) else { continue };
        let Some(p) = r.prediction.level(load) else { continue };
        if m.saturated.is_some() {
            stopped += 1;
            continue;
        }
        let c = goodput_report::prediction::compare(m, p);
        let Some(c) = c.iter().find(|c| c.metric == name) else { continue };
        let (Some(mv), Some(pv)) = (c.measured, c.predicted) else { continue };
        measured.push(mv);
        predicted.push(pv);
        errors.extend(prediction_error(Some(mv), Some(pv)));
        outside.extend(c.beyond);
    }
    let m = Spread::of(&measured);
    if m.is_none() && stopped == 0 {
        return None;
    }
    let error = percentile(&errors, 50.0);
    let spread = m.as_ref().filter(|m| m.n > 1).map(|m| m.relative);
    let beyond = match (error, spread) {
        (Some(e), Some(s)) => Some(beyond_spread(e, s)),
        // One run: beyond when the prediction falls outside its 95 % interval.
        _ => outside.first().copied(),
    };
    Some(LevelAccuracy {
        load,
        measured: m.map(|m| m.median),
        predicted: percentile(&predicted, 50.0),
        error,
        spread,
        beyond,
        stopped,
    })
}

/// The family's steps priced by kind, summed over its runs: decodes of 1–4, 5–16 and 17 or
/// more sequences, mixed steps, prefills.
fn kinds(runs: &[&CheckedRun]) -> Vec<KindPrice> {
    let names = ["decode ×1–4", "decode ×5–16", "decode ×17+", "mixed", "prefill"];
    let mut out: Vec<KindPrice> = names.iter().map(|n| KindPrice { kind: (*n).into(), ..Default::default() }).collect();
    for k in runs.iter().filter_map(|r| r.priced.as_ref()).flat_map(|p| &p.kinds) {
        let i = match (k.class, k.size) {
            (StepClass::Decode, 0..=4) => 0,
            (StepClass::Decode, 5..=16) => 1,
            (StepClass::Decode, _) => 2,
            (StepClass::Mixed, _) => 3,
            (StepClass::Prefill, _) => 4,
        };
        out[i].steps += k.steps;
        out[i].measured_s += k.measured_s;
        out[i].priced_s += k.priced_s;
    }
    out.retain(|k| k.steps > 0);
    out
}

/// The steps of the run in `dir` priced by `cost`; `None` when it kept none.
pub fn price_run(dir: &std::path::Path, cost: &dyn goodput_sizing::cost::StepCost) -> Option<Priced> {
    let path = dir.join(goodput_results::files::STEPS);
    let steps: Vec<goodput_core::StepRecord> = goodput_results::files::read_jsonl(&path).ok()?;
    (!steps.is_empty()).then(|| goodput_sizing::price::price(path.display().to_string(), &steps, cost))
}

/// The runs under each of `dirs` with the family each belongs to: the finished repeats of a
/// `--repeats` directory are one family, named by the directory (a matrix's combinations a
/// family each, `DIR (rate=4)`); a run directory is a family of its own.
pub fn runs_of(
    dirs: &[std::path::PathBuf],
) -> Result<Vec<(String, std::path::PathBuf)>, goodput_results::ResultsError> {
    let mut out = Vec::new();
    for d in dirs {
        let name = d.file_name().map_or_else(|| d.display().to_string(), |n| n.to_string_lossy().into_owned());
        match goodput_results::matrix::MatrixIndex::read(d)? {
            Some(index) => {
                for g in index.groups() {
                    let family = if g.values.is_empty() { name.clone() } else { format!("{name} ({})", g.label()) };
                    out.extend(g.runs.iter().filter(|r| r.finished()).map(|r| (family.clone(), d.join(&r.dir))));
                }
            }
            None => out.push((name, d.clone())),
        }
    }
    Ok(out)
}

/// Why the suite could not be checked.
#[derive(Debug, thiserror::Error)]
pub enum AccuracyError {
    #[error("no finished run to check")]
    NoRuns,
    #[error("reading profile {path}")]
    Profile { path: String, source: goodput_sizing::profile::ProfileError },
    #[error("checking {dir}")]
    Check { dir: String, source: crate::check::CheckError },
}

/// Checks every run of `runs` (as [`runs_of`] lists them) against `profile`, each simulated
/// by the spec `simulated` makes of it (see [`crate::check::check`]; its prediction written
/// beside it): the runs checked and their accuracy. A line per run (and the check's notes)
/// goes to `progress`.
pub fn check_all<V, E: Into<Box<dyn std::error::Error + Send + Sync>>>(
    runs: &[(String, std::path::PathBuf)],
    profile: &std::path::Path,
    simulated: impl Fn(&RunSummary, &std::path::Path) -> Result<(crate::RunSpec, V), E>,
    stop: goodput_workload::Stop,
    progress: &dyn crate::progress::Progress,
) -> Result<(Vec<CheckedRun>, AccuracyReport), AccuracyError> {
    if runs.is_empty() {
        return Err(AccuracyError::NoRuns);
    }
    let p = goodput_sizing::profile::Profile::read(profile)
        .map_err(|source| AccuracyError::Profile { path: profile.display().to_string(), source })?;
    let cost = p.cost();
    let mut checked = Vec::new();
    for (family, dir) in runs {
        let c = crate::check::check(dir, profile, &simulated, stop.clone(), progress)
            .map_err(|source| AccuracyError::Check { dir: dir.display().to_string(), source })?;
        progress
            .line(&format!("checked {} ({family}): prediction written to {}", dir.display(), c.path.display()), true);
        let priced = price_run(dir, &cost);
        checked.push(CheckedRun { family: family.clone(), measured: c.measured, prediction: c.prediction, priced });
    }
    let r = report(&profile.display().to_string(), &checked);
    Ok((checked, r))
}

#[cfg(test)]
mod tests {
    use super::*;
    use goodput_results::testing::{level, record, run_summary};

    /// A run of two levels (1 and 2 users) whose output throughputs are `tput`.
    fn run(tput: [f64; 2]) -> RunSummary {
        let records: Vec<_> = (0..4).map(|i| record(i, 20, 5, 1)).collect();
        let mut s = run_summary();
        for (load, t) in [1.0, 2.0].into_iter().zip(tput) {
            let mut l = level(load, &records);
            l.summary.output_throughput = t;
            s.levels.push(l);
        }
        s
    }

    fn checked(measured: [f64; 2], predicted: [f64; 2]) -> CheckedRun {
        let twin = run(predicted);
        let mut prediction = Prediction {
            profile: "p.json".into(),
            levels: Vec::new(),
            capacity: RunSummary::verdict_of(&[]),
            steps_per_s: 1.0,
            speedup: 1.0,
        };
        twin.levels.into_iter().for_each(|l| prediction.push_level(l));
        CheckedRun { family: "fam".into(), measured: run(measured), prediction, priced: None }
    }

    #[test]
    fn a_family_of_repeats_by_hand() {
        // Load 1: measured 100 and 110, predicted 120 and 121: errors +20 % and +10 %, median
        // +15 %; spread (110 − 100) ÷ 105 = 9.5 %: beyond. Load 2: measured 200 and 220,
        // predicted 200 and 242: errors 0 and +10 %, median +5 %; spread 20 ÷ 210: within.
        let runs = [checked([100.0, 200.0], [120.0, 200.0]), checked([110.0, 220.0], [121.0, 242.0])];
        let r = report("p.json", &runs);
        assert_eq!(r.families.len(), 1);
        let f = &r.families[0];
        assert_eq!((f.family.as_str(), f.runs, f.load_unit.as_str()), ("fam", 2, "users"));
        let m = f.metrics.iter().find(|m| m.metric == "output_throughput").unwrap();
        let (l1, l2) = (&m.levels[0], &m.levels[1]);
        assert!((l1.error.unwrap() - 0.15).abs() < 1e-9 && (l1.spread.unwrap() - 10.0 / 105.0).abs() < 1e-9);
        assert_eq!((l1.beyond, l2.beyond), (Some(true), Some(false)));
        assert!((l2.error.unwrap() - 0.05).abs() < 1e-9 && (l2.measured.unwrap() - 210.0).abs() < 1e-9);
        assert!((m.mape.unwrap() - 0.10).abs() < 1e-9, "{:?}", m.mape);
        assert_eq!(m.beyond, 1);
        // Equal TTFTs on both sides: no error, within the noise.
        let ttft = f.metrics.iter().find(|m| m.metric == "ttft_p95").unwrap();
        assert_eq!(ttft.mape, Some(0.0));
        assert_eq!(f.capacity.len(), 2);
        let text = goodput_report::console::accuracy(&r);
        assert!(text.contains("10 % (noise 10 %, 1/2 beyond)") && text.contains("+15 % !"), "{text}");
    }

    #[test]
    fn a_level_stopped_over_saturated_is_counted_not_compared() {
        // Load 2 of the second run was stopped by the saturation guard: only the first run's
        // +10 % is compared there; the first level as before.
        let mut runs = [checked([100.0, 200.0], [120.0, 220.0]), checked([110.0, 100.0], [121.0, 400.0])];
        let stop = goodput_metrics::saturation::SaturationStop {
            at_s: 55.0,
            offered_rate: 2.0,
            completion_rate: 0.5,
            ended: 20,
            sent_about: 110.0,
            early_e2e_s: 16.0,
            late_e2e_s: 40.0,
        };
        runs[1].measured.levels[1].saturated = Some(stop);
        let r = report("p.json", &runs);
        let m = r.families[0].metrics.iter().find(|m| m.metric == "output_throughput").unwrap();
        let l2 = &m.levels[1];
        assert_eq!((l2.stopped, l2.spread), (1, None));
        assert!((l2.error.unwrap() - 0.10).abs() < 1e-9 && l2.measured == Some(200.0));
        assert!((m.mape.unwrap() - 0.125).abs() < 1e-9, "(15 % + 10 %) / 2: {:?}", m.mape);
        // Stopped in every run: no error, and the console says it is left out.
        runs[0].measured.levels[1].saturated = runs[1].measured.levels[1].saturated.clone();
        let r = report("p.json", &runs);
        let m = r.families[0].metrics.iter().find(|m| m.metric == "output_throughput").unwrap();
        assert_eq!((m.levels[1].error, m.levels[1].stopped), (None, 2));
        assert!((m.mape.unwrap() - 0.15).abs() < 1e-9);
        let text = goodput_report::console::accuracy(&r);
        assert!(text.contains("Not compared") && text.contains("fam at 2 users (2 of 2 runs)"), "{text}");
        assert!(text.contains("stopped"), "{text}");
    }
}
