//! One finished level as `summary.json` stores it ([`LevelReport`]), and the capacity verdict
//! over levels ([`verdict_of`]): what a run's summary and a prediction's simulated twin both
//! hold, so neither needs the other.

use crate::harness::Harness;
use crate::vllm::VllmKeys;
use goodput_metrics::agent::TaskSummary;
use goodput_metrics::capacity::{level_queue_time, LevelOutcome, QueueSource, RetryShare, Verdict};
use goodput_metrics::level::LevelSummary;
use goodput_metrics::occupancy::{EngineLevel, Occupancy};
use goodput_metrics::server::ServerSide;
use goodput_metrics::turns::TurnSummary;
use serde::{Deserialize, Serialize};

/// One finished level: the service summary, the engine's side and the harness's own.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LevelReport {
    pub summary: LevelSummary,
    /// The level was cut short (the run was interrupted during it): its numbers cover the
    /// requests that finished before it stopped.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub partial: bool,
    /// When the level's schedule started (time 0 of its arrivals), seconds on the run's clock
    /// (`goodput merge` lines up the shards of a level by it). Absent in results written
    /// before levels kept it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_s: Option<f64>,
    /// Open loops, traces and bursts: the requests of the level's schedule it went through,
    /// every shard's included (its ids run from the level's first id); `goodput merge` refuses
    /// a shard's record beyond it. Absent for closed loops, sessions, an interrupted level
    /// whose grace ran out, and results written before levels kept it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<u64>,
    /// Requests run but left out of `summary`: warm-up and cool-down.
    pub warmup_requests: usize,
    pub cooldown_requests: usize,
    /// The engine's steps over the measured window (from the first measured request's
    /// intended send to the last one's end), as the summary's; the time series keeps all.
    pub engine: EngineLevel,
    /// HTTP targets: the server's own histograms over the level and its gauges over time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<ServerSide>,
    /// Running, waiting and KV usage over the level ([`Occupancy::of`]); `None` unknown.
    #[serde(default)]
    pub occupancy: Option<Occupancy>,
    pub harness: Harness,
    /// Multi-turn runs (and agents, by call): the requests grouped by turn index.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub turns: Vec<TurnSummary>,
    /// Runs of sessions (multi-turn, agents, a trace's sessions): what they re-sent, what the
    /// prefix cache served, and which turns found their session's context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions: Option<goodput_metrics::sessions::SessionSummary>,
    /// Agent runs: task-level numbers (task E2E, calls per task, tool-wait share, steps).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<TaskSummary>,
    /// RAG runs: the queries' stage timeline (embed, retrieve, rerank, assemble, model call).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rag: Option<TaskSummary>,
    /// Prompt tokens the target served from its prefix cache over the measured requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_cache: Option<goodput_metrics::cache::PrefixHits>,
    /// The machine during the level: what else used its CPUs, steal, the speed probe's drift
    /// ([`goodput_metrics::machine::MachineLoad::busy`] flags it). Absent in results written
    /// before it was watched, and for a merged or simulated level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<goodput_metrics::machine::MachineLoad>,
    /// The level's steady window (ramp and drain left out), which its throughputs are
    /// counted over; an open loop's over-saturation ([`goodput_metrics::steady`]). Absent in
    /// results written before it was found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steady: Option<goodput_metrics::steady::Steady>,
    /// An open-loop level stopped early because its queue grew without bound
    /// ([`goodput_metrics::saturation`]): its requests in flight then were abandoned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saturated: Option<goodput_metrics::saturation::SaturationStop>,
    /// vLLM `bench serve`'s keys for the same quantities (`mean_ttft_ms`, `p99_tpot_ms`,
    /// `output_throughput`, …), so dashboards built on its files read ours. Written from
    /// `summary` ([`crate::vllm_keys`]); nothing of goodput reads them.
    #[serde(flatten)]
    pub vllm: VllmKeys,
    /// AIPerf's names for the same quantities (`time_to_first_output_token`, …), written from
    /// `summary` ([`crate::aiperf_keys`]); nothing of goodput reads them.
    #[serde(default)]
    pub aiperf: crate::aiperf::AiperfKeys,
}

impl LevelReport {
    /// The level's wait for the knee, and where it comes from ([`level_queue_time`]): the
    /// median `engine_wait` (handoff into the engine plus queue: all the waiting a request
    /// does before it is computed), the median `queue_time` in results that predate it, else
    /// the server's mean queue time from its /metrics.
    pub fn queue_time(&self) -> Option<(f64, QueueSource)> {
        let s = &self.summary;
        let stamps = s.engine_wait.as_ref().or(s.queue_time.as_ref()).map(|q| q.p50);
        level_queue_time(stamps, self.server.as_ref().and_then(ServerSide::queue_mean))
    }

    /// The level's queue grew without bound (stopped early, or seen after it ran): its
    /// latencies grow with its length, so its SLOs cannot hold whatever its percentiles say.
    pub fn oversaturated(&self) -> bool {
        self.saturated.is_some() || self.steady.as_ref().is_some_and(|s| s.oversaturated.is_some())
    }

    /// What the capacity verdict needs of this level.
    pub fn outcome(&self) -> LevelOutcome {
        LevelOutcome {
            load: self.summary.load,
            slos_hold: self.summary.slos_hold() && !self.oversaturated(),
            surely_holds: self.summary.slos_surely_hold() && !self.oversaturated(),
            slo_used: self.summary.most_used(),
            output_throughput: self.summary.output_throughput,
            queue_time: self.queue_time().map(|q| q.0),
        }
    }
}

/// The capacity verdict over `levels` ([`Verdict::of`]): what a writer stores, for a run's
/// levels and a prediction's alike.
pub fn verdict_of(levels: &[LevelReport]) -> Verdict {
    let outcomes: Vec<LevelOutcome> = levels.iter().map(LevelReport::outcome).collect();
    let sources: Vec<QueueSource> = levels.iter().filter_map(|l| Some(l.queue_time()?.1)).collect();
    let shares: Vec<RetryShare> =
        levels.iter().map(|l| RetryShare { load: l.summary.load, share: l.summary.retry_share }).collect();
    Verdict::of(&outcomes, &sources, &shares)
}
