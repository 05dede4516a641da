//! `goodput plan --trace FILE --router … [--replicas N] [--autoscale RULE]`: a trace served by
//! a fleet of replicas of one configuration, simulated behind each router. Each replica is the
//! real scheduler with the configuration's roofline step cost, on one virtual clock. The
//! answer, per router, is the requests, how many met the SLOs (per hour and in all), GPU-hours,
//! peak GPUs, prefix hits and how evenly the replicas were loaded.

use super::error::refuse;
use super::replay::{measured, projected, PolicyRun, ReplicaSpec, Tally, TraceSource};
use super::{FleetSpec, PlanSpec, Said, Setting};
use super::{PlanError, Result};
use crate::fleet::autoscale::{Rule, Scaler, Signal};
use crate::fleet::router::{Policy, Router};
use crate::fleet::{drive_fleet_into, Fleet};
use crate::hardware::Gpu;
use crate::sim::SimEngine;
use goodput_core::Stamp;
use goodput_core::ValueError;
use goodput_workload::trace::{Trace, TraceFormat, TraceOptions};
use serde::Serialize;
use std::time::Duration;

/// A router's name on the command line.
pub fn parse_policy(s: &str) -> Result<Policy, ValueError> {
    match s.trim() {
        "round-robin" => Ok(Policy::RoundRobin),
        "random" => Ok(Policy::Random),
        "power-of-two" => Ok(Policy::PowerOfTwo),
        "least-loaded" => Ok(Policy::LeastLoaded),
        "cache-aware" => Ok(Policy::cache_aware()),
        other => {
            Err(ValueError::new(other, "a router is round-robin, random, power-of-two, least-loaded or cache-aware"))
        }
    }
}

/// `requests=6,min=1,max=8,interval=15s,cooldown=60s,startup=120s[,stabilize=300s]` (or `kv=0.7,…`, `queue=500ms,…`).
pub fn parse_rule(s: &str) -> Result<Rule, ValueError> {
    let mut rule = Rule {
        signal: Signal::Requests,
        target: 0.0,
        min: 1,
        max: 0,
        interval: Duration::from_secs(15),
        cooldown: Duration::from_secs(60),
        startup: Duration::from_secs(120),
        stabilization: Duration::ZERO,
    };
    for part in s.split(',') {
        let (k, v) = part.split_once('=').ok_or_else(|| ValueError::new(part, "expected KEY=VALUE"))?;
        let num = || v.trim().parse::<f64>().ok().filter(|x| x.is_finite() && *x > 0.0);
        let count = || v.trim().parse::<usize>().ok().filter(|&x| x >= 1);
        let bad = |what: &str| ValueError::new(part, format!("{k} takes {what}"));
        let dur = || goodput_metrics::slo::parse_duration_or_zero(v.trim()).map_err(|e| bad(&e.to_string()));
        match k.trim() {
            "requests" => {
                (rule.signal, rule.target) = (Signal::Requests, num().ok_or_else(|| bad("a positive number"))?)
            }
            "kv" => {
                (rule.signal, rule.target) =
                    (Signal::KvUsage, num().filter(|x| *x <= 1.0).ok_or_else(|| bad("a share in (0, 1]"))?)
            }
            "queue" => {
                let target = dur()?.as_secs_f64();
                if target <= 0.0 {
                    return Err(bad("a positive duration"));
                }
                (rule.signal, rule.target) = (Signal::QueueTime, target)
            }
            "min" => rule.min = count().ok_or_else(|| bad("at least 1"))?,
            "max" => rule.max = count().ok_or_else(|| bad("at least 1"))?,
            "interval" => rule.interval = dur()?,
            "cooldown" => rule.cooldown = dur()?,
            "startup" => rule.startup = dur()?,
            "stabilize" => rule.stabilization = dur()?,
            other => {
                return Err(ValueError::new(
                    part,
                    format!(
                        "unknown key `{other}` (requests, kv, queue, min, max, interval, cooldown, startup, stabilize)"
                    ),
                ))
            }
        }
    }
    if rule.target <= 0.0 || rule.max == 0 || rule.min > rule.max || rule.interval.is_zero() {
        return Err(ValueError::new(
            s,
            "a rule needs a target (requests=N, kv=F or queue=DURATION), max ≥ min ≥ 1 and a non-zero interval",
        ));
    }
    Ok(rule)
}

/// The fleet plan, as written to JSON.
#[derive(Debug, Serialize)]
pub struct FleetPlan {
    pub model: String,
    pub gpu: String,
    pub layout: String,
    pub trace: String,
    pub replicas: usize,
    pub autoscale: Option<Rule>,
    pub slos: Vec<String>,
    pub runs: Vec<PolicyRun>,
    pub answer: String,
}

/// `policy`'s run of `trace` over `--replicas` (or the autoscaler's) aggregated replicas.
pub(super) fn simulate(
    a: &PlanSpec,
    f: &FleetSpec,
    set: &Setting,
    p: &ReplicaSpec,
    policy: Policy,
    trace: &Trace,
) -> Result<PolicyRun> {
    let started = std::time::Instant::now();
    let n = f.autoscale.as_ref().map_or(f.replicas, |r| r.max);
    // No prompt can hit another's blocks: a cache that only ever misses changes no step, and
    // costs a day-long fleet half its time.
    let sched = goodput_scheduler::SchedulerConfig {
        enable_prefix_caching: p.sched.enable_prefix_caching && trace.shares_prefixes(),
        ..p.sched.clone()
    };
    let engines = (0..n).map(|_| SimEngine::new(sched.clone(), p.cost.clone())).collect::<Result<Vec<_>, _>>()?;
    let scrape = f.scrape_interval;
    let mut fleet = Fleet::new(engines, Router::new(policy.clone(), n, a.seed), scrape);
    fleet.keep_steps = f.steps_out.is_some();
    if let Some(rule) = &f.autoscale {
        fleet = fleet.with_scaler(Scaler::new(rule.clone(), n, f.replicas.min(n)));
    }
    let mut tally = Tally::for_trace(trace, f.speedup, &f.request_overhead);
    let mut source = TraceSource::new(trace, f.speedup, set.spec.vocab_size, &policy, f.chat_template_tokens);
    let out = drive_fleet_into(&mut fleet, &mut source, &mut |_, r| tally.add(&r, &set.slos));
    for (id, _) in out.replicas.iter().flat_map(|r| &r.refused) {
        tally.refused(out.routed.iter().find(|x| x.id == *id).map_or(Stamp(0), |x| x.at));
    }
    let (replica_s, peak) = match &fleet.scaler {
        Some(s) => (s.billed_s, s.events.iter().map(|e| e.replicas).max().unwrap_or(0).max(f.replicas.min(n))),
        None => (n as f64 * tally.end_s(), n),
    };
    if let Some(dir) = &f.steps_out {
        write_steps(dir, &policy, &out.replicas)?;
    }
    let mut counts = vec![0usize; n];
    for x in &out.routed {
        counts[x.replica] += 1;
    }
    let mut run = tally.into_run(policy.name().into(), replica_s * p.gpus as f64 / 3600.0, peak * p.gpus, &counts);
    run.scale_events = fleet.scaler.map(|s| s.events).unwrap_or_default();
    run.wall_s = started.elapsed().as_secs_f64();
    Ok(run)
}

/// Each replica's simulated steps, as JSON lines in `dir/POLICY-R.jsonl`.
fn write_steps(dir: &std::path::Path, policy: &Policy, replicas: &[crate::sim::SimOutput]) -> Result<()> {
    let what = |what: String| move |source| PlanError::Write { what, source };
    std::fs::create_dir_all(dir).map_err(what(format!("creating --steps-out {}", dir.display())))?;
    for (r, replica) in replicas.iter().enumerate() {
        let mut text = String::new();
        for s in &replica.steps {
            text += &serde_json::to_string(s)?;
            text.push('\n');
        }
        let path = dir.join(format!("{}-{r}.jsonl", policy.name()));
        std::fs::write(&path, text).map_err(what(format!("writing {}", path.display())))?;
    }
    Ok(())
}

/// The fleet of `f.replicas` replaying the trace at `path` behind each router of `f.router`.
pub fn run(a: &PlanSpec, f: &FleetSpec, set: &Setting, gpus: &[Gpu], say: &mut dyn FnMut(Said)) -> Result<FleetPlan> {
    if !((1..=4096).contains(&f.replicas) && f.speedup.is_finite() && f.speedup > 0.0) {
        refuse!("--replicas: 1 to 4096; --speedup: a positive factor");
    }
    let p = match &f.profile {
        Some(profile) => measured(set, profile)?,
        None => projected(a, set, gpus)?,
    };
    let trace = load(a, f, set, &p, say)?;
    let mut runs = Vec::new();
    for policy in &f.router {
        say(Said::Step(&format!("plan --trace: {} …", policy.name())));
        runs.push(simulate(a, f, set, &p, policy.clone(), &trace)?);
    }
    Ok(plan_of(f, set, &p, &trace, runs, ""))
}

/// The fleet's trace, within the replicas' context.
pub(super) fn load(
    a: &PlanSpec,
    f: &FleetSpec,
    set: &Setting,
    p: &ReplicaSpec,
    say: &mut dyn FnMut(Said),
) -> Result<Trace> {
    let path = &f.trace;
    let entries = goodput_workload::trace::read(path, TraceFormat::Auto)?;
    let options = TraceOptions { window: (0.0, None), block_size: f.trace_block_size };
    let max_len = p.sched.max_model_len.min(set.spec.max_position_embeddings);
    let trace = Trace::new(path.display().to_string(), entries, options, max_len, a.seed)?;
    say(Said::Line(&format!("plan --trace: {}", trace.describe())));
    if !f.request_overhead.is_zero() {
        say(Said::Line(&format!("plan --trace: outside the engines: {}", f.request_overhead.describe())));
    }
    Ok(trace)
}

/// The plan of `runs`: its answer, then `more` of it.
pub(super) fn plan_of(
    f: &FleetSpec,
    set: &Setting,
    p: &ReplicaSpec,
    trace: &Trace,
    runs: Vec<PolicyRun>,
    more: &str,
) -> FleetPlan {
    let answer = answer(&runs, p);
    FleetPlan {
        model: set.spec.name.clone(),
        gpu: p.gpu.clone(),
        layout: p.layout.clone(),
        trace: trace.name.clone(),
        replicas: f.replicas,
        autoscale: f.autoscale.clone(),
        slos: set.slos.iter().map(|s| s.to_string()).collect(),
        answer: if more.is_empty() { answer } else { format!("{answer} {more}") },
        runs,
    }
}

fn answer(runs: &[PolicyRun], p: &ReplicaSpec) -> String {
    let share = |r: &PolicyRun| r.good as f64 / r.requests.max(1) as f64;
    // The most requests within the SLOs, then the fewest GPU-hours, then the lowest TTFT P95;
    // on a tie the router listed first.
    let key = |r: &PolicyRun| (share(r), -r.gpu_hours, -r.ttft_p95_s.unwrap_or(f64::INFINITY));
    let better = |a: &PolicyRun, b: &PolicyRun| {
        let (x, y) = (key(a), key(b));
        x.0.total_cmp(&y.0).then(x.1.total_cmp(&y.1)).then(x.2.total_cmp(&y.2))
    };
    let Some(best) = runs.iter().rev().max_by(|a, b| better(a, b)) else {
        return "No router was simulated.".into();
    };
    format!(
        "Behind {} the fleet of {} {} meets the SLOs for {:.1} % of {} requests ({} missed) on {:.2} GPU-hours, {} GPUs at the peak{}. Error bar: {}.",
        best.router,
        p.gpu,
        p.layout,
        share(best) * 100.0,
        best.requests,
        best.requests - best.good,
        best.gpu_hours,
        best.peak_gpus,
        best.prefix_hit_rate.map_or(String::new(), |h| format!(", {:.0} % of prompt tokens from the prefix cache", h * 100.0)),
        p.error_bar
    )
}
