//! What `goodput run` will do, checked before anything is loaded: the SLOs, the model's shape,
//! the workload, the load levels of the sweep and how refinement adds levels between the last
//! passing and the first failing one (ripgrep's "low args → high args" step: clap's raw
//! arguments become one validated plan).

use super::args::RunArgs;
use crate::args::Span;
use crate::workload::{build_workload, WorkloadSpec};
use anyhow::{bail, Context, Result};
use goodput_core::ModelSpec;
use goodput_metrics::capacity::{pass_fail, LevelOutcome};
use goodput_metrics::slo::{parse_slos, Slo};
use goodput_results::LoadUnit;
use goodput_workload::{Arrival, RetryPolicy, Trim};
use std::collections::VecDeque;
use std::time::Duration;

/// One level to run: its load, how requests arrive, and how long it lasts (if by time).
#[derive(Clone, Debug, PartialEq)]
pub struct LevelSpec {
    pub load: f64,
    pub arrival: Arrival,
    pub duration: Option<Duration>,
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
    /// a whole number of users strictly between them, or a rate more than 10 % from both.
    pub fn next(self, outcomes: &[LevelOutcome]) -> Option<LevelSpec> {
        let (pass, fail) = pass_fail(outcomes)?;
        let mid = ((pass + fail) / 2.0).floor();
        let between = mid > pass && mid < fail;
        let arrival = match self {
            RefineKind::Users(think) if between => Arrival::Closed { users: mid as usize, think },
            RefineKind::Burst if between => Arrival::Burst { size: mid as usize },
            RefineKind::Rate { burstiness } if (fail - pass) / fail > 0.1 => {
                Arrival::Rate { rate: (pass + fail) / 2.0, burstiness }
            }
            _ => return None,
        };
        Some(LevelSpec { load: arrival.load(), arrival, duration: None })
    }
}

/// A validated `goodput run`.
pub struct RunPlan {
    pub slos: Vec<Slo>,
    pub spec: ModelSpec,
    /// The longest sequence the engine (or the prompts) may reach.
    pub max_len: usize,
    pub workload: WorkloadSpec,
    pub unit: LoadUnit,
    /// The sweep's levels, in the order given.
    pub levels: VecDeque<LevelSpec>,
    pub refine: RefineKind,
    pub retry: RetryPolicy,
    /// `http(s)://…` of an external server; `None` for the in-process engine (or http-local).
    pub url: Option<String>,
    /// The run's seed: `--seed`, or drawn for this run ([`RunPlan::seed_drawn`]).
    pub seed: u64,
    pub seed_drawn: bool,
}

impl RunPlan {
    pub fn new(a: &RunArgs) -> Result<RunPlan> {
        let slos = parse_slos(&a.slo).context("--slo")?;
        let spec = a.model.spec()?;
        if !(a.burstiness.is_finite() && a.burstiness > 0.0) {
            bail!("--burstiness must be a positive number (1 = Poisson), got {}", a.burstiness);
        }
        check_bounds(a)?;
        check_spans(a)?;
        check_exports(a)?;
        let max_len = a.engine.max_model_len.unwrap_or(spec.max_position_embeddings).min(spec.max_position_embeddings);
        // A nonce per run unless told: the same prompts twice meet a warm prefix cache.
        let (seed, seed_drawn) = match a.seed {
            Some(s) => (s, false),
            None => (u64::from(rand::random::<u32>()), true),
        };
        let mut workload = build_workload(&a.scenario, a.encoder.as_deref(), a.rate.is_some(), max_len)?;
        workload.dataset = crate::workload::read_dataset(&a.dataset, a.rate.is_some())?;
        workload.trace = crate::workload::read_trace(&a.trace, max_len, seed)?;
        check_workload(a, &workload)?;
        let url = match a.target.as_str() {
            "in-process" | "http-local" => None,
            t if t.starts_with("http://") || t.starts_with("https://") => Some(t.trim_end_matches('/').to_string()),
            t => bail!("--target {t}: expected in-process, http-local or http://HOST:PORT"),
        };
        let http_only = a.connection.http_only_flags();
        if a.target == "in-process" && !http_only.is_empty() {
            bail!("{} apply to HTTP targets; with --target in-process there is no HTTP", http_only.join(", "));
        }
        if url.is_some() && a.engine_cpus.is_some() {
            bail!("--engine-cpus pins goodput's own engine; with --target {} there is none in this process", a.target);
        }
        let burstiness = (!a.constant_rate).then_some(a.burstiness);
        let (unit, refine) = match (&a.rate, &a.stages) {
            _ if workload.trace.is_some() => (LoadUnit::Rate, RefineKind::None),
            _ if a.burst.is_some() => (LoadUnit::Burst, RefineKind::Burst),
            (Some(_), None) => (LoadUnit::Rate, RefineKind::Rate { burstiness }),
            (None, None) if a.duration.is_none() => (LoadUnit::Users, RefineKind::Users(a.think)),
            _ => (LoadUnit::Users, RefineKind::None),
        };
        let levels = match &workload.trace {
            Some(t) => trace_levels(a, t)?,
            None => levels(a, burstiness)?,
        };
        check_distinct(&levels)?;
        if levels.iter().any(|l| l.duration.is_some()) && workload.is_sessions() {
            bail!("--duration and --stages apply to single-request scenarios; use --requests for {}", workload.name());
        }
        let retry = RetryPolicy { max: a.retries, backoff: a.retry_backoff };
        Ok(RunPlan { slos, spec, max_len, workload, unit, levels, refine, retry, url, seed, seed_drawn })
    }
}

/// Export files go into directories that exist, and `--out` takes no second run: found out
/// now, not after the first level.
fn check_exports(a: &RunArgs) -> Result<()> {
    if let Some(dir) = &a.out {
        goodput_results::files::check_out_dir(dir, a.overwrite)?;
    }
    let exports =
        [("--export-json", &a.export_json), ("--export-csv", &a.export_csv), ("--export-markdown", &a.export_markdown)];
    for (flag, path) in exports.into_iter().filter_map(|(f, p)| Some((f, p.as_deref()?))) {
        let dir = path.parent().unwrap_or(std::path::Path::new(""));
        if !(dir.as_os_str().is_empty() || dir.is_dir()) {
            bail!("{flag} {}: no directory {} to write it in", path.display(), dir.display());
        }
    }
    Ok(())
}

fn check_spans(a: &RunArgs) -> Result<()> {
    if a.burst.is_some() && !(a.warmup.is_none_or(Span::is_zero) && a.cooldown.is_zero()) {
        bail!("--burst is a cold start: every request is measured, so --warmup and --cooldown do not apply");
    }
    if (a.duration.is_some() || a.stages.is_some()) && a.cooldown.count() > 0 {
        bail!("--cooldown {}: a level bounded by time has no fixed last request; give the cool-down as a duration (e.g. 5s)", a.cooldown.count());
    }
    Ok(())
}

/// What only single-request scenarios take.
fn check_workload(a: &RunArgs, w: &WorkloadSpec) -> Result<()> {
    if !w.is_sessions() {
        return Ok(());
    }
    if !a.think.is_zero() {
        bail!("--think applies to single-request scenarios; {} has its own think time in its scenario file", w.name());
    }
    if a.warmup.is_some_and(|w| !w.time().is_zero()) || !a.cooldown.time().is_zero() {
        bail!(
            "--warmup and --cooldown as durations apply to single-request scenarios; give a count of {} units",
            w.name()
        );
    }
    if a.burst.is_some() {
        bail!("--burst applies to single-request scenarios; {} runs closed-loop with --concurrency", w.name());
    }
    Ok(())
}

/// The most virtual users (or burst requests) one level may have: far beyond what one load
/// generator drives, and small enough that a typo cannot exhaust memory.
pub const MAX_USERS: usize = 100_000;
/// The highest request rate one level may offer (requests per second).
pub const MAX_RATE: f64 = 100_000.0;
/// The most measured requests (sessions, tasks) per level.
pub const MAX_REQUESTS: usize = 10_000_000;
/// The longest level, warm-up or think time.
pub const MAX_DURATION: Duration = Duration::from_secs(7 * 24 * 3600);

/// Upper bounds on counts, rates and times, each refused with its flag and its limit.
fn check_bounds(a: &RunArgs) -> Result<()> {
    let most = |flag: &str, values: &[usize], max: usize| -> Result<()> {
        match values.iter().find(|&&v| v > max) {
            Some(v) => bail!("{flag}: {v} is more than goodput drives in one level (at most {max})"),
            None => Ok(()),
        }
    };
    most("--concurrency", &a.concurrency, MAX_USERS)?;
    most("--burst", a.burst.as_deref().unwrap_or(&[]), MAX_USERS)?;
    let stage_users: Vec<usize> = a.stages.iter().flatten().map(|s| s.0).collect();
    most("--stages", &stage_users, MAX_USERS)?;
    most("--requests", a.requests.as_slice(), MAX_REQUESTS)?;
    if a.requests == Some(0) {
        bail!("--requests: a level must measure at least 1 request");
    }
    if !(1e-3..=1e3).contains(&a.burstiness) {
        bail!("--burstiness: {} is outside 0.001–1000 (1 = Poisson, below 1 burstier)", a.burstiness);
    }
    most("--warmup", &[a.warmup.map_or(0, Span::count)], MAX_REQUESTS)?;
    most("--cooldown", &[a.cooldown.count()], MAX_REQUESTS)?;
    if let Some(r) = a.rate.iter().flatten().find(|&&r| r > MAX_RATE) {
        bail!("--rate: {r} requests per second is beyond what goodput offers (at most {MAX_RATE})");
    }
    let times = [
        ("--duration", a.duration.unwrap_or_default()),
        ("--think", a.think),
        ("--warmup", a.warmup.map_or(Duration::ZERO, Span::time)),
        ("--cooldown", a.cooldown.time()),
        ("--timeout", a.timeout),
    ];
    let stage_times = a.stages.iter().flatten().map(|s| ("--stages", s.1));
    if let Some((flag, d)) = times.into_iter().chain(stage_times).find(|(_, d)| *d > MAX_DURATION) {
        bail!("{flag}: {d:?} is longer than a week, the longest goodput accepts");
    }
    if a.retries > 100 {
        bail!("--retries: {} retries per request is beyond any sensible policy (at most 100)", a.retries);
    }
    Ok(())
}

/// A trace's levels: one per speedup, by the rate it offers (at most [`MAX_RATE`]).
fn trace_levels(a: &RunArgs, t: &goodput_workload::Trace) -> Result<VecDeque<LevelSpec>> {
    let (rate, requests) = (t.rate(), t.entries.len());
    a.trace
        .trace_speedup
        .iter()
        .map(|&speedup| {
            // Offered requests per second, to the thousandth (a level's name in every table).
            let offered = (rate * speedup * 1e3).round() / 1e3;
            if offered > MAX_RATE {
                bail!(
                    "--trace-speedup {speedup}: the trace would offer {offered} requests per second, beyond what \
                     goodput offers (at most {MAX_RATE})"
                );
            }
            let arrival = Arrival::Trace { speedup, rate: offered, requests };
            Ok(LevelSpec { load: arrival.load(), arrival, duration: a.duration })
        })
        .collect()
}

/// Each load once: levels are named by their load in every table, file and comparison, so a
/// second level of the same load would be mixed with the first.
fn check_distinct(levels: &VecDeque<LevelSpec>) -> Result<()> {
    for (i, l) in levels.iter().enumerate() {
        if levels.iter().take(i).any(|m| m.load == l.load) {
            bail!("the load {} is given twice; each level of a sweep must have a load of its own", l.load);
        }
    }
    Ok(())
}

/// The sweep's levels from `--burst`, `--stages`, `--rate` or `--concurrency`.
fn levels(a: &RunArgs, burstiness: Option<f64>) -> Result<VecDeque<LevelSpec>> {
    let level = |arrival: Arrival, duration: Option<Duration>| LevelSpec { load: arrival.load(), arrival, duration };
    Ok(match (&a.burst, &a.stages, &a.rate) {
        (Some(sizes), _, _) => {
            if sizes.is_empty() || sizes.contains(&0) {
                bail!("--burst: every level must send at least 1 request, got {sizes:?}");
            }
            sizes.iter().map(|&n| level(Arrival::Burst { size: n }, None)).collect()
        }
        (None, Some(stages), _) => {
            if stages.is_empty() {
                bail!("--stages: give at least one USERSxDURATION stage");
            }
            stages.iter().map(|&(u, d)| level(Arrival::Closed { users: u, think: a.think }, Some(d))).collect()
        }
        (None, None, Some(rates)) => {
            if rates.is_empty() || rates.iter().any(|r| !(r.is_finite() && *r >= 0.001)) {
                bail!(
                    "--rate: every rate must be a positive number, at least 0.001 requests per second, got {rates:?}"
                );
            }
            rates.iter().map(|&r| level(Arrival::Rate { rate: r, burstiness }, a.duration)).collect()
        }
        (None, None, None) => {
            if a.concurrency.is_empty() || a.concurrency.contains(&0) {
                bail!("--concurrency: every level must be at least 1 user, got {:?}", a.concurrency);
            }
            a.concurrency.iter().map(|&c| level(Arrival::Closed { users: c, think: a.think }, a.duration)).collect()
        }
    })
}

/// How many requests (or units) a level measures, warms up with and cools down with.
pub struct Counts {
    pub requests: usize,
    pub warmup: usize,
    pub cooldown: usize,
    pub trim: Trim,
}

impl Counts {
    pub fn of(a: &RunArgs, level: &LevelSpec, sessions: bool) -> Counts {
        // With a duration, the request count only caps the level.
        let requests = match (&level.duration, &level.arrival) {
            // The window's requests, once (not beyond: the times would start over), even
            // with a duration (which then only cuts the replay short).
            (_, Arrival::Trace { requests, .. }) => a.requests.map_or(*requests, |r| r.min(*requests)),
            (Some(_), _) => usize::MAX / 2,
            (None, Arrival::Burst { size }) => *size,
            (None, Arrival::Closed { users, .. }) if sessions => a.requests.unwrap_or((2 * users).max(2)),
            (None, Arrival::Closed { users, .. }) => a.requests.unwrap_or((4 * users).max(8)),
            (None, Arrival::Rate { rate, .. }) => a.requests.unwrap_or(((10.0 * rate).ceil() as usize).max(8)),
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
        LevelOutcome { load, slos_hold, output_throughput: load, queue_time: None }
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
