//! `summary.json`: the typed run summary — the setup a reader needs to reproduce the run, one
//! [`LevelReport`] per level, and the capacity verdict computed once from the levels and
//! stored beside them (readers show it, never recompute it).

use crate::harness::Harness;
use goodput_metrics::agent::TaskSummary;
use goodput_metrics::capacity::{level_queue_time, LevelOutcome, QueueSource, RetryShare, Verdict};
use goodput_metrics::level::LevelSummary;
use goodput_metrics::occupancy::{EngineLevel, Occupancy};
use goodput_metrics::server::ServerSide;
use goodput_metrics::slo::Slo;
use goodput_metrics::turns::TurnSummary;
use goodput_metrics::Summary;
use serde::{Deserialize, Serialize};

/// The results format this goodput writes. 1: results written before the typed summary
/// (no `format` key): still read, their capacity verdict computed once on reading.
pub const FORMAT: u32 = 2;

/// Everything `summary.json` holds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunSummary {
    /// [`FORMAT`] of the goodput that wrote it (1 when absent).
    #[serde(default = "format_1")]
    pub format: u32,
    pub goodput_version: String,
    /// The model's catalog name.
    pub model: String,
    /// Weights: dummy (seeded) or where the real ones came from.
    pub weights: String,
    /// `cpu`, the CUDA device, or `remote` for another process's server.
    pub device: String,
    /// Seed of the prompts, lengths and arrivals (`--seed N` repeats them).
    pub seed: u64,
    /// The seed was drawn for this run (no `--seed`), so its prompts are new to any server.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub seed_drawn: bool,
    /// Where requests went: in-process, http-local or the server's URL.
    pub target: String,
    pub engine: EngineSettings,
    pub machine: Machine,
    /// Where the engine and the harness ran (CPU lists in the kernel's notation).
    pub cpus: Pinning,
    pub retry: RetrySetting,
    /// The workload's own settings as its crate wrote them. Opaque here on purpose: the
    /// workload crate (scenario, multi-turn, agent, RAG types) sits beside this one, not
    /// below it; readers take only [`RunSummary::workload`].
    pub scenario: serde_json::Value,
    /// The workload's name and description, for the conclusion and the charts.
    #[serde(default)]
    pub workload: WorkloadInfo,
    pub load_unit: LoadUnit,
    pub slos: Vec<Slo>,
    /// The levels run so far, by load ascending.
    pub levels: Vec<LevelReport>,
    /// The capacity verdict over `levels`, stored when written (filled on reading format 1).
    #[serde(default)]
    pub capacity: Option<Verdict>,
    /// `false` while the run is going and when it ended early (interrupted, or killed: the
    /// summary of the last finished level stays); `true` once it finished. Absent in results
    /// written before runs said so, which were only written whole: read as `true`.
    #[serde(default = "yes")]
    pub complete: bool,
    /// `--predict`: the simulated twin of every level, from a profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prediction: Option<crate::prediction::Prediction>,
    /// The command line of the run (`goodput run …`), so `goodput plan --check` can simulate
    /// the same sweep. Empty in results written before it was kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
}

fn format_1() -> u32 {
    1
}

fn yes() -> bool {
    true
}

/// The engine's settings (block size, pool, budgets).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EngineSettings {
    pub block_size: usize,
    pub kv_blocks: Option<usize>,
    pub kv_memory_bytes: Option<u64>,
    pub max_num_batched_tokens: usize,
    pub max_num_seqs: usize,
    pub max_model_len: usize,
    pub prefix_caching: bool,
}

/// The machine the run measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Machine {
    pub cpu: String,
    pub logical_cpus: usize,
    pub memory_gib: f64,
    pub kernel: String,
}

/// Where the engine and the harness were pinned.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Pinning {
    pub engine: Option<String>,
    pub harness: Option<String>,
}

/// The retry policy of the run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RetrySetting {
    pub max: u32,
    pub backoff_s: f64,
}

/// The workload as a reader names it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WorkloadInfo {
    /// `short-qa`, `multi-turn`, `agent`, `rag`, or a scenario file's name.
    pub name: String,
    /// One line: lengths, turns, steps.
    pub description: String,
    /// The lengths alone, for the conclusion's first sentence.
    pub lengths: String,
}

/// What a level's load counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub enum LoadUnit {
    /// Closed loop: concurrent virtual users.
    #[default]
    #[serde(rename = "users")]
    Users,
    /// Open loop: requests per second.
    #[serde(rename = "req/s")]
    Rate,
    /// A burst: requests due at once.
    #[serde(rename = "requests at once")]
    Burst,
}

impl LoadUnit {
    pub fn as_str(self) -> &'static str {
        match self {
            LoadUnit::Users => "users",
            LoadUnit::Rate => "req/s",
            LoadUnit::Burst => "requests at once",
        }
    }

    /// Whether the levels double (1, 2, 4, … users; bursts), so a log2 axis reads best.
    pub fn doubling(levels: &[f64]) -> bool {
        levels.len() >= 3 && levels.iter().all(|&l| l > 0.0) && {
            let (lo, hi) = levels.iter().fold((f64::MAX, 0.0f64), |(a, b), &l| (a.min(l), b.max(l)));
            hi / lo >= 8.0
        }
    }
}

impl std::fmt::Display for LoadUnit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One finished level: the service summary, the engine's side and the harness's own.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LevelReport {
    pub summary: LevelSummary,
    /// The level was cut short (the run was interrupted during it): its numbers cover the
    /// requests that finished before it stopped.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub partial: bool,
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
    /// Agent runs: task-level numbers (task E2E, calls per task, tool-wait share, steps).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<TaskSummary>,
    /// RAG runs: the queries' stage timeline (embed, retrieve, rerank, assemble, model call).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rag: Option<TaskSummary>,
    /// Prompt tokens the target served from its prefix cache over the measured requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_cache: Option<goodput_metrics::cache::PrefixHits>,
    /// vLLM `bench serve`'s keys for the same quantities (`mean_ttft_ms`, `p99_tpot_ms`,
    /// `output_throughput`, …), so dashboards built on its files read ours. Written from
    /// `summary` ([`vllm_keys`]); nothing of goodput reads them.
    #[serde(flatten)]
    pub vllm: VllmKeys,
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

    /// What the capacity verdict needs of this level.
    pub fn outcome(&self) -> LevelOutcome {
        LevelOutcome {
            load: self.summary.load,
            slos_hold: self.summary.slos_hold(),
            output_throughput: self.summary.output_throughput,
            queue_time: self.queue_time().map(|q| q.0),
        }
    }
}

/// A level's prefix-cache hits in words, after a `; ` (nothing when unknown).
pub fn prefix_text(h: Option<&goodput_metrics::cache::PrefixHits>) -> String {
    use goodput_metrics::cache::HitSource;
    let Some(h) = h else { return String::new() };
    let Some(rate) = h.hit_rate() else { return String::new() };
    let source = match h.source {
        HitSource::Engine => "engine",
        HitSource::Usage => "usage",
        HitSource::Metrics => "/metrics",
    };
    let requests = match (h.requests_with_hits, h.requests) {
        (Some(hit), Some(n)) => format!(", {hit} of {n} requests hit"),
        _ => String::new(),
    };
    format!("; prefix cache {:.1} % of prompt tokens ({source}{requests})", rate * 100.0)
}

/// A level's occupancy in words, for the console and the report: running and waiting
/// (means and maxima), KV blocks, preemptions, and where the numbers came from.
pub fn occupancy_text(o: Option<&Occupancy>) -> String {
    let Some(o) = o else { return "occupancy unknown (no engine in this process, no /metrics)".into() };
    let n = |x: f64, d: usize| if x.is_finite() { format!("{x:.d$}") } else { "-".into() };
    format!(
        "running mean {} (max {}), waiting mean {} (max {}), KV blocks mean {} % (max {} %), {}{}",
        n(o.running_mean, 1),
        n(o.running_max, 0),
        n(o.waiting_mean, 1),
        n(o.waiting_max, 0),
        n(o.kv_mean * 100.0, 0),
        n(o.kv_max * 100.0, 0),
        o.preemptions.map_or("preemptions unknown".into(), |p| format!("{p} preemptions")),
        if o.from_server { " (from the server's /metrics)" } else { "" },
    )
}

/// Declares [`VllmKeys`]: `completed`, then optional numbers (left out when unknown).
macro_rules! vllm_keys_struct {
    ($($name:ident),* $(,)?) => {
        /// vLLM `bench serve`'s keys of a level, written beside the contract's names: counts and
        /// rates as vLLM names them, latencies in milliseconds with `mean_/median_/std_/pNN_`
        /// prefixes. Keys goodput does not know are ignored on reading.
        #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
        pub struct VllmKeys {
            #[serde(default)]
            pub completed: usize,
            #[serde(default)]
            pub failed: usize,
            #[serde(default)]
            pub total_input_tokens: usize,
            #[serde(default)]
            pub total_output_tokens: usize,
            /// Requests per second sent (open loop), `"inf"` (closed loop and bursts).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub request_rate: Option<RequestRate>,
            /// Closed loop: the users (vLLM's `--max-concurrency`).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub max_concurrency: Option<usize>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub max_concurrent_requests: Option<usize>,
            $(
                #[serde(default, skip_serializing_if = "Option::is_none")]
                pub $name: Option<f64>,
            )*
        }
    };
}

vllm_keys_struct!(
    duration,
    burstiness,
    max_output_tokens_per_s,
    request_throughput,
    output_throughput,
    total_token_throughput,
    request_goodput,
    mean_ttft_ms,
    median_ttft_ms,
    std_ttft_ms,
    p90_ttft_ms,
    p95_ttft_ms,
    p99_ttft_ms,
    mean_tpot_ms,
    median_tpot_ms,
    std_tpot_ms,
    p90_tpot_ms,
    p95_tpot_ms,
    p99_tpot_ms,
    mean_itl_ms,
    median_itl_ms,
    std_itl_ms,
    p90_itl_ms,
    p95_itl_ms,
    p99_itl_ms,
    mean_e2el_ms,
    median_e2el_ms,
    std_e2el_ms,
    p90_e2el_ms,
    p95_e2el_ms,
    p99_e2el_ms,
);

/// vLLM's `request_rate`: a number, or `"inf"` when requests are not paced by a rate.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum RequestRate {
    PerSecond(f64),
    Unlimited(Inf),
}

/// The string `"inf"`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub enum Inf {
    #[serde(rename = "inf")]
    Inf,
}

/// How a level sent its requests and what peaked, for the vLLM keys beyond the summary.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct VllmLoad {
    pub request_rate: Option<RequestRate>,
    pub max_concurrency: Option<usize>,
    pub burstiness: Option<f64>,
    /// [`goodput_metrics::peaks::max_output_tokens_per_s`].
    pub max_output_tokens_per_s: Option<f64>,
    /// [`goodput_metrics::peaks::max_concurrent_requests`].
    pub max_concurrent_requests: Option<usize>,
}

/// Mean, median, standard deviation, P90, P95, P99 of `s` in milliseconds. The standard
/// deviation is the population's, as vLLM's (`np.std`): goodput's sample one × √((n−1)/n).
fn ms6(s: &Option<Summary>) -> [Option<f64>; 6] {
    let x = |f: &dyn Fn(&Summary) -> f64| s.as_ref().map(|s| f(s) * 1e3).filter(|v| v.is_finite());
    let population = |s: &Summary| s.stddev * ((s.n.max(1) - 1) as f64 / s.n.max(1) as f64).sqrt();
    [x(&|s| s.mean), x(&|s| s.p50), x(&population), x(&|s| s.p90), x(&|s| s.p95), x(&|s| s.p99)]
}

/// vLLM `bench serve`'s keys of a level, from its summary and how it was loaded.
pub fn vllm_keys(s: &LevelSummary, load: VllmLoad) -> VllmKeys {
    let finite = |v: f64| Some(v).filter(|v| v.is_finite());
    let mut k = VllmKeys {
        completed: s.completed,
        failed: s.requests - s.completed,
        total_input_tokens: s.total_input_tokens,
        total_output_tokens: s.total_output_tokens,
        duration: finite(s.window_s),
        request_rate: load.request_rate,
        max_concurrency: load.max_concurrency,
        burstiness: load.burstiness,
        max_output_tokens_per_s: load.max_output_tokens_per_s,
        max_concurrent_requests: load.max_concurrent_requests,
        request_throughput: finite(s.request_throughput),
        output_throughput: finite(s.output_throughput),
        total_token_throughput: finite(s.input_throughput + s.output_throughput),
        request_goodput: finite(s.goodput),
        ..Default::default()
    };
    [k.mean_ttft_ms, k.median_ttft_ms, k.std_ttft_ms, k.p90_ttft_ms, k.p95_ttft_ms, k.p99_ttft_ms] = ms6(&s.ttft);
    [k.mean_tpot_ms, k.median_tpot_ms, k.std_tpot_ms, k.p90_tpot_ms, k.p95_tpot_ms, k.p99_tpot_ms] = ms6(&s.tpot);
    [k.mean_itl_ms, k.median_itl_ms, k.std_itl_ms, k.p90_itl_ms, k.p95_itl_ms, k.p99_itl_ms] = ms6(&s.itl);
    [k.mean_e2el_ms, k.median_e2el_ms, k.std_e2el_ms, k.p90_e2el_ms, k.p95_e2el_ms, k.p99_e2el_ms] = ms6(&s.e2e);
    k
}

impl RunSummary {
    /// The capacity verdict over the levels ([`Verdict::of`]): what a writer stores.
    pub fn verdict_of(levels: &[LevelReport]) -> Verdict {
        let outcomes: Vec<LevelOutcome> = levels.iter().map(LevelReport::outcome).collect();
        let sources: Vec<QueueSource> = levels.iter().filter_map(|l| Some(l.queue_time()?.1)).collect();
        let shares: Vec<RetryShare> =
            levels.iter().map(|l| RetryShare { load: l.summary.load, share: l.summary.retry_share }).collect();
        Verdict::of(&outcomes, &sources, &shares)
    }

    /// Adds a finished level (levels stay by load ascending) and stores the new verdict.
    pub fn push_level(&mut self, level: LevelReport) {
        self.levels.push(level);
        self.levels.sort_by(|x, y| x.summary.load.total_cmp(&y.summary.load));
        self.capacity = Some(Self::verdict_of(&self.levels));
    }

    /// The stored capacity verdict (every summary read or written has one).
    pub fn verdict(&self) -> Verdict {
        self.capacity.clone().unwrap_or_else(|| Self::verdict_of(&self.levels))
    }

    /// The level run at `load`.
    pub fn level(&self, load: f64) -> Option<&LevelReport> {
        self.levels.iter().find(|l| l.summary.load == load)
    }
}
