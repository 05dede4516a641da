//! `--rate-of-limit 0.25,0.5,1,1.5`: an open loop's rates as multiples of the rate at which
//! this workload saturates the engine, found before the sweep by the simulated twin
//! (`--predict`'s or `--simulate`'s profile). Fixed rates chosen on one machine flood a slower
//! one: on a 2-vCPU EPYC the accuracy suite's long-prompt levels of 8–32 req/s, tuned on a
//! Xeon, offered 4–20× what the engine served, and 72 requests measured the first seconds of
//! a queue growing without bound. guidellm's sweep measures its bounds first (a synchronous
//! and a throughput benchmark); the twin finds this one in seconds, without load on the
//! target.
//!
//! The limit: closed loops of users sending back to back on the simulated engine, from
//! [`FIRST_USERS`] users doubling to the engine's `max_num_seqs` (at most [`MOST_USERS`])
//! until one gains less than [`PLATEAU`] over the best before it or a request fails (a
//! batch so large that a long generation outlasts its timeout); the most requests per second
//! any of them completes (its users over the mean time a request of its measured waves took,
//! between a warm-up wave and a wind-down wave) is the most this workload's requests the
//! engine serves. Every repeat of a run (`--repeats`, one seed)
//! resolves to the same rates: the simulation is deterministic.

use super::error::RunError;
use super::level::{self, Feeds};
use super::rig::Rig;
use super::spec::{Counts, LevelSpec, RunSpec, Simulation, TargetSpec, MAX_RATE};
use crate::progress::Progress;
use goodput_engine::EngineConfig;
use goodput_workload::{Arrival, Ramp, Stop, Trim};
use std::collections::VecDeque;
use std::path::Path;
use std::time::Duration;

/// The most users the limit's closed loops take (an engine that batches more is saturated
/// well before: the limit is a rate, not a batch).
pub const MOST_USERS: usize = 256;

/// The users of the search's first closed loop.
pub const FIRST_USERS: usize = 4;

/// A closed loop whose rate is not this many times the best before it ends the search.
pub const PLATEAU: f64 = 1.05;

/// Waves of the closed loop whose requests are counted (one more before them is its warm-up,
/// one after its wind-down).
const WAVES: usize = 4;

/// What the multiples were resolved against.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Limit {
    /// Users of the closed loop.
    pub users: usize,
    /// Requests it completed in its counted waves.
    pub completed: usize,
    /// Their completed requests per second (simulated time).
    pub rate: f64,
}

/// The multiple `m` of `limit`, to three significant digits (a level's name in every table).
pub fn rate_of(m: f64, limit: f64) -> f64 {
    let x = m * limit;
    if !(x.is_finite() && x > 0.0) {
        return x;
    }
    // Divided by a power of ten held exactly, so that 0.00334 is the literal's double.
    let digits = 2 - x.log10().floor() as i32;
    if digits >= 0 {
        let scale = 10f64.powi(digits);
        (x * scale).round() / scale
    } else {
        let unit = 10f64.powi(-digits);
        (x / unit).round() * unit
    }
}

/// `--predict`'s or `--simulate`'s profile and the engine it stands for.
fn twin(spec: &RunSpec) -> Option<(&EngineConfig, &Path)> {
    match &spec.target {
        TargetSpec::InProcess { engine, simulation: Some(Simulation::Predict(p) | Simulation::Simulate(p)) } => {
            Some((engine, p))
        }
        _ => None,
    }
}

/// The limit of `spec`'s workload on its twin: see the module docs.
pub fn limit(spec: &RunSpec, progress: &dyn Progress) -> Result<Limit, RunError> {
    let (engine, path) = twin(spec).ok_or(RunError::LimitNeedsProfile)?;
    let rig = Rig::simulated(spec, engine, path, None, progress)?;
    let most = engine.max_num_seqs.clamp(1, MOST_USERS);
    let (mut users, mut first_id) = (FIRST_USERS.min(most), 0);
    let mut best: Option<Limit> = None;
    loop {
        let (at, failed, next_id) = closed_loop(&rig, spec, users, first_id);
        first_id = next_id;
        if failed || at.rate <= 0.0 {
            return best.ok_or(RunError::NoLimit { users, completed: at.completed });
        }
        let on = goes_on(best.map(|b| b.rate), at.rate, users, most);
        if best.is_none_or(|b| at.rate > b.rate) {
            best = Some(at);
        }
        if !on {
            return Ok(best.unwrap_or(at));
        }
        users = (users * 2).min(most);
    }
}

/// Whether the search doubles its users after a loop of `users` whose rate was `rate`, the
/// best before it `best`: while a loop gains [`PLATEAU`] and the engine batches more.
fn goes_on(best: Option<f64>, rate: f64, users: usize, most: usize) -> bool {
    best.is_none_or(|b| rate > b * PLATEAU) && users < most
}

/// A closed loop of `users` on `rig` (request ids from `first_id`): its rate over its
/// [`WAVES`] measured waves, whether a request failed, and the next free request id.
fn closed_loop(rig: &Rig, spec: &RunSpec, users: usize, first_id: u64) -> (Limit, bool, u64) {
    let arrival = Arrival::Closed { users, think: Duration::ZERO };
    let level = LevelSpec { load: users as f64, arrival, duration: None };
    let counts = Counts { requests: WAVES * users, warmup: users, cooldown: users, trim: Trim::default() };
    let stop = Stop::default();
    let ramp = Ramp::Over(Duration::ZERO);
    let lp = level::level_plan(spec, &level, &counts, first_id, ramp, Feeds::default(), stop.clone());
    let f = level::run(rig, spec, &level, lp, &stop, &level::Seen::default());
    let s = &f.report.summary;
    // Little's law: `users` always busy (the warm-up and cool-down waves cover the ramp and
    // the wind-down), each cycling through one request after another, complete `users` ÷
    // the mean time a request takes, whether their requests run in step or spread.
    let e2e: Vec<f64> = f.measured.iter().filter(|r| r.is_ok()).map(|r| r.end.secs_since(r.intended)).collect();
    let mean = e2e.iter().sum::<f64>() / e2e.len().max(1) as f64;
    let rate = if mean > 0.0 { users as f64 / mean } else { 0.0 };
    (Limit { users, completed: s.completed, rate }, s.completed < s.requests, f.next_id)
}

/// `--rate-of-limit`'s multiples checked (`twin`: a profile was given, `--predict` or
/// `--simulate`), as the rates that stand for them until the sweep finds the limit
/// ([`levels`]); `None` without multiples.
pub fn check_multiples(multiples: Option<&[f64]>, twin: bool) -> Result<Option<Vec<f64>>, RunError> {
    let Some(m) = multiples else { return Ok(None) };
    if m.iter().any(|x| !(x.is_finite() && *x > 0.0)) {
        return Err(RunError::BadMultiples(m.to_vec()));
    }
    if !twin {
        return Err(RunError::LimitNeedsProfile);
    }
    Ok(Some(m.to_vec()))
}

/// The sweep's levels: `spec`'s, their rates set from their multiples
/// (`spec.rate_multiples`) and the twin's [`limit`] when it has them, with a line that says
/// what they were resolved against.
pub fn levels(spec: &RunSpec, progress: &dyn Progress) -> Result<VecDeque<LevelSpec>, RunError> {
    let mut levels = spec.levels.clone();
    let Some(multiples) = &spec.rate_multiples else { return Ok(levels) };
    let found = limit(spec, progress)?;
    let mut rates = Vec::new();
    for (l, &m) in levels.iter_mut().zip(multiples) {
        let rate = rate_of(m, found.rate);
        if rate > MAX_RATE {
            return Err(RunError::LimitRateOver { multiple: m, limit: found.rate, rate, max: MAX_RATE });
        }
        if let Arrival::Rate { rate: r, .. } = &mut l.arrival {
            *r = rate;
        }
        l.load = l.arrival.load();
        rates.push(format!("{m}× = {rate}"));
    }
    let line = format!(
        "--rate-of-limit: {} req/s of the limit {:.3} req/s: the simulated twin's completed requests a second on this workload with {} users sending back to back ({} requests)",
        rates.join(", "),
        found.rate,
        found.users,
        found.completed
    );
    progress.line(&line, false);
    Ok(levels)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_multiple_is_kept_to_three_significant_digits() {
        assert_eq!(rate_of(0.5, 1.234_56), 0.617);
        assert_eq!(rate_of(2.0, 61.349), 123.0);
        assert_eq!(rate_of(0.25, 0.013_37), 0.003_34);
        assert_eq!(rate_of(1.0, 0.0), 0.0);
    }

    #[test]
    fn multiples_are_positive_and_need_a_twin() {
        assert_eq!(check_multiples(None, false).unwrap(), None);
        assert_eq!(check_multiples(Some(&[0.5, 1.0]), true).unwrap(), Some(vec![0.5, 1.0]));
        assert!(matches!(check_multiples(Some(&[0.0, 1.0]), true), Err(RunError::BadMultiples(_))));
        assert!(matches!(check_multiples(Some(&[f64::NAN]), true), Err(RunError::BadMultiples(_))));
        assert!(matches!(check_multiples(Some(&[1.0]), false), Err(RunError::LimitNeedsProfile)));
    }

    #[test]
    fn the_search_doubles_while_the_rate_grows_and_the_engine_batches_more() {
        assert!(goes_on(None, 10.0, 4, 256));
        assert!(goes_on(Some(10.0), 10.6, 8, 256), "6 % more");
        assert!(!goes_on(Some(10.0), 10.4, 8, 256), "4 %: the plateau");
        assert!(!goes_on(Some(10.0), 9.0, 8, 256), "less");
        assert!(!goes_on(Some(10.0), 20.0, 256, 256), "every slot");
    }
}
