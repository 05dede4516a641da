//! What a run drives, set up once before its first level: the model and the engine (unless
//! the target is another process's server), the target itself (the engine in-process,
//! goodput's own server on loopback, or an external server), the RAG index, the engine's step
//! channel and the load generator's runtime. Dropping the rig stops the server and the engine.

use super::error::{io, RunError};
use super::spec::{HttpSpec, RunSpec, Simulation, TargetSpec};
use crate::progress::Progress;
use crate::target::{AnyTarget, LocalServer};
use crate::workload::{EncoderEmbedder, ModelCodec};
use goodput_client::{Api, HttpConfig, HttpTarget};
use goodput_core::{Clock, StepRecord, Target, TextCodec};
use goodput_engine::tokenizer::Tokenizer;
use goodput_engine::Engine;
use goodput_engine::EngineConfig;
use goodput_results::{Machine, Pinning};
use goodput_workload::{Dataset, Embedder, RagSetup, Workload};
use std::sync::Arc;

type Result<T, E = RunError> = std::result::Result<T, E>;

pub struct Rig {
    /// The load generator's runtime: one thread, so its CPU time is the harness's own cost.
    /// Paused (virtual time) for a simulation.
    pub rt: tokio::runtime::Runtime,
    /// Where the simulated engine runs (its scheduler is single-threaded); levels are driven
    /// inside it ([`Rig::block_on`]).
    local: tokio::task::LocalSet,
    pub target: Arc<AnyTarget>,
    pub workload: Workload,
    /// The model's vocabulary (prompts are token ids drawn from it).
    pub vocab: usize,
    /// The engine's steps, as it takes them (in-process and http-local).
    pub steps: flume::Receiver<StepRecord>,
    /// Weights and device, as the setup describes them.
    pub weights: String,
    pub device: String,
    pub pinning: Pinning,
    /// The simulation stands in for the engine (`--simulate`).
    pub simulated: bool,
    /// The model's tokenizer (byte-level against another process's server or a simulation).
    pub tokenizer: Arc<Tokenizer>,
    engine: Option<Engine>,
    server: Option<LocalServer>,
    /// The load generator's worker pool, one pinned thread per CPU of a `--harness-cpus` of
    /// two or more; none, and the runtime's thread does it all, otherwise.
    workers: Option<goodput_workload::pool::Workers>,
}

impl Drop for Rig {
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            server.stop();
        }
        if let Some(engine) = self.engine.take() {
            engine.shutdown(false);
        }
    }
}

/// The model as loaded here, or what stands for it against another process's server.
struct Model {
    model: Option<goodput_engine::model::Llama>,
    tokenizer: Arc<Tokenizer>,
    chat: goodput_engine::loader::ChatFormat,
    weights: String,
    device: String,
}

fn load_model(s: &RunSpec, p: &dyn Progress) -> Result<Model> {
    if let TargetSpec::Url { http, .. } = &s.target {
        // An external server: prompts need only the vocabulary (and a tokenizer for text).
        let tokenizer = match s.model_args.client_tokenizer()? {
            Some(t) => t,
            None => {
                if http.config.api == Api::Completions {
                    let line = format!(
                        "prompts: token ids below `{}`'s vocabulary of {} (no tokenizer of it here): for the served model's own, give --model (its directory, catalog name or ORG/NAME in the local Hugging Face cache) or --tokenizer",
                        s.model.name, s.model.vocab_size
                    );
                    p.line(&line, false);
                } else {
                    let line = format!(
                        "warning: no tokenizer of `{}` here (give --tokenizer, or --model as a directory or a \
                         repository in the local Hugging Face cache): the --api {} prompts are byte-level text, so \
                         their lengths under the server's tokenizer are approximate",
                        s.model.name,
                        http.api_flag()
                    );
                    p.line(&line, true);
                }
                Tokenizer::try_byte_level(s.model.vocab_size).map_err(RunError::Tokenizer)?
            }
        };
        return Ok(Model {
            model: None,
            tokenizer: Arc::new(tokenizer),
            chat: Default::default(),
            weights: "served elsewhere".into(),
            device: "remote".into(),
        });
    }
    s.engine.apply_before_load();
    let mut warnings = Vec::new();
    let l = s.model_args.load(s.max_len, &mut warnings)?;
    warnings.iter().for_each(|w| p.line(&format!("goodput: warning: {w}"), true));
    let device = if l.model.device.is_cpu() { "cpu".to_string() } else { format!("{:?}", l.model.device) };
    Ok(Model {
        weights: l.weights_text(),
        device,
        model: Some(l.model),
        tokenizer: Arc::new(l.tokenizer),
        chat: l.chat,
    })
}

/// The workload to run: the scenario's, with RAG's encoder loaded and its corpus embedded
/// (and, for a `simulated` engine, the harness's stages timed here: see [`time_harness`]).
fn workload(s: &RunSpec, tokenizer: &Arc<Tokenizer>, simulated: bool, p: &dyn Progress) -> Result<Workload> {
    let (spec, seed, max_len) = (&s.workload, s.seed, s.max_len);
    if let Some(t) = &spec.trace {
        let t = match t.has_text() {
            true => Arc::new(t.tokenized(|text| tokenizer.encode(text))?),
            false => t.clone(),
        };
        p.line(&format!("trace: {}", t.describe()), false);
        return Ok(Workload::Trace(t));
    }
    if let Some(d) = &spec.dataset {
        if tokenizer.kind() == "bytes" {
            let line = format!(
                "warning: {} is measured in byte-level tokens (no tokenizer of the model here; give --tokenizer)",
                d.name
            );
            p.line(&line, true);
        }
        let tok = ModelCodec(tokenizer.clone());
        let data = Dataset::build(d.name.clone(), d.conversations.clone(), &tok, d.options.clone(), max_len, seed)?;
        p.line(&format!("dataset: {}", data.describe()), false);
        return Ok(Workload::Dataset(Arc::new(data)));
    }
    Workload::from_file(spec.file.clone(), |rag| -> Result<RagSetup> {
        let t = std::time::Instant::now();
        let dir = spec.encoder.clone();
        let embedder: Arc<dyn Embedder> = match &dir {
            Some(d) => Arc::new(EncoderEmbedder(goodput_engine::encoder::Encoder::load(d, &candle_core::Device::Cpu)?)),
            None => {
                let line = format!(
                    "rag: no sentence encoder at {} (scripts/fetch-minilm.sh fetches all-MiniLM-L6-v2); the embed stage is the engine's own prefill-only pass over the query, and retrieval uses hashed bag-of-words vectors",
                    crate::workload::default_encoder_dir().display()
                );
                p.line(&line, false);
                Arc::new(goodput_workload::HashEmbedder { dims: 384 })
            }
        };
        let codec: Arc<dyn TextCodec> = Arc::new(ModelCodec(tokenizer.clone()));
        let mut setup = RagSetup::build(rag, embedder, codec, dir, seed)?;
        let with = setup.encoder.as_ref().map_or("hashed bag-of-words vectors".into(), |d| d.display().to_string());
        let n = setup.index.chunks.len();
        p.line(&format!("rag: embedded {n} corpus chunks with {with} in {:.2} s", t.elapsed().as_secs_f64()), false);
        if simulated {
            time_harness(&mut setup, seed, s.harness_cpus.as_deref(), p)?;
        }
        Ok(setup)
    })
}

/// Queries timed for a simulated RAG run's harness stages.
const HARNESS_QUERIES: usize = 64;

/// A simulated RAG run's harness: the CPU time of each stage before a model call, timed here
/// (the encoder really runs, but outside virtual time) on one CPU — the first of `harness`
/// (the measured run's `--harness-cpus`), else the last this thread may use — for the twin to
/// spend on as many virtual cores as the harness had (one when it was not pinned).
fn time_harness(setup: &mut RagSetup, seed: u64, harness: Option<&[usize]>, p: &dyn Progress) -> Result<()> {
    let cpu = harness.and_then(|h| h.first().copied()).or_else(|| goodput_engine::affinity::allowed().last().copied());
    let (costs, pinned) = std::thread::scope(|sc| {
        sc.spawn(|| {
            // One CPU: the encoder's matrix products then run on one thread, as the measured
            // harness's, whose threads are pinned.
            let pinned = cpu.is_some_and(|c| goodput_engine::affinity::pin_current(&[c]).is_ok());
            (setup.time_stages(seed, HARNESS_QUERIES), pinned)
        })
        .join()
        .unwrap_or_else(|_| (Err("the timing thread panicked".into()), false))
    });
    let costs = costs.map_err(RunError::HarnessTiming)?;
    let cores = harness.map_or(1, <[usize]>::len);
    let each: Vec<String> =
        costs.iter().map(|(k, d)| format!("{} {:.2} ms", k.name(), d.as_secs_f64() * 1e3)).collect();
    let on = match (pinned, cpu) {
        (true, Some(c)) => format!("on CPU {c}"),
        _ => "unpinned".to_string(),
    };
    let line = format!(
        "rag: the twin spends each query's harness time on {cores} core{}, as timed here {on} (median of {HARNESS_QUERIES}): {}",
        if cores == 1 { "" } else { "s" },
        each.join(", ")
    );
    p.line(&line, false);
    setup.harness = Some(goodput_workload::harness::HarnessWork::new(costs, cores));
    Ok(())
}

impl Rig {
    /// Runs `fut` on the load generator's runtime, with the simulated engine (if any) beside
    /// it, its requests spread over the worker pool if there is one.
    pub fn block_on<F: std::future::Future>(&self, fut: F) -> F::Output {
        let _pool = self.workers.as_ref().map(goodput_workload::pool::Workers::enter);
        self.local.block_on(&self.rt, fut)
    }

    /// The worker pool's threads (none without a pool), whose CPU is the harness's.
    #[cfg(unix)]
    pub fn worker_threads(&self) -> Vec<std::os::unix::thread::RawPthread> {
        self.workers.as_ref().map_or_else(Vec::new, |w| w.pthreads())
    }

    /// The worker pool's threads (none without a pool), whose CPU is the harness's.
    #[cfg(not(unix))]
    pub fn worker_threads(&self) -> Vec<()> {
        Vec::new()
    }

    /// With `--harness-cpus` of two or more CPUs: a worker per CPU, pinned to it.
    fn start_workers(&mut self, s: &RunSpec) -> Result<()> {
        let Some(cpus) = s.harness_cpus.clone().filter(|c| c.len() >= 2) else { return Ok(()) };
        let http = self.http();
        let workers = goodput_workload::pool::Workers::start(cpus.len(), move |k| {
            if let Err(e) = goodput_engine::affinity::pin_current(&[cpus[k]]) {
                eprintln!("warning: load-generator worker {k}: {e}");
            }
            // Each worker's HTTP client built before the first request, not during it.
            if let Some(h) = &http {
                h.prepare_here();
            }
        })?;
        self.workers = Some(workers);
        Ok(())
    }

    /// Sets up what `s` drives; what it says on the way goes to `p`.
    pub fn build(s: &RunSpec, p: &dyn Progress) -> Result<Rig> {
        if let TargetSpec::InProcess { engine, simulation: Some(Simulation::Simulate(path)) } = &s.target {
            return Self::simulated(s, engine, path, None, p);
        }
        let mut m = load_model(s, p)?;
        let workload = workload(s, &m.tokenizer, false, p)?;
        let (step_tx, steps) = flume::unbounded();
        let (target, engine) = match (&s.target, m.model.take()) {
            (TargetSpec::InProcess { engine: cfg, .. } | TargetSpec::HttpLocal { engine: cfg, .. }, Some(model)) => {
                let engine = Engine::start(model, cfg.clone(), Clock::new(), Some(step_tx))?;
                (AnyTarget::Engine(engine.handle()), Some(engine))
            }
            // Against another process's server: no engine here.
            (TargetSpec::Url { url, http, .. }, None) => {
                let http = HttpTarget::new(http_config(http, url.clone(), &m.tokenizer), Clock::new())?;
                (AnyTarget::Http(Arc::new(http)), None)
            }
            _ => return Err(RunError::NoTarget),
        };
        let mut rig = Rig {
            rt: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(io("the load generator's runtime"))?,
            local: tokio::task::LocalSet::new(),
            simulated: false,
            tokenizer: m.tokenizer.clone(),
            target: Arc::new(target),
            workload,
            vocab: s.model.vocab_size,
            steps,
            weights: m.weights,
            device: m.device,
            pinning: pinning(s),
            engine,
            server: None,
            workers: None,
        };
        if let TargetSpec::HttpLocal { http, .. } = &s.target {
            rig.serve_locally(s, http, &m.tokenizer, m.chat)?;
        }
        rig.pin_harness(s, p)?;
        rig.start_workers(s)?;
        if let TargetSpec::Url { http, .. } = &s.target {
            rig.check_served(http, p)?;
        }
        Ok(rig)
    }

    /// The simulated engine of `profile` in place of the in-process engine of `engine`: the
    /// run's engine settings, the profile's step costs, virtual time. `tokenizer`: the measured
    /// rig's, so a twin's prompts (RAG's, built from text) are the measured run's.
    pub fn simulated(
        s: &RunSpec,
        engine: &EngineConfig,
        path: &std::path::Path,
        tokenizer: Option<Arc<Tokenizer>>,
        p: &dyn Progress,
    ) -> Result<Rig> {
        let profile = goodput_sizing::profile::Profile::read(path)?;
        if profile.model != s.model.name {
            let (profile, model) = (profile.model, s.model.name.clone());
            return Err(RunError::ProfileModel { path: path.to_path_buf(), profile, model });
        }
        let projected = profile.projection.is_some();
        if projected {
            let line = format!(
                "note: {} is a projection ({}): roofline step costs of a GPU goodput has not measured",
                path.display(),
                profile.source
            );
            p.line(&line, true);
        } else {
            warn_if_elsewhere(s, &profile, path, p);
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .map_err(io("the simulation's runtime"))?;
        let clock = crate::simulate::clock(&rt);
        let mut cfg = engine.clone();
        let pe = &profile.engine;
        // The profiled engine's cap on a step's prefill tokens, unless the run sets one.
        cfg.max_prefill_tokens = cfg.max_prefill_tokens.or(pe.max_prefill_tokens);
        if projected && (cfg.max_num_seqs, cfg.max_num_batched_tokens) != (pe.max_num_seqs, pe.max_num_batched_tokens) {
            let line = format!(
                "note: the projection's KV pool was sized for {} sequences and {} batched tokens a step; this run takes {} and {} (give --max-num-seqs and --max-num-batched-tokens as the plan had them)",
                pe.max_num_seqs, pe.max_num_batched_tokens, cfg.max_num_seqs, cfg.max_num_batched_tokens
            );
            p.line(&line, true);
        }
        if projected && s.engine.kv_blocks.is_none() && s.engine.kv_memory.is_none() {
            // The projected GPU's KV pool, unless the run sizes its own.
            (cfg.num_blocks, cfg.block_size) = (Some(profile.engine.num_blocks), profile.engine.block_size);
        }
        let sc = sim_config(s, &cfg)?;
        let engine = goodput_sizing::sim::SimEngine::new(sc, profile.step_cost()).map_err(RunError::Simulator)?;
        let tokenizer = match tokenizer {
            Some(t) => t,
            None if s.model.vocab_size >= 259 => Arc::new(Tokenizer::byte_level(s.model.vocab_size)),
            None => return Err(RunError::SmallVocab),
        };
        let workload = workload(s, &tokenizer, true, p)?;
        let (step_tx, steps) = flume::unbounded();
        let local = tokio::task::LocalSet::new();
        let description = format!("simulated engine ({})", path.display());
        let sim = crate::simulate::SimTarget::start(&local, engine, clock, s.model.vocab_size, step_tx, description);
        Ok(Rig {
            rt,
            local,
            target: Arc::new(AnyTarget::Sim(sim)),
            workload,
            vocab: s.model.vocab_size,
            steps,
            weights: format!("simulated from {} ({})", path.display(), profile.source),
            device: if projected {
                format!("projected {} — a roofline projection, not a measurement", profile.fingerprint.device)
            } else {
                format!(
                    "simulated {} ({}, {} CPUs)",
                    profile.fingerprint.device, profile.fingerprint.cpu, profile.fingerprint.logical_cpus
                )
            },
            pinning: pinning(s),
            simulated: true,
            tokenizer,
            engine: None,
            server: None,
            workers: None,
        })
    }

    /// goodput's own server on loopback, on its own threads (so this thread's CPU time stays
    /// the load generator's), driven over HTTP.
    fn serve_locally(
        &mut self,
        s: &RunSpec,
        http: &HttpSpec,
        tokenizer: &Arc<Tokenizer>,
        template: goodput_engine::loader::ChatFormat,
    ) -> Result<()> {
        let Some(e) = self.engine.as_ref() else { return Err(RunError::NoTarget) };
        let name = http.config.model.clone();
        let st =
            Arc::new(goodput_server::AppState::new(e.handle(), tokenizer.clone(), name, template, Default::default())?);
        let server = LocalServer::start(st, s.harness_cpus.clone())?;
        let http = HttpTarget::new(http_config(http, server.url.clone(), tokenizer), e.handle().clock())?;
        self.server = Some(server);
        self.target = Arc::new(AnyTarget::Http(Arc::new(http)));
        Ok(())
    }

    /// The engine thread is pinned by now; this thread (the load generator) follows.
    fn pin_harness(&self, s: &RunSpec, p: &dyn Progress) -> Result<()> {
        if let Some(h) = &s.harness_cpus {
            goodput_engine::affinity::pin_current(h)?;
        }
        if let (Some(e), Some(h)) = (&s.engine_cpus, &s.harness_cpus) {
            if e.iter().any(|c| h.contains(c)) {
                p.line(
                    "warning: --engine-cpus and --harness-cpus share CPUs; the harness competes with the engine there",
                    true,
                );
            }
        }
        Ok(())
    }

    /// Checks that the server serves the model; without --served-model-name, a server that
    /// serves one model only is asked for its name (`GET /v1/models`).
    fn check_served(&mut self, http: &HttpSpec, p: &dyn Progress) -> Result<()> {
        let Some(h) = self.http() else { return Ok(()) };
        let models = self.block_on(h.models()).map_err(RunError::Models)?;
        let name = &http.config.model;
        if models.contains(name) {
            return Ok(());
        }
        match models.as_slice() {
            [only] if !http.name_given => {
                p.line(&format!("the server serves `{only}` (GET /v1/models); sending that as the model name"), false);
                let cfg = HttpConfig { model: only.clone(), ..h.config().clone() };
                self.target = Arc::new(AnyTarget::Http(Arc::new(HttpTarget::new(cfg, h.clock())?)));
                Ok(())
            }
            _ => Err(RunError::NotServed { url: h.config().base_url.clone(), name: name.clone(), models }),
        }
    }

    /// The HTTP target, when requests go over HTTP.
    pub fn http(&self) -> Option<Arc<HttpTarget>> {
        match &*self.target {
            AnyTarget::Http(h) => Some(h.clone()),
            AnyTarget::Engine(_) | AnyTarget::Sim(_) => None,
        }
    }

    /// Whether the engine runs in this process (its steps are seen, it shares the CPU).
    pub fn engine_in_process(&self) -> bool {
        self.engine.is_some()
    }
}

/// The client's settings of `http` completed: the server at `base_url`, the model's tokenizer
/// as the codec (a byte-level stand-in writes prompts but counts nothing: the server's usage
/// and the streamed chunks count instead).
fn http_config(http: &HttpSpec, base_url: String, tokenizer: &Arc<Tokenizer>) -> HttpConfig {
    HttpConfig {
        base_url,
        codec: Some(Arc::new(ModelCodec(tokenizer.clone()))),
        codec_counts: tokenizer.kind() != "bytes",
        ..http.config.clone()
    }
}

fn pinning(s: &RunSpec) -> Pinning {
    let list = |c: &Option<Vec<usize>>| c.as_deref().map(goodput_engine::affinity::format_cpu_list);
    Pinning { engine: list(&s.engine_cpus), harness: list(&s.harness_cpus) }
}

/// Warns when the profile was measured on another machine, or pinned otherwise, than this run.
fn warn_if_elsewhere(
    s: &RunSpec,
    profile: &goodput_sizing::profile::Profile,
    path: &std::path::Path,
    p: &dyn Progress,
) {
    let here = machine();
    let f = &profile.fingerprint;
    if f.logical_cpus == 0 {
        // Fitted from a GPU's bench rows: no CPU to compare.
        return;
    }
    let engine_cpus = s.engine_cpus.as_deref().map(goodput_engine::affinity::format_cpu_list);
    if f.cpu != here.cpu || f.logical_cpus != here.logical_cpus {
        let line = format!(
            "warning: {} was measured on {} ({} CPUs), this is {} ({} CPUs): its step costs stand for that machine",
            path.display(),
            f.cpu,
            f.logical_cpus,
            here.cpu,
            here.logical_cpus
        );
        p.line(&line, true);
    } else if s.target.predict().is_some() && f.engine_cpus != engine_cpus {
        let line = format!(
            "warning: {} was measured with the engine on CPUs {:?}, this run pins it to {:?}: pin both alike",
            path.display(),
            f.engine_cpus,
            engine_cpus
        );
        p.line(&line, true);
    }
}

/// The scheduler of a simulation: the run's engine settings (`cfg`) over the model, the KV
/// pool sized at the run's dtype.
fn sim_config(s: &RunSpec, cfg: &EngineConfig) -> Result<goodput_scheduler::SchedulerConfig> {
    let (_, dtype) = s.model_args.device_dtype()?;
    let num_blocks = match cfg.num_blocks {
        Some(n) => n,
        None => goodput_engine::kv_cache::KvCache::blocks_for_bytes(&s.model, cfg.block_size, dtype, cfg.kv_memory),
    };
    let sc = goodput_scheduler::SchedulerConfig {
        max_num_batched_tokens: cfg.max_num_batched_tokens,
        max_prefill_tokens: cfg.max_prefill_tokens,
        max_num_seqs: cfg.max_num_seqs,
        num_blocks,
        block_size: cfg.block_size,
        enable_prefix_caching: cfg.enable_prefix_caching,
        max_model_len: s.max_len,
        eos_token_id: s.model.eos_token_id,
        group_windows: s.model.kv_groups().iter().map(|g| g.window).collect(),
    };
    sc.validate().map_err(|reason| RunError::SimSettings { reason })?;
    Ok(sc)
}

/// The machine's logical CPUs: those /proc/cpuinfo lists, not the ones this process may run
/// on (a profile pinned to one core was measured on the same two-core machine as a run that
/// is not), else what the standard library sees.
fn logical_cpus(cpuinfo: &str) -> usize {
    match cpuinfo.lines().filter(|l| l.starts_with("processor")).count() {
        0 => std::thread::available_parallelism().map_or(0, |n| n.get()),
        n => n,
    }
}

/// CPU model, logical CPUs, memory and kernel of this machine, for the report's setup.
pub fn machine() -> Machine {
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
    Machine {
        cpu: field(&cpuinfo, "model name"),
        logical_cpus: logical_cpus(&cpuinfo),
        memory_gib: (mem_kib as f64 / (1024.0 * 1024.0) * 10.0).round() / 10.0,
        kernel: read("/proc/sys/kernel/osrelease").trim().to_string(),
    }
}
