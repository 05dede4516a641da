//! One configuration of a plan made concrete: a GPU and a layout turned into the roofline step
//! cost, the memory left for KV and the scheduler of one simulated attention group — or the
//! reason it cannot be.

pub use super::error::Unfit;
use super::PlanSpec;
use crate::hardware::{DType, Gpu};
use crate::layout::Layout;
use crate::roofline::{DeviceLimits, Efficiencies, ModelWork, ProjectedCost, RooflineCost};
use crate::work::{Deployment, Precision};
use goodput_core::ModelSpec;
use goodput_scheduler::SchedulerConfig;

/// A configuration ready to simulate.
pub struct Prepared {
    pub cost: ProjectedCost,
    /// The scheduler of one simulated engine (one attention group of one pipeline slot).
    pub sched: SchedulerConfig,
    /// Simulated engines per replica: attention groups × pipeline slots.
    pub engines: usize,
    pub weight_gb_per_gpu: f64,
    /// KV tokens one engine holds (as if every layer kept them), and sequences of the
    /// scenario's mean length (sliding layers keeping only their window).
    pub kv_tokens: usize,
    pub kv_sequences: f64,
}

/// The precision of a plan: `--dtype` weights, `--kv-dtype` (or fp8 with fp8 weights, else bf16).
pub fn precision(a: &PlanSpec) -> Precision {
    let kv = a.kv_dtype.unwrap_or(if a.dtype == DType::Fp8 { DType::Fp8 } else { DType::Bf16 });
    Precision { weights: a.dtype, kv }
}

/// Peak activation memory of one step of the token budget (hidden states, attention and MLP
/// intermediates in bf16, f32 logits of the sampled rows): an estimate of what vLLM's
/// profiling run reserves.
fn activation_reserve(spec: &ModelSpec, a: &PlanSpec, tp: usize) -> f64 {
    let mlp = match &spec.moe {
        Some(m) => spec.intermediate_size.max(m.expert_intermediate_size * m.experts_per_token),
        None => spec.intermediate_size,
    };
    let per_token = (4 * spec.hidden_size + 2 * mlp / tp) as f64 * 2.0;
    a.max_num_batched_tokens as f64 * per_token
        + (a.max_num_seqs * spec.vocab_size / tp) as f64 * 4.0
        + a.extra_reserve as f64
}

/// `spec` on `g` laid out as `layout`, or why not.
pub fn prepare(
    a: &PlanSpec,
    spec: &ModelSpec,
    g: &Gpu,
    layout: Layout,
    eff: &Efficiencies,
    mean_len: f64,
) -> Result<Prepared, Unfit> {
    layout.check(spec, g.gpus_per_node, g.internode.is_some())?;
    let nodes = layout.nodes(g.gpus_per_node);
    if nodes > a.nodes {
        return Err(Unfit::Nodes { nodes, per_node: g.gpus_per_node, allowed: a.nodes });
    }
    let precision = precision(a);
    let deploy = Deployment { precision, layout, skew: a.expert_skew, gpus_per_node: g.gpus_per_node };
    let work = ModelWork::build(spec, &deploy)?;
    let device = DeviceLimits::of(g, precision, a.emulate)?;
    let free = g.memory_bytes() * a.memory_utilization - work.weight_bytes - activation_reserve(spec, a, layout.tp);
    if free <= 0.0 {
        return Err(Unfit::Memory {
            weights_gb: work.weight_bytes / 1e9,
            percent: a.memory_utilization * 100.0,
            memory_gb: g.memory_gb,
        });
    }
    // The pipeline's slots share each stage's KV memory.
    let per_engine = free / layout.pp as f64;
    let groups = spec.kv_groups();
    let per_token = work.kv_bytes_per_token + work.sliding_kv_bytes_per_token;
    let block_bytes = a.block_size as f64 * per_token / groups.len() as f64;
    let num_blocks = (per_engine / block_bytes) as usize + 1;
    let window = work.window.unwrap_or(mean_len).min(mean_len);
    let kv_sequences = per_engine / (work.kv_bytes_per_token * mean_len + work.sliding_kv_bytes_per_token * window);
    let sched = SchedulerConfig {
        max_num_batched_tokens: a.max_num_batched_tokens,
        // GPU replicas: prompts join while the budget lasts (the engine's CUDA default).
        max_prefill_tokens: None,
        max_num_seqs: a.max_num_seqs,
        num_blocks,
        block_size: a.block_size,
        enable_prefix_caching: true,
        max_model_len: spec.max_position_embeddings,
        eos_token_id: spec.eos_token_id,
        group_windows: groups.iter().map(|g| g.window).collect(),
    };
    // Stages fill nodes in turn: the hand-overs between nodes are the nodes less one.
    let network_hops = (layout.pp - 1).min(nodes - 1);
    let weight_gb_per_gpu = work.weight_bytes / 1e9;
    let cost = ProjectedCost { roofline: RooflineCost { work, device, eff: eff.clone() }, layout, network_hops };
    Ok(Prepared {
        cost,
        sched,
        engines: layout.dp * layout.pp,
        weight_gb_per_gpu,
        kv_tokens: (per_engine / per_token) as usize,
        kv_sequences,
    })
}

/// The layouts `a` asks for, each once: TP × DP × EP × PP (those beyond `--nodes` are refused
/// by [`prepare`], by name). EP is 1 for a dense model; `all` is EP over every GPU of a stage.
pub fn layouts(a: &PlanSpec, spec: &ModelSpec) -> Vec<Layout> {
    let mut out: Vec<Layout> = Vec::new();
    for &tp in &a.tp {
        for &dp in &a.dp_attention {
            for &pp in &a.pp {
                for ep in &a.ep {
                    // A dense model has no experts to split: EP is 1 whatever was asked.
                    let ep = match (ep, spec.moe.is_some()) {
                        (_, false) => 1,
                        (super::Ep::All, true) => tp * dp,
                        (super::Ep::Ways(n), true) => *n,
                    };
                    let l = Layout { tp, dp, ep, pp };
                    if !out.contains(&l) {
                        out.push(l);
                    }
                }
            }
        }
    }
    out
}

/// The weight dtypes a capacity plan tries on `g`, each with whether it runs on bf16 math
/// (weight-only kernels): the one asked, or where none was asked ([`PlanSpec::try_dtypes`])
/// the recommended ones — for a model published in MXFP4 (gpt-oss's experts) that format
/// alone, on bf16 math where `g` has no FP4 tensor cores, as vLLM serves it on Hopper; for
/// the others bf16, fp8 where `g` has fp8 tensor cores and nvfp4 where it has FP4 ones
/// (Blackwell).
pub fn dtypes(a: &PlanSpec, spec: &ModelSpec, g: &Gpu) -> Vec<(DType, bool)> {
    let fp4 = g.flops_per_s(DType::Nvfp4).is_some();
    if !a.try_dtypes {
        return vec![(a.dtype, a.emulate)];
    }
    if spec.architecture == goodput_core::Architecture::GptOss {
        return vec![(DType::Mxfp4, !fp4)];
    }
    let mut out = vec![(DType::Bf16, false)];
    if g.flops_per_s(DType::Fp8).is_some() {
        out.push((DType::Fp8, false));
    }
    if fp4 {
        out.push((DType::Nvfp4, false));
    }
    out
}
