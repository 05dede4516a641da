//! `goodput engine-bench`: the engine's own step costs, in the manner of TGI's
//! `text-generation-benchmark`: prefill latency and tokens/s per prompt length, decode step
//! latency and tokens/s per batch size, each with percentiles and spread over repeats, and the
//! roofline context (weight and KV bytes moved, achieved GB/s and GFLOP/s against the
//! machine's measured read bandwidth).

use crate::args::ModelArgs;
use anyhow::{bail, Result};
use clap::{Args, ValueEnum};
use goodput_core::{Clock, SamplingParams, StepRecord};
use goodput_engine::{AttentionImpl, EngineConfig, EngineCore, Llama, PartTimes};
use goodput_metrics::engine::step_time;
use goodput_metrics::Summary;
use goodput_report::console as table;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

mod parts;
mod print;
use parts::PartsRow;
use print::print;

#[derive(Clone, Copy, Debug, ValueEnum, Serialize)]
pub enum Attention {
    /// The paged-attention kernel reading blocks in place (on CUDA: goodput's kernels, the
    /// fused layer and on-device sampling).
    Paged,
    /// Gather each sequence's blocks into a contiguous copy, then candle ops (on CUDA: the
    /// candle-op path, logits sampled on the host — the engine before its CUDA kernels).
    Gather,
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Prompt lengths of the prefill benchmark.
    #[arg(long, value_delimiter = ',', default_value = "128,512,2048")]
    pub prompt_lens: Vec<usize>,
    /// Batch sizes of the decode benchmark.
    #[arg(long, value_delimiter = ',', default_value = "1,4,8,16,32")]
    pub batch_sizes: Vec<usize>,
    /// Prompt length of each sequence in the decode benchmark.
    #[arg(long, default_value_t = 128)]
    pub decode_context: usize,
    /// Timed decode steps per repeat.
    #[arg(long, default_value_t = 16)]
    pub decode_steps: usize,
    /// Timed repeats of each prefill length and decode batch.
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// Untimed warm-up runs (prefill) or steps (decode) before the timed ones.
    #[arg(long, default_value_t = 1)]
    pub warmup: usize,
    #[arg(long, default_value_t = 16)]
    pub block_size: usize,
    #[arg(long, value_enum, default_value = "paged")]
    pub attention: Attention,
    /// On CUDA: also capture a decode step (batch 1 and 32) as a CUDA graph and time its
    /// replay against launching it kernel by kernel.
    #[arg(long)]
    pub graph_probe: bool,
    /// On CUDA: the GPU time of each op of a decode step (batch 1 and 32) and of a prefill of
    /// the first prompt length, from events recorded between the ops (launched eagerly: where
    /// the host launches slower than the GPU runs, gaps count too), with each matmul's achieved
    /// bandwidth.
    #[arg(long)]
    pub step_profile: bool,
    /// On CUDA: time steps launched kernel by kernel instead of replayed from CUDA graphs.
    #[arg(long)]
    pub no_cuda_graphs: bool,
    /// On CUDA: replay only decode steps from CUDA graphs (prefills launched kernel by kernel).
    #[arg(long)]
    pub no_mixed_graphs: bool,
    /// On CUDA: launch every kernel after the previous one has finished, instead of with
    /// programmatic dependent launch (from the load's matmul tuning on).
    #[arg(long)]
    pub no_pdl: bool,
    /// On CUDA: prefill chunks longer than this take the long-chunk attention path (the
    /// tensor-core prefill kernel in f16/bf16, cuBLAS in f32) instead of the paged kernel
    /// (default 32).
    #[arg(long)]
    pub cuda_long_chunk: Option<usize>,
    /// On CUDA: long prefill chunks through cuBLAS (matmul, causal softmax, matmul) instead of
    /// the tensor-core prefill kernel: the A/B of that kernel.
    #[arg(long)]
    pub no_flash_prefill: bool,
    /// On CUDA: the small-batch gate|up matmul, then SwiGLU, instead of SwiGLU in the matmul's
    /// epilogue: the A/B of that fusion.
    #[arg(long)]
    pub no_fused_swiglu: bool,
    /// Skip measuring the machine's memory read bandwidth.
    #[arg(long)]
    pub no_bandwidth: bool,
    /// Also write the results as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// A prefill row of the bench (one prompt alone).
#[derive(Serialize, Deserialize)]
pub(crate) struct PrefillRow {
    pub(crate) prompt_len: usize,
    pub(crate) latency_s: Summary,
    pub(crate) tokens_per_s: f64,
    pub(crate) gflops_per_s: f64,
    /// FLOPs / peak or weight bytes / bandwidth, whichever is longer (GPU roofline).
    pub(crate) floor_s: Option<f64>,
    /// floor_s / p50: 1 is at the roofline.
    pub(crate) of_floor: Option<f64>,
    /// Attention, dense MLP and MoE layers apart (CPU).
    pub(crate) parts: Option<PartsRow>,
    #[serde(skip)]
    pub(crate) flops: f64,
}

/// A decode row of the bench (a batch at a context).
#[derive(Serialize, Deserialize)]
pub(crate) struct DecodeRow {
    pub(crate) batch: usize,
    pub(crate) context: usize,
    pub(crate) step_s: Summary,
    pub(crate) tokens_per_s: f64,
    /// Weight + KV bytes one step reads.
    pub(crate) bytes_per_step: u64,
    pub(crate) gbytes_per_s: f64,
    pub(crate) gflops_per_s: f64,
    /// Scheduler + sampling/update time as a share of the step.
    pub(crate) overhead_share: f64,
    /// Bytes per step / bandwidth (the GPU's datasheet, or the CPU's measured read bandwidth).
    pub(crate) floor_s: Option<f64>,
    /// floor_s / p50: 1 is at the roofline.
    pub(crate) of_floor: Option<f64>,
    /// MoE models: (layer, expert) weight sets a timed step read, mean, and their share of
    /// all the routed experts. `bytes_per_step` counts these experts, not all of them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) experts_touched: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) expert_share: Option<f64>,
    /// Attention, dense MLP and MoE layers apart (CPU).
    pub(crate) parts: Option<PartsRow>,
}

/// What the figures are held against: the device's memory bandwidth and dense peak.
#[derive(Serialize, Deserialize)]
pub(crate) struct Roofline {
    /// The GPU's name as its driver reports it, or `cpu`.
    pub(crate) device_name: String,
    /// The hardware catalog's entry (`goodput hardware`), when one matches.
    pub(crate) catalog_entry: Option<String>,
    pub(crate) bandwidth_gbytes_per_s: f64,
    /// Dense tensor peak at the model's dtype (none for f32 or the CPU).
    pub(crate) peak_tflops: Option<f64>,
    pub(crate) source: String,
}

/// What `goodput profile --from-bench` reads of an `engine-bench --json` file: the rows and the
/// roofline they were held against (the other fields are left unread).
#[derive(Deserialize)]
pub(crate) struct BenchFile {
    pub(crate) model: String,
    pub(crate) weights: String,
    pub(crate) device: String,
    pub(crate) dtype: String,
    pub(crate) prefill: Vec<PrefillRow>,
    pub(crate) decode: Vec<DecodeRow>,
    pub(crate) roofline: Option<Roofline>,
}

#[derive(Serialize)]
struct Report {
    model: String,
    weights: String,
    device: String,
    dtype: String,
    attention: Attention,
    weight_bytes_per_step: u64,
    kv_bytes_per_token: u64,
    machine_read_gbytes_per_s: Option<f64>,
    prefill: Vec<PrefillRow>,
    decode: Vec<DecodeRow>,
    batch16_over_batch1_throughput: Option<f64>,
    batch1_bandwidth_utilisation: Option<f64>,
    roofline: Option<Roofline>,
    /// `--graph-probe`: (batch, result).
    graph_probe: Vec<(usize, goodput_engine::cuda::GraphProbe)>,
    /// On CUDA: the small-batch matmul kernels timed per weight shape at load, and the choice.
    gemv_tuning: Vec<goodput_engine::cuda::TuneRow>,
    gemv_tuning_error: Option<String>,
    /// `--step-profile`: each op's GPU time in a decode step.
    step_profile: Vec<goodput_engine::cuda::StepTiming>,
    /// What CUDA graph serving did in the decode benchmark (None when off).
    cuda_graphs: Option<String>,
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

/// Best-of-5 parallel read bandwidth over a 512 MiB buffer, in GB/s.
pub fn measure_read_bandwidth() -> f64 {
    use rayon::prelude::*;
    let n = 64 << 20; // u64 words = 512 MiB
    let buf: Vec<u64> = (0..n as u64).collect();
    let mut best = 0.0f64;
    for _ in 0..5 {
        let t = std::time::Instant::now();
        let s: u64 = buf
            .par_chunks(1 << 16)
            .map(|c| c.iter().fold(0u64, |a, &x| a.wrapping_add(x)))
            .reduce(|| 0, u64::wrapping_add);
        let dt = t.elapsed().as_secs_f64();
        std::hint::black_box(s);
        best = best.max((n * 8) as f64 / dt / 1e9);
    }
    best
}

/// What a benchmark measures with, after checking the arguments: the prompt lengths (capped
/// to the model's context), the longest sequence and the KV blocks it needs.
struct Sizes {
    max_b: usize,
    max_prompt: usize,
    max_len: usize,
    blocks: usize,
}

fn sizes(a: &mut BenchArgs, spec: &goodput_core::ModelSpec) -> Result<Sizes> {
    if a.repeats == 0 || a.decode_steps == 0 || a.block_size == 0 {
        bail!("--repeats, --decode-steps and --block-size must be at least 1");
    }
    if a.prompt_lens.contains(&0) || a.batch_sizes.contains(&0) || a.decode_context == 0 {
        let list = |v: &[usize]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(",");
        bail!(
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
            eprintln!(
                "engine-bench: prompt length {len} capped to {} (model `{}` has {ctx_limit} positions)",
                ctx_limit - 1,
                spec.name
            );
            *len = ctx_limit - 1;
        }
    }
    let max_b = *a.batch_sizes.iter().max().unwrap_or(&1);
    let decode_len = a.decode_context + a.warmup + a.decode_steps + 2;
    let max_prompt = a.prompt_lens.iter().copied().max().unwrap_or(1);
    let max_len = (max_prompt + 1).max(decode_len);
    if max_len > ctx_limit {
        bail!(
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
    a: &BenchArgs,
    c: &Costs,
    rng: &mut rand::rngs::SmallRng,
) -> Result<Vec<PrefillRow>> {
    let vocab = core.model.spec.vocab_size.min(u32::MAX as usize);
    let mut prefill = Vec::new();
    for &len in &a.prompt_lens {
        let (mut lat, mut parts) = (Vec::new(), Vec::new());
        for r in 0..a.warmup + a.repeats {
            let now = core.clock().now();
            core.add_request(r as u64, unique_prompt(rng, len, vocab), SamplingParams::greedy_exact(1), now)?;
            let out = core.step()?.ok_or_else(|| anyhow::anyhow!("the prefill step scheduled nothing"))?;
            if out.record.prefill_tokens != len || core.has_work() {
                bail!("prefill of {len} tokens did not run as one step");
            }
            let part_times = core.model.take_part_times();
            if r >= a.warmup {
                lat.push(step_time(&out.record));
                parts.extend(part_times.map(|p| (step_time(&out.record), p)));
            }
        }
        let s = Summary::of(&lat).expect("repeats ≥ 1");
        let flops = 2.0 * (c.layer_macs * len as f64 + c.head_macs) + attn_flops(&core.model, len, len);
        eprintln!("  prefill {len}: p50 {:.1} ms", s.p50 * 1e3);
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
    a: &BenchArgs,
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
        let Some(out) = core.step()? else { bail!("decode batch {b}: nothing scheduled") };
        let parts = core.model.take_part_times();
        if out.record.prefill_tokens == 0 && out.record.decode_seqs == b {
            decode_steps_seen += 1;
            if decode_steps_seen > a.warmup {
                timed.push((out.record, parts));
            }
        } else if decode_steps_seen > 0 {
            bail!("decode batch {b}: a step ran {} sequences", out.record.num_seqs);
        }
    }
    core.abort_all(goodput_core::FinishReason::Abort);
    Ok(timed)
}

/// Decode step latency per batch size, at `a.decode_context` tokens of context.
fn bench_decode(
    core: &mut EngineCore,
    a: &BenchArgs,
    c: &Costs,
    rng: &mut rand::rngs::SmallRng,
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
        eprintln!("  decode batch {b}: p50 {:.2} ms", s.p50 * 1e3);
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
        bail!("blocks leaked: {} of {} free", p.num_free_blocks(), p.usable_blocks());
    }
    Ok(decode)
}

pub fn run(mut a: BenchArgs) -> Result<()> {
    let spec = a.model.source().spec()?;
    let z = sizes(&mut a, &spec)?;
    if let Some(rows) = a.cuda_long_chunk {
        #[cfg(feature = "cuda")]
        goodput_engine::cuda::set_long_chunk(rows);
        #[cfg(not(feature = "cuda"))]
        bail!("--cuda-long-chunk {rows}: this build has no `cuda` feature");
    }
    goodput_engine::cuda::set_pdl(!a.no_pdl);
    goodput_engine::cuda::set_flash_prefill(!a.no_flash_prefill);
    goodput_engine::cuda::set_fused_swiglu(!a.no_fused_swiglu);
    let mut loaded = crate::args::load(&a.model.source(), z.max_len)?;
    loaded.model.time_parts = loaded.model.device.is_cpu();
    loaded.model.attention = match a.attention {
        Attention::Paged => AttentionImpl::Paged,
        Attention::Gather => AttentionImpl::Gather,
    };
    let cfg = EngineConfig {
        block_size: a.block_size,
        num_blocks: Some(z.blocks),
        max_num_batched_tokens: z.max_prompt.max(z.max_b * a.decode_context).max(z.max_b),
        max_num_seqs: z.max_b,
        enable_prefix_caching: false,
        max_model_len: Some(z.max_len),
        cuda_graphs: !a.no_cuda_graphs,
        cuda_mixed_graphs: !a.no_mixed_graphs,
        cuda_pdl: !a.no_pdl,
        ..Default::default()
    };
    let weights_desc = format!("{} ({})", loaded.weights_kind, loaded.weights_origin);
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
    eprintln!(
        "engine-bench: {} on {device} {dtype}, {weights_desc}, {} attention; {} weight bytes per step",
        spec.name,
        format!("{:?}", a.attention).to_lowercase(),
        table::bytes(c.weight_bytes)
    );
    let prefill = bench_prefill(&mut core, &a, &c, &mut rng)?;
    let decode = bench_decode(&mut core, &a, &c, &mut rng)?;
    // The host's bandwidth says nothing about a GPU's; only measured for CPU runs.
    let bw = (!a.no_bandwidth && core.model.device.is_cpu()).then(measure_read_bandwidth);
    let tps = |b: usize| decode.iter().find(|d| d.batch == b).map(|d| d.tokens_per_s);
    let ratio = tps(16).zip(tps(1)).map(|(x, y)| x / y);
    // The bytes the step read: a MoE step's touched experts, not all of them.
    let util =
        bw.zip(decode.iter().find(|d| d.batch == 1)).map(|(bw, d)| d.bytes_per_step as f64 / d.step_s.p50 / 1e9 / bw);
    let roofline = roofline(&core.model, bw);
    let (graph_probe, step_profile) = cuda_probes(&core.model, &a)?;
    let (mut prefill, mut decode) = (prefill, decode);
    if let Some(r) = &roofline {
        apply_floors(r, &c, &mut prefill, &mut decode);
    }
    let report = Report {
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
        gemv_tuning: goodput_engine::cuda::gemv_table::results(),
        gemv_tuning_error: goodput_engine::cuda::gemv_table::error(),
        step_profile,
        cuda_graphs: core.graph_summary(),
    };
    print(&report);
    if let Some(path) = &a.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}

/// What [`cuda_probes`] found: graph probes by batch, and kernel timings.
type Probes = (Vec<(usize, goodput_engine::cuda::GraphProbe)>, Vec<goodput_engine::cuda::StepTiming>);

/// `--graph-probe` and `--step-profile`: what CUDA graphs and goodput's kernels do at batch 1
/// and 32 (and a prefill of the first prompt length); nothing on other devices.
fn cuda_probes(model: &Llama, a: &BenchArgs) -> Result<Probes> {
    let mut graph_probe = Vec::new();
    if a.graph_probe {
        for b in [1, 32] {
            if let Some(p) = goodput_engine::cuda::probe_decode(model, b, a.decode_context, 20)? {
                graph_probe.push((b, p));
            }
        }
    }
    let mut step_profile = Vec::new();
    if a.step_profile {
        for b in [1, 32] {
            step_profile.extend(goodput_engine::cuda::time_decode(model, b, a.decode_context, 10)?);
        }
        if let Some(&p) = a.prompt_lens.first() {
            step_profile.extend(goodput_engine::cuda::time_prefill(model, p, 3)?);
        }
        if step_profile.is_empty() {
            eprintln!("--step-profile: only on CUDA with goodput's kernels; nothing profiled");
        }
    }
    Ok((graph_probe, step_profile))
}

/// The roofline of the model's device: a GPU's datasheet bandwidth and dense peak from the
/// hardware catalog (matched by the driver's device name), or the CPU's measured bandwidth.
fn roofline(m: &Llama, cpu_bw: Option<f64>) -> Option<Roofline> {
    if m.device.is_cpu() {
        return cpu_bw.map(|bw| Roofline {
            device_name: "cpu".into(),
            catalog_entry: None,
            bandwidth_gbytes_per_s: bw,
            peak_tflops: None,
            source: "measured read bandwidth (best of 5 over 512 MiB)".into(),
        });
    }
    let name = goodput_engine::loader::device_name(&m.device)?;
    let cat = goodput_sizing::hardware::HardwareCatalog::builtin();
    let Some(gpu) = cat.for_device_name(&name) else {
        eprintln!("engine-bench: `{name}` is not in the hardware catalog (goodput hardware): no roofline columns");
        return None;
    };
    let dtype = match m.dtype {
        candle_core::DType::BF16 => Some(goodput_sizing::hardware::DType::Bf16),
        candle_core::DType::F16 => Some(goodput_sizing::hardware::DType::Fp16),
        _ => None,
    };
    Some(Roofline {
        device_name: name,
        catalog_entry: Some(gpu.name.clone()),
        bandwidth_gbytes_per_s: gpu.memory_bandwidth_gbps,
        peak_tflops: dtype.and_then(|d| gpu.flops_per_s(d)).map(|f| f / 1e12),
        source: format!("hardware catalog `{}` ({})", gpu.name, gpu.description),
    })
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
