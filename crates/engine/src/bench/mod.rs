//! The engine's own step costs (`goodput engine-bench`), in the manner of TGI's
//! `text-generation-benchmark`: prefill latency and tokens/s per prompt length, decode step
//! latency and tokens/s per batch size, each with percentiles and spread over repeats, and the
//! roofline context (weight and KV bytes moved, achieved GB/s and GFLOP/s against the
//! machine's measured read bandwidth).

use crate::error::EngineError;
use crate::source::{ModelSource, SourceError};
use crate::{AttentionImpl, EngineConfig, EngineCore, Llama, PartTimes};
use goodput_core::{Clock, SamplingParams, StepRecord};
use goodput_metrics::engine::step_time;
use goodput_metrics::Summary;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

mod host;
mod parts;
pub use host::measure_read_bandwidth;
pub use parts::PartsRow;

/// Why a benchmark or a check could not run, or ran other than measured.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error(transparent)]
    Source(Box<SourceError>),
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Candle(#[from] candle_core::Error),
    /// A model did not load where a check needs it (`what`: the model, device and dtype).
    #[error("loading {what}")]
    Load {
        what: String,
        #[source]
        cause: Box<SourceError>,
    },
    /// A setting the benchmark cannot run with, or a step that did not run as one.
    #[error("{0}")]
    Invalid(String),
}

/// Boxed: a model's error carries the engine's, which carries candle's.
impl From<SourceError> for BenchError {
    fn from(e: SourceError) -> Self {
        Self::Source(Box::new(e))
    }
}

type Result<T, E = BenchError> = std::result::Result<T, E>;

/// Returns [`BenchError::Invalid`] with the formatted message.
macro_rules! fail {
    ($($t:tt)*) => { return Err(BenchError::Invalid(format!($($t)*))) };
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Attention {
    /// The paged-attention kernel reading blocks in place (on CUDA: goodput's kernels, the
    /// fused layer and on-device sampling).
    Paged,
    /// Gather each sequence's blocks into a contiguous copy, then candle ops (on CUDA: the
    /// candle-op path, logits sampled on the host — the engine before its CUDA kernels).
    Gather,
}

impl Attention {
    /// `paged` or `gather`.
    pub fn parse(s: &str) -> Result<Attention, goodput_core::ValueError> {
        match s {
            "paged" => Ok(Attention::Paged),
            "gather" => Ok(Attention::Gather),
            _ => Err(goodput_core::ValueError::new(s, "the attention is `paged` or `gather`")),
        }
    }
}

/// What `engine-bench` measures: the model, the prompt lengths and batch sizes, how many
/// steps and repeats, and on CUDA which paths and probes.
#[derive(Clone, Debug)]
pub struct BenchSpec {
    pub model: ModelSource,
    /// Prompt lengths of the prefill benchmark.
    pub prompt_lens: Vec<usize>,
    /// Batch sizes of the decode benchmark.
    pub batch_sizes: Vec<usize>,
    /// Prompt length of each sequence in the decode benchmark.
    pub decode_context: usize,
    /// Timed decode steps per repeat.
    pub decode_steps: usize,
    /// Timed repeats of each prefill length and decode batch.
    pub repeats: usize,
    /// Untimed warm-up runs (prefill) or steps (decode) before the timed ones.
    pub warmup: usize,
    pub block_size: usize,
    pub attention: Attention,
    /// On CUDA: a decode step captured as a CUDA graph and timed against launching it.
    pub graph_probe: bool,
    /// On CUDA: the GPU time of each op of a decode step and of a prefill.
    pub step_profile: bool,
    /// On CUDA: steps replayed from CUDA graphs; only decode steps (`mixed_graphs` false).
    pub cuda_graphs: bool,
    pub mixed_graphs: bool,
    /// On CUDA: programmatic dependent launch.
    pub pdl: bool,
    /// On CUDA: prefill chunks longer than this take the long-chunk attention path.
    pub cuda_long_chunk: Option<usize>,
    /// On CUDA: long prefill chunks through the tensor-core prefill kernel (else cuBLAS).
    pub flash_prefill: bool,
    /// On CUDA: SwiGLU in the small-batch gate|up matmul's epilogue.
    pub fused_swiglu: bool,
    /// Measure the machine's memory read bandwidth (CPU runs).
    pub bandwidth: bool,
}

/// A prefill row of the bench (one prompt alone).
#[derive(Debug, Serialize, Deserialize)]
pub struct PrefillRow {
    pub prompt_len: usize,
    pub latency_s: Summary,
    pub tokens_per_s: f64,
    pub gflops_per_s: f64,
    /// FLOPs / peak or weight bytes / bandwidth, whichever is longer (GPU roofline).
    pub floor_s: Option<f64>,
    /// floor_s / p50: 1 is at the roofline.
    pub of_floor: Option<f64>,
    /// Attention, dense MLP and MoE layers apart (CPU).
    pub parts: Option<PartsRow>,
    #[serde(skip)]
    pub flops: f64,
}

/// A decode row of the bench (a batch at a context).
#[derive(Debug, Serialize, Deserialize)]
pub struct DecodeRow {
    pub batch: usize,
    pub context: usize,
    pub step_s: Summary,
    pub tokens_per_s: f64,
    /// Weight + KV bytes one step reads.
    pub bytes_per_step: u64,
    pub gbytes_per_s: f64,
    pub gflops_per_s: f64,
    /// Scheduler + sampling/update time as a share of the step.
    pub overhead_share: f64,
    /// Bytes per step / bandwidth (the GPU's datasheet, or the CPU's measured read bandwidth).
    pub floor_s: Option<f64>,
    /// floor_s / p50: 1 is at the roofline.
    pub of_floor: Option<f64>,
    /// MoE models: (layer, expert) weight sets a timed step read, mean, and their share of
    /// all the routed experts. `bytes_per_step` counts these experts, not all of them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub experts_touched: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expert_share: Option<f64>,
    /// Attention, dense MLP and MoE layers apart (CPU).
    pub parts: Option<PartsRow>,
}

/// What the figures are held against: the device's memory bandwidth and dense peak.
#[derive(Debug, Serialize, Deserialize)]
pub struct Roofline {
    /// The GPU's name as its driver reports it, or `cpu`.
    pub device_name: String,
    /// The hardware catalog's entry (`goodput hardware`), when one matches.
    pub catalog_entry: Option<String>,
    pub bandwidth_gbytes_per_s: f64,
    /// Dense tensor peak at the model's dtype (a GPU's datasheet; on the CPU in bf16, the
    /// measured per-core peak of the instruction its prefill matmuls run on × the threads;
    /// none for f32).
    pub peak_tflops: Option<f64>,
    pub source: String,
    /// On the CPU: the measured bf16 peak of each instruction, per core.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_bf16_peak: Option<crate::cpu::peak::Bf16Peak>,
}

/// What `goodput profile --from-bench` reads of an `engine-bench --json` file: the rows and the
/// roofline they were held against (the other fields are left unread).
#[derive(Debug, Deserialize)]
pub struct BenchFile {
    pub model: String,
    pub weights: String,
    pub device: String,
    pub dtype: String,
    pub prefill: Vec<PrefillRow>,
    pub decode: Vec<DecodeRow>,
    pub roofline: Option<Roofline>,
}

/// What `engine-bench` measured.
#[derive(Debug, Serialize)]
pub struct Report {
    pub model: String,
    pub weights: String,
    pub device: String,
    pub dtype: String,
    pub attention: Attention,
    pub weight_bytes_per_step: u64,
    pub kv_bytes_per_token: u64,
    pub machine_read_gbytes_per_s: Option<f64>,
    pub prefill: Vec<PrefillRow>,
    pub decode: Vec<DecodeRow>,
    pub batch16_over_batch1_throughput: Option<f64>,
    pub batch1_bandwidth_utilisation: Option<f64>,
    pub roofline: Option<Roofline>,
    /// `--graph-probe`: (batch, result).
    pub graph_probe: Vec<(usize, crate::cuda::GraphProbe)>,
    /// On CUDA: the small-batch matmul kernels timed per weight shape at load, and the choice.
    pub gemv_tuning: Vec<crate::cuda::TuneRow>,
    pub gemv_tuning_error: Option<String>,
    /// `--step-profile`: each op's GPU time in a decode step.
    pub step_profile: Vec<crate::cuda::StepTiming>,
    /// What CUDA graph serving did in the decode benchmark (None when off).
    pub cuda_graphs: Option<String>,
}

fn unique_prompt(rng: &mut rand::rngs::SmallRng, len: usize, vocab: usize) -> Vec<u32> {
    (0..len).map(|_| rng.random_range(3..vocab as u32)).collect()
}

/// Attention FLOPs of `q` new tokens at the end of a context of `ctx` (QKᵀ and AV; a sliding
/// layer's queries see only their window).
fn attn_flops(m: &Llama, q: usize, ctx: usize) -> f64 {
    let s = &m.spec;
    let visible =
        |w: Option<usize>| -> f64 { (0..q).map(|i| (ctx - q + i + 1).min(w.unwrap_or(usize::MAX)) as f64).sum() };
    let per_layer = 4.0 * s.num_heads as f64 * s.head_dim() as f64;
    s.kv_groups().iter().map(|g| g.layers.len() as f64 * per_layer * visible(g.window)).sum()
}

/// What a benchmark measures with, after checking the arguments: the prompt lengths (capped
/// to the model's context), the longest sequence and the KV blocks it needs.
struct Sizes {
    max_b: usize,
    max_prompt: usize,
    max_len: usize,
    blocks: usize,
}

fn sizes(a: &mut BenchSpec, spec: &goodput_core::ModelSpec, say: &mut dyn FnMut(&str)) -> Result<Sizes> {
    if a.repeats == 0 || a.decode_steps == 0 || a.block_size == 0 {
        fail!("--repeats, --decode-steps and --block-size must be at least 1");
    }
    if a.prompt_lens.contains(&0) || a.batch_sizes.contains(&0) || a.decode_context == 0 {
        let list = |v: &[usize]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(",");
        fail!(
            "--prompt-lens, --batch-sizes and --decode-context must be positive; got --prompt-lens {} --batch-sizes {} --decode-context {}",
            list(&a.prompt_lens),
            list(&a.batch_sizes),
            a.decode_context
        );
    }
    let ctx_limit = spec.max_position_embeddings;
    for len in a.prompt_lens.iter_mut() {
        // Prompt + the one sampled token must fit the context.
        if *len >= ctx_limit {
            say(&format!(
                "engine-bench: prompt length {len} capped to {} (model `{}` has {ctx_limit} positions)",
                ctx_limit - 1,
                spec.name
            ));
            *len = ctx_limit - 1;
        }
    }
    let max_b = *a.batch_sizes.iter().max().unwrap_or(&1);
    let decode_len = a.decode_context + a.warmup + a.decode_steps + 2;
    let max_prompt = a.prompt_lens.iter().copied().max().unwrap_or(1);
    let max_len = (max_prompt + 1).max(decode_len);
    if max_len > ctx_limit {
        fail!(
            "model `{}` has a context of {ctx_limit} tokens; a prompt length of {max_prompt} or a decode context of {} does not fit",
            spec.name,
            a.decode_context
        );
    }
    let bs = a.block_size;
    // A block table per KV-cache group (gpt-oss: a sliding and a full one).
    let groups = spec.kv_groups().len();
    let blocks = groups * (max_b * decode_len.div_ceil(bs)).max((max_prompt + 1).div_ceil(bs)) + 2;
    Ok(Sizes { max_b, max_prompt, max_len, blocks })
}

/// The model's per-token costs, for the roofline columns.
struct Costs {
    weight_bytes: u64,
    kv_per_token: u64,
    layer_macs: f64,
    head_macs: f64,
}

/// Prefill latency per prompt length: one request of `len` tokens, one step.
fn bench_prefill(
    core: &mut EngineCore,
    a: &BenchSpec,
    c: &Costs,
    rng: &mut rand::rngs::SmallRng,
    say: &mut dyn FnMut(&str),
) -> Result<Vec<PrefillRow>> {
    let vocab = core.model.spec.vocab_size.min(u32::MAX as usize);
    let mut prefill = Vec::new();
    for &len in &a.prompt_lens {
        let (mut lat, mut parts) = (Vec::new(), Vec::new());
        for r in 0..a.warmup + a.repeats {
            let now = core.clock().now();
            core.add_request(r as u64, unique_prompt(rng, len, vocab), SamplingParams::greedy_exact(1), now)?;
            let out = core.step()?.ok_or_else(|| BenchError::Invalid("the prefill step scheduled nothing".into()))?;
            if out.record.prefill_tokens != len || core.has_work() {
                fail!("prefill of {len} tokens did not run as one step");
            }
            let part_times = core.model.take_part_times();
            if r >= a.warmup {
                lat.push(step_time(&out.record));
                parts.extend(part_times.map(|p| (step_time(&out.record), p)));
            }
        }
        let s = Summary::of(&lat).expect("repeats ≥ 1");
        let flops = 2.0 * (c.layer_macs * len as f64 + c.head_macs) + attn_flops(&core.model, len, len);
        say(&format!("  prefill {len}: p50 {:.1} ms", s.p50 * 1e3));
        prefill.push(PrefillRow {
            prompt_len: len,
            tokens_per_s: len as f64 / s.p50,
            gflops_per_s: flops / s.p50 / 1e9,
            latency_s: s,
            floor_s: None,
            of_floor: None,
            parts: PartsRow::of(&parts, None),
            flops,
        });
    }
    Ok(prefill)
}

/// The timed decode steps of one repeat at batch `b` (with their layer parts' times, on the
/// CPU): `b` requests prefilled, then steps that decode exactly `b` sequences (after
/// `a.warmup` untimed ones).
fn decode_repeat(
    core: &mut EngineCore,
    a: &BenchSpec,
    b: usize,
    next_id: &mut u64,
    rng: &mut rand::rngs::SmallRng,
) -> Result<Vec<(StepRecord, Option<PartTimes>)>> {
    let vocab = core.model.spec.vocab_size.min(u32::MAX as usize);
    for _ in 0..b {
        let now = core.clock().now();
        let p = SamplingParams::greedy_exact(a.warmup + a.decode_steps + 1);
        core.add_request(*next_id, unique_prompt(rng, a.decode_context, vocab), p, now)?;
        *next_id += 1;
    }
    let mut decode_steps_seen = 0;
    let mut timed = Vec::new();
    while timed.len() < a.decode_steps {
        let Some(out) = core.step()? else { fail!("decode batch {b}: nothing scheduled") };
        let parts = core.model.take_part_times();
        if out.record.prefill_tokens == 0 && out.record.decode_seqs == b {
            decode_steps_seen += 1;
            if decode_steps_seen > a.warmup {
                timed.push((out.record, parts));
            }
        } else if decode_steps_seen > 0 {
            fail!("decode batch {b}: a step ran {} sequences", out.record.num_seqs);
        }
    }
    core.abort_all(goodput_core::FinishReason::Abort);
    Ok(timed)
}

/// Decode step latency per batch size, at `a.decode_context` tokens of context.
fn bench_decode(
    core: &mut EngineCore,
    a: &BenchSpec,
    c: &Costs,
    rng: &mut rand::rngs::SmallRng,
    say: &mut dyn FnMut(&str),
) -> Result<Vec<DecodeRow>> {
    let mut decode = Vec::new();
    let mut next_id = 1_000_000u64;
    for &b in &a.batch_sizes {
        let (mut lat, mut overhead, mut experts, mut parts) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for _ in 0..a.repeats {
            for (r, p) in decode_repeat(core, a, b, &mut next_id, rng)? {
                let t = step_time(&r);
                lat.push(t);
                overhead.push((r.schedule_s + r.sample_s) / t);
                experts.extend(r.experts);
                parts.extend(p.map(|p| (t, p)));
            }
        }
        let s = Summary::of(&lat).expect("steps ≥ 1");
        let ctx = a.decode_context + a.warmup + a.decode_steps / 2;
        let mean = |f: &dyn Fn(&goodput_core::ExpertStepLoad) -> f64| {
            experts.iter().map(f).sum::<f64>() / experts.len() as f64
        };
        let touched = (!experts.is_empty()).then(|| mean(&|e| e.touched as f64));
        let weights = touched.map_or(c.weight_bytes, |t| core.model.weight_bytes_touching(t) as u64);
        // A sliding layer reads only its window of each sequence's K/V.
        let kv_dtype = core.kv_dtype().size_in_bytes();
        let bytes = weights + b as u64 * core.model.spec.kv_bytes_for_context(ctx, kv_dtype);
        let flops = 2.0 * (c.layer_macs + c.head_macs) * b as f64 + b as f64 * attn_flops(&core.model, 1, ctx);
        say(&format!("  decode batch {b}: p50 {:.2} ms", s.p50 * 1e3));
        decode.push(DecodeRow {
            batch: b,
            context: ctx,
            tokens_per_s: b as f64 / s.p50,
            bytes_per_step: bytes,
            gbytes_per_s: bytes as f64 / s.p50 / 1e9,
            gflops_per_s: flops / s.p50 / 1e9,
            overhead_share: overhead.iter().sum::<f64>() / overhead.len() as f64,
            step_s: s,
            floor_s: None,
            of_floor: None,
            experts_touched: touched,
            expert_share: touched.map(|_| mean(&|e| e.touched_share())),
            parts: PartsRow::of(&parts, touched.map(|t| t * core.model.routed_expert_bytes().0 as f64)),
        });
    }
    let p = core.scheduler().pool();
    if p.num_free_blocks() != p.usable_blocks() {
        fail!("blocks leaked: {} of {} free", p.num_free_blocks(), p.usable_blocks());
    }
    Ok(decode)
}

/// Runs the benchmark `a`: the model loaded, each prompt length prefilled alone and each batch
/// decoded, timed over repeats, and held against the device's roofline (a GPU's from
/// `catalog`); what it does on the way is said through `say`.
pub fn run(mut a: BenchSpec, catalog: Catalog, say: &mut dyn FnMut(&str)) -> Result<Report> {
    let spec = a.model.spec()?;
    let z = sizes(&mut a, &spec, say)?;
    if let Some(rows) = a.cuda_long_chunk {
        #[cfg(feature = "cuda")]
        crate::cuda::set_long_chunk(rows);
        #[cfg(not(feature = "cuda"))]
        fail!("--cuda-long-chunk {rows}: this build has no `cuda` feature");
    }
    crate::cuda::set_pdl(a.pdl);
    crate::cuda::set_flash_prefill(a.flash_prefill);
    crate::cuda::set_fused_swiglu(a.fused_swiglu);
    let mut warnings = Vec::new();
    let mut loaded = a.model.load(z.max_len, &mut warnings)?;
    warnings.iter().for_each(|w| say(&format!("goodput: warning: {w}")));
    loaded.model.time_parts = loaded.model.device.is_cpu();
    loaded.model.attention = match a.attention {
        Attention::Paged => AttentionImpl::Paged,
        Attention::Gather => AttentionImpl::Gather,
    };
    let budget = z.max_prompt.max(z.max_b * a.decode_context).max(z.max_b);
    let cfg = EngineConfig {
        block_size: a.block_size,
        num_blocks: Some(z.blocks),
        max_num_batched_tokens: budget,
        // Its batches are built whole, every prompt in one step: no cap on a step's prefill.
        max_prefill_tokens: Some(budget),
        max_num_seqs: z.max_b,
        enable_prefix_caching: false,
        max_model_len: Some(z.max_len),
        cuda_graphs: a.cuda_graphs,
        cuda_mixed_graphs: a.mixed_graphs,
        cuda_pdl: a.pdl,
        ..Default::default()
    };
    let weights_desc = loaded.weights_text();
    let (device, dtype) = (format!("{:?}", loaded.model.device), format!("{:?}", loaded.model.dtype));
    let mut core = EngineCore::new(loaded.model, &cfg, Clock::new())?;
    let m = &core.model;
    let c = Costs {
        weight_bytes: m.weight_bytes_per_step(),
        kv_per_token: spec.kv_bytes_per_token(core.kv_dtype().size_in_bytes()),
        layer_macs: m.layer_macs_per_token() as f64,
        head_macs: m.lm_head_macs() as f64,
    };
    let mut rng = rand::rngs::SmallRng::seed_from_u64(0x5eed);
    say(&format!(
        "engine-bench: {} on {device} {dtype}, {weights_desc}, {} attention; {} weight bytes per step",
        spec.name,
        format!("{:?}", a.attention).to_lowercase(),
        goodput_core::sizes::format_bytes(c.weight_bytes)
    ));
    let prefill = bench_prefill(&mut core, &a, &c, &mut rng, say)?;
    let decode = bench_decode(&mut core, &a, &c, &mut rng, say)?;
    // The host's bandwidth says nothing about a GPU's; only measured for CPU runs.
    let bw = (a.bandwidth && core.model.device.is_cpu()).then(measure_read_bandwidth);
    let tps = |b: usize| decode.iter().find(|d| d.batch == b).map(|d| d.tokens_per_s);
    let ratio = tps(16).zip(tps(1)).map(|(x, y)| x / y);
    // The bytes the step read: a MoE step's touched experts, not all of them.
    let util =
        bw.zip(decode.iter().find(|d| d.batch == 1)).map(|(bw, d)| d.bytes_per_step as f64 / d.step_s.p50 / 1e9 / bw);
    let roofline = roofline(&core.model, bw, catalog, say);
    let (graph_probe, step_profile) = cuda_probes(&core.model, &a, say)?;
    let (mut prefill, mut decode) = (prefill, decode);
    if let Some(r) = &roofline {
        apply_floors(r, &c, &mut prefill, &mut decode);
    }
    Ok(Report {
        model: spec.name.clone(),
        weights: weights_desc,
        device,
        dtype,
        attention: a.attention,
        weight_bytes_per_step: c.weight_bytes,
        kv_bytes_per_token: c.kv_per_token,
        machine_read_gbytes_per_s: bw,
        prefill,
        decode,
        batch16_over_batch1_throughput: ratio,
        batch1_bandwidth_utilisation: util,
        roofline,
        graph_probe,
        gemv_tuning: crate::cuda::gemv_table::results(),
        gemv_tuning_error: crate::cuda::gemv_table::error(),
        step_profile,
        cuda_graphs: core.graph_summary(),
    })
}

/// What [`cuda_probes`] found: graph probes by batch, and kernel timings.
type Probes = (Vec<(usize, crate::cuda::GraphProbe)>, Vec<crate::cuda::StepTiming>);

/// `--graph-probe` and `--step-profile`: what CUDA graphs and goodput's kernels do at batch 1
/// and 32 (and a prefill of the first prompt length); nothing on other devices.
fn cuda_probes(model: &Llama, a: &BenchSpec, say: &mut dyn FnMut(&str)) -> Result<Probes> {
    let mut graph_probe = Vec::new();
    if a.graph_probe {
        for b in [1, 32] {
            if let Some(p) = crate::cuda::probe_decode(model, b, a.decode_context, 20)? {
                graph_probe.push((b, p));
            }
        }
    }
    let mut step_profile = Vec::new();
    if a.step_profile {
        for b in [1, 32] {
            step_profile.extend(crate::cuda::time_decode(model, b, a.decode_context, 10)?);
        }
        if let Some(&p) = a.prompt_lens.first() {
            step_profile.extend(crate::cuda::time_prefill(model, p, 3)?);
        }
        if step_profile.is_empty() {
            say("--step-profile: only on CUDA with goodput's kernels; nothing profiled");
        }
    }
    Ok((graph_probe, step_profile))
}

/// A GPU's roofline by the name its driver reports and the model's dtype (a hardware
/// catalog's entry); `None` where the catalog has none.
pub type Catalog<'a> = &'a dyn Fn(&str, candle_core::DType) -> Option<Roofline>;

/// The roofline of the model's device: a GPU's datasheet bandwidth and dense peak from
/// `catalog` (matched by the driver's device name), or the CPU's measured bandwidth.
fn roofline(m: &Llama, cpu_bw: Option<f64>, catalog: Catalog, say: &mut dyn FnMut(&str)) -> Option<Roofline> {
    if m.device.is_cpu() {
        return cpu_bw.map(|bw| host::roofline(m.dtype, bw));
    }
    let name = crate::loader::device_name(&m.device)?;
    let found = catalog(&name, m.dtype);
    if found.is_none() {
        say(&format!("engine-bench: `{name}` is not in the hardware catalog (goodput hardware): no roofline columns"));
    }
    found
}

/// Fills each row's floor: decode steps at bytes / bandwidth; prefill at the longer of FLOPs /
/// peak and weight bytes / bandwidth (no floor without a peak).
fn apply_floors(r: &Roofline, c: &Costs, prefill: &mut [PrefillRow], decode: &mut [DecodeRow]) {
    let bw = r.bandwidth_gbytes_per_s * 1e9;
    for d in decode {
        let floor = d.bytes_per_step as f64 / bw;
        d.floor_s = Some(floor);
        d.of_floor = Some(floor / d.step_s.p50);
    }
    let Some(peak) = r.peak_tflops else { return };
    for p in prefill {
        let floor = (p.flops / (peak * 1e12)).max(c.weight_bytes as f64 / bw);
        p.floor_s = Some(floor);
        p.of_floor = Some(floor / p.latency_s.p50);
    }
}
