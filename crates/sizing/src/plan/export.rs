//! `goodput plan --export-profile GPU … --out p.json`: the roofline step costs of one (model,
//! GPU, layout, dtype) written as a profile, so `goodput run --simulate p.json` runs any
//! scenario on a GPU this machine does not have. The profile is one engine of the layout (one
//! attention group of one pipeline slot) with the GPU's KV pool; its run says it is a
//! projection.

use super::error::refuse;
use super::{config, PlanSpec, Setting};
use super::{PlanError, Result};
use crate::cost::{StepCost, StepWork};
use crate::fit::{Fit, Residuals};
use crate::hardware::Gpu;
use crate::profile::{Fingerprint, Profile, ProfileEngine};
use serde::Serialize;

/// A layout's roofline step costs, written as a profile to `a.out`.
#[derive(Debug)]
pub struct Projection {
    pub model: String,
    /// `h200 ×1 (TP1, bf16 weights, bf16 KV)`.
    pub device: String,
    pub weight_gb_per_gpu: f64,
    /// KV tokens of one engine, and the engines of one replica.
    pub kv_tokens: usize,
    pub engines: usize,
    /// Each phase alone on one GPU.
    pub phases: Vec<PhaseRow>,
    /// Where the profile was written.
    pub out: std::path::PathBuf,
}

/// Writes the profile of the one layout `a` gives on `g` to `a.out`.
pub fn run(a: &PlanSpec, set: &Setting, g: &Gpu, out: &std::path::Path) -> Result<Projection> {
    let layouts = config::layouts(a, &set.spec);
    let layout = match layouts.as_slice() {
        [l] => *l,
        [] => refuse!("no layout within --nodes {} for {} on {}", a.nodes, set.spec.name, g.name),
        many => refuse!(
            "--export-profile writes one layout; these flags give {} ({}): give one --tp, --ep, --dp-attention and --pp",
            many.len(),
            many.iter().map(|l| l.label()).collect::<Vec<_>>().join(", ")
        ),
    };
    let p = config::prepare(a, &set.spec, g, layout, &set.eff, set.mean_in + set.mean_out)
        .map_err(|why| super::unfit(set, g, layout, why))?;
    let precision = config::precision(a);
    let device = format!("{} ×{} ({layout}, {} weights, {} KV)", g.name, layout.gpus(), a.dtype, precision.kv);
    // No fit: the projection is the step cost.
    let empty = Fit { terms: Vec::new(), r2: 0.0, residuals: Residuals::default(), samples: 0 };
    let profile = Profile {
        dtype: a.dtype.to_string(),
        weights: "none: roofline projection".into(),
        engine: ProfileEngine {
            block_size: p.sched.block_size,
            num_blocks: p.sched.num_blocks,
            max_num_batched_tokens: p.sched.max_num_batched_tokens,
            max_prefill_tokens: p.sched.max_prefill_tokens,
            max_num_seqs: p.sched.max_num_seqs,
            max_model_len: p.sched.max_model_len,
            prefix_caching: true,
        },
        fingerprint: Fingerprint {
            cpu: g.description.clone(),
            memory_gib: g.memory_bytes() / (1u64 << 30) as f64,
            device: device.clone(),
            ..Default::default()
        },
        source: format!("goodput plan --export-profile: roofline of {device}, {}", set.eff.source),
        projection: Some(p.cost.clone()),
        ..Profile::now(set.spec.name.clone(), empty)
    };
    profile.check().map_err(|source| PlanError::ProfileUse { path: "the projection".into(), source })?;
    profile.write(out).map_err(|source| PlanError::Write { what: format!("writing {}", out.display()), source })?;
    Ok(Projection {
        model: set.spec.name.clone(),
        device,
        weight_gb_per_gpu: p.weight_gb_per_gpu,
        kv_tokens: p.kv_tokens,
        engines: p.engines,
        phases: phases(a, set, &p),
        out: out.to_path_buf(),
    })
}

/// One phase alone on one GPU: a decode batch, or a prefill step.
#[derive(Debug, Serialize)]
pub struct PhaseRow {
    /// `decode` or `prefill`.
    pub phase: &'static str,
    /// Sequences decoded, or prompts prefilled, in the step.
    pub batch: usize,
    /// Context of each decode sequence (0 for prefill).
    pub context: usize,
    /// Tokens of each prompt (prefill), else 0.
    pub prompt_tokens: usize,
    pub step_s: f64,
    /// Output (decode) or input (prefill) tokens per second per GPU.
    pub tokens_per_s_per_gpu: f64,
    /// The most sequences of this context the KV holds.
    pub kv_full: bool,
}

/// Each phase alone on one GPU, without SLOs or a scheduler: decode steps of a batch at the
/// scenario's mean context (its prompt and half its output), and a prefill step of the
/// engine's whole token budget in prompts of the scenario's mean input.
fn phases(a: &PlanSpec, set: &Setting, p: &config::Prepared) -> Vec<PhaseRow> {
    let tp = p.cost.layout.tp as f64;
    let step = |w: StepWork| p.cost.step_seconds(&w);
    let context = (set.mean_in + set.mean_out / 2.0).round();
    // Batches of 1, 4, 16, … and the most sequences of that context the KV holds.
    let full = ((p.kv_tokens as f64 / context).floor() as usize).min(a.max_num_seqs);
    let mut batches: Vec<usize> =
        std::iter::successors(Some(1usize), |b| Some(b * 4)).take_while(|&b| b <= full).collect();
    if batches.last() != Some(&full) && full > 0 {
        batches.push(full);
    }
    let mut out: Vec<PhaseRow> = batches
        .into_iter()
        .map(|b| {
            let n = b as f64;
            let s = step(StepWork { decode_seqs: n, decode_context: n * context, sampled: n, ..Default::default() });
            PhaseRow {
                phase: "decode",
                batch: b,
                context: context as usize,
                prompt_tokens: 0,
                step_s: s,
                tokens_per_s_per_gpu: n / s / tp,
                kv_full: b == full,
            }
        })
        .collect();
    let len = set.mean_in.round().max(1.0);
    let prompts = (a.max_num_batched_tokens as f64 / len).floor().max(1.0);
    let tokens = prompts * len;
    let s = step(StepWork {
        prefill_tokens: tokens,
        prefill_attention: prompts * len * (len + 1.0) / 2.0,
        sampled: prompts,
        ..Default::default()
    });
    out.push(PhaseRow {
        phase: "prefill",
        batch: prompts as usize,
        context: 0,
        prompt_tokens: len as usize,
        step_s: s,
        tokens_per_s_per_gpu: tokens / s / tp,
        kv_full: false,
    });
    out
}
