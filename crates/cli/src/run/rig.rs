//! What a run drives, set up once before its first level: the model and the engine (unless
//! the target is another process's server), the target itself (the engine in-process,
//! goodput's own server on loopback, or an external server), the RAG index, the engine's step
//! channel and the load generator's runtime. Dropping the rig stops the server and the engine.

use super::args::RunArgs;
use super::plan::RunPlan;
use crate::target::{AnyTarget, Codec, LocalServer};
use crate::workload::{EncoderEmbedder, LlmTokenizer, WorkloadSpec};
use anyhow::{bail, Context, Result};
use goodput_client::{Api, HttpConfig, HttpTarget};
use goodput_core::{Clock, StepRecord, Target};
use goodput_engine::tokenizer::Tokenizer;
use goodput_engine::Engine;
use goodput_results::{EngineSettings, Machine, Pinning};
use goodput_workload::{Dataset, Embedder, RagSetup, Workload};
use std::sync::Arc;

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

fn load_model(a: &RunArgs, plan: &RunPlan) -> Result<Model> {
    if plan.url.is_some() {
        // An external server: prompts need only the vocabulary (and a tokenizer for text).
        let tokenizer = match a.model.client_tokenizer()? {
            Some(t) => t,
            None => {
                if a.api != "completions" {
                    eprintln!(
                        "warning: no tokenizer of `{}` here (give --tokenizer, or --model as a directory or a \
                         repository in the local Hugging Face cache): the --api {} prompts are byte-level text, so \
                         their lengths under the server's tokenizer are approximate",
                        plan.spec.name, a.api
                    );
                }
                Tokenizer::try_byte_level(plan.spec.vocab_size).map_err(|e| anyhow::anyhow!("{e}"))?
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
    a.engine.apply_before_load();
    let l = a.model.load(plan.max_len)?;
    let device = if l.model.device.is_cpu() { "cpu".to_string() } else { format!("{:?}", l.model.device) };
    Ok(Model {
        weights: format!("{} ({})", l.weights_kind, l.weights_origin),
        device,
        model: Some(l.model),
        tokenizer: Arc::new(l.tokenizer),
        chat: l.chat,
    })
}

/// The workload to run: the scenario's, with RAG's encoder loaded and its corpus embedded.
fn workload(
    a: &RunArgs,
    spec: &WorkloadSpec,
    seed: u64,
    tokenizer: &Arc<Tokenizer>,
    max_len: usize,
) -> Result<Workload> {
    if let Some(t) = &spec.trace {
        if !a.quiet {
            eprintln!("trace: {}", t.describe());
        }
        return Ok(Workload::Trace(t.clone()));
    }
    if let Some(d) = &spec.dataset {
        if tokenizer.kind() == "bytes" {
            eprintln!(
                "warning: {} is measured in byte-level tokens (no tokenizer of the model here; give --tokenizer)",
                d.name
            );
        }
        let tok = LlmTokenizer(tokenizer.clone());
        let data = Dataset::build(d.name.clone(), d.conversations.clone(), &tok, d.options.clone(), max_len, seed)?;
        if !a.quiet {
            eprintln!("dataset: {}", data.describe());
        }
        return Ok(Workload::Dataset(Arc::new(data)));
    }
    Workload::from_file(spec.file.clone(), |rag| -> Result<RagSetup> {
        let t = std::time::Instant::now();
        let dir = spec.encoder.clone();
        let embedder: Arc<dyn Embedder> = match &dir {
            Some(d) => Arc::new(EncoderEmbedder(goodput_engine::encoder::Encoder::load(d, &candle_core::Device::Cpu)?)),
            None => Arc::new(goodput_workload::HashEmbedder { dims: 384 }),
        };
        let tokenizer = Arc::new(LlmTokenizer(tokenizer.clone()));
        let setup = RagSetup::build(rag, embedder, tokenizer, dir, seed)?;
        if !a.quiet {
            let with = setup.encoder.as_ref().map_or("hashed bag-of-words vectors".into(), |d| d.display().to_string());
            let n = setup.index.chunks.len();
            eprintln!("rag: embedded {n} corpus chunks with {with} in {:.2} s", t.elapsed().as_secs_f64());
        }
        Ok(setup)
    })
}

impl Rig {
    /// Runs `fut` on the load generator's runtime, with the simulated engine (if any) beside it.
    pub fn block_on<F: std::future::Future>(&self, fut: F) -> F::Output {
        self.local.block_on(&self.rt, fut)
    }

    pub fn build(a: &RunArgs, plan: &RunPlan) -> Result<Rig> {
        if let Some(path) = &a.simulate {
            return Self::simulated(a, plan, path, None);
        }
        let mut m = load_model(a, plan)?;
        let workload = workload(a, &plan.workload, plan.seed, &m.tokenizer, plan.max_len)?;
        let (step_tx, steps) = flume::unbounded();
        let (target, engine) = match m.model.take() {
            Some(model) => {
                let mut cfg = a.engine.config()?;
                cfg.cpus = a.engine_cpus.as_ref().map(|c| c.0.clone());
                let engine = Engine::start(model, cfg, Clock::new(), Some(step_tx))?;
                (AnyTarget::Engine(engine.handle()), Some(engine))
            }
            // Against another process's server: no engine here.
            None => {
                let url = plan.url.clone().context("no engine and no server to send requests to")?;
                let http = HttpTarget::new(http_config(a, plan, url, &m.tokenizer)?, Clock::new())?;
                (AnyTarget::Http(Arc::new(http)), None)
            }
        };
        let mut rig = Rig {
            rt: tokio::runtime::Builder::new_current_thread().enable_all().build()?,
            local: tokio::task::LocalSet::new(),
            simulated: false,
            tokenizer: m.tokenizer.clone(),
            target: Arc::new(target),
            workload,
            vocab: plan.spec.vocab_size,
            steps,
            weights: m.weights,
            device: m.device,
            pinning: pinning(a),
            engine,
            server: None,
        };
        if a.target == "http-local" {
            rig.serve_locally(a, plan, &m.tokenizer, m.chat)?;
        }
        rig.pin_harness(a)?;
        if plan.url.is_some() {
            rig.check_served(a, plan)?;
        }
        Ok(rig)
    }

    /// The simulated engine of `profile` in place of the model: the run's engine settings, the
    /// profile's step costs, virtual time. `tokenizer`: the measured rig's, so a twin's
    /// prompts (RAG's, built from text) are the measured run's.
    pub fn simulated(
        a: &RunArgs,
        plan: &RunPlan,
        path: &std::path::Path,
        tokenizer: Option<Arc<Tokenizer>>,
    ) -> Result<Rig> {
        if plan.url.is_some() || a.target != "in-process" {
            bail!("a simulation stands for the in-process engine; drop --target {}", a.target);
        }
        let profile = goodput_sizing::profile::Profile::read(path)?;
        if profile.model != plan.spec.name {
            bail!("{} is a profile of `{}`, not of --model `{}`", path.display(), profile.model, plan.spec.name);
        }
        warn_if_elsewhere(a, &profile, path);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build()?;
        let clock = crate::simulate::clock(&rt);
        let sc = sim_config(a, plan)?;
        let engine = goodput_sizing::sim::SimEngine::new(sc, Arc::new(profile.cost()))
            .map_err(|e| anyhow::anyhow!("the simulated engine: {e}"))?;
        let tokenizer = match tokenizer {
            Some(t) => t,
            None if plan.spec.vocab_size >= 259 => Arc::new(Tokenizer::byte_level(plan.spec.vocab_size)),
            None => bail!("a simulation needs a vocabulary of at least 259 tokens (bytes and specials)"),
        };
        let workload = workload(a, &plan.workload, plan.seed, &tokenizer, plan.max_len)?;
        let (step_tx, steps) = flume::unbounded();
        let local = tokio::task::LocalSet::new();
        let description = format!("simulated engine ({})", path.display());
        let sim = crate::simulate::SimTarget::start(&local, engine, clock, plan.spec.vocab_size, step_tx, description);
        Ok(Rig {
            rt,
            local,
            target: Arc::new(AnyTarget::Sim(sim)),
            workload,
            vocab: plan.spec.vocab_size,
            steps,
            weights: format!("simulated from {} ({})", path.display(), profile.source),
            device: format!(
                "simulated {} ({}, {} CPUs)",
                profile.fingerprint.device, profile.fingerprint.cpu, profile.fingerprint.logical_cpus
            ),
            pinning: pinning(a),
            simulated: true,
            tokenizer,
            engine: None,
            server: None,
        })
    }

    /// goodput's own server on loopback, on its own threads (so this thread's CPU time stays
    /// the load generator's), driven over HTTP.
    fn serve_locally(
        &mut self,
        a: &RunArgs,
        plan: &RunPlan,
        tokenizer: &Arc<Tokenizer>,
        template: goodput_engine::loader::ChatFormat,
    ) -> Result<()> {
        let e = self.engine.as_ref().context("http-local needs the engine")?;
        let st = crate::serve::state(
            e,
            tokenizer.clone(),
            served_name(a, plan),
            template,
            goodput_server::Policy::default(),
        )?;
        let server = LocalServer::start(st, a.harness_cpus.as_ref().map(|c| c.0.clone()))?;
        let http = HttpTarget::new(http_config(a, plan, server.url.clone(), tokenizer)?, e.handle().clock())?;
        self.server = Some(server);
        self.target = Arc::new(AnyTarget::Http(Arc::new(http)));
        Ok(())
    }

    /// The engine thread is pinned by now; this thread (the load generator) follows.
    fn pin_harness(&self, a: &RunArgs) -> Result<()> {
        if let Some(h) = &a.harness_cpus {
            goodput_engine::affinity::pin_current(&h.0)?;
        }
        if let (Some(e), Some(h)) = (&a.engine_cpus, &a.harness_cpus) {
            if e.0.iter().any(|c| h.0.contains(c)) {
                eprintln!(
                    "warning: --engine-cpus and --harness-cpus share CPUs; the harness competes with the engine there"
                );
            }
        }
        Ok(())
    }

    /// Checks that the server serves the model; without --served-model-name, a server that
    /// serves one model only is asked for its name (`GET /v1/models`).
    fn check_served(&mut self, a: &RunArgs, plan: &RunPlan) -> Result<()> {
        let Some(h) = self.http() else { return Ok(()) };
        let models = self.block_on(h.models()).context("asking the server for its models")?;
        let name = served_name(a, plan);
        if models.contains(&name) {
            return Ok(());
        }
        match models.as_slice() {
            [only] if a.served_model_name.is_none() => {
                if !a.quiet {
                    eprintln!("the server serves `{only}` (GET /v1/models); sending that as the model name");
                }
                let cfg = HttpConfig { model: only.clone(), ..h.config().clone() };
                self.target = Arc::new(AnyTarget::Http(Arc::new(HttpTarget::new(cfg, h.clock())?)));
                Ok(())
            }
            _ => bail!(
                "the server at {} does not serve `{name}` (it lists {models:?}); pass --served-model-name",
                h.config().base_url
            ),
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

fn served_name(a: &RunArgs, plan: &RunPlan) -> String {
    a.served_model_name.clone().unwrap_or_else(|| plan.spec.name.clone())
}

fn http_config(a: &RunArgs, plan: &RunPlan, base_url: String, tokenizer: &Arc<Tokenizer>) -> Result<HttpConfig> {
    Ok(HttpConfig {
        base_url,
        model: served_name(a, plan),
        api: match a.api.as_str() {
            "chat" => Api::Chat,
            "completions-text" => Api::CompletionsText,
            _ => Api::Completions,
        },
        exact_lengths: true,
        return_token_ids: plan.url.is_none(),
        same_clock: plan.url.is_none(),
        codec: Some(Arc::new(Codec(tokenizer.clone()))),
        server_stamps: !a.ignore_server_stamps,
        strict_openai: a.connection.strict_openai,
        extra_body: a.connection.extra_body.clone().unwrap_or_default(),
        connection: a.connection.connection()?,
        timeout: a.timeout,
    })
}

fn pinning(a: &RunArgs) -> Pinning {
    let list = |c: &Option<crate::args::CpuList>| c.as_ref().map(|c| goodput_engine::affinity::format_cpu_list(&c.0));
    Pinning { engine: list(&a.engine_cpus), harness: list(&a.harness_cpus) }
}

/// Warns when the profile was measured on another machine, or pinned otherwise, than this run.
fn warn_if_elsewhere(a: &RunArgs, profile: &goodput_sizing::profile::Profile, path: &std::path::Path) {
    let here = machine();
    let f = &profile.fingerprint;
    let engine_cpus = a.engine_cpus.as_ref().map(|c| goodput_engine::affinity::format_cpu_list(&c.0));
    if f.cpu != here.cpu || f.logical_cpus != here.logical_cpus {
        eprintln!(
            "warning: {} was measured on {} ({} CPUs), this is {} ({} CPUs): its step costs stand for that machine",
            path.display(),
            f.cpu,
            f.logical_cpus,
            here.cpu,
            here.logical_cpus
        );
    } else if a.predict.is_some() && f.engine_cpus != engine_cpus {
        eprintln!(
            "warning: {} was measured with the engine on CPUs {:?}, this run pins it to {:?}: pin both alike",
            path.display(),
            f.engine_cpus,
            engine_cpus
        );
    }
}

/// The scheduler of a simulation: the run's engine settings over the model, the KV pool sized
/// at the run's dtype.
fn sim_config(a: &RunArgs, plan: &RunPlan) -> Result<goodput_scheduler::SchedulerConfig> {
    let cfg = a.engine.config()?;
    let (_, dtype) = a.model.device_dtype()?;
    let num_blocks = match cfg.num_blocks {
        Some(n) => n,
        None => goodput_engine::kv_cache::KvCache::blocks_for_bytes(&plan.spec, cfg.block_size, dtype, cfg.kv_memory),
    };
    let sc = goodput_scheduler::SchedulerConfig {
        max_num_batched_tokens: cfg.max_num_batched_tokens,
        max_num_seqs: cfg.max_num_seqs,
        num_blocks,
        block_size: cfg.block_size,
        enable_prefix_caching: cfg.enable_prefix_caching,
        max_model_len: plan.max_len,
        eos_token_id: plan.spec.eos_token_id,
    };
    sc.validate().map_err(|e| anyhow::anyhow!("{e}: raise --kv-blocks or --kv-memory, or check the engine flags"))?;
    Ok(sc)
}

/// The engine's settings as given (for the setup).
pub fn engine_settings(a: &RunArgs, plan: &RunPlan) -> EngineSettings {
    let e = &a.engine;
    EngineSettings {
        block_size: e.block_size,
        kv_blocks: e.kv_blocks,
        kv_memory_bytes: Some(e.kv_memory),
        max_num_batched_tokens: e.max_num_batched_tokens,
        max_num_seqs: e.max_num_seqs,
        max_model_len: plan.max_len,
        prefix_caching: !e.no_prefix_caching,
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
        logical_cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
        memory_gib: (mem_kib as f64 / (1024.0 * 1024.0) * 10.0).round() / 10.0,
        kernel: read("/proc/sys/kernel/osrelease").trim().to_string(),
    }
}
