//! The engine's step, synchronous: scheduler → packed forward over the paged pool → sampling
//! → stamps. [`EngineCore`] owns everything and has no thread; [`crate::Engine`] wraps it in
//! one. Benches and tests drive it directly. (The module is named for what it runs: "core" is
//! the `goodput-core` crate and the standard library, and "engine" is the crate.)

use crate::cuda::{self, StepGraphs};
use crate::error::{EngineError, Result};
use crate::kv_cache::KvCache;
use crate::model::{Llama, StepBatch};
use crate::sampler::Sampler;
use candle_core::{DType, Tensor};
use goodput_core::{Clock, EngineRecord, FinishReason, RequestId, SamplingParams, Stamp, StepRecord, TokenId};
use goodput_scheduler::{NewRequest, Scheduler, SchedulerConfig, SchedulerOutput, StepUpdate};
use std::collections::HashMap;

/// Sizes and limits of an engine.
#[derive(Clone, Debug, PartialEq)]
pub struct EngineConfig {
    pub block_size: usize,
    /// Blocks in the KV pool (including the null block); `None`: from `kv_memory`.
    pub num_blocks: Option<usize>,
    /// KV pool size in bytes when `num_blocks` is not given.
    pub kv_memory: u64,
    pub max_num_batched_tokens: usize,
    /// Prefill tokens past which a step starts no further prompt; `None`: by device
    /// ([`EngineConfig::prefill_cap`]).
    pub max_prefill_tokens: Option<usize>,
    pub max_num_seqs: usize,
    pub enable_prefix_caching: bool,
    /// Longest sequence; `None`: the model's `max_position_embeddings`.
    pub max_model_len: Option<usize>,
    /// Pin the engine thread and its compute threads (a rayon pool of this many threads) to
    /// these CPUs; `None`: no pinning, the global rayon pool.
    pub cpus: Option<Vec<usize>>,
    /// Test-only: sleep this long before every step (a deliberately slowed engine, for
    /// regression checks of `goodput compare`).
    pub step_delay: std::time::Duration,
    /// On CUDA with goodput's kernels: serve decode steps from CUDA graphs captured per
    /// batch-size bucket (`cuda/graph_serve.rs`).
    pub cuda_graphs: bool,
    /// With `cuda_graphs`: serve mixed steps (prefill chunks, with or without decode rows)
    /// from graphs too, captured per (token, sequence) bucket.
    pub cuda_mixed_graphs: bool,
    /// On CUDA: launch goodput's kernels with programmatic dependent launch
    /// (`cuda/launch.rs`), process-wide.
    pub cuda_pdl: bool,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            block_size: 16,
            num_blocks: None,
            kv_memory: 1 << 30,
            max_num_batched_tokens: 2048,
            max_prefill_tokens: None,
            max_num_seqs: 256,
            enable_prefix_caching: true,
            max_model_len: None,
            cpus: None,
            step_delay: std::time::Duration::ZERO,
            cuda_graphs: true,
            cuda_mixed_graphs: true,
            cuda_pdl: true,
        }
    }
}

/// Prefill tokens past which a CPU step starts no further prompt, unless set: one core
/// prefills SmolLM2-135M at ~2,500 tokens/s whatever the batch (engine-bench: 128 tokens
/// 54 ms, 1024 tokens 400 ms), so a second long prompt in a step only delays the first's
/// first token (goodput serve on one core, 16 users, two runs each: 1024-token prompts'
/// median TTFT 930 ms against 1,810–1,870 ms with prompts joining up to the 2048-token
/// budget, 128-token prompts' 190–250 against 260–430 ms; output tok/s the same within the
/// runs' spread), while short prompts still share a step's pass over the weights.
pub const CPU_MAX_PREFILL_TOKENS: usize = 512;

/// The scheduler's cap on a step's prefill tokens: `set` if given, else
/// [`CPU_MAX_PREFILL_TOKENS`] on the CPU and none on a GPU (where prompts batched together
/// fill more of it).
pub fn prefill_cap(set: Option<usize>, cpu: bool) -> Option<usize> {
    set.or(cpu.then_some(CPU_MAX_PREFILL_TOKENS))
}

impl EngineConfig {
    /// [`prefill_cap`] of these settings on `device`.
    pub fn prefill_cap(&self, device: &candle_core::Device) -> Option<usize> {
        prefill_cap(self.max_prefill_tokens, device.is_cpu())
    }

    /// The scheduler's configuration for `model`, checking the numbers.
    pub fn scheduler_config(&self, model: &Llama) -> Result<SchedulerConfig> {
        // The RoPE tables loaded may cover fewer positions than the model could.
        let positions = model.spec.max_position_embeddings.min(model.max_positions());
        let max_model_len = self.max_model_len.unwrap_or(positions);
        if max_model_len == 0 || max_model_len > positions {
            let problem = format!("max model length {max_model_len} must be between 1 and the {positions} positions the model was loaded for");
            return Err(EngineError::Setting { setting: "--max-model-len", problem });
        }
        if self.block_size == 0 || self.max_num_batched_tokens == 0 || self.max_num_seqs == 0 {
            let problem = "block size, max batched tokens and max sequences must be positive".into();
            return Err(EngineError::Setting { setting: "--max-num-seqs", problem });
        }
        let num_blocks = match self.num_blocks {
            Some(n) => n,
            None => KvCache::blocks_for_bytes(&model.spec, self.block_size, model.dtype, self.kv_memory),
        };
        if num_blocks < 2 {
            let problem = format!(
                "the KV pool would have {num_blocks} blocks; it needs at least 2 (one is reserved): raise --kv-blocks or --kv-memory (one block is {} bytes)",
                KvCache::bytes_per_block(&model.spec, self.block_size, model.dtype)
            );
            return Err(EngineError::Setting { setting: "--kv-blocks", problem });
        }
        Ok(SchedulerConfig {
            max_num_batched_tokens: self.max_num_batched_tokens,
            max_prefill_tokens: self.prefill_cap(&model.device),
            max_num_seqs: self.max_num_seqs,
            num_blocks,
            block_size: self.block_size,
            enable_prefix_caching: self.enable_prefix_caching,
            max_model_len,
            eos_token_id: model.spec.eos_token_id,
            group_windows: model.spec.kv_groups().iter().map(|g| g.window).collect(),
        })
    }
}

/// One step's outcome.
#[derive(Debug)]
pub struct StepOutput {
    pub record: StepRecord,
    pub update: StepUpdate,
}

/// Scheduler, model, KV pool and samplers, stepped by the caller.
pub struct EngineCore {
    pub model: Llama,
    kv: KvCache,
    sched: Scheduler,
    samplers: HashMap<RequestId, Sampler>,
    clock: Clock,
    steps: u64,
    /// When set, every sampled row of logits is kept here (tests compare them with the reference).
    pub logits_tap: Option<Vec<(RequestId, Vec<f32>)>>,
    /// Steps served from CUDA graphs, when on and the model runs goodput's kernels.
    graphs: Option<StepGraphs>,
    /// On the CPU, when the caller is not already a compute thread (an unpinned engine, a
    /// bench): the pool each step's forward runs in, so its ~5 parallel kernels a layer are
    /// joins inside one pool instead of each handing off from an outside thread (a futex
    /// wake and sleep of the caller per kernel).
    pool: Option<rayon::ThreadPool>,
}

impl EngineCore {
    pub fn new(model: Llama, cfg: &EngineConfig, clock: Clock) -> Result<Self> {
        let sc = cfg.scheduler_config(&model)?;
        cuda::set_pdl(cfg.cuda_pdl);
        let graphs =
            StepGraphs::for_model(&model, cfg.cuda_graphs, cfg.cuda_mixed_graphs, sc.max_model_len, sc.block_size);
        let kv = KvCache::new(&model.spec, sc.num_blocks, sc.block_size, model.dtype, &model.device)?;
        let sched = Scheduler::new(sc)?.with_vocab_size(model.spec.vocab_size);
        let pool = if model.device.is_cpu() && rayon::current_thread_index().is_none() {
            Some(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(rayon::current_num_threads())
                    .thread_name(|i| format!("goodput-step-{i}"))
                    .build()
                    .map_err(|e| EngineError::Thread { what: "the compute threads", reason: e.to_string() })?,
            )
        } else {
            None
        };
        Ok(Self { model, kv, sched, samplers: HashMap::new(), clock, steps: 0, logits_tap: None, graphs, pool })
    }

    /// What CUDA graph serving did (buckets captured, replays, why it stopped), when it is on.
    pub fn graph_summary(&self) -> Option<String> {
        self.graphs.as_ref().map(StepGraphs::summary)
    }

    /// The model back, the engine's KV pool and scheduler dropped (to run it again under
    /// another configuration without reloading).
    pub fn into_model(self) -> Llama {
        self.model
    }

    pub fn clock(&self) -> Clock {
        self.clock
    }

    pub fn scheduler(&self) -> &Scheduler {
        &self.sched
    }

    pub fn has_work(&self) -> bool {
        self.sched.has_work()
    }

    pub fn kv_dtype(&self) -> DType {
        self.model.dtype
    }

    /// Queues a request; `arrival` is when the caller accepted it.
    pub fn add_request(
        &mut self,
        id: RequestId,
        prompt: Vec<TokenId>,
        params: SamplingParams,
        arrival: Stamp,
    ) -> Result<()> {
        let sampler = Sampler::new(&params);
        self.sched.add(NewRequest { id, prompt, params, arrival }, self.clock.now())?;
        self.samplers.insert(id, sampler);
        Ok(())
    }

    pub fn abort(&mut self, id: RequestId) -> Option<(EngineRecord, Vec<TokenId>)> {
        self.samplers.remove(&id);
        self.sched.abort(id, self.clock.now())
    }

    pub fn abort_all(&mut self, reason: FinishReason) -> Vec<(EngineRecord, Vec<TokenId>)> {
        self.samplers.clear();
        self.sched.abort_all(reason, self.clock.now())
    }

    /// One step: schedule, run the model, sample, update. `None` when there was nothing to do.
    /// On a model error the scheduling of the step has happened (blocks allocated, sequences
    /// admitted) but no token was applied; the engine thread then fails every request.
    pub fn step(&mut self) -> Result<Option<StepOutput>> {
        let start = self.clock.now();
        let out = self.sched.schedule(start);
        let scheduled = self.clock.now();
        if out.is_empty() {
            return Ok(None);
        }
        let mut batch = StepBatch::new(self.sched.config().block_size);
        for s in &out.seqs {
            batch.push(&s.tokens, s.start, &s.block_tables, s.samples);
        }
        // A step replayed from a CUDA graph samples inside it: its forward_s holds both.
        let (sampled, forwarded, graph) = match self.graph_step(&out, &batch)? {
            Some((sampled, replayed)) => (sampled, self.clock.now(), Some(replayed)),
            None => {
                let logits = self.forward(&batch)?;
                // A GPU runs the step after `forward` returns: wait, so that forward_s is the
                // step's compute and sample_s the sampling alone (a no-op on the CPU).
                self.model.device.synchronize()?;
                let forwarded = self.clock.now();
                (self.sample(&out, &logits)?, forwarded, self.graphs.as_ref().map(|_| false))
            }
        };
        let now = self.clock.now();
        let update = self.sched.update(&out, &sampled, now);
        for (rec, _) in &update.finished {
            self.samplers.remove(&rec.id);
        }
        let end = self.clock.now();
        let p = self.sched.pool();
        let record = StepRecord {
            step: self.steps,
            start,
            end,
            schedule_s: scheduled.secs_since(start),
            forward_s: forwarded.secs_since(scheduled),
            sample_s: end.secs_since(forwarded),
            prefill_tokens: out.prefill_tokens,
            decode_seqs: out.decode_seqs,
            num_seqs: out.seqs.len(),
            running: self.sched.num_running(),
            waiting: self.sched.num_waiting(),
            blocks_used: p.usable_blocks() - p.num_free_blocks(),
            usable_blocks: p.usable_blocks(),
            block_size: p.block_size(),
            tokens_held: 0,
            preemptions: out.preempted.len(),
            prefix_hit_tokens: out.prefix_hit_tokens,
            prefix_query_tokens: out.prefix_query_tokens,
            prefill_attention: out.prefill_attention(),
            decode_context: out.decode_context(),
            decode_distinct_context: Some(out.decode_distinct_context),
            sampled: out.sampled(),
            experts: expert_load(&self.model.take_expert_load(), self.model.spec.moe.as_ref()),
            kv_by_kind: None,
            graph,
        };
        drop(p);
        let record =
            StepRecord { tokens_held: self.sched.tokens_held(), kv_by_kind: self.sched.kv_by_kind(), ..record };
        self.steps += 1;
        Ok(Some(StepOutput { record, update }))
    }

    /// The model's forward over the pool, in [`Self::pool`] when there is one.
    fn forward(&self, batch: &StepBatch) -> Result<Tensor> {
        let (model, kv) = (&self.model, &self.kv);
        match &self.pool {
            Some(pool) => pool.install(|| model.forward(batch, kv)),
            None => model.forward(batch, kv),
        }
    }

    /// One token per sampling sequence of the step (`None` for the others): on the GPU when
    /// the model runs goodput's CUDA kernels (only the ids come back), else from host rows.
    fn sample(&mut self, out: &SchedulerOutput, logits: &Tensor) -> Result<Vec<Option<TokenId>>> {
        let which: Vec<RequestId> = out.seqs.iter().filter(|s| s.samples).map(|s| s.id).collect();
        let ids = if self.model.uses_cuda_kernels() && self.logits_tap.is_none() {
            let mut params = Vec::with_capacity(which.len());
            for &id in &which {
                params.push(self.sampler(id)?.device_params());
            }
            device_sample(logits, &params)?
        } else {
            let rows: Vec<Vec<f32>> = Llama::logits_rows(logits)?;
            let mut ids = Vec::with_capacity(rows.len());
            for (&id, row) in which.iter().zip(rows) {
                ids.push(self.sampler(id)?.sample(&row));
                if let Some(tap) = &mut self.logits_tap {
                    tap.push((id, row));
                }
            }
            ids
        };
        let mut ids = ids.into_iter();
        Ok(out.seqs.iter().map(|s| if s.samples { ids.next() } else { None }).collect())
    }

    /// The step from a CUDA graph when it fits one (eagerly, with the same sampling draws, if
    /// the graph fails or no graph slot is left), with whether it was replayed from a graph;
    /// `None` to run it the usual way.
    fn graph_step(&mut self, out: &SchedulerOutput, batch: &StepBatch) -> Result<Option<(Vec<Option<TokenId>>, bool)>> {
        let fits = self.logits_tap.is_none() && self.graphs.as_ref().is_some_and(|g| g.fits(batch));
        if !fits {
            return Ok(None);
        }
        let mut params = Vec::with_capacity(out.seqs.len());
        for s in out.seqs.iter().filter(|s| s.samples) {
            params.push(self.sampler(s.id)?.device_params());
        }
        let Some(graphs) = self.graphs.as_mut() else { return Ok(None) };
        let (ids, replayed) = match graphs.run(&self.model, batch, &self.kv, &params) {
            Some(ids) => (ids, true),
            None => (device_sample(&self.model.forward(batch, &self.kv)?, &params)?, false),
        };
        let mut ids = ids.into_iter();
        Ok(Some((out.seqs.iter().map(|s| if s.samples { ids.next() } else { None }).collect(), replayed)))
    }

    fn sampler(&mut self, id: RequestId) -> Result<&mut Sampler> {
        self.samplers.get_mut(&id).ok_or_else(|| EngineError::Internal(format!("no sampler for request {id}")))
    }

    /// Runs until every queued request has finished; returns the finished requests.
    pub fn run_to_completion(&mut self) -> Result<Vec<(EngineRecord, Vec<TokenId>)>> {
        let mut done = Vec::new();
        while self.has_work() {
            if let Some(o) = self.step()? {
                done.extend(o.update.finished);
            }
        }
        Ok(done)
    }
}

/// Samples each row of `logits` on the GPU with its `params` (`cuda::sample`).
fn device_sample(logits: &Tensor, params: &[[f32; 4]]) -> Result<Vec<TokenId>> {
    Ok(cuda::sample(logits, params)?)
}

/// The step's expert load, summed over its sparse layers (`None` for dense models).
fn expert_load(
    layers: &[crate::moe::ExpertLoad],
    moe: Option<&goodput_core::MoeSpec>,
) -> Option<goodput_core::ExpertStepLoad> {
    let m = moe?;
    Some(goodput_core::ExpertStepLoad {
        sparse_layers: layers.len(),
        experts: m.num_experts,
        assignments: layers.iter().flat_map(|l| &l.tokens).map(|&n| u64::from(n)).sum(),
        touched: layers.iter().map(|l| l.distinct() as u64).sum(),
        max_tokens: layers.iter().flat_map(|l| l.tokens.iter().copied()).max().unwrap_or(0),
    })
}
