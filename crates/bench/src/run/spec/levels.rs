//! The sweep's load levels, checked: one [`LevelSpec`] per level given (`--concurrency`,
//! `--rate`, `--burst`, `--stages`, a trace's speedups), the bounds every level keeps, how
//! refinement adds levels between the last passing and the first failing one, and the counts
//! of requests a level measures and leaves out.

use super::bounds::{MAX_LEVELS, MAX_RATE, MAX_USERS};
use super::error::SpecError;
use goodput_metrics::capacity::{pass_fail_levels, refine_point, LevelOutcome};
use goodput_results::LoadUnit;
use goodput_workload::shard::Shard;
use goodput_workload::{Arrival, Trace, Trim};
use std::collections::VecDeque;
use std::time::Duration;

type Result<T, E = SpecError> = std::result::Result<T, E>;

/// One level to run: its load, how requests arrive, and how long it lasts (if by time).
#[derive(Clone, Debug, PartialEq)]
pub struct LevelSpec {
    pub load: f64,
    pub arrival: Arrival,
    pub duration: Option<Duration>,
}

impl LevelSpec {
    fn of(arrival: Arrival, duration: Option<Duration>) -> LevelSpec {
        LevelSpec { load: arrival.load(), arrival, duration }
    }

    /// Closed loops of `users` each (`--concurrency`; [`SEARCH_START`] when none is given),
    /// thinking `think` between requests, each level lasting `duration` if given.
    pub fn users(users: &[usize], think: Duration, duration: Option<Duration>) -> Result<VecDeque<LevelSpec>> {
        if users.contains(&0) {
            return Err(SpecError::ZeroUsers(users.to_vec()));
        }
        let users = if users.is_empty() { &SEARCH_START[..] } else { users };
        Ok(users.iter().map(|&u| Self::of(Arrival::Closed { users: u, think }, duration)).collect())
    }

    /// Open loops at `rates` requests per second (`--rate`), Poisson or gamma with
    /// `burstiness`, each level lasting `duration` if given.
    pub fn rates(rates: &[f64], burstiness: Option<f64>, duration: Option<Duration>) -> Result<VecDeque<LevelSpec>> {
        if rates.is_empty() || rates.iter().any(|r| !(r.is_finite() && *r >= 0.001)) {
            return Err(SpecError::Rates(rates.to_vec()));
        }
        Ok(rates.iter().map(|&rate| Self::of(Arrival::Rate { rate, burstiness }, duration)).collect())
    }

    /// Bursts of `sizes` requests sent at once (`--burst`).
    pub fn bursts(sizes: &[usize]) -> Result<VecDeque<LevelSpec>> {
        if sizes.is_empty() || sizes.contains(&0) {
            return Err(SpecError::Bursts(sizes.to_vec()));
        }
        Ok(sizes.iter().map(|&size| Self::of(Arrival::Burst { size }, None)).collect())
    }

    /// Stages of `(users, duration)` (`--stages`), thinking `think` between requests.
    pub fn stages(stages: &[(usize, Duration)], think: Duration) -> Result<VecDeque<LevelSpec>> {
        if stages.is_empty() {
            return Err(SpecError::NoStages);
        }
        Ok(stages.iter().map(|&(users, d)| Self::of(Arrival::Closed { users, think }, Some(d))).collect())
    }

    /// `trace` replayed at each of `speedups` (`--trace-speedup`, each from 0.001 to 10000),
    /// each level offering the trace's rate × its speedup (at most [`MAX_RATE`]).
    pub fn trace(trace: &Trace, speedups: &[f64], duration: Option<Duration>) -> Result<VecDeque<LevelSpec>> {
        if speedups.is_empty() || speedups.iter().any(|x| !(x.is_finite() && (0.001..=10_000.0).contains(x))) {
            return Err(SpecError::Speedups(speedups.to_vec()));
        }
        let (rate, requests) = (trace.rate(), trace.entries.len());
        let level = |&speedup: &f64| {
            // Offered requests per second, to the thousandth (a level's name in every table).
            let offered = (rate * speedup * 1e3).round() / 1e3;
            if offered > MAX_RATE {
                return Err(SpecError::TraceSpeedup { speedup, offered });
            }
            Ok(Self::of(Arrival::Trace { speedup, rate: offered, requests }, duration))
        };
        speedups.iter().map(level).collect()
    }
}

/// `goodput capacity`'s levels: [`doubling`] up to `--max-users` (256 unless given), refused
/// beyond [`MAX_USERS`] or at 0.
pub fn capacity_levels(max_users: Option<usize>) -> Result<Vec<usize>, SpecError> {
    let max = max_users.unwrap_or(256);
    if max == 0 || max > MAX_USERS {
        return Err(SpecError::MaxUsers(max));
    }
    Ok(doubling(max))
}

/// `1, 2, 4, …` users up to `max`, and `max` itself (`goodput capacity`'s levels).
pub fn doubling(max: usize) -> Vec<usize> {
    let mut users: Vec<usize> =
        std::iter::successors(Some(1usize), |&u| u.checked_mul(2)).take_while(|&u| u <= max).collect();
    if users.last() != Some(&max) {
        users.push(max);
    }
    users
}

/// How refinement levels are made: integer users, rates, or not at all (stages, durations).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RefineKind {
    Users(Duration),
    Burst,
    Rate { burstiness: Option<f64> },
    None,
}

impl RefineKind {
    /// The next level between the last passing and the first failing level, if there is room:
    /// a whole number of users strictly between them, or a rate, while they are more than
    /// 10 % apart and the passing level used under 95 % of its nearest bound (within 5 % of it,
    /// the limit is found).
    pub fn next(self, outcomes: &[LevelOutcome]) -> Option<LevelSpec> {
        let (p, f) = pass_fail_levels(outcomes)?;
        let (pass, fail) = (p.load, f.load);
        let at = refine_point((pass, p.slo_used), (fail, f.slo_used));
        // The nearest whole number strictly inside the bracket, when there is one.
        let whole = at.round().max(pass + 1.0).min(fail - 1.0);
        let apart = (fail - pass) / fail > 0.1 && p.slo_used < 0.95;
        let between = whole > pass && whole < fail && apart;
        let arrival = match self {
            RefineKind::Users(think) if between => Arrival::Closed { users: whole as usize, think },
            RefineKind::Burst if between => Arrival::Burst { size: whole as usize },
            RefineKind::Rate { burstiness } if apart => Arrival::Rate { rate: (at * 1e3).round() / 1e3, burstiness },
            _ => return None,
        };
        Some(LevelSpec { load: arrival.load(), arrival, duration: None })
    }
}

/// The level a search starts with when none are given: 1 user.
pub const SEARCH_START: [usize; 1] = [1];

/// A search for the limit (`--search`): the sweep doubles its highest level while
/// every level's SLOs hold with confidence, up to `max_load`, adding no level that would end
/// past `budget` after the sweep started.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Search {
    pub max_load: f64,
    pub budget: Duration,
}

impl Search {
    /// A search of users up to `max_users` (4096 when not given) or of rates up to
    /// `max_rate` requests per second, by `unit`, within `budget`; each bound refused by its
    /// flag beyond what goodput drives in a level.
    pub fn bounded(unit: LoadUnit, max_users: Option<usize>, max_rate: f64, budget: Duration) -> Result<Search> {
        let max_load = match unit {
            LoadUnit::Users => {
                let m = max_users.unwrap_or(4096);
                if m == 0 || m > MAX_USERS {
                    return Err(SpecError::MaxUsers(m));
                }
                m as f64
            }
            _ => {
                if !(max_rate.is_finite() && max_rate > 0.0 && max_rate <= MAX_RATE) {
                    return Err(SpecError::MaxRate(max_rate));
                }
                max_rate
            }
        };
        Ok(Search { max_load, budget })
    }

    /// The level after `last` (every level so far held), whose SLO nearest its bound reached
    /// `used` of it (value ÷ bound: 0.96 for a P95 TPOT of 48 ms against 50 ms): four times
    /// its load while every SLO uses under a quarter of its bound, else twice, or where that
    /// SLO would reach 110 % of its bound if it grew in proportion to the load, when that is
    /// nearer (a level just past the limit, not one far beyond it); at most `max_load`.
    /// `None` at the bound, or for a level that does not double (a burst, a trace).
    pub fn next(&self, last: &LevelSpec, used: f64) -> Option<LevelSpec> {
        if last.load >= self.max_load {
            return None;
        }
        let step = goodput_metrics::capacity::search_step(used);
        let to = |x: f64| (x * step).min(self.max_load);
        let arrival = match last.arrival {
            Arrival::Closed { users, think } => {
                Arrival::Closed { users: (to(users as f64).ceil() as usize).max(users + 1), think }
            }
            Arrival::Rate { rate, burstiness } => Arrival::Rate { rate: (to(rate) * 1e3).round() / 1e3, burstiness },
            _ => return None,
        };
        Some(LevelSpec { load: arrival.load(), arrival, duration: last.duration })
    }
}

/// A shard whose slice of a level's schedule is empty (request `j` goes to shard `j mod N`,
/// and the schedule holds fewer than `i + 1` requests) would send nothing: refused before the
/// run, not said at its end.
/// A trace of sessions is refused: a session's later turns follow its first, so they go with
/// it, not with the shard of their own number.
pub fn check_slice(
    shard: Option<Shard>,
    per_level: &PerLevel,
    levels: &VecDeque<LevelSpec>,
    workload: &crate::workload::WorkloadSpec,
) -> Result<()> {
    let Some(shard) = shard else { return Ok(()) };
    if workload.trace.as_ref().is_some_and(|t| t.sessions > 0) {
        return Err(SpecError::ShardedSessions);
    }
    let sessions = workload.is_sessions();
    for l in levels.iter().filter(|l| l.duration.is_none()) {
        let c = Counts::of(per_level, l, sessions);
        let total = c.requests.saturating_add(c.warmup).saturating_add(c.cooldown);
        if (shard.index as usize) >= total {
            return Err(SpecError::EmptySlice { shard, load: l.load, total });
        }
    }
    Ok(())
}

/// At most [`MAX_LEVELS`], each load once: levels are named by their load in every table,
/// file and comparison, so a second level of the same load would be mixed with the first.
pub fn check_distinct(levels: &VecDeque<LevelSpec>) -> Result<()> {
    if levels.len() > MAX_LEVELS {
        return Err(SpecError::TooManyLevels(levels.len()));
    }
    for (i, l) in levels.iter().enumerate() {
        if levels.iter().take(i).any(|m| m.load == l.load) {
            return Err(SpecError::LoadTwice(l.load));
        }
    }
    Ok(())
}

/// A warm-up or cool-down: a count or a time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Span {
    Count(usize),
    Time(Duration),
}

impl Span {
    pub fn count(self) -> usize {
        match self {
            Span::Count(n) => n,
            Span::Time(_) => 0,
        }
    }
    pub fn time(self) -> Duration {
        match self {
            Span::Count(_) => Duration::ZERO,
            Span::Time(d) => d,
        }
    }
    pub fn is_zero(self) -> bool {
        self.count() == 0 && self.time().is_zero()
    }
}

impl std::str::FromStr for Span {
    type Err = goodput_core::ValueError;

    /// A count (`5`) or a duration (`10s`, `500ms`).
    fn from_str(s: &str) -> Result<Span, Self::Err> {
        match s.trim().parse::<usize>() {
            Ok(n) => Ok(Span::Count(n)),
            Err(_) => goodput_metrics::slo::parse_duration(s)
                .map(Span::Time)
                .map_err(|_| goodput_core::ValueError::new(s, "neither a count nor a duration (5, 10s, 500ms)")),
        }
    }
}

/// What each level measures and leaves out, as given (`--requests`, `--warmup`,
/// `--cooldown`); [`RunSpec::counts`] makes a level's counts of them.
#[derive(Clone, Copy, Debug)]
pub struct PerLevel {
    pub requests: Option<usize>,
    /// [`min_requests`] of the run's SLOs: the least a level measures by default.
    pub min_requests: usize,
    pub warmup: Option<Span>,
    pub cooldown: Span,
}

/// How many requests (or units) a level measures, warms up with and cools down with.
pub struct Counts {
    pub requests: usize,
    pub warmup: usize,
    pub cooldown: usize,
    pub trim: Trim,
}

impl Counts {
    pub fn of(a: &PerLevel, level: &LevelSpec, sessions: bool) -> Counts {
        // With a duration, the request count only caps the level.
        let requests = match (&level.duration, &level.arrival) {
            // The window's requests, once (not beyond: the times would start over), even
            // with a duration (which then only cuts the replay short).
            (_, Arrival::Trace { requests, .. }) => a.requests.map_or(*requests, |r| r.min(*requests)),
            (Some(_), _) => usize::MAX / 2,
            (None, Arrival::Burst { size }) => *size,
            (None, Arrival::Closed { users, .. }) if sessions => a.requests.unwrap_or((2 * users).max(2)),
            (None, Arrival::Closed { users, .. }) => a.requests.unwrap_or((2 * users).max(a.min_requests)),
            (None, Arrival::Rate { rate, .. }) => {
                a.requests.unwrap_or(((10.0 * rate).ceil() as usize).max(a.min_requests))
            }
        };
        let warmup = match (a.warmup, &level.arrival) {
            (_, Arrival::Burst { .. }) => 0,
            (None, Arrival::Trace { .. }) => 0,
            (Some(w), _) => w.count(),
            (None, Arrival::Closed { users, .. }) => *users,
            (None, _) => 2,
        };
        let trim = Trim { start: a.warmup.map_or(Duration::ZERO, Span::time), end: a.cooldown.time() };
        Counts { requests, warmup, cooldown: a.cooldown.count(), trim }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(load: f64, slos_hold: bool) -> LevelOutcome {
        LevelOutcome {
            load,
            slos_hold,
            surely_holds: slos_hold,
            slo_used: 0.0,
            output_throughput: load,
            queue_time: None,
        }
    }

    #[test]
    fn a_search_doubles_to_its_bound_and_levels_measure_what_their_percentiles_need() {
        let search = Search { max_load: 100.0, budget: Duration::from_secs(60) };
        let at = |users| LevelSpec {
            load: users as f64,
            arrival: Arrival::Closed { users, think: Duration::ZERO },
            duration: None,
        };
        assert_eq!(search.next(&at(32), 0.3), Some(at(64)));
        assert_eq!(search.next(&at(4), 0.1), Some(at(16)), "far from every bound: four times");
        assert_eq!(search.next(&at(64), 0.3), Some(at(100)), "clamped to the bound");
        assert_eq!(search.next(&at(100), 0.3), None);
        // 96 % of a bound used at 60 users: 60 × 1.1 / 0.96 = 68.75, so 69 rather than 120.
        assert_eq!(search.next(&at(60), 0.96), Some(at(69)));
        // Within 5 % of the bound: at least 5 % more, and at least one more user.
        assert_eq!(search.next(&at(4), 1.0), Some(at(5)));
        let rate = LevelSpec { load: 3.0, arrival: Arrival::Rate { rate: 3.0, burstiness: None }, duration: None };
        assert_eq!(search.next(&rate, 0.4).map(|l| l.load), Some(6.0));
        let burst = LevelSpec { load: 4.0, arrival: Arrival::Burst { size: 4 }, duration: None };
        assert_eq!(search.next(&burst, 0.0), None);
        let per = PerLevel { requests: None, min_requests: 72, warmup: None, cooldown: Span::Count(0) };
        assert_eq!(Counts::of(&per, &at(1), false).requests, 72);
        assert_eq!(Counts::of(&per, &at(64), false).requests, 128);
    }

    #[test]
    fn refinement_bisects_between_the_last_pass_and_the_first_failure() {
        let levels = [outcome(1.0, true), outcome(2.0, true), outcome(8.0, false), outcome(16.0, false)];
        let users = RefineKind::Users(Duration::ZERO).next(&levels).unwrap();
        assert_eq!(users.arrival, Arrival::Closed { users: 5, think: Duration::ZERO });
        assert_eq!(RefineKind::Burst.next(&levels).unwrap().load, 5.0);
        let rate = RefineKind::Rate { burstiness: Some(1.0) }.next(&levels).unwrap();
        assert_eq!(rate.load, 5.0);
        // No whole number between 2 and 3 users; 10.0 and 10.5 req/s are within 10 %.
        assert!(RefineKind::Users(Duration::ZERO).next(&[outcome(2.0, true), outcome(3.0, false)]).is_none());
        assert!(RefineKind::Rate { burstiness: None }.next(&[outcome(10.0, true), outcome(10.5, false)]).is_none());
        assert!(RefineKind::None.next(&levels).is_none());
        // Nothing failed, or nothing passed: nothing to bisect.
        assert!(RefineKind::Users(Duration::ZERO).next(&levels[..2]).is_none());
        assert!(RefineKind::Users(Duration::ZERO).next(&levels[2..]).is_none());
    }
}
