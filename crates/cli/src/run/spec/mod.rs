//! What `goodput run` will do, checked once before anything is loaded (ripgrep's "low args →
//! high args" step): clap's `RunArgs` are consumed into one [`RunSpec`] that owns everything
//! the rig, the sweep and each level need — the SLOs, the model's shape, the workload, the
//! target ([`TargetSpec`]: the in-process engine, goodput's own server on loopback, or a
//! server's URL, each with what it needs), the load levels and how refinement adds levels,
//! and the files to write. Nothing after this step reads the arguments.
//!
//! Here: the run as a whole and the checks across flags; [`levels`]: the sweep's levels, their
//! bounds and counts; [`load`]: how the levels are paced, the SLOs and the latency columns;
//! [`target`]: the target. The rest of `run` imports the checked types from
//! here; nothing here imports the rest of `run` but its arguments (`run::args`), which import
//! nothing from here.

mod levels;
mod load;
mod target;

pub use levels::{Counts, LevelSpec, PerLevel, RefineKind, Search, MAX_DURATION, MAX_RATE, MAX_REQUESTS, MAX_USERS};
pub use load::Pacing;
pub use target::{HttpSpec, Simulation, TargetSpec};

use super::args::RunArgs;
use crate::args::Span;
use goodput_engine::source::{EngineOptions, ModelSource};
use crate::workload::{build_workload, WorkloadSpec};
use anyhow::{bail, Result};
use goodput_core::ModelSpec;
use goodput_metrics::slo::Slo;
use goodput_report::console::latency::LatencyColumns;
use goodput_results::{EngineSettings, LoadUnit};
use goodput_workload::shard::Shard;
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
    /// The command line stored in the summary: a config file's run as the flags it expands
    /// to; `None`: this process's own.
    pub command: Option<Vec<String>>,
    /// A config file's inline scenario, written into `--out` as `scenario.toml`.
    pub scenario_toml: Option<String>,
    /// `--json`: the summary on stdout, the tables on stderr.
    pub json: bool,
    /// `--metrics-port` (and `--metrics-host`): where the run's live metrics are served.
    pub metrics: Option<std::net::SocketAddr>,
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
    /// `--percentile-metrics`, `--metric-percentiles`: the final table's latency columns.
    pub latency_columns: Option<LatencyColumns>,
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
    /// Print only the final table and conclusion.
    pub quiet: bool,
}

impl RunSpec {
    /// Checks `a` and takes what every later step needs from it.
    pub fn new(a: RunArgs) -> Result<RunSpec> {
        let slos = load::slos(&a)?;
        let model = a.model.source().spec()?;
        if !(a.burstiness.is_finite() && a.burstiness > 0.0) {
            bail!("--burstiness must be a positive number (1 = Poisson), got {}", a.burstiness);
        }
        check_bounds(&a)?;
        check_spans(&a)?;
        check_exports(&a)?;
        let max_len =
            a.engine.max_model_len.unwrap_or(model.max_position_embeddings).min(model.max_position_embeddings);
        // A nonce per run unless told: the same prompts twice meet a warm prefix cache.
        let (seed, seed_drawn) = match a.seed {
            Some(s) => (s, false),
            None => (u64::from(rand::random::<u32>()), true),
        };
        let mut workload =
            build_workload(&a.scenario, a.scenario_inline.as_deref(), a.encoder.as_deref(), a.rate.is_some(), max_len)?;
        workload.dataset = crate::workload::read_dataset(&a.dataset, a.rate.is_some())?;
        workload.trace = crate::workload::read_trace(&a.trace, max_len, seed)?;
        check_workload(&a, &workload)?;
        check_shard(&a, &workload)?;
        let reasons =
            matches!(&workload.file, goodput_workload::file::ScenarioFile::Single(s) if s.reasoning_share.is_some());
        let target = TargetSpec::new(&a, &model, reasons)?;
        let burstiness = (!a.constant_rate).then_some(a.burstiness);
        let (unit, refine) = match (&a.rate, &a.stages) {
            _ if workload.trace.is_some() => (LoadUnit::Rate, RefineKind::None),
            _ if a.burst.is_some() => (LoadUnit::Burst, RefineKind::Burst),
            (Some(_), None) => (LoadUnit::Rate, RefineKind::Rate { burstiness }),
            (None, None) if a.duration.is_none() => (LoadUnit::Users, RefineKind::Users(a.think)),
            _ => (LoadUnit::Users, RefineKind::None),
        };
        let levels = match &workload.trace {
            Some(t) => levels::trace_levels(&a, t)?,
            None => levels::levels(&a, burstiness)?,
        };
        levels::check_distinct(&levels)?;
        let min_requests = goodput_metrics::interval::min_requests(&slos, MAX_REQUESTS);
        let per_level = PerLevel { requests: a.requests, min_requests, warmup: a.warmup, cooldown: a.cooldown };
        let search = search(&a, &workload, unit)?;
        check_slice(a.shard, &per_level, &levels, workload.is_sessions())?;
        let pacing = Pacing::new(&a, &levels)?;
        let latency_columns = load::latency_columns(&a);
        if levels.iter().any(|l| l.duration.is_some()) && workload.is_sessions() {
            bail!("--duration and --stages apply to single-request scenarios; use --requests for {}", workload.name());
        }
        let cpus = |c: Option<crate::args::CpuList>| c.map(|c| c.0);
        Ok(RunSpec {
            slos,
            model,
            model_args: a.model.source(),
            engine: a.engine.options(),
            max_len,
            workload,
            target,
            unit,
            levels,
            refine,
            refine_levels: if a.shard.is_some() { 0 } else { a.refine },
            stop_at_first_failure: a.stop_at_first_failure,
            soak: a.soak.map(|d| (d, a.soak_windows as usize)),
            search,
            shard: a.shard,
            start_at: a.start_at,
            clock_ref: a.clock_ref.clone(),
            per_level,
            pacing,
            latency_columns,
            retry: RetryPolicy { max: a.retries, backoff: a.retry_backoff },
            timeout: a.timeout,
            engine_cpus: cpus(a.engine_cpus),
            harness_cpus: cpus(a.harness_cpus),
            scrape_interval: a.scrape_interval,
            series_interval: a.series_interval,
            seed,
            seed_drawn,
            outputs: Outputs {
                out: a.out.map(|dir| OutDir { dir, overwrite: a.overwrite, report: a.report }),
                export_json: a.export_json,
                export_csv: a.export_csv,
                export_markdown: a.export_markdown,
                command: a.command,
                scenario_toml: a.scenario_inline,
                json: a.json,
                metrics: a.metrics_port.map(|p| std::net::SocketAddr::new(a.metrics_host, p)),
            },
            quiet: a.quiet,
        })
    }

    /// The engine's settings as given (for the setup).
    pub fn engine_settings(&self) -> EngineSettings {
        let e = &self.engine;
        EngineSettings {
            block_size: e.block_size,
            kv_blocks: e.kv_blocks,
            kv_memory_bytes: Some(e.kv_memory_bytes()),
            max_num_batched_tokens: e.max_num_batched_tokens,
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
/// `--shard` splits one schedule of single requests: an open loop, a trace or a burst, the
/// levels decided before the run (no stop at a failure, which each shard would judge alone).
fn check_shard(a: &RunArgs, w: &WorkloadSpec) -> Result<()> {
    let Some(shard) = a.shard else { return Ok(()) };
    if w.is_sessions() {
        bail!(
            "--shard {shard}: {} runs sessions of many turns, which are not split yet; shard single-request scenarios",
            w.name()
        );
    }
    if a.rate.is_none() && a.burst.is_none() && w.trace.is_none() {
        bail!("--shard {shard}: a closed loop's users take their requests as they finish, which no fixed slice splits; shard an open loop (--rate), a trace or a burst");
    }
    if a.rate.as_ref().map_or(0, Vec::len) > 1
        || a.burst.as_ref().map_or(0, Vec::len) > 1
        || (w.trace.is_some() && a.trace.trace_speedup.len() > 1)
    {
        bail!("--shard {shard}: one level per process (each later level would start when this shard's previous one ended, out of step with the others); run a level per --start-at");
    }
    if a.stop_at_first_failure {
        bail!("--shard {shard}: --stop-at-first-failure would stop each shard on its own slice; the merge judges the levels");
    }
    Ok(())
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

/// `--search`, or the default search when no levels are given (`None` for a burst, stages,
/// a trace or a shard, whose levels are a schedule of their own).
fn search(a: &RunArgs, w: &WorkloadSpec, unit: LoadUnit) -> Result<Option<Search>> {
    let given = !a.concurrency.is_empty() || a.rate.is_some() || a.stages.is_some() || a.burst.is_some();
    let schedule = a.stages.is_some() || a.burst.is_some() || w.trace.is_some();
    if a.search && schedule {
        bail!("--search doubles users or rates; --stages, --burst and a trace are schedules of their own");
    }
    if a.soak.is_some() && (a.shard.is_some() || a.stages.is_some() || a.burst.is_some() || w.trace.is_some()) {
        bail!("--soak runs the usable capacity of a sweep of users or rates; not with --shard, --stages, --burst or a trace");
    }
    if a.search && a.shard.is_some() {
        bail!("--search: each shard would search on its own slice; give the shards their levels");
    }
    if (given && !a.search) || schedule || a.shard.is_some() || a.stop_at_first_failure {
        return Ok(None);
    }
    let max_load = match unit {
        LoadUnit::Users => {
            let m = a.max_users.unwrap_or(4096);
            if m == 0 || m > MAX_USERS {
                bail!("--max-users must be between 1 and {MAX_USERS}, got {m}");
            }
            m as f64
        }
        _ => {
            if !(a.max_rate.is_finite() && a.max_rate > 0.0 && a.max_rate <= MAX_RATE) {
                bail!(
                    "--max-rate must be a positive rate of at most {MAX_RATE} requests per second, got {}",
                    a.max_rate
                );
            }
            a.max_rate
        }
    };
    Ok(Some(Search { max_load, budget: a.search_budget }))
}

/// A shard whose slice of a level's schedule is empty (request `j` goes to shard `j mod N`,
/// and the schedule holds fewer than `i + 1` requests) would send nothing: refused before the
/// run, not said at its end.
fn check_slice(shard: Option<Shard>, per_level: &PerLevel, levels: &VecDeque<LevelSpec>, sessions: bool) -> Result<()> {
    let Some(shard) = shard else { return Ok(()) };
    for l in levels.iter().filter(|l| l.duration.is_none()) {
        let c = Counts::of(per_level, l, sessions);
        let total = c.requests.saturating_add(c.warmup).saturating_add(c.cooldown);
        if (shard.index as usize) >= total {
            bail!(
                "--shard {shard}: the level at {} holds {total} requests (warm-up and cool-down included), none of which falls to shard {} (request j goes to shard j mod {}): give fewer shards or more --requests",
                l.load,
                shard.index,
                shard.count
            );
        }
    }
    Ok(())
}

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
