//! One level of `goodput run`: its plan run against the rig's target, and the level's report —
//! the service summary of its measured requests, the engine's side from its steps (or the
//! server's from its /metrics), the harness's own cost, and the task-level numbers.

use super::rig::Rig;
use super::spec::{Counts, LevelSpec, RunSpec};
use crate::target::Scraper;
use goodput_core::{ClientRecord, Phase, Stamp, StepRecord};
use goodput_metrics::cache::{HitSource, PrefixHits};
use goodput_metrics::engine::SeriesPoint;
use goodput_metrics::occupancy::{EngineLevel, Occupancy};
use goodput_metrics::saturation::{SaturationStop, Watch};
use goodput_metrics::soak::ProcessSample;
use goodput_metrics::windowed::Sending;
use goodput_results::{vllm_keys, Harness, Inf, LevelReport, OpenLoop, RequestRate, VllmLoad};
use goodput_workload::{Arrival, LevelOutput, LevelPlan, LevelRun, Ramp, RecordSink, Stop, UnitPlan, Workload};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A finished level: its report and what the files keep beside it.
pub struct Finished {
    pub report: LevelReport,
    pub steps: Vec<StepRecord>,
    pub series: Vec<SeriesPoint>,
    /// One past the highest request id the level used (a closed loop's warm-up may take more
    /// ids than planned).
    pub next_id: u64,
    /// The measured records (a soak is cut into time windows of them).
    pub measured: Vec<ClientRecord>,
    /// The target's process over the level (its memory, descriptors, connections).
    pub process: Vec<ProcessSample>,
    /// What the level warns of beyond its report (prompts served from a cache they should
    /// have missed), a line each.
    pub warnings: Vec<String>,
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

/// Where a level's records go as they end: the sink (files, and what a level cut short keeps)
/// and the live view.
#[derive(Default)]
pub struct Feeds {
    pub sink: Option<RecordSink>,
    pub progress: Option<RecordSink>,
}

/// The workload's plan of a level, its users started over `ramp`.
pub fn level_plan(
    spec: &RunSpec,
    level: &LevelSpec,
    counts: &Counts,
    first_id: u64,
    ramp: Ramp,
    feeds: Feeds,
    stop: Stop,
) -> LevelPlan {
    LevelPlan {
        arrival: level.arrival.clone(),
        duration: level.duration,
        trim: counts.trim,
        think_jitter: spec.pacing.think_jitter,
        max_in_flight: spec.pacing.max_in_flight,
        shard: spec.shard,
        unit: UnitPlan {
            users: level.arrival.users(),
            units: counts.requests,
            warmup: counts.warmup,
            cooldown: counts.cooldown,
            timeout: spec.timeout,
            retry: spec.retry,
            seed: spec.seed,
            first_id,
            sink: feeds.sink,
            stop,
            ramp,
            progress: feeds.progress,
        },
    }
}

/// How long requests in flight get to finish after an interrupt.
pub const INTERRUPT_GRACE: Duration = Duration::from_secs(5);

/// How long requests in flight get to finish after an over-saturated level is stopped: its
/// queue would take longer, and only says again what the stop says.
pub const SATURATION_GRACE: Duration = Duration::from_secs(1);

/// What a level's sink saw, for a level cut short before the workload returned its records.
pub type Seen = Arc<Mutex<Vec<(Phase, Arc<ClientRecord>)>>>;

/// What the workload gave back: whole, or (cut at the interrupt grace) the records its sink saw.
struct Ran {
    records: Vec<(Phase, ClientRecord)>,
    tasks: Vec<goodput_core::TaskRecord>,
    start: Stamp,
    partial: bool,
    /// A closed loop's ramp, when the workload returned it.
    ramp: Option<Duration>,
    /// The requests of the schedule the level went through ([`LevelRun::schedule`]).
    schedule: Option<u64>,
}

impl Ran {
    fn whole(out: LevelOutput, partial: bool) -> Self {
        let LevelOutput { run: LevelRun { records, window, start, ramp, schedule, .. }, tasks } = out;
        let records = records.into_iter().map(|r| (window.phase(&r), r)).collect();
        Ran { records, tasks, start, partial, ramp, schedule }
    }

    fn measured(&self) -> Vec<&ClientRecord> {
        self.records.iter().filter(|(p, _)| *p == Phase::Measured).map(|(_, r)| r).collect()
    }

    fn count(&self, phase: Phase) -> usize {
        self.records.iter().filter(|(p, _)| *p == phase).count()
    }
}

/// Runs the level's workload until it ends; once `stop` is raised (an interrupt) the
/// workload sends nothing more, and what is in flight gets [`INTERRUPT_GRACE`]. Past it, the
/// level is what `seen` holds. An open loop offered `offered` requests per second is watched
/// for over-saturation ([`goodput_metrics::saturation`]) and stopped the same way once its
/// queue grows without bound, its requests in flight given [`SATURATION_GRACE`].
fn drive(
    rig: &Rig,
    mut lp: LevelPlan,
    stop: &Stop,
    seen: &Seen,
    offered: Option<f64>,
) -> (Ran, Option<SaturationStop>) {
    let clock = goodput_core::Target::clock(&*rig.target);
    let start = clock.now();
    // The level's own stop: raised by an interrupt, or by the watch.
    let level_stop = Stop::default();
    lp.unit.stop = level_stop.clone();
    let mut watch = offered.filter(|_| !rig.simulated).map(Watch::new);
    let mut saturated = None;
    let out = rig.block_on(async {
        let work = rig.workload.run(rig.target.clone(), rig.vocab, lp);
        tokio::pin!(work);
        let stopped = async {
            let (mut read, mut judged) = (0, 0.0);
            while !stop.raised() {
                tokio::time::sleep(Duration::from_millis(20)).await;
                let Some(w) = watch.as_mut() else { continue };
                let now = clock.now().secs_since(start);
                if now - judged < 0.5 {
                    continue;
                }
                judged = now;
                let ended = seen.lock().unwrap_or_else(|e| e.into_inner());
                for (_, r) in &ended[read..] {
                    w.ended(r.intended.secs_since(start), r.end.secs_since(start));
                }
                read = ended.len();
                drop(ended);
                if let Some(s) = w.judge(now) {
                    saturated = Some(s);
                    break;
                }
            }
            level_stop.raise();
            if saturated.is_some() {
                SATURATION_GRACE
            } else {
                INTERRUPT_GRACE
            }
        };
        tokio::select! {
            out = &mut work => Ok(out),
            grace = stopped => tokio::time::timeout(grace, work).await.map_err(|_| ()),
        }
    });
    let ran = match out {
        Ok(out) => Ran::whole(out, stop.raised()),
        Err(()) => {
            let seen = std::mem::take(&mut *seen.lock().unwrap_or_else(|e| e.into_inner()));
            let records = seen.into_iter().map(|(p, r)| (p, Arc::unwrap_or_clone(r))).collect();
            Ran { records, tasks: Vec::new(), start, partial: stop.raised(), ramp: None, schedule: None }
        }
    };
    (ran, saturated)
}

/// Runs one level: the workload against the target (its /metrics scraped around it for an
/// HTTP target), then the level's report over its measured window.
pub fn run(rig: &Rig, spec: &RunSpec, level: &LevelSpec, lp: LevelPlan, stop: &Stop, seen: &Seen) -> Finished {
    let _ = rig.steps.drain();
    let scraper = rig.http().map(|h| Scraper::start(&rig.rt, h, spec.scrape_interval));
    // Without /metrics to scrape, the in-process engine's process is this one.
    let sampler = (scraper.is_none() && rig.engine_in_process() && !rig.simulated)
        .then(|| super::process::Sampler::start(goodput_core::Target::clock(&*rig.target)));
    let here = spec.target.elsewhere_on_this_machine();
    // An open loop at a steady rate is watched for over-saturation (a shard sends its part).
    let offered = match level.arrival {
        Arrival::Rate { rate, .. } => Some(rate / spec.shard.map_or(1.0, |s| f64::from(s.count))),
        Arrival::Closed { .. } | Arrival::Burst { .. } | Arrival::Trace { .. } => None,
    };
    let drive = || drive(rig, lp, stop, seen, offered);
    let (((ran, saturated), cpu), machine) =
        crate::cpu::watched(here, || crate::cpu::measure_with(&rig.worker_threads(), drive));
    // A simulated level computes nothing on the machine it would describe.
    let machine = machine.filter(|_| !rig.simulated);
    let measured = ran.measured();
    // The engine's and the server's state over the measured window (the summary's): from the
    // first measured request's intended send to the last one's end, a warm-up burst left out.
    let window = measured.iter().map(|r| r.intended).min().zip(measured.iter().map(|r| r.end).max());
    // The server's histograms over the measured requests: from when the last warm-up request
    // ended to when the last measured one did.
    let last_end = |p: Phase| ran.records.iter().filter(|(q, _)| *q == p).map(|(_, r)| r.end).max();
    let measured_ends = last_end(Phase::Measured).map(|end| (last_end(Phase::Warmup), end));
    let (server, scrapes) = scraper.map(|s| s.finish(&rig.rt, measured_ends, window)).unzip();
    let process = match sampler {
        Some(s) => s.finish(),
        None => super::process::of_scrapes(&scrapes.unwrap_or_default()),
    };
    let steps: Vec<StepRecord> = rig.steps.drain().collect();
    let every: Vec<&ClientRecord> = ran.records.iter().map(|(_, r)| r).collect();
    let sending = match level.arrival {
        Arrival::Closed { .. } => Sending::Closed,
        _ => Sending::Open { until: saturated.as_ref().map(|x| ran.start.plus(Duration::from_secs_f64(x.at_s))) },
    };
    // Percentiles over the measured requests sent in the steady window, throughputs over it.
    let (summary, steady) = goodput_metrics::windowed::summarize(level.load, &every, &measured, &spec.slos, sending);
    // A trace's gaps are its own, not a steady rate's: nothing to hold the sends against.
    let open_loop = offered;
    let sent: Vec<f64> = measured.iter().map(|r| r.sent.as_secs()).collect();
    let intended: Vec<f64> = measured.iter().map(|r| r.intended.as_secs()).collect();
    let mut harness = Harness::new(
        cpu,
        ran.records.len(),
        summary.send_lag.as_ref().map_or(0.0, |x| x.p99),
        open_loop.map(|rate| OpenLoop { sent: &sent, intended: &intended, rate }),
        rig.engine_in_process(),
    );
    harness = match level.arrival {
        Arrival::Closed { users, .. } => harness.closed_loop(users, ran.ramp.unwrap_or_default().as_secs_f64(), &sent),
        Arrival::Rate { .. } | Arrival::Trace { .. } => {
            Harness { max_concurrency: spec.pacing.max_in_flight, ..harness }
        }
        Arrival::Burst { .. } => harness,
    };
    let task_summary = (!ran.tasks.is_empty()).then(|| goodput_metrics::agent::summarize_tasks(&ran.tasks));
    let (agent, rag) = match rig.workload {
        Workload::Rag(_) => (None, task_summary),
        _ => (task_summary, None),
    };
    let engine = EngineLevel::of(&in_window(&steps, window));
    let prefix_cache = PrefixHits::of_level(&measured, server.as_ref().and_then(|s| s.prefix_cache.as_ref()));
    let warnings: Vec<String> = prefix_cache
        .filter(|h| h.contaminated() && rig.workload.unique_prompts())
        .map(|h| cache_hits(level.load, &h, spec.seed_drawn, &rig.workload))
        .into_iter()
        .collect();
    let report = LevelReport {
        steady,
        saturated,
        schedule: ran.schedule,
        prefix_cache,
        vllm: vllm_keys(&summary, vllm_load(&level.arrival, spec.pacing.max_in_flight, &measured)),
        aiperf: goodput_results::aiperf_keys(&summary),
        turns: goodput_metrics::turns::by_turn(&measured),
        sessions: goodput_metrics::sessions::summarize(&measured),
        summary,
        start_s: Some(ran.start.as_secs()),
        warmup_requests: ran.count(Phase::Warmup),
        cooldown_requests: ran.count(Phase::Cooldown),
        occupancy: Occupancy::of(&engine, server.as_ref()),
        engine,
        server,
        harness,
        agent,
        rag,
        partial: ran.partial,
        machine,
    };
    let series = goodput_metrics::engine::series(&steps, ran.start, spec.series_interval.as_secs_f64());
    let next_id = ran.records.iter().map(|(_, r)| r.id + 1).max().unwrap_or(0);
    let measured = measured.into_iter().cloned().collect();
    Finished { report, steps, series, next_id, measured, process, warnings }
}

/// vLLM's description of how a level was loaded (`request_rate`, `max_concurrency`: a closed
/// loop's users or an open loop's cap, `burstiness`) and its peaks.
fn vllm_load(arrival: &Arrival, cap: Option<usize>, measured: &[&ClientRecord]) -> VllmLoad {
    let (request_rate, max_concurrency, burstiness) = match *arrival {
        Arrival::Rate { rate, burstiness } => (RequestRate::PerSecond(rate), cap, burstiness),
        Arrival::Closed { users, .. } => (RequestRate::Unlimited(Inf::Inf), Some(users), Some(1.0)),
        Arrival::Burst { .. } => (RequestRate::Unlimited(Inf::Inf), None, Some(1.0)),
        Arrival::Trace { rate, .. } => (RequestRate::PerSecond(rate), cap, None),
    };
    VllmLoad {
        request_rate: Some(request_rate),
        max_concurrency,
        burstiness,
        max_output_tokens_per_s: goodput_metrics::peaks::max_output_tokens_per_s(measured),
        max_concurrent_requests: goodput_metrics::peaks::max_concurrent_requests(measured),
    }
}

/// A workload of unique prompts served from the prefix cache: the level measured the cache.
fn cache_hits(load: f64, h: &PrefixHits, seed_drawn: bool, workload: &Workload) -> String {
    let why = match workload {
        Workload::Dataset(d) => format!(
            "the dataset's {} prompts repeat once the run has sent them all: give a larger dataset or fewer --requests",
            d.conversations.len()
        ),
        _ if seed_drawn => {
            "its prompts are this run's own, so the server shares prefixes across them (or reports hits it did not have)"
                .into()
        }
        _ => "a run with the same --seed sent these prompts before: pass another --seed, or none (one is drawn per run)"
            .into(),
    };
    format!(
        "warning: level {load}: {:.0} % of prompt tokens beyond the {:.0} every request shares came from the prefix cache ({} of {} in all, from {}) where the \
         scenario's prompts are unique; {why}",
        h.beyond_shared_prefix().unwrap_or(0.0) * 100.0,
        h.shared_prefix_tokens,
        h.cached_tokens,
        h.prompt_tokens,
        match h.source {
            HitSource::Engine => "the engine's counts",
            HitSource::Usage => "usage.prompt_tokens_details",
            HitSource::Metrics => "the server's /metrics",
        }
    )
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
