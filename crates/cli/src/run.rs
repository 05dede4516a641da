//! `goodput run`: a scenario through a sweep of load levels against the in-process engine,
//! with the three layers of numbers per level, SLO checks, usable and limit capacity, the
//! queueing knee, and the written conclusion of the seeds.

use crate::args::{parse_cpus, parse_duration, parse_duration_or_zero, parse_span, parse_stage, CpuList, Span};
use crate::args::{EngineArgs, ModelArgs};
use crate::level::{engine_level, machine, Harness, LevelReport, Occupancy, Pinning, Setup};
use crate::output::{Conclusion, RunFiles};
use crate::table;
use crate::target::{AnyTarget, LocalServer, Scraper};
use crate::workload::{build_workload, EncoderEmbedder, LlmTokenizer, Workload};
use anyhow::{bail, Context, Result};
use clap::Args;
use goodput_core::{Clock, StepRecord};
use goodput_engine::Engine;
use goodput_metrics::capacity::{self, LevelOutcome};
use goodput_metrics::level::summarize;
use goodput_metrics::slo::{parse_slos, Slo};
use goodput_workload::{
    run_level, run_rag, run_sessions, run_tasks, Arrival, Embedder, LevelPlan, RagIndex, RagSetup, UnitPlan,
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
    /// HTTP API: `completions` (prompts as token ids, exact lengths), `completions-text`
    /// (prompts decoded to text, for servers that take no token ids, as llama.cpp's) or `chat`
    /// (prompts as text in one user message, through the server's chat template).
    #[arg(long, default_value = "completions", value_parser = ["completions", "completions-text", "chat"])]
    pub api: String,
    /// HTTP targets: ignore the per-request engine stamps a server returns (goodput's own
    /// `goodput` object), as for a server that returns none (vLLM, SGLang, TGI's OpenAI
    /// route): queue and prefill then come only from its /metrics. Checks what an HTTP-only
    /// view of a server can explain against what the stamps explain.
    #[arg(long)]
    pub ignore_server_stamps: bool,
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
    /// after it). Its histograms are taken between the scrapes that bracket the measured
    /// requests, so a shorter interval leaves out warm-up more exactly.
    #[arg(long, default_value = "500ms", value_parser = parse_duration)]
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
        api: match a.api.as_str() {
            "chat" => goodput_client::Api::Chat,
            "completions-text" => goodput_client::Api::CompletionsText,
            _ => goodput_client::Api::Completions,
        },
        exact_lengths: true,
        return_token_ids: url.is_none(),
        same_clock: url.is_none(),
        codec: Some(Arc::new(crate::target::Codec(tokenizer.clone()))),
        server_stamps: !a.ignore_server_stamps,
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
        // The server's histograms over the measured requests: from when the last warm-up
        // request ended to when the last measured one did.
        let last_end =
            |p: goodput_workload::Phase| run.records.iter().filter(|r| run.phase(r) == p).map(|r| r.end).max();
        let measured_span =
            last_end(goodput_workload::Phase::Measured).map(|end| (last_end(goodput_workload::Phase::Warmup), end));
        // The engine's state over the measured window (the summary's): from the first measured
        // request's intended send to the last one's end, so a warm-up burst is left out.
        let measured: Vec<_> = run.measured().collect();
        let window = measured.iter().map(|r| r.intended).min().zip(measured.iter().map(|r| r.end).max());
        let server = scraper.and_then(|s| s.finish(&rt, measured_span, window));
        let steps: Vec<StepRecord> = step_rx.drain().collect();
        let summary = summarize(load, &measured, &slos);
        let harness = Harness::new(&summary, &run, cpu, &arrival_copy, url.is_none());
        let turns = goodput_metrics::turns::by_turn(&measured);
        let task_summary = (!tasks.is_empty()).then(|| goodput_metrics::agent::summarize_tasks(&tasks));
        let (agent, rag) =
            if matches!(workload, Workload::Rag(..)) { (None, task_summary) } else { (task_summary, None) };
        let (warmup_requests, cooldown_requests) = run.excluded();
        let in_window: Vec<StepRecord> = match window {
            Some((from, to)) => steps.iter().filter(|s| s.end >= from && s.start <= to).cloned().collect(),
            None => Vec::new(),
        };
        let engine = engine_level(if in_window.is_empty() { &steps } else { &in_window });
        let report = LevelReport {
            summary,
            warmup_requests,
            cooldown_requests,
            occupancy: Occupancy::of(&engine, server.as_ref()),
            engine,
            server,
            harness,
            turns,
            agent,
            rag,
        };
        for w in report.harness.warnings() {
            log(format!("warning: {} {unit}: {w}", report.summary.load), true);
        }
        if report.summary.short_outputs > 0 {
            log(
                format!(
                    "warning: {} {unit}: {} of {} completed requests returned fewer output tokens than the scenario requires (the server ignores ignore_eos/min_tokens, or cut them short): output lengths, TPOT and throughput are not the scenario's",
                    report.summary.load, report.summary.short_outputs, report.summary.completed
                ),
                true,
            );
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
            queue_time: l.queue_time().map(|q| q.0),
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
