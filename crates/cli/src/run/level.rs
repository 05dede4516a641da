//! One level of `goodput run`: its plan run against the rig's target, and the level's report —
//! the service summary of its measured requests, the engine's side from its steps (or the
//! server's from its /metrics), the harness's own cost, and the task-level numbers.

use super::args::RunArgs;
use super::plan::{Counts, LevelSpec, RunPlan};
use super::rig::Rig;
use crate::target::Scraper;
use goodput_core::{ClientRecord, Phase, Stamp, StepRecord};
use goodput_metrics::engine::SeriesPoint;
use goodput_metrics::level::summarize;
use goodput_metrics::occupancy::{EngineLevel, Occupancy};
use goodput_results::{vllm_keys, Harness, LevelReport};
use goodput_workload::{Arrival, LevelOutput, LevelPlan, RecordSink, UnitPlan, Workload};

/// A finished level: its report and what the files keep beside it.
pub struct Finished {
    pub report: LevelReport,
    pub steps: Vec<StepRecord>,
    pub series: Vec<SeriesPoint>,
}

/// The request ids a level takes: one per request (a session has `turns` requests); a timed
/// level takes a wide range (its real count is not known in advance).
pub fn id_span(level: &LevelSpec, counts: &Counts, workload: &Workload) -> u64 {
    if level.duration.is_some() {
        1u64 << 40
    } else {
        ((counts.requests + counts.warmup + counts.cooldown) * workload.requests_per_unit()) as u64
    }
}

/// The workload's plan of a level.
pub fn level_plan(
    a: &RunArgs,
    plan: &RunPlan,
    level: &LevelSpec,
    counts: &Counts,
    first_id: u64,
    sink: Option<RecordSink>,
) -> LevelPlan {
    LevelPlan {
        arrival: level.arrival.clone(),
        duration: level.duration,
        trim: counts.trim,
        unit: UnitPlan {
            users: level.arrival.users(),
            units: counts.requests,
            warmup: counts.warmup,
            cooldown: counts.cooldown,
            timeout: a.timeout,
            retry: plan.retry,
            seed: a.seed,
            first_id,
            sink,
        },
    }
}

/// Runs one level: the workload against the target (its /metrics scraped around it for an
/// HTTP target), then the level's report over its measured window.
pub fn run(rig: &Rig, a: &RunArgs, plan: &RunPlan, level: &LevelSpec, lp: LevelPlan) -> Finished {
    let _ = rig.steps.drain();
    let scraper = rig.http().map(|h| Scraper::start(&rig.rt, h, a.scrape_interval));
    let (out, cpu) = crate::cpu::measure(|| rig.rt.block_on(rig.workload.run(rig.target.clone(), rig.vocab, lp)));
    let LevelOutput { run, tasks } = out;
    let measured: Vec<&ClientRecord> = run.measured().collect();
    // The engine's and the server's state over the measured window (the summary's): from the
    // first measured request's intended send to the last one's end, a warm-up burst left out.
    let window = measured.iter().map(|r| r.intended).min().zip(measured.iter().map(|r| r.end).max());
    // The server's histograms over the measured requests: from when the last warm-up request
    // ended to when the last measured one did.
    let last_end = |p: Phase| run.records.iter().filter(|r| run.phase(r) == p).map(|r| r.end).max();
    let measured_ends = last_end(Phase::Measured).map(|end| (last_end(Phase::Warmup), end));
    let server = scraper.map(|s| s.finish(&rig.rt, measured_ends, window));
    let steps: Vec<StepRecord> = rig.steps.drain().collect();
    let summary = summarize(level.load, &measured, &plan.slos);
    let open_loop = match level.arrival {
        Arrival::Rate { rate, .. } => Some(rate),
        Arrival::Closed { .. } | Arrival::Burst { .. } => None,
    };
    let sent: Vec<f64> = measured.iter().map(|r| r.sent.as_secs()).collect();
    let harness = Harness::new(
        cpu,
        run.records.len(),
        summary.send_lag.as_ref().map_or(0.0, |x| x.p99),
        open_loop.map(|rate| (sent.as_slice(), rate)),
        rig.engine_in_process(),
    );
    let task_summary = (!tasks.is_empty()).then(|| goodput_metrics::agent::summarize_tasks(&tasks));
    let (agent, rag) = match rig.workload {
        Workload::Rag(_) => (None, task_summary),
        _ => (task_summary, None),
    };
    let engine = EngineLevel::of(&in_window(&steps, window));
    let (warmup_requests, cooldown_requests) = run.excluded();
    let report = LevelReport {
        vllm: vllm_keys(&summary),
        turns: goodput_metrics::turns::by_turn(&measured),
        summary,
        warmup_requests,
        cooldown_requests,
        occupancy: Occupancy::of(&engine, server.as_ref()),
        engine,
        server,
        harness,
        agent,
        rag,
    };
    let series = goodput_metrics::engine::series(&steps, run.start, a.series_interval.as_secs_f64());
    Finished { report, steps, series }
}

/// The steps that overlap the measured window (all of them when there is none in it).
fn in_window(steps: &[StepRecord], window: Option<(Stamp, Stamp)>) -> Vec<StepRecord> {
    let inside: Vec<StepRecord> = match window {
        Some((from, to)) => steps.iter().filter(|s| s.end >= from && s.start <= to).cloned().collect(),
        None => Vec::new(),
    };
    if inside.is_empty() {
        steps.to_vec()
    } else {
        inside
    }
}
