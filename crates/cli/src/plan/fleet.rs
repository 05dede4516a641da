//! `goodput plan --trace FILE --router … [--replicas N] [--autoscale RULE]`: a trace served by
//! a fleet of replicas of one configuration, simulated behind each router. Each replica is the
//! real scheduler with the configuration's roofline step cost, on one virtual clock. The
//! answer, per router, is the requests, how many met the SLOs (per hour and in all), GPU-hours,
//! peak GPUs, prefix hits and how evenly the replicas were loaded.

use super::replay::{measured, projected, PolicyRun, ReplicaSpec, Tally, TraceSource};
use super::{PlanArgs, Setting};
use anyhow::{bail, Context, Result};
use goodput_core::Stamp;
use goodput_report::console as table;
use goodput_report::html::svg::{self, Chart, Kind, Series};
use goodput_sizing::fleet::autoscale::{Rule, Scaler, Signal};
use goodput_sizing::fleet::router::{Policy, Router};
use goodput_sizing::fleet::{drive_fleet_into, Fleet};
use goodput_sizing::hardware::Gpu;
use goodput_sizing::sim::SimEngine;
use goodput_workload::trace::{Trace, TraceFormat, TraceOptions};
use serde::Serialize;
use std::time::Duration;

/// A router's name on the command line.
pub fn parse_policy(s: &str) -> Result<Policy, String> {
    match s.trim() {
        "round-robin" => Ok(Policy::RoundRobin),
        "random" => Ok(Policy::Random),
        "power-of-two" => Ok(Policy::PowerOfTwo),
        "least-loaded" => Ok(Policy::LeastLoaded),
        "cache-aware" => Ok(Policy::cache_aware()),
        other => Err(format!("`{other}`: a router is round-robin, random, power-of-two, least-loaded or cache-aware")),
    }
}

/// `requests=6,min=1,max=8,interval=15s,cooldown=60s,startup=120s[,stabilize=300s]` (or `kv=0.7,…`, `queue=500ms,…`).
pub fn parse_rule(s: &str) -> Result<Rule, String> {
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
        let (k, v) = part.split_once('=').ok_or_else(|| format!("--autoscale `{part}`: expected KEY=VALUE"))?;
        let num = || v.trim().parse::<f64>().ok().filter(|x| x.is_finite() && *x > 0.0);
        let count = || v.trim().parse::<usize>().ok().filter(|&x| x >= 1);
        let dur = || crate::args::parse_duration_or_zero(v.trim()).map_err(|e| format!("--autoscale {k}: {e}"));
        let bad = |what: &str| format!("--autoscale {k}=`{v}`: {what}");
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
                return Err(format!(
                    "--autoscale: unknown key `{other}` (requests, kv, queue, min, max, interval, cooldown, startup, stabilize)"
                ))
            }
        }
    }
    if rule.target <= 0.0 || rule.max == 0 || rule.min > rule.max || rule.interval.is_zero() {
        return Err(
            "--autoscale needs a target (requests=N, kv=F or queue=DURATION), max ≥ min ≥ 1 and a non-zero interval"
                .into(),
        );
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
    a: &PlanArgs,
    set: &Setting,
    p: &ReplicaSpec,
    policy: Policy,
    trace: &Trace,
) -> Result<PolicyRun> {
    let started = std::time::Instant::now();
    let n = a.autoscale.as_ref().map_or(a.replicas, |r| r.max);
    // No prompt can hit another's blocks: a cache that only ever misses changes no step, and
    // costs a day-long fleet half its time.
    let sched = goodput_scheduler::SchedulerConfig {
        enable_prefix_caching: p.sched.enable_prefix_caching && trace.shares_prefixes(),
        ..p.sched.clone()
    };
    let engines = (0..n)
        .map(|_| SimEngine::new(sched.clone(), p.cost.clone()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow::anyhow!("the simulated engine: {e}"))?;
    let scrape = a.scrape_interval;
    let mut fleet = Fleet::new(engines, Router::new(policy.clone(), n, a.seed), scrape);
    fleet.keep_steps = a.steps_out.is_some();
    if let Some(rule) = &a.autoscale {
        fleet = fleet.with_scaler(Scaler::new(rule.clone(), n, a.replicas.min(n)));
    }
    let mut tally = Tally::for_trace(trace, a.speedup, &a.request_overhead);
    let mut source = TraceSource::new(trace, a.speedup, set.spec.vocab_size, &policy, a.chat_template_tokens);
    let out = drive_fleet_into(&mut fleet, &mut source, &mut |_, r| tally.add(&r, &set.slos));
    for (id, _) in out.replicas.iter().flat_map(|r| &r.refused) {
        tally.refused(out.routed.iter().find(|x| x.id == *id).map_or(Stamp(0), |x| x.at));
    }
    let (replica_s, peak) = match &fleet.scaler {
        Some(s) => (s.billed_s, s.events.iter().map(|e| e.replicas).max().unwrap_or(0).max(a.replicas.min(n))),
        None => (n as f64 * tally.end_s(), n),
    };
    if let Some(dir) = &a.steps_out {
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
fn write_steps(dir: &std::path::Path, policy: &Policy, replicas: &[goodput_sizing::sim::SimOutput]) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating --steps-out {}", dir.display()))?;
    for (r, replica) in replicas.iter().enumerate() {
        let mut text = String::new();
        for s in &replica.steps {
            text += &serde_json::to_string(s)?;
            text.push('\n');
        }
        let path = dir.join(format!("{}-{r}.jsonl", policy.name()));
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

pub fn run(a: &PlanArgs, set: &Setting, gpus: &[Gpu], path: &std::path::Path) -> Result<()> {
    if !((1..=4096).contains(&a.replicas) && a.speedup.is_finite() && a.speedup > 0.0) {
        bail!("--replicas: 1 to 4096; --speedup: a positive factor");
    }
    let p = match &a.profile {
        Some(profile) => measured(set, profile)?,
        None => projected(a, set, gpus)?,
    };
    let trace = load(a, set, &p, path)?;
    let mut runs = Vec::new();
    for policy in &a.router {
        eprint!("\rplan --trace: {} …        ", policy.name());
        runs.push(simulate(a, set, &p, policy.clone(), &trace)?);
    }
    eprintln!();
    write(a, set, &p, &trace, runs, "")
}

/// The trace at `path`, within the replicas' context.
pub(super) fn load(a: &PlanArgs, set: &Setting, p: &ReplicaSpec, path: &std::path::Path) -> Result<Trace> {
    let entries = goodput_workload::trace::read(path, TraceFormat::Auto)?;
    let options = TraceOptions { window: (0.0, None), block_size: a.trace_block_size };
    let max_len = p.sched.max_model_len.min(set.spec.max_position_embeddings);
    let trace = Trace::new(path.display().to_string(), entries, options, max_len, a.seed)?;
    eprintln!("plan --trace: {}", trace.describe());
    if !a.request_overhead.is_zero() {
        eprintln!("plan --trace: outside the engines: {}", a.request_overhead.describe());
    }
    Ok(trace)
}

/// The plan of `runs` (its answer, then `more` of it): printed, and written as a page and
/// JSON where asked.
pub(super) fn write(
    a: &PlanArgs,
    set: &Setting,
    p: &ReplicaSpec,
    trace: &Trace,
    runs: Vec<PolicyRun>,
    more: &str,
) -> Result<()> {
    let answer = answer(&runs, p);
    let plan = &FleetPlan {
        model: set.spec.name.clone(),
        gpu: p.gpu.clone(),
        layout: p.layout.clone(),
        trace: trace.name.clone(),
        replicas: a.replicas,
        autoscale: a.autoscale.clone(),
        slos: set.slos.iter().map(|s| s.to_string()).collect(),
        answer: if more.is_empty() { answer } else { format!("{answer} {more}") },
        runs,
    };
    print(plan);
    if let Some(path) = &a.html {
        std::fs::write(path, html(plan)?).with_context(|| format!("writing {}", path.display()))?;
        eprintln!("fleet page in {}", path.display());
    }
    if let Some(path) = &a.json {
        std::fs::write(path, serde_json::to_string_pretty(plan)? + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
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

fn print(p: &FleetPlan) {
    let mut t = table::new(&[
        "router",
        "requests",
        "met SLOs",
        "GPU-hours",
        "peak GPUs",
        "prefix hits",
        "TTFT P95 s",
        "E2E P95 s",
        "replica shares",
    ]);
    for r in &p.runs {
        let (lo, hi) = r.replica_shares.iter().fold((1.0f64, 0.0f64), |(l, h), &s| (l.min(s), h.max(s)));
        t.add_row(vec![
            r.router.clone(),
            r.requests.to_string(),
            format!("{:.1} %", r.good as f64 / r.requests.max(1) as f64 * 100.0),
            table::f(r.gpu_hours, 2),
            r.peak_gpus.to_string(),
            r.prefix_hit_rate.map_or("-".into(), |h| format!("{:.1} %", h * 100.0)),
            r.ttft_p95_s.map_or("-".into(), |x| table::f(x, 2)),
            r.e2e_p95_s.map_or("-".into(), |x| table::f(x, 2)),
            format!("{:.1}–{:.1} %", lo * 100.0, hi * 100.0),
        ]);
    }
    println!("Fleet plan: {} on {} {}, trace {}, SLOs {}\n{t}", p.model, p.gpu, p.layout, p.trace, p.slos.join(", "));
    if let Some(first) = p.runs.first().filter(|r| r.hours.len() > 1) {
        let mut h = table::new(&["hour", "requests", "met SLOs"]);
        for (i, (n, good)) in first.hours.iter().enumerate() {
            h.add_row(vec![
                i.to_string(),
                n.to_string(),
                format!("{:.1} %", *good as f64 / (*n).max(1) as f64 * 100.0),
            ]);
        }
        println!("By hour, behind {}:\n{h}", first.router);
    }
    let speed = |r: &PolicyRun| {
        let rate = r.requests as f64 / r.wall_s.max(1e-9);
        format!("{} in {:.1} s ({rate:.0} requests/s)", r.router, r.wall_s)
    };
    println!("Simulated on this machine: {}.", p.runs.iter().map(speed).collect::<Vec<_>>().join("; "));
    println!("{}", p.answer);
}

/// The hour-by-hour chart: requests within the SLOs (percent) behind each router, and the
/// requests of each hour.
fn hourly_chart(p: &FleetPlan) -> Chart {
    let mut series: Vec<Series> = p
        .runs
        .iter()
        .map(|r| Series {
            name: format!("{}: met SLOs (%)", r.router),
            points: r
                .hours
                .iter()
                .enumerate()
                .map(|(h, (n, g))| (h as f64, *g as f64 / (*n).max(1) as f64 * 100.0))
                .collect(),
            right: false,
            emphasis: false,
        })
        .collect();
    if let Some(r) = p.runs.first() {
        let points = r.hours.iter().enumerate().map(|(h, (n, _))| (h as f64, *n as f64)).collect();
        series.push(Series { name: "requests in the hour".into(), points, right: true, emphasis: false });
    }
    Chart {
        id: "hourly".into(),
        title: "Requests within the SLOs, hour by hour".into(),
        caption:
            "Each router's share of the hour's requests that met every SLO (left), and the hour's requests (right)."
                .into(),
        x_label: "hour of the trace".into(),
        x_log2: false,
        y_label: "met SLOs (%)".into(),
        y2_label: Some("requests".into()),
        kind: Kind::Lines,
        series,
        marks: Vec::new(),
        limits: Vec::new(),
    }
}

/// The fleet's size through the trace behind each autoscaled router: a step at each of the
/// autoscaler's changes. `None` when nothing scaled.
fn replicas_chart(p: &FleetPlan) -> Option<Chart> {
    let series: Vec<Series> = p
        .runs
        .iter()
        .filter(|r| !r.scale_events.is_empty())
        .map(|r| {
            let mut points = vec![(0.0, p.replicas as f64)];
            let mut now = p.replicas as f64;
            for e in &r.scale_events {
                let h = e.at_s / 3600.0;
                points.extend([(h, now), (h, e.replicas as f64)]);
                now = e.replicas as f64;
            }
            let end = (r.hours.len() as f64).max(points.last().map_or(0.0, |p| p.0));
            points.push((end, now));
            Series { name: format!("{}: replicas", r.router), points, right: false, emphasis: false }
        })
        .collect();
    (!series.is_empty()).then(|| Chart {
        id: "replicas".into(),
        title: "Replicas through the trace".into(),
        caption: "Replicas serving or starting after each of the autoscaler's changes (its scale events), behind each router."
            .into(),
        x_label: "hour of the trace".into(),
        x_log2: false,
        y_label: "replicas".into(),
        y2_label: None,
        kind: Kind::Lines,
        series,
        marks: Vec::new(),
        limits: Vec::new(),
    })
}

/// The fleet plan as one self-contained page: the answer, the routers' table, the hourly
/// chart, and the replicas through the trace when an autoscaler changed them.
fn html(p: &FleetPlan) -> Result<String> {
    let mut chart = svg::svg(&hourly_chart(p))?;
    if let Some(replicas) = replicas_chart(p) {
        chart = format!("{chart}\n{}", svg::svg(&replicas)?);
    }
    let head = ["router", "requests", "met SLOs", "GPU-hours", "peak GPUs", "prefix hits"];
    let rows = p.runs.iter().map(|r| {
        let cells = vec![
            r.router.clone(),
            r.requests.to_string(),
            format!("{:.1} %", r.good as f64 / r.requests.max(1) as f64 * 100.0),
            format!("{:.2}", r.gpu_hours),
            r.peak_gpus.to_string(),
            r.prefix_hit_rate.map_or("-".into(), |h| format!("{:.1} %", h * 100.0)),
        ];
        (String::new(), cells)
    });
    let body = format!("{}\n{chart}", super::answer::table_html(&head, rows));
    Ok(super::answer::page(
        &format!("goodput fleet plan: {}", p.model),
        &format!("{} on {} {}: {}", p.model, p.gpu, p.layout, p.trace),
        &p.answer,
        "",
        &body,
        &p.slos,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use goodput_sizing::fleet::autoscale::ScaleEvent;

    #[test]
    fn the_page_steps_the_replicas_at_each_scale_event() {
        let events = vec![
            ScaleEvent { at_s: 1800.0, replicas: 6, value: 20.0 },
            ScaleEvent { at_s: 5400.0, replicas: 3, value: 5.0 },
        ];
        let scaled = PolicyRun {
            router: "round-robin".into(),
            hours: vec![(10, 10); 2],
            scale_events: events,
            ..PolicyRun::default()
        };
        let fixed = PolicyRun { router: "least-loaded".into(), hours: vec![(10, 10); 2], ..PolicyRun::default() };
        let mut plan = FleetPlan {
            model: "m".into(),
            gpu: "g".into(),
            layout: "TP1".into(),
            trace: "t".into(),
            replicas: 4,
            autoscale: None,
            slos: Vec::new(),
            runs: vec![scaled, fixed],
            answer: String::new(),
        };
        let chart = replicas_chart(&plan).unwrap();
        assert_eq!(chart.series.len(), 1, "only the run that scaled");
        assert_eq!(chart.series[0].points, [(0.0, 4.0), (0.5, 4.0), (0.5, 6.0), (1.5, 6.0), (1.5, 3.0), (2.0, 3.0)]);
        let page = html(&plan).unwrap();
        assert!(page.contains("Replicas through the trace"), "{page}");
        plan.runs.remove(0);
        assert!(replicas_chart(&plan).is_none());
        assert!(!html(&plan).unwrap().contains("Replicas through the trace"));
    }
}
