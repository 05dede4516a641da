//! What a run will do, checked once before anything is loaded (ripgrep's "low args → high
//! args" step): one [`RunSpec`] owns everything the rig, the sweep and each level need — the
//! SLOs, the model's shape, the workload, the target ([`TargetSpec`]: the in-process engine,
//! goodput's own server on loopback, or a server's URL, each with what it needs), the load
//! levels and how refinement adds levels, and the files to write. These are the checked
//! types; the command line builds them from its flags (checking each by its flag's name), a
//! program builds them directly.
//!
//! Here: the run as a whole; [`levels`]: the sweep's levels, their bounds and counts;
//! [`load`]: how the levels are paced; [`target`]: the target. The rest of `run` imports the
//! checked types from here; nothing here imports the rest of `run`.

mod bounds;
mod error;
mod levels;
mod load;
mod start;
mod target;

pub use bounds::{MAX_DURATION, MAX_LEVELS, MAX_RATE, MAX_REQUESTS, MAX_USERS};
pub use error::{SpecError, StartAtError, StartError};
pub use levels::SEARCH_START;
pub use levels::{
    capacity_levels, check_distinct, check_slice, doubling, Counts, LevelSpec, PerLevel, RefineKind, Search, Span,
};
pub use load::{in_flight, Pacing};
pub use start::{parse_start_at, start_within, MAX_START_AHEAD, MAX_START_BEHIND};
pub use target::{HttpSpec, Simulation, TargetSpec, APIS, MAX_TOKENS_FIELDS};

use crate::workload::WorkloadSpec;
use goodput_core::ModelSpec;
use goodput_engine::source::{EngineOptions, ModelSource};
use goodput_metrics::slo::Slo;
use goodput_results::{EngineSettings, LoadUnit};
use goodput_workload::RetryPolicy;
use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::Duration;

/// The run's files: its directory (`--out`) and the exports rewritten after every level.
pub struct Outputs {
    /// `--out`, with `--overwrite` and `--report`.
    pub out: Option<OutDir>,
    pub export_json: Option<PathBuf>,
    pub export_csv: Option<PathBuf>,
    pub export_markdown: Option<PathBuf>,
    /// The command line stored in the summary, credentials already redacted (a config file's
    /// run as the flags it expands to); `None`: none stored.
    pub command: Option<Vec<String>>,
    /// A config file's inline scenario, written into `--out` as `scenario.toml`.
    pub scenario_toml: Option<String>,
    /// `--metrics-port` (and `--metrics-host`): where the run's live metrics are served.
    pub metrics: Option<std::net::SocketAddr>,
}

impl Outputs {
    /// `--out` takes no second run (unless replaced), and each export goes into a directory
    /// that exists: found out now, not after the first level.
    pub fn check(&self) -> Result<(), SpecError> {
        if let Some(o) = &self.out {
            goodput_results::files::check_out_dir(&o.dir, o.overwrite)?;
        }
        let exports = [
            ("--export-json", &self.export_json),
            ("--export-csv", &self.export_csv),
            ("--export-markdown", &self.export_markdown),
        ];
        for (flag, path) in exports.into_iter().filter_map(|(f, p)| Some((f, p.as_deref()?))) {
            let dir = path.parent().unwrap_or(std::path::Path::new(""));
            if !(dir.as_os_str().is_empty() || dir.is_dir()) {
                return Err(SpecError::ExportDir { flag, path: path.to_path_buf(), dir: dir.to_path_buf() });
            }
        }
        Ok(())
    }
}

/// The run's directory.
pub struct OutDir {
    pub dir: PathBuf,
    /// Replace the run there.
    pub overwrite: bool,
    /// Write `report.html` at the end.
    pub report: bool,
}

/// A validated `goodput run`: everything the rig, the sweep and its levels need.
pub struct RunSpec {
    pub slos: Vec<Slo>,
    pub model: ModelSpec,
    /// How the model is loaded (its files, tokenizer, device and dtype), as given.
    pub model_args: ModelSource,
    /// The engine's flags as given: the setup's settings, and what must hold before a model
    /// loads (the checked configuration is the target's).
    pub engine: EngineOptions,
    /// The longest sequence the engine (or the prompts) may reach.
    pub max_len: usize,
    pub workload: WorkloadSpec,
    pub target: TargetSpec,
    pub unit: LoadUnit,
    /// The sweep's levels, in the order given.
    pub levels: VecDeque<LevelSpec>,
    /// `--rate-of-limit`: the open-loop levels' rates are these multiples of the rate at which
    /// the simulated twin saturates on this workload; the sweep sets the rates as it starts
    /// (`run::limit::levels`), and here each level's rate is its multiple.
    pub rate_multiples: Option<Vec<f64>>,
    pub refine: RefineKind,
    /// The most refinement levels to add (`--refine`).
    pub refine_levels: usize,
    /// `--search` (the default without levels given): the sweep goes on until it finds the
    /// limit or a bound.
    pub search: Option<Search>,
    /// Stop the sweep at the first level whose SLOs break (`goodput capacity`).
    pub stop_at_first_failure: bool,
    /// `--soak`: how long to run the usable capacity after the sweep, in how many windows.
    pub soak: Option<(Duration, usize)>,
    /// `--shard`: the part of each level's schedule this process sends.
    pub shard: Option<goodput_workload::shard::Shard>,
    /// `--start-at`: when the first level starts.
    pub start_at: Option<std::time::SystemTime>,
    /// `--clock-ref`: the reference clock measured before and after the sweep.
    pub clock_ref: Option<crate::clockref::ClockRef>,
    pub per_level: PerLevel,
    /// The cap on requests in flight, the ramp and the think jitter.
    pub pacing: Pacing,
    pub retry: RetryPolicy,
    /// A request without its end marker after this long times out.
    pub timeout: Duration,
    /// CPUs the engine thread (with its compute threads) and the load generator are pinned to.
    pub engine_cpus: Option<Vec<usize>>,
    pub harness_cpus: Option<Vec<usize>>,
    /// HTTP targets: how often /metrics is scraped during a level.
    pub scrape_interval: Duration,
    /// Interval of the engine time series.
    pub series_interval: Duration,
    /// The run's seed: `--seed`, or drawn for this run ([`RunSpec::seed_drawn`]).
    pub seed: u64,
    pub seed_drawn: bool,
    pub outputs: Outputs,
    /// A hint for the view (`--quiet`): progress lines left out, only warnings and the
    /// outcome shown. The library prints nothing itself.
    pub quiet: bool,
    /// A hint for the view (`--explain`): each level's full line, its ramp and its three
    /// layers printed as it ends, rather than one short line.
    pub explain: bool,
}

impl RunSpec {
    /// The engine's settings as given (for the setup).
    pub fn engine_settings(&self) -> EngineSettings {
        let e = &self.engine;
        // goodput's engine runs: the cap it takes on its device. A simulated one takes its
        // profile's unless the run sets one, and a server elsewhere its own: as given.
        let engine_runs = matches!(
            self.target,
            TargetSpec::InProcess { simulation: None | Some(Simulation::Predict(_)), .. }
                | TargetSpec::HttpLocal { .. }
        );
        let cap = if engine_runs {
            goodput_engine::prefill_cap(e.max_prefill_tokens, self.model_args.on_cpu())
        } else {
            e.max_prefill_tokens
        };
        EngineSettings {
            block_size: e.block_size,
            kv_blocks: e.kv_blocks,
            kv_memory_bytes: Some(e.kv_memory_bytes()),
            max_num_batched_tokens: e.max_num_batched_tokens,
            max_prefill_tokens: cap,
            max_num_seqs: e.max_num_seqs,
            max_model_len: self.max_len,
            prefix_caching: e.prefix_caching,
        }
    }

    /// How many requests (or units) `level` measures, warms up with and cools down with.
    pub fn counts(&self, level: &LevelSpec, sessions: bool) -> Counts {
        Counts::of(&self.per_level, level, sessions)
    }

    /// The largest level's connections: the level, its requests in flight, whether those are
    /// a bound ([`load::in_flight`]), and the sockets each holds in this process (1 against
    /// another process's server, 2 against goodput's own); `None` without HTTP (the
    /// in-process engine).
    pub fn connections(&self) -> Option<(&LevelSpec, u64, bool, u64)> {
        let sides = match &self.target {
            TargetSpec::InProcess { .. } => return None,
            TargetSpec::HttpLocal { .. } => 2,
            TargetSpec::Url { .. } => 1,
        };
        let with_flight = |l| (l, load::in_flight(l, self.pacing.max_in_flight, self.timeout));
        let (level, (n, bounded)) = self.levels.iter().map(with_flight).max_by_key(|(_, (n, _))| *n)?;
        Some((level, n, bounded, sides))
    }
}

impl RunSpec {
    /// `--requests` below what the SLOs' percentiles need for an interval closed above: said
    /// before the run, since its levels can then hold their SLOs only "not significantly".
    pub fn few_requests(&self) -> Option<String> {
        let (n, need) = (self.per_level.requests?, self.per_level.min_requests);
        (n < need).then(|| {
            format!(
                "--requests {n}: the SLOs' percentiles need {need} measured requests per level for a 95 % interval closed above (72 for a P95, 368 for a P99); with fewer, a level's percentile SLOs hold only \"not significantly\" and usable capacity is not established"
            )
        })
    }
}
