//! `goodput plan --export-profile GPU … --out p.json`: the roofline step costs of one (model,
//! GPU, layout, dtype) written as a profile, so `goodput run --simulate p.json` runs any
//! scenario on a GPU this machine does not have. The profile is one engine of the layout (one
//! attention group of one pipeline slot) with the GPU's KV pool; its run says it is a
//! projection.

use super::{config, PlanArgs, Setting};
use anyhow::{bail, Context, Result};
use goodput_sizing::cost::{StepCost, StepWork};
use goodput_sizing::fit::{Fit, Residuals};
use goodput_sizing::hardware::Gpu;
use goodput_sizing::profile::{Fingerprint, Profile, ProfileEngine, PROFILE_FORMAT, PROFILE_KIND};

pub fn run(a: &PlanArgs, set: &Setting, g: &Gpu) -> Result<()> {
    let out = a.out.as_ref().context("--export-profile needs --out FILE")?;
    let layouts = config::layouts(a, &set.spec, g);
    let layout = match layouts.as_slice() {
        [l] => *l,
        [] => bail!("no layout within --nodes {} for {} on {}", a.nodes, set.spec.name, g.name),
        many => bail!(
            "--export-profile writes one layout; these flags give {} ({}): give one --tp, --ep, --dp-attention and --pp",
            many.len(),
            many.iter().map(|l| l.label()).collect::<Vec<_>>().join(", ")
        ),
    };
    let p = config::prepare(a, &set.spec, g, layout, &set.eff, set.mean_in + set.mean_out)
        .map_err(|why| anyhow::anyhow!("{} on {} {layout}: {why}", set.spec.name, g.name))?;
    let precision = config::precision(a);
    let created = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let device = format!("{} ×{} ({layout}, {} weights, {} KV)", g.name, layout.gpus(), a.dtype, precision.kv);
    let profile = Profile {
        kind: PROFILE_KIND.into(),
        format: PROFILE_FORMAT,
        goodput_version: env!("CARGO_PKG_VERSION").into(),
        created_unix_s: created,
        model: set.spec.name.clone(),
        dtype: a.dtype.to_string(),
        weights: "none: roofline projection".into(),
        engine: ProfileEngine {
            block_size: p.sched.block_size,
            num_blocks: p.sched.num_blocks,
            max_num_batched_tokens: p.sched.max_num_batched_tokens,
            max_num_seqs: p.sched.max_num_seqs,
            max_model_len: p.sched.max_model_len,
            prefix_caching: true,
        },
        fingerprint: Fingerprint {
            cpu: g.description.clone(),
            logical_cpus: 0,
            memory_gib: g.memory_bytes() / (1u64 << 30) as f64,
            kernel: String::new(),
            device: device.clone(),
            engine_cpus: None,
        },
        source: format!("goodput plan --export-profile: roofline of {device}, {}", set.eff.source),
        fit: Fit {
            terms: Vec::new(),
            r2: 0.0,
            residuals: Residuals { p50: 0.0, p90: 0.0, p99: 0.0, bias: 0.0 },
            samples: 0,
        },
        gap_s: 0.0,
        roofline: None,
        projection: Some(p.cost.clone()),
        experts: None,
    };
    profile.check().map_err(|e| anyhow::anyhow!("the projection: {e}"))?;
    profile.write(out).with_context(|| format!("writing {}", out.display()))?;
    let step = |w: StepWork| p.cost.step_seconds(&w) * 1e3;
    let decode = |b: f64| StepWork { decode_seqs: b, decode_context: b * 1024.0, sampled: b, ..Default::default() };
    let prefill = StepWork {
        prefill_tokens: 2048.0,
        prefill_attention: 2048.0 * 2049.0 / 2.0,
        sampled: 1.0,
        ..Default::default()
    };
    println!(
        "Projection of {} on {device}: {:.1} GB of weights and {} KV tokens per engine, {} engine{} per replica.\n  step: decode 1 × 1k context {:.2} ms, 64 × 1k {:.2} ms, 256 × 1k {:.2} ms; prefill 2048 tokens {:.1} ms.\nWritten to {} — run any scenario on it with `goodput run -m {} --simulate {}` (each run says it is a projection).",
        set.spec.name,
        p.weight_gb_per_gpu,
        p.kv_tokens,
        p.engines,
        if p.engines == 1 { "" } else { "s" },
        step(decode(1.0)),
        step(decode(64.0)),
        step(decode(256.0)),
        step(prefill),
        out.display(),
        set.spec.name,
        out.display()
    );
    Ok(())
}
