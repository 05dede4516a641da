//! `goodput run`: a scenario through a sweep of load levels against the in-process engine,
//! with the three layers of numbers per level, SLO checks, usable and limit capacity, the
//! queueing knee, and the written conclusion of the seeds.

use crate::args::{EngineArgs, ModelArgs};
use crate::output::{Conclusion, RunFiles};
use crate::table;
use crate::target::AnyTarget;
use anyhow::{bail, Context, Result};
use clap::Args;
use goodput_core::{Clock, StepRecord};
use goodput_engine::Engine;
use goodput_metrics::capacity::{self, LevelOutcome};
use goodput_metrics::level::{summarize, LevelSummary};
use goodput_metrics::slo::{parse_secs, parse_slos, Slo};
use goodput_metrics::Summary;
use goodput_workload::{load_scenario, ScenarioFile};
use goodput_workload::{
    run_level, run_rag, run_sessions, run_tasks, Agent, Arrival, Embedder, LevelPlan, MultiTurn, Rag, RagIndex,
    RagSetup, Scenario, TextTokenizer, UnitPlan,
};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Default SLOs: an interactive chat on the tiny model. Override with --slo.
pub const DEFAULT_SLOS: &str = "ttft_p95=1s,tpot_p95=50ms,e2e_p95=10s,error_rate=1%";

/// Queue-time rise (seconds, on top of doubling) that marks the knee.
const KNEE_MIN_RISE: f64 = 0.010;

#[derive(Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Where requests go: `in-process` (the engine, no HTTP), `http-local` (goodput's own
    /// server started on loopback in this process and driven over HTTP: TTFT is decomposed
    /// into HTTP, tokenization, queue and prefill), or `http://HOST:PORT` (any
    /// OpenAI-compatible server: vLLM, SGLang, TGI, llama.cpp).
    #[arg(long, default_value = "in-process")]
    pub target: String,
    /// The model name the HTTP server expects (default: the catalog name).
    #[arg(long)]
    pub served_model_name: Option<String>,
    /// HTTP API: `completions` (prompts as token ids, exact lengths) or `chat` (prompts as
    /// text through the model's tokenizer).
    #[arg(long, default_value = "completions", value_parser = ["completions", "chat"])]
    pub api: String,
    /// Scenario: a TOML file (see `goodput_workload::file`), or built in: short-qa, long-gen,
    /// long-context, multi-turn (--requests counts sessions),
    /// agent (--requests counts tasks), rag (needs the encoder of scripts/fetch-minilm.sh).
    #[arg(long, default_value = "short-qa")]
    pub scenario: String,
    /// Closed-loop sweep: virtual users per level.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16,32", conflicts_with = "rate")]
    pub concurrency: Vec<usize>,
    /// Closed loop: each virtual user waits this long after a response before its next
    /// request (think time; 0 by default).
    #[arg(long, value_parser = parse_duration_or_zero, default_value = "0s", conflicts_with_all = ["rate", "burst"])]
    pub think: Duration,
    /// Open-loop sweep: requests per second per level (Poisson arrivals).
    #[arg(long, value_delimiter = ',', allow_negative_numbers = true)]
    pub rate: Option<Vec<f64>>,
    /// Evenly spaced arrivals instead of Poisson (with --rate).
    #[arg(long, requires = "rate")]
    pub constant_rate: bool,
    /// Gamma-distributed arrivals with this shape (with --rate): 1 = Poisson, below 1 burstier.
    #[arg(long, default_value_t = 1.0, requires = "rate", conflicts_with = "constant_rate")]
    pub burstiness: f64,
    /// Measured requests per level (default: 4 × users, at least 8; 10 s worth with --rate).
    #[arg(long, conflicts_with = "duration")]
    pub requests: Option<usize>,
    /// Run each level for this long instead of a number of requests (e.g. 30s).
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Closed-loop stages, USERSxDURATION each: `10x2m,20x2m,40x2m` (the seeds' "start at 10
    /// users, raise every few minutes"). Replaces --concurrency and --duration.
    #[arg(long, value_delimiter = ',', value_parser = parse_stage, conflicts_with_all = ["rate", "duration", "requests"])]
    pub stages: Option<Vec<(usize, Duration)>>,
    /// Burst (cold-start) sweep: per level, this many requests all due at the level's start,
    /// no warm-up (the first level meets a cold engine).
    #[arg(long, value_delimiter = ',', conflicts_with_all = ["rate", "stages", "duration", "requests"])]
    pub burst: Option<Vec<usize>>,
    /// Warm-up per level, run and left out of the statistics: a count (requests; sessions,
    /// tasks or queries for those scenarios) or a duration of intended send time (5s).
    /// Default: one per user, or 2.
    #[arg(long, value_parser = parse_span)]
    pub warmup: Option<Span>,
    /// Cool-down per level, run after the measured part (keeping the load up while it
    /// finishes) and left out: a count, or a duration before the end of sending (5s).
    #[arg(long, value_parser = parse_span, default_value = "0")]
    pub cooldown: Span,
    /// A request without its end marker after this long times out.
    #[arg(long, default_value = "120s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Retry a failed or timed-out request up to this many times (refusals are not retried).
    /// Off by default; retries are counted and reported apart, and latency runs from the
    /// first attempt.
    #[arg(long, default_value_t = 0)]
    pub retries: u32,
    /// Back-off before the first retry, doubling for each further one.
    #[arg(long, default_value = "100ms", value_parser = parse_duration)]
    pub retry_backoff: Duration,
    /// Pin the engine thread and its compute threads to these CPUs (0-1, 0,2).
    #[arg(long, value_parser = parse_cpus)]
    pub engine_cpus: Option<CpuList>,
    /// Pin the load generator (this thread, its timers and bookkeeping) to these CPUs.
    #[arg(long, value_parser = parse_cpus)]
    pub harness_cpus: Option<CpuList>,
    /// HTTP targets: scrape the server's /metrics this often during each level (and before and
    /// after it).
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub scrape_interval: Duration,
    /// Interval of the engine time series (running, waiting, KV usage) in timeseries.csv.
    #[arg(long, default_value = "250ms", value_parser = parse_duration)]
    pub series_interval: Duration,
    /// SLOs that define usable capacity, e.g. ttft_p95=2s,tpot_p95=50ms,e2e_p95=30s,error_rate=1%.
    #[arg(long, default_value = DEFAULT_SLOS)]
    pub slo: String,
    /// After the sweep, run up to this many extra levels between the last passing and the
    /// first failing level (bisection), to pin usable capacity down.
    #[arg(long, default_value_t = 3)]
    pub refine: usize,
    /// Stop the sweep at the first level whose SLOs break (what `goodput capacity` does).
    #[arg(long)]
    pub stop_at_first_failure: bool,
    /// RAG: directory of the sentence encoder (default: where scripts/fetch-minilm.sh puts it).
    #[arg(long)]
    pub encoder: Option<PathBuf>,
    /// Seed of the prompts, lengths and arrivals.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Write records (JSONL, CSV), engine steps and the summary JSON here, level by level.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// At the end, write DIR/report.html (see `goodput report`); needs --out.
    #[arg(long, requires = "out")]
    pub report: bool,
    /// Print only the final table and conclusion.
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

/// The scenario named by `--scenario`: a built-in name or a TOML file, checked against the
/// model before anything runs.
fn build_workload(a: &RunArgs, max_len: usize) -> Result<Workload> {
    let spec = if a.scenario.ends_with(".toml") {
        load_scenario(std::path::Path::new(&a.scenario)).map_err(anyhow::Error::msg)?
    } else {
        match a.scenario.as_str() {
            "rag" => ScenarioFile::Rag(Rag::builtin()),
            "agent" => ScenarioFile::Agent(Agent::builtin()),
            "multi-turn" => ScenarioFile::MultiTurn(MultiTurn::builtin()),
            name => ScenarioFile::Single(Scenario::builtin(name, max_len).map_err(anyhow::Error::msg)?),
        }
    };
    let closed_only = |what: &str| -> Result<()> {
        if a.rate.is_some() {
            bail!("--scenario {}: {what} run closed-loop: use --concurrency, not --rate", a.scenario);
        }
        Ok(())
    };
    Ok(match spec {
        ScenarioFile::Single(s) => {
            s.validate(max_len).map_err(anyhow::Error::msg)?;
            Workload::Single(Arc::new(s))
        }
        ScenarioFile::MultiTurn(mt) => {
            closed_only("multi-turn sessions")?;
            mt.validate(max_len).map_err(anyhow::Error::msg)?;
            Workload::Sessions(Arc::new(mt))
        }
        ScenarioFile::Agent(ag) => {
            closed_only("agent tasks")?;
            ag.validate(max_len).map_err(anyhow::Error::msg)?;
            Workload::Tasks(Arc::new(ag))
        }
        ScenarioFile::Rag(rag) => {
            closed_only("RAG queries")?;
            rag.validate().map_err(anyhow::Error::msg)?;
            let dir = a.encoder.clone().unwrap_or_else(default_encoder_dir);
            if dir.join("model.safetensors").is_file() {
                Workload::Rag(Some(dir), rag)
            } else if a.encoder.is_some() {
                bail!(
                    "--encoder {}: no model.safetensors there (scripts/fetch-minilm.sh puts all-MiniLM-L6-v2 in place)",
                    dir.display()
                );
            } else {
                eprintln!(
                    "rag: no sentence encoder at {} (scripts/fetch-minilm.sh fetches all-MiniLM-L6-v2); the embed stage is the engine's own prefill-only pass over the query, and retrieval uses hashed bag-of-words vectors",
                    dir.display()
                );
                Workload::Rag(None, rag)
            }
        }
    })
}

/// How refinement levels are made: integer users, rates, or not at all (stages, durations).
enum RefineKind {
    Users(Duration),
    Burst,
    Rate { burstiness: Option<f64> },
    None,
}

/// The next level between the last passing and the first failing level, if there is room:
/// a whole number of users strictly between them, or a rate more than 10 % from both.
fn refinement(levels: &[LevelReport], kind: &RefineKind) -> Option<((f64, Arrival), Option<Duration>)> {
    let mut sorted: Vec<(f64, bool)> = levels.iter().map(|l| (l.summary.load, l.summary.slos_hold())).collect();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let first_fail = sorted.iter().position(|x| !x.1)?;
    let pass = sorted[..first_fail].last()?.0;
    let fail = sorted[first_fail].0;
    match kind {
        RefineKind::Users(think) => {
            let mid = ((pass + fail) / 2.0).floor();
            (mid > pass && mid < fail).then_some(((mid, Arrival::Closed { users: mid as usize, think: *think }), None))
        }
        RefineKind::Burst => {
            let mid = ((pass + fail) / 2.0).floor();
            (mid > pass && mid < fail).then_some(((mid, Arrival::Burst { size: mid as usize }), None))
        }
        RefineKind::Rate { burstiness } => {
            let mid = (pass + fail) / 2.0;
            ((fail - pass) / fail > 0.1).then_some(((mid, Arrival::Rate { rate: mid, burstiness: *burstiness }), None))
        }
        RefineKind::None => None,
    }
}

/// A warm-up or cool-down: a count or a time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Span {
    Count(usize),
    Time(Duration),
}

impl Span {
    fn count(self) -> usize {
        match self {
            Span::Count(n) => n,
            Span::Time(_) => 0,
        }
    }
    fn time(self) -> Duration {
        match self {
            Span::Count(_) => Duration::ZERO,
            Span::Time(d) => d,
        }
    }
    fn is_zero(self) -> bool {
        self.count() == 0 && self.time().is_zero()
    }
}

fn parse_span(s: &str) -> Result<Span, String> {
    match s.trim().parse::<usize>() {
        Ok(n) => Ok(Span::Count(n)),
        Err(_) => parse_duration(s)
            .map(Span::Time)
            .map_err(|_| format!("`{s}` is neither a count nor a duration (5, 10s, 500ms)")),
    }
}

/// CPUs to pin to.
#[derive(Clone, Debug, PartialEq)]
pub struct CpuList(pub Vec<usize>);

fn parse_cpus(s: &str) -> Result<CpuList, String> {
    goodput_engine::affinity::parse_cpu_list(s).map(CpuList)
}

fn parse_stage(s: &str) -> Result<(usize, Duration), String> {
    let (users, d) = s.split_once('x').ok_or_else(|| format!("stage `{s}`: expected USERSxDURATION, e.g. 10x2m"))?;
    let users: usize = users
        .trim()
        .parse()
        .ok()
        .filter(|&u| u > 0)
        .ok_or_else(|| format!("stage `{s}`: `{users}` is not a positive number of users"))?;
    Ok((users, parse_duration(d)?))
}

pub(crate) fn parse_duration_or_zero(s: &str) -> Result<Duration, String> {
    parse_secs(s)
        .filter(|x| *x >= 0.0 && x.is_finite())
        .map(Duration::from_secs_f64)
        .ok_or_else(|| format!("`{s}` is not a duration (0s, 500ms)"))
}

pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    parse_secs(s)
        .filter(|x| *x > 0.0)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| format!("`{s}` is not a duration (120s, 500ms)"))
}

/// The engine's side of one level, from its step records.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct EngineLevel {
    pub steps: usize,
    pub kv_block_usage_max: f64,
    pub kv_token_usage_max: f64,
    pub running_max: usize,
    pub waiting_max: usize,
    /// Means over the level's steps, weighted by step duration (busy time).
    pub running_mean: f64,
    pub waiting_mean: f64,
    pub kv_block_usage_mean: f64,
    pub preemptions: usize,
    pub prefix_hit_tokens: usize,
    pub step_time: Option<Summary>,
}

fn engine_level(steps: &[StepRecord]) -> EngineLevel {
    use goodput_metrics::engine as em;
    let busy: f64 = steps.iter().map(em::step_time).sum();
    let mean = |f: &dyn Fn(&StepRecord) -> f64| {
        if busy > 0.0 {
            steps.iter().map(|s| em::step_time(s) * f(s)).sum::<f64>() / busy
        } else {
            0.0
        }
    };
    EngineLevel {
        running_mean: mean(&|s| s.running as f64),
        waiting_mean: mean(&|s| s.waiting as f64),
        kv_block_usage_mean: mean(&em::kv_block_usage),
        steps: steps.len(),
        kv_block_usage_max: steps.iter().map(em::kv_block_usage).fold(0.0, f64::max),
        kv_token_usage_max: steps.iter().map(em::kv_token_usage).fold(0.0, f64::max),
        running_max: steps.iter().map(|s| s.running).max().unwrap_or(0),
        waiting_max: steps.iter().map(|s| s.waiting).max().unwrap_or(0),
        preemptions: steps.iter().map(|s| s.preemptions).sum(),
        prefix_hit_tokens: steps.iter().map(|s| s.prefix_hit_tokens).sum(),
        step_time: Summary::of(&steps.iter().map(em::step_time).collect::<Vec<_>>()),
    }
}

/// The load generator's own side of a level: its CPU cost and whether it kept its schedule.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Harness {
    pub cpu: crate::cpu::CpuUse,
    /// Harness CPU per request (all requests of the level, warm-up included), in seconds.
    pub cpu_per_request_s: f64,
    /// P99 of (actual − intended send time) over the measured requests, in seconds.
    pub send_lag_p99_s: f64,
    /// Open loop: requests actually sent per second over the sending period, and the target.
    pub achieved_rate: Option<f64>,
    pub target_rate: Option<f64>,
}

/// Harness CPU share of the process above which the numbers may be skewed by it.
const CPU_SHARE_WARN: f64 = 0.05;
/// P99 send lag above which the generator fell behind its schedule.
const SEND_LAG_WARN_S: f64 = 0.005;

impl Harness {
    fn new(s: &LevelSummary, run: &goodput_workload::LevelRun, cpu: crate::cpu::CpuUse, arrival: &Arrival) -> Self {
        let n = run.records.len().max(1);
        let (achieved_rate, target_rate) = match *arrival {
            Arrival::Rate { rate, .. } => {
                let sent: Vec<f64> = run.measured().map(|r| r.sent.as_secs()).collect();
                let span =
                    sent.iter().copied().fold(f64::MIN, f64::max) - sent.iter().copied().fold(f64::MAX, f64::min);
                let achieved = if sent.len() > 1 && span > 0.0 { (sent.len() - 1) as f64 / span } else { f64::NAN };
                (Some(achieved), Some(rate))
            }
            Arrival::Closed { .. } | Arrival::Burst { .. } => (None, None),
        };
        Harness {
            cpu,
            cpu_per_request_s: cpu.harness_s / n as f64,
            send_lag_p99_s: s.send_lag.as_ref().map_or(0.0, |x| x.p99),
            achieved_rate,
            target_rate,
        }
    }

    /// What a reader must know before trusting the level's numbers.
    pub fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        if self.cpu.share() > CPU_SHARE_WARN {
            w.push(format!(
                "the harness used {:.1} % of the process CPU ({:.3} s); on shared cores it competes with the engine",
                self.cpu.share() * 100.0,
                self.cpu.harness_s
            ));
        }
        if self.send_lag_p99_s > SEND_LAG_WARN_S {
            w.push(format!("the load generator fell behind: send lag p99 {:.1} ms", self.send_lag_p99_s * 1e3));
        }
        if let (Some(a), Some(t)) = (self.achieved_rate, self.target_rate) {
            if a < 0.95 * t {
                w.push(format!("achieved {a:.2} req/s of the {t} req/s target (< 95 %)"));
            }
        }
        w
    }
}

/// One finished level: the service summary, the engine's side and the harness's own.
#[derive(Clone, Debug, serde::Serialize)]
pub struct LevelReport {
    pub summary: LevelSummary,
    /// Requests run but left out of `summary`: warm-up and cool-down.
    pub warmup_requests: usize,
    pub cooldown_requests: usize,
    pub engine: EngineLevel,
    /// HTTP targets: the server's own histograms over the level and its gauges over time,
    /// from its /metrics.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<ServerSide>,
    pub harness: Harness,
    /// Multi-turn runs: the requests grouped by turn index.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub turns: Vec<goodput_metrics::turns::TurnSummary>,
    /// Agent runs: task-level numbers (task E2E, calls per task, tool-wait share, steps).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<goodput_metrics::agent::AgentSummary>,
    /// RAG runs: the stage timeline (embed, retrieve, rerank, assemble, model call).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rag: Option<goodput_metrics::agent::AgentSummary>,
}

/// What a server's /metrics said about one level.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct ServerSide {
    pub scrapes: usize,
    /// Percentiles of the level's requests from histogram deltas (after − before).
    pub histograms: std::collections::BTreeMap<String, goodput_metrics::prom::HistogramStats>,
    /// Gauges at each scrape: seconds since the level started, running, waiting, KV usage.
    pub series: Vec<(f64, f64, f64, f64)>,
    /// Why scraping failed, if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The histograms compared before and after a level.
const SERVER_HISTOGRAMS: [&str; 6] = [
    "time_to_first_token_seconds",
    "e2e_request_latency_seconds",
    "request_queue_time_seconds",
    "request_prefill_time_seconds",
    "request_decode_time_seconds",
    "request_inference_time_seconds",
];

/// Scrapes a target's /metrics before a level, every `interval` during it, and after it.
struct Scraper {
    target: Arc<AnyTarget>,
    before: Result<goodput_client::ServerScrape, String>,
    during: Arc<std::sync::Mutex<Vec<goodput_client::ServerScrape>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Scraper {
    fn start(rt: &tokio::runtime::Runtime, target: Arc<AnyTarget>, interval: Duration) -> Self {
        let scrape = |t: Arc<AnyTarget>| async move {
            match &*t {
                AnyTarget::Http(h) => h.scrape().await,
                AnyTarget::Engine(_) => Err("not an HTTP target".to_string()),
            }
        };
        let before = rt.block_on(scrape(target.clone()));
        let during = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (t, d) = (target.clone(), during.clone());
        // Runs while the level runs on the same (current-thread) runtime.
        let task = rt.spawn(async move {
            loop {
                tokio::time::sleep(interval).await;
                if let Ok(s) = scrape(t.clone()).await {
                    d.lock().unwrap_or_else(|e| e.into_inner()).push(s);
                }
            }
        });
        Scraper { target, before, during, task }
    }

    fn finish(self, rt: &tokio::runtime::Runtime) -> Option<ServerSide> {
        self.task.abort();
        let after = rt.block_on(async {
            match &*self.target {
                AnyTarget::Http(h) => h.scrape().await,
                AnyTarget::Engine(_) => Err("not an HTTP target".to_string()),
            }
        });
        let (before, after) = match (self.before, after) {
            (Ok(b), Ok(a)) => (b, a),
            (Err(e), _) | (_, Err(e)) => return Some(ServerSide { error: Some(e), ..Default::default() }),
        };
        let mut side = ServerSide::default();
        for name in SERVER_HISTOGRAMS {
            if let (Some(b), Some(a)) = (before.histograms.get(name), after.histograms.get(name)) {
                if let Some(st) = goodput_metrics::prom::stats(&goodput_metrics::prom::delta(b, a)) {
                    side.histograms.insert(name.to_string(), st);
                }
            }
        }
        let during = std::mem::take(&mut *self.during.lock().unwrap_or_else(|e| e.into_inner()));
        side.scrapes = during.len() + 2;
        let g = |s: &goodput_client::ServerScrape, k: &str| s.gauges.get(k).copied().unwrap_or(f64::NAN);
        for s in std::iter::once(&before).chain(&during).chain(std::iter::once(&after)) {
            let kv = s.gauges.get("kv_cache_usage_perc").or_else(|| s.gauges.get("gpu_cache_usage_perc")).copied();
            side.series.push((
                s.at.secs_since(before.at),
                g(s, "num_requests_running"),
                g(s, "num_requests_waiting"),
                kv.unwrap_or(f64::NAN),
            ));
        }
        Some(side)
    }
}

/// goodput's server on loopback in this process, on a runtime of its own.
struct LocalServer {
    url: String,
    rt: tokio::runtime::Runtime,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl LocalServer {
    /// `cpus`: pin the server's threads there (the harness's CPUs: the HTTP layer is the
    /// client side of the measurement, not the engine's).
    fn start(state: Arc<goodput_server::AppState>, cpus: Option<Vec<usize>>) -> Result<Self> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("goodput-server")
            .on_thread_start(move || {
                if let Some(c) = &cpus {
                    let _ = goodput_engine::affinity::pin_current(c);
                }
            })
            .enable_all()
            .build()?;
        let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).context("binding 127.0.0.1")?;
        let url = format!("http://{}", listener.local_addr()?);
        let (stop, rx) = tokio::sync::oneshot::channel::<()>();
        let task = rt.spawn(goodput_server::serve(
            listener,
            state,
            async move {
                let _ = rx.await;
            },
            Duration::from_secs(5),
        ));
        Ok(LocalServer { url, rt, stop, task })
    }

    fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.rt.block_on(self.task);
    }
}

/// Where the engine and the harness ran (CPU lists in the kernel's notation).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Pinning {
    pub engine: Option<String>,
    pub harness: Option<String>,
}

/// What a reader needs to reproduce a run.
pub struct Setup<'a> {
    pub model: &'a str,
    pub weights: &'a str,
    pub device: &'a str,
    pub pinning: &'a Pinning,
    pub retry: goodput_workload::RetryPolicy,
    pub seed: u64,
    /// Where requests went: in-process, http-local or the server's URL.
    pub target: &'a str,
    /// The engine's settings (block size, pool, budgets).
    pub engine: serde_json::Value,
    /// The machine the run measured.
    pub machine: serde_json::Value,
}

/// CPU model, logical CPUs, memory and kernel of this machine, for the report's setup.
pub fn machine() -> serde_json::Value {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let cpuinfo = read("/proc/cpuinfo");
    let field = |text: &str, key: &str| {
        text.lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_default()
    };
    let mem_kib: u64 = field(&read("/proc/meminfo"), "MemTotal").trim_end_matches("kB").trim().parse().unwrap_or(0);
    serde_json::json!({
        "cpu": field(&cpuinfo, "model name"),
        "logical_cpus": std::thread::available_parallelism().map_or(0, |n| n.get()),
        "memory_gib": (mem_kib as f64 / (1024.0 * 1024.0) * 10.0).round() / 10.0,
        "kernel": read("/proc/sys/kernel/osrelease").trim(),
    })
}

/// The engine's sentence encoder as the workload's embedder.
struct EncoderEmbedder(goodput_engine::encoder::Encoder);
impl Embedder for EncoderEmbedder {
    fn embed(&self, texts: &[&str]) -> std::result::Result<Vec<Vec<f32>>, String> {
        self.0.embed(texts).map_err(|e| e.to_string())
    }
}

/// The model's tokenizer as the workload's prompt tokenizer.
struct LlmTokenizer(Arc<goodput_engine::tokenizer::Tokenizer>);
impl TextTokenizer for LlmTokenizer {
    fn encode(&self, text: &str) -> std::result::Result<Vec<u32>, String> {
        self.0.encode(text).map_err(|e| e.to_string())
    }
}

/// Where scripts/fetch-minilm.sh puts the encoder.
fn default_encoder_dir() -> PathBuf {
    let cache = std::env::var_os("GOODPUT_CACHE").map(PathBuf::from).unwrap_or_else(|| {
        std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache"))
            .join("goodput")
    });
    cache.join("minilm")
}

/// What a run sends: single requests of a scenario, or multi-turn sessions.
enum Workload {
    /// The sentence encoder's directory, or `None`: embed by the engine's prefill pass.
    Rag(Option<PathBuf>, Rag),
    Single(Arc<Scenario>),
    Sessions(Arc<MultiTurn>),
    Tasks(Arc<Agent>),
}

impl Workload {
    fn is_sessions(&self) -> bool {
        matches!(self, Workload::Sessions(_) | Workload::Tasks(_) | Workload::Rag(..))
    }
    /// Requests per unit of `--requests` (a session is `turns` requests).
    fn requests_per_unit(&self) -> usize {
        match self {
            Workload::Single(_) | Workload::Rag(..) => 1,
            Workload::Sessions(mt) => mt.turns as usize,
            Workload::Tasks(ag) => ag.model_calls(),
        }
    }
    fn name(&self) -> String {
        match self {
            Workload::Single(s) => s.name.clone(),
            Workload::Sessions(_) => "multi-turn".into(),
            Workload::Tasks(_) => "agent".into(),
            Workload::Rag(..) => "rag".into(),
        }
    }
    fn describe(&self) -> String {
        match self {
            Workload::Single(s) => s.describe(),
            Workload::Sessions(mt) => mt.describe(),
            Workload::Tasks(ag) => ag.describe(),
            Workload::Rag(_, r) => r.describe(),
        }
    }
    fn describe_lengths(&self) -> String {
        match self {
            Workload::Single(s) => s.describe_lengths(),
            Workload::Sessions(mt) => mt.describe().trim_start_matches("multi-turn: ").to_string(),
            Workload::Tasks(ag) => ag.describe().trim_start_matches("agent: ").to_string(),
            Workload::Rag(_, r) => r.describe().trim_start_matches("rag: ").to_string(),
        }
    }
    fn to_json(&self) -> serde_json::Value {
        match self {
            Workload::Single(s) => serde_json::json!(s.as_ref()),
            Workload::Sessions(mt) => serde_json::json!({ "name": "multi-turn", "multi_turn": mt.as_ref() }),
            Workload::Tasks(ag) => serde_json::json!({ "name": "agent", "agent": ag.as_ref() }),
            Workload::Rag(dir, r) => serde_json::json!({
                "name": "rag",
                "rag": r,
                "encoder": dir.as_ref().map_or("none: the engine's prefill-only pass".to_string(), |d| d.display().to_string()),
            }),
        }
    }
}

#[derive(Args, Debug)]
pub struct CapacityArgs {
    #[command(flatten)]
    pub run: RunArgs,
    /// Highest number of users the search tries.
    #[arg(long, default_value_t = 256)]
    pub max_users: usize,
}

/// `goodput capacity`: levels 1, 2, 4, … users up to `--max-users`, stopping at the first
/// level whose SLOs break, then `--refine` bisection steps.
pub fn capacity(c: CapacityArgs) -> Result<()> {
    let mut a = c.run;
    if a.rate.is_some() || a.stages.is_some() || a.duration.is_some() {
        bail!("goodput capacity searches over users with --requests per level; drop --rate, --stages and --duration");
    }
    if c.max_users == 0 {
        bail!("--max-users must be at least 1");
    }
    a.concurrency =
        std::iter::successors(Some(1usize), |&u| u.checked_mul(2)).take_while(|&u| u <= c.max_users).collect();
    if a.concurrency.last() != Some(&c.max_users) {
        a.concurrency.push(c.max_users);
    }
    a.stop_at_first_failure = true;
    run(a)
}

pub fn run(a: RunArgs) -> Result<()> {
    let slos: Vec<Slo> = parse_slos(&a.slo).map_err(anyhow::Error::msg).context("--slo")?;
    let spec = a.model.spec()?;
    if !(a.burstiness.is_finite() && a.burstiness > 0.0) {
        bail!("--burstiness must be a positive number (1 = Poisson), got {}", a.burstiness);
    }
    let burstiness = (!a.constant_rate).then_some(a.burstiness);
    let mut durations: Vec<Option<Duration>> = Vec::new();
    let arrival_kind = match (&a.rate, &a.stages) {
        _ if a.burst.is_some() => RefineKind::Burst,
        (Some(_), None) => RefineKind::Rate { burstiness },
        (None, None) if a.duration.is_none() => RefineKind::Users(a.think),
        _ => RefineKind::None,
    };
    if a.burst.is_some() && !(a.warmup.is_none_or(Span::is_zero) && a.cooldown.is_zero()) {
        bail!("--burst is a cold start: every request is measured, so --warmup and --cooldown do not apply");
    }
    if (a.duration.is_some() || a.stages.is_some()) && a.cooldown.count() > 0 {
        bail!("--cooldown {}: a level bounded by time has no fixed last request; give the cool-down as a duration (e.g. 5s)", a.cooldown.count());
    }
    let loads: Vec<(f64, Arrival)> = match (&a.rate, &a.stages) {
        _ if a.burst.is_some() => {
            let sizes = a.burst.as_deref().unwrap_or_default();
            if sizes.is_empty() || sizes.contains(&0) {
                bail!("--burst: every level must send at least 1 request, got {sizes:?}");
            }
            sizes.iter().map(|&n| (n as f64, Arrival::Burst { size: n })).collect()
        }
        (_, Some(stages)) => {
            if stages.is_empty() {
                bail!("--stages: give at least one USERSxDURATION stage");
            }
            durations = stages.iter().map(|s| Some(s.1)).collect();
            stages.iter().map(|&(u, _)| (u as f64, Arrival::Closed { users: u, think: a.think })).collect()
        }
        (rate, None) => match rate {
            Some(rates) => {
                if rates.is_empty() || rates.iter().any(|r| !(r.is_finite() && *r > 0.0)) {
                    bail!("--rate: every rate must be a positive number of requests per second, got {rates:?}");
                }
                rates.iter().map(|&r| (r, Arrival::Rate { rate: r, burstiness })).collect()
            }
            None => {
                if a.concurrency.is_empty() || a.concurrency.contains(&0) {
                    bail!("--concurrency: every level must be at least 1 user, got {:?}", a.concurrency);
                }
                a.concurrency.iter().map(|&c| (c as f64, Arrival::Closed { users: c, think: a.think })).collect()
            }
        },
    };
    if durations.is_empty() {
        durations = vec![a.duration; loads.len()];
    }
    let max_len = a.engine.max_model_len.unwrap_or(spec.max_position_embeddings).min(spec.max_position_embeddings);
    let workload = build_workload(&a, max_len)?;
    if !a.think.is_zero() && !matches!(workload, Workload::Single(_)) {
        bail!(
            "--think applies to single-request scenarios; {} has its own think time in its scenario file",
            workload.name()
        );
    }
    let spans_in_time = a.warmup.is_some_and(|w| !w.time().is_zero()) || !a.cooldown.time().is_zero();
    if spans_in_time && !matches!(workload, Workload::Single(_)) {
        bail!(
            "--warmup and --cooldown as durations apply to single-request scenarios; give a count of {} units",
            workload.name()
        );
    }
    if a.burst.is_some() && !matches!(workload, Workload::Single(_)) {
        bail!("--burst applies to single-request scenarios; {} runs closed-loop with --concurrency", workload.name());
    }
    let retry = goodput_workload::RetryPolicy { max: a.retries, backoff: a.retry_backoff };
    let url = match a.target.as_str() {
        "in-process" | "http-local" => None,
        t if t.starts_with("http://") || t.starts_with("https://") => Some(t.trim_end_matches('/').to_string()),
        t => bail!("--target {t}: expected in-process, http-local or http://HOST:PORT"),
    };
    if url.is_some() && (a.engine_cpus.is_some()) {
        bail!("--engine-cpus pins goodput's own engine; with --target {} there is none in this process", a.target);
    }
    // An external server: no engine here; prompts need only the vocabulary (and a tokenizer
    // for text prompts).
    let loaded = if url.is_none() { Some(a.model.load(max_len)?) } else { None };
    let (weights_desc, device) = match &loaded {
        Some(l) => (
            format!("{} ({})", l.weights_kind, l.weights_origin),
            if l.model.device.is_cpu() { "cpu".to_string() } else { format!("{:?}", l.model.device) },
        ),
        None => ("served elsewhere".to_string(), "remote".to_string()),
    };
    let (model, tokenizer, chat_template) = match loaded {
        Some(l) => (Some(l.model), Arc::new(l.tokenizer), l.chat_template),
        None => (None, Arc::new(goodput_engine::tokenizer::Tokenizer::byte_level(spec.vocab_size)), None),
    };
    // RAG: load the encoder and embed the corpus before any level runs.
    let rag_setup = match &workload {
        Workload::Rag(dir, rag) => {
            let t = std::time::Instant::now();
            let embedder: Arc<dyn Embedder> = match dir {
                Some(dir) => {
                    Arc::new(EncoderEmbedder(goodput_engine::encoder::Encoder::load(dir, &candle_core::Device::Cpu)?))
                }
                None => Arc::new(goodput_workload::HashEmbedder { dims: 384 }),
            };
            let index = RagIndex::build(rag, embedder.as_ref(), a.seed)
                .map_err(anyhow::Error::msg)
                .context("embedding the RAG corpus")?;
            if !a.quiet {
                eprintln!(
                    "rag: embedded {} corpus chunks with {} in {:.2} s",
                    index.chunks.len(),
                    dir.as_ref().map_or("hashed bag-of-words vectors".to_string(), |d| d.display().to_string()),
                    t.elapsed().as_secs_f64()
                );
            }
            Some(Arc::new(RagSetup {
                rag: rag.clone(),
                index,
                embedder,
                tokenizer: Arc::new(LlmTokenizer(tokenizer.clone())),
                embed_by_prefill: dir.is_none(),
            }))
        }
        _ => None,
    };
    let vocab = spec.vocab_size;
    let (step_tx, step_rx) = flume::unbounded();
    let engine = match model {
        Some(m) => {
            let mut engine_cfg = a.engine.config()?;
            engine_cfg.cpus = a.engine_cpus.as_ref().map(|c| c.0.clone());
            Some(Engine::start(m, engine_cfg, Clock::new(), Some(step_tx))?)
        }
        None => None,
    };
    let served_name = a.served_model_name.clone().unwrap_or_else(|| spec.name.clone());
    let http_config = |base_url: String| goodput_client::HttpConfig {
        base_url,
        model: served_name.clone(),
        api: if a.api == "chat" { goodput_client::Api::Chat } else { goodput_client::Api::Completions },
        exact_lengths: true,
        return_token_ids: url.is_none(),
        same_clock: url.is_none(),
        codec: Some(Arc::new(crate::target::Codec(tokenizer.clone()))),
    };
    // http-local: goodput's server on loopback, on its own threads (so this thread's CPU time
    // stays the load generator's).
    let mut local_server: Option<LocalServer> = None;
    let target: Arc<AnyTarget> = match (&engine, &url) {
        (Some(e), None) if a.target == "in-process" => Arc::new(AnyTarget::Engine(e.handle())),
        (Some(e), None) => {
            let st = crate::serve::state(e, tokenizer.clone(), served_name.clone(), chat_template.clone(), None)?;
            let server = LocalServer::start(st, a.harness_cpus.as_ref().map(|c| c.0.clone()))?;
            let t = goodput_client::HttpTarget::new(http_config(server.url.clone()), e.handle().clock())
                .map_err(anyhow::Error::msg)?;
            local_server = Some(server);
            Arc::new(AnyTarget::Http(t))
        }
        (_, Some(u)) => {
            let t =
                goodput_client::HttpTarget::new(http_config(u.clone()), Clock::new()).map_err(anyhow::Error::msg)?;
            Arc::new(AnyTarget::Http(t))
        }
        (None, None) => bail!("no engine and no server to send requests to"),
    };
    // The engine thread is pinned by now; this thread (the load generator) follows.
    if let Some(h) = &a.harness_cpus {
        goodput_engine::affinity::pin_current(&h.0)?;
    }
    let pinning = Pinning {
        engine: a.engine_cpus.as_ref().map(|c| goodput_engine::affinity::format_cpu_list(&c.0)),
        harness: a.harness_cpus.as_ref().map(|c| goodput_engine::affinity::format_cpu_list(&c.0)),
    };
    if let (Some(e), Some(h)) = (&a.engine_cpus, &a.harness_cpus) {
        if e.0.iter().any(|c| h.0.contains(c)) {
            eprintln!(
                "warning: --engine-cpus and --harness-cpus share CPUs; the harness competes with the engine there"
            );
        }
    }
    let mut files = match &a.out {
        Some(dir) => Some(RunFiles::create(dir)?),
        None => None,
    };
    // The load generator runs on this thread only, so its CPU time is the harness's own cost.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    if let AnyTarget::Http(h) = &*target {
        let models = rt.block_on(h.models()).map_err(anyhow::Error::msg).context("asking the server for its models")?;
        if !models.contains(&served_name) {
            bail!(
                "the server at {} does not serve `{served_name}` (it lists {models:?}); pass --served-model-name",
                h.config().base_url
            );
        }
    }
    let unit = if a.rate.is_some() {
        "req/s"
    } else if a.burst.is_some() {
        "requests at once"
    } else {
        "users"
    };
    if !a.quiet {
        eprintln!(
            "goodput run: {} on {device} ({weights_desc}), {}; {}; SLOs: {}",
            spec.name,
            goodput_core::Target::describe(&*target),
            workload.describe(),
            slos.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(", ")
        );
    }
    let mut levels: Vec<LevelReport> = Vec::new();
    let mut first_id = 0u64;
    // Progress on stderr; indicatif hides it when stderr is not a terminal.
    let bar = if a.quiet { indicatif::ProgressBar::hidden() } else { indicatif::ProgressBar::new(loads.len() as u64) };
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} [{elapsed_precise}] level {pos}/{len}: {msg}")
            .expect("a valid progress template"),
    );
    bar.enable_steady_tick(Duration::from_millis(120));
    // Level lines are progress (hidden by --quiet); warnings always show.
    let log = |line: String, warning: bool| {
        if bar.is_hidden() {
            if warning || !a.quiet {
                eprintln!("{line}");
            }
        } else {
            bar.println(line);
        }
    };
    let mut queue: std::collections::VecDeque<((f64, Arrival), Option<Duration>)> =
        loads.into_iter().zip(durations).collect();
    let mut refine_left = a.refine;
    // When the sweep is done, refine between the last passing and the first failing level.
    while let Some(((load, arrival), duration)) = queue.pop_front().or_else(|| {
        let next = if refine_left > 0 { refinement(&levels, &arrival_kind) } else { None };
        refine_left = refine_left.saturating_sub(1);
        next.inspect(|_| bar.inc_length(1))
    }) {
        bar.set_message(format!("{load} {unit}"));
        if duration.is_some() && !matches!(workload, Workload::Single(_)) {
            bail!("--duration and --stages apply to single-request scenarios; use --requests for {}", workload.name());
        }
        // With a duration, the request count only caps the level.
        let requests = if duration.is_some() { usize::MAX / 2 } else { 0 };
        let requests = if requests > 0 {
            requests
        } else {
            match arrival {
                Arrival::Burst { size } => size,
                Arrival::Closed { users, .. } if workload.is_sessions() => a.requests.unwrap_or((2 * users).max(2)),
                Arrival::Closed { users, .. } => a.requests.unwrap_or((4 * users).max(8)),
                Arrival::Rate { rate, .. } => a.requests.unwrap_or(((10.0 * rate).ceil() as usize).max(8)),
            }
        };
        let warmup = match (a.warmup, &arrival) {
            (_, Arrival::Burst { .. }) => 0,
            (Some(w), _) => w.count(),
            (None, Arrival::Closed { users, .. }) => *users,
            (None, _) => 2,
        };
        let cooldown = a.cooldown.count();
        let trim =
            goodput_workload::Trim { start: a.warmup.map_or(Duration::ZERO, Span::time), end: a.cooldown.time() };
        let arrival_copy = arrival.clone();
        let plan = LevelPlan {
            arrival,
            requests,
            warmup,
            cooldown,
            trim,
            timeout: a.timeout,
            retry,
            seed: a.seed,
            first_id,
            duration,
        };
        // Ids of a level: one per request (a session has `turns` requests); a timed level
        // takes a wide id range (its real count is not known in advance).
        let span = if duration.is_some() {
            1u64 << 40
        } else {
            ((requests + warmup + cooldown) * workload.requests_per_unit()) as u64
        };
        first_id += span;
        let _ = step_rx.drain();
        let users = match plan.arrival {
            Arrival::Closed { users, .. } => users,
            Arrival::Rate { .. } | Arrival::Burst { .. } => 1,
        };
        let unit_plan = UnitPlan {
            users,
            units: plan.requests,
            warmup: plan.warmup,
            cooldown: plan.cooldown,
            timeout: plan.timeout,
            retry: plan.retry,
            seed: plan.seed,
            first_id: plan.first_id,
        };
        // HTTP targets: the server's /metrics before, during and after the level.
        let scraper = match &*target {
            AnyTarget::Http(_) => Some(Scraper::start(&rt, target.clone(), a.scrape_interval)),
            AnyTarget::Engine(_) => None,
        };
        let ((run, tasks), cpu) = crate::cpu::measure(|| match &workload {
            Workload::Single(sc) => (rt.block_on(run_level(target.clone(), sc.clone(), vocab, plan)), Vec::new()),
            Workload::Rag(..) => {
                let setup = rag_setup.clone().expect("built above for rag");
                rt.block_on(run_rag(target.clone(), setup, unit_plan))
            }
            Workload::Tasks(ag) => rt.block_on(run_tasks(target.clone(), ag.clone(), vocab, unit_plan)),
            Workload::Sessions(mt) => {
                (rt.block_on(run_sessions(target.clone(), mt.clone(), vocab, unit_plan)), Vec::new())
            }
        });
        let server = scraper.and_then(|s| s.finish(&rt));
        let steps: Vec<StepRecord> = step_rx.drain().collect();
        let measured: Vec<_> = run.measured().collect();
        let summary = summarize(load, &measured, &slos);
        let harness = Harness::new(&summary, &run, cpu, &arrival_copy);
        let turns = goodput_metrics::turns::by_turn(&measured);
        let task_summary = (!tasks.is_empty()).then(|| goodput_metrics::agent::summarize_tasks(&tasks));
        let (agent, rag) =
            if matches!(workload, Workload::Rag(..)) { (None, task_summary) } else { (task_summary, None) };
        let (warmup_requests, cooldown_requests) = run.excluded();
        let report = LevelReport {
            summary,
            warmup_requests,
            cooldown_requests,
            engine: engine_level(&steps),
            server,
            harness,
            turns,
            agent,
            rag,
        };
        for w in report.harness.warnings() {
            log(format!("warning: {} {unit}: {w}", report.summary.load), true);
        }
        if let Some(f) = files.as_mut() {
            let series = goodput_metrics::engine::series(&steps, run.start, a.series_interval.as_secs_f64());
            f.write_level(&report, &run, &steps, &series)?;
        }
        log(table::level_line(&report, unit), false);
        log(table::layers(&report, unit), false);
        bar.inc(1);
        let failed = !report.summary.slos_hold();
        levels.push(report);
        levels.sort_by(|x, y| x.summary.load.total_cmp(&y.summary.load));
        if let Some(f) = files.as_mut() {
            let setup = Setup {
                model: &spec.name,
                weights: &weights_desc,
                device: &device,
                pinning: &pinning,
                retry,
                seed: a.seed,
                target: &a.target,
                engine: serde_json::json!({
                    "block_size": a.engine.block_size,
                    "kv_blocks": a.engine.kv_blocks,
                    "kv_memory_bytes": a.engine.kv_memory,
                    "max_num_batched_tokens": a.engine.max_num_batched_tokens,
                    "max_num_seqs": a.engine.max_num_seqs,
                    "max_model_len": max_len,
                    "prefix_caching": !a.engine.no_prefix_caching,
                }),
                machine: machine(),
            };
            f.write_summary(&setup, &workload.to_json(), &slos, unit, &levels)?;
        }
        if failed && a.stop_at_first_failure {
            // A capacity search: nothing above a failing level needs running.
            bar.set_length(bar.position());
            queue.clear();
        }
    }
    bar.finish_and_clear();
    if let Some(server) = local_server.take() {
        server.stop();
    }
    if let Some(engine) = engine {
        engine.shutdown(false);
    }
    let storm =
        capacity::retry_storm(&levels.iter().map(|l| (l.summary.load, l.summary.retry_share)).collect::<Vec<_>>());
    if let Some(storm) = &storm {
        let shares: Vec<String> = storm.iter().map(|(l, s)| format!("{:.0} % at {l} {unit}", s * 100.0)).collect();
        eprintln!(
            "warning: retries feed on themselves: the share of attempts that were retries rises with load ({}); the extra attempts are load the target would not otherwise have had",
            shares.join(", ")
        );
    }
    println!("{}", table::levels(&levels, unit, &spec.name, &workload.describe()));
    if let Some(t) = table::http(&levels, unit) {
        println!("{t}");
    }
    if let Some(t) = table::server(&levels, unit) {
        println!("{t}");
    }
    if let Some(last) = levels.last().filter(|l| !l.turns.is_empty()) {
        println!("{}", table::turns(&last.turns, last.summary.load, unit));
    }
    if let Some((last, ag)) = levels.last().and_then(|l| l.agent.as_ref().map(|a| (l, a))) {
        println!("{}", table::agent(ag, last.summary.load, unit));
    }
    if let Some((last, r)) = levels.last().and_then(|l| l.rag.as_ref().map(|a| (l, a))) {
        println!("{}", table::rag(r, &last.summary, unit));
    }
    let outcomes: Vec<LevelOutcome> = levels
        .iter()
        .map(|l| LevelOutcome {
            load: l.summary.load,
            slos_hold: l.summary.slos_hold(),
            output_throughput: l.summary.output_throughput,
            queue_p50: l.summary.queue_time.as_ref().map(|q| q.p50),
        })
        .collect();
    let conclusion = Conclusion {
        scenario_name: workload.name(),
        scenario_lengths: workload.describe_lengths(),
        unit,
        slos: &slos,
        levels: &levels,
        usable: capacity::usable_capacity(&outcomes),
        limit: capacity::limit_capacity(&outcomes),
        knee: capacity::queue_knee(&outcomes, KNEE_MIN_RISE),
        no_queue_until: capacity::last_without_queueing(&outcomes, KNEE_MIN_RISE),
    };
    println!("{}", conclusion.render());
    if let Some(f) = files.as_mut() {
        f.write_conclusion(&conclusion.render())?;
        if a.report {
            let page = f.dir().join("report.html");
            crate::report::write(&crate::report::read(f.dir())?, &page)?;
            eprintln!("report in {}", page.display());
        }
        eprintln!("results in {}", f.dir().display());
    }
    Ok(())
}
