//! `summary.json`: the typed run summary — the setup a reader needs to reproduce the run, one
//! [`LevelReport`] per level, and the capacity verdict computed once from the levels and
//! stored beside them (readers show it, never recompute it).

use crate::level::LevelReport;
use crate::prediction::Prediction;
use goodput_metrics::capacity::Verdict;
use goodput_metrics::slo::Slo;
use serde::{Deserialize, Serialize};

/// The results format this goodput writes. 1: results written before the typed summary
/// (no `format` key): still read, their capacity verdict computed once on reading.
pub const FORMAT: u32 = 2;

/// Everything `summary.json` holds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunSummary {
    /// [`FORMAT`] of the goodput that wrote it (1 when absent).
    #[serde(default = "format_1")]
    #[schemars(range(min = 2))]
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
    pub prediction: Option<Prediction>,
    /// The command line of the run (`goodput run …`), so `goodput plan --check` can simulate
    /// the same sweep. Empty in results written before it was kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// `--shard`: this run is one shard of a run split over processes (its records are the
    /// shard's slice of each level's schedule).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<goodput_core::shard::Shard>,
    /// `--start-at`: the moment the first level was to start (seconds since the Unix epoch, on
    /// the reference's clock with `--clock-ref`), and how late it started, seconds (0 when it
    /// waited for it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_at: Option<StartAt>,
    /// The wall time of the run's stamp 0 and, with `--clock-ref`, the machine's offset from a
    /// reference clock. Absent in results written before runs kept it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<crate::clock::ClockInfo>,
    /// `goodput merge`: the shards this run was built from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged: Option<crate::clock::Merged>,
    /// `--search` (the default without levels given): its bounds and why it stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<SearchRecord>,
    /// `--soak`: the usable capacity run over time, in windows, and whether it held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soak: Option<goodput_metrics::soak::Soak>,
}

/// A search for the limit: how far it could go and why it stopped.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SearchRecord {
    /// `--max-users` or `--max-rate`: the highest load it could add.
    pub max_load: f64,
    /// `--search-budget`, seconds.
    pub budget_s: f64,
    /// Why it added no more levels (`None` while it runs).
    pub stopped: Option<SearchStop>,
}

/// Why a search added no more levels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SearchStop {
    /// A level's SLOs did not hold with 95 % confidence: the limit is below it.
    LimitFound,
    /// The highest level reached `max_load`.
    MaxLoad,
    /// The next level would have ended past the budget.
    Budget,
    /// The run was interrupted.
    Interrupted,
}

/// When a `--start-at` run was to start and how late it did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StartAt {
    pub unix_s: f64,
    /// Started this many seconds after the moment (0 when it waited for it).
    pub late_s: f64,
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
    /// Prefill tokens past which a step started no further prompt (`None`: no cap; older
    /// summaries have none).
    #[serde(default)]
    pub max_prefill_tokens: Option<usize>,
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

impl RunSummary {
    /// The capacity verdict over the levels ([`Verdict::of`]): what a writer stores.
    pub fn verdict_of(levels: &[LevelReport]) -> Verdict {
        crate::level::verdict_of(levels)
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
