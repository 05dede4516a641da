//! A profile fitted from `engine-bench --json` files (`goodput profile --from-bench FILE…`:
//! the H200 runs of `docs/results/gpu-h200/`) rather than from steps measured here. A bench
//! times whole engine steps of a few shapes — one prompt alone at a few lengths, a decode
//! batch of a few sizes at one context — so the fit takes only the terms those shapes tell
//! apart: the fixed step, prefill tokens, decode sequences, and prefill attention or decode
//! context only where the lengths or contexts vary. The roofline is the bench's own (the
//! catalog GPU it was held against): a batch-1 decode step against its bytes ÷ bandwidth
//! (MBU) and the longest prompt's FLOPs per second against the peak (MFU), which `plan
//! --calibrate` carries over. A mixture of experts' decode rows carry the expert reads the
//! bench recorded, fitted as `experts_touched`.

use super::error::{self, ProfilingError};
use super::ProfileSpec;
use goodput_core::ModelSpec;
use goodput_engine::bench::BenchFile;
use goodput_sizing::cost::{ExpertShape, StepWork, Term};
use goodput_sizing::fit::{fit, FitOptions, Sample};
use goodput_sizing::profile::{Fingerprint, MachineRoofline, Profile, ProfileEngine, TermFloor};
use goodput_sizing::roofline::{term_floor, DeviceLimits, ModelWork};
use std::path::Path;

type Result<T, E = ProfilingError> = std::result::Result<T, E>;

fn read(path: &Path, spec: &ModelSpec) -> Result<BenchFile> {
    let text = goodput_core::input::read_to_string(path, "engine-bench file", goodput_core::input::MAX_WHOLE_FILE)
        .map_err(|source| ProfilingError::Read { path: path.into(), source })?;
    let b: BenchFile =
        serde_json::from_str(&text).map_err(|source| ProfilingError::NotBench { path: path.into(), source })?;
    if b.model != spec.name {
        return Err(ProfilingError::BenchOfOther { path: path.into(), found: b.model, model: spec.name.clone() });
    }
    Ok(b)
}

/// Every row of every file as a step sample (its median time). A MoE model's decode rows
/// carry the expert reads the bench recorded; its prompts, their expectation.
fn samples(files: &[BenchFile], experts: Option<&ExpertShape>) -> Vec<Sample> {
    let mut out = Vec::new();
    for b in files {
        for p in &b.prefill {
            let l = p.prompt_len as f64;
            let work = StepWork {
                prefill_tokens: l,
                prefill_attention: l * (l + 1.0) / 2.0,
                sampled: 1.0,
                experts_touched: experts.map(|e| e.expected_touched(l)),
                ..Default::default()
            };
            out.push(Sample { work, seconds: p.latency_s.p50 });
        }
        for d in &b.decode {
            let (n, c) = (d.batch as f64, d.context as f64);
            let touched = experts.map(|e| d.experts_touched.unwrap_or_else(|| e.expected_touched(n)));
            let work = StepWork {
                decode_seqs: n,
                decode_context: n * c,
                sampled: n,
                experts_touched: touched,
                ..Default::default()
            };
            out.push(Sample { work, seconds: d.step_s.p50 });
        }
    }
    out
}

/// The terms the rows tell apart.
fn terms(files: &[BenchFile], moe: bool) -> Vec<Term> {
    let distinct = |xs: Vec<usize>| {
        let mut xs = xs;
        xs.sort_unstable();
        xs.dedup();
        xs.len()
    };
    let lens = distinct(files.iter().flat_map(|b| b.prefill.iter().map(|p| p.prompt_len)).collect());
    let contexts = distinct(files.iter().flat_map(|b| b.decode.iter().map(|d| d.context)).collect());
    let mut t = vec![Term::Fixed, Term::PrefillTokens, Term::DecodeSeqs];
    if lens >= 3 {
        t.push(Term::PrefillAttention);
    }
    if contexts >= 2 {
        t.push(Term::DecodeContext);
    }
    if moe {
        t.push(Term::ExpertsTouched);
    }
    t
}

/// The profile fitted from `a.from_bench`, written to `a.out`, and the bench rows it took.
pub fn run(a: &ProfileSpec, spec: &ModelSpec) -> Result<(Profile, usize)> {
    let files: Vec<BenchFile> = a.from_bench.iter().map(|p| read(p, spec)).collect::<Result<_>>()?;
    let first = &files[0];
    let Some(roof) = first.roofline.as_ref().filter(|r| r.peak_tflops.is_some() && r.catalog_entry.is_some()) else {
        return Err(ProfilingError::NoGpuRoofline { path: a.from_bench[0].clone() });
    };
    if files
        .iter()
        .any(|b| b.dtype != first.dtype || b.roofline.as_ref().map(|r| &r.device_name) != Some(&roof.device_name))
    {
        return Err(ProfilingError::MixedBench);
    }
    let experts = ExpertShape::of(spec);
    let samples = samples(&files, experts.as_ref());
    let terms = terms(&files, experts.is_some());
    let fit = fit(&samples, &terms, &FitOptions { bootstrap: a.bootstrap, seed: a.seed })
        .map_err(|source| ProfilingError::Fit { what: format!("{} bench rows", samples.len()), source })?;
    let (bandwidth, flops) = (roof.bandwidth_gbytes_per_s * 1e9, roof.peak_tflops.unwrap_or(0.0) * 1e12);
    let dev = DeviceLimits::uniform(bandwidth, flops, 0.0);
    let bytes = goodput_sizing::hardware::DType::of_engine(&first.dtype)
        .map(goodput_sizing::hardware::DType::bytes)
        .ok_or_else(|| ProfilingError::UnknownDtype(first.dtype.clone()))?;
    let work = ModelWork::of(spec, bytes, 1).map_err(ProfilingError::Work)?;
    let floors = fit
        .terms
        .iter()
        .map(|f| {
            let floor_s = term_floor(f.term, &work, &dev);
            let memory = matches!(f.term, Term::Fixed | Term::DecodeContext);
            TermFloor {
                term: f.term,
                floor_s,
                efficiency: (f.measured && f.coefficient > 0.0).then(|| floor_s / f.coefficient),
                bound: if memory { "memory" } else { "compute" }.into(),
            }
        })
        .collect();
    let all_decode = || files.iter().flat_map(|b| b.decode.iter());
    let median = |xs: Vec<f64>| goodput_metrics::stats::percentile(&xs, 50.0);
    let mbu = median(all_decode().filter(|d| d.batch == 1).filter_map(|d| d.of_floor).collect());
    let longest = files.iter().flat_map(|b| b.prefill.iter()).map(|p| p.prompt_len).max().unwrap_or(0);
    // FLOPs ÷ peak of the longest prompts (the bench's own floor is the longer of that and the
    // weights' read, which at short prompts is bandwidth, not MFU).
    let mfu_rows = files.iter().flat_map(|b| b.prefill.iter()).filter(|p| p.prompt_len == longest);
    let mfu = median(mfu_rows.map(|p| p.gflops_per_s * 1e9 / flops).filter(|x| x.is_finite() && *x > 0.0).collect());
    let how = format!("{} ({}), as the bench held its rows against it", roof.source, roof.device_name);
    let roofline =
        MachineRoofline { bandwidth, flops, how, terms: floors, memory_efficiency: mbu, compute_efficiency: mfu };
    let max_batch = all_decode().map(|d| d.batch).max().unwrap_or(1);
    let max_ctx = all_decode().map(|d| d.context).max().unwrap_or(1);
    let samples_n = samples.len();
    let profile = Profile {
        dtype: first.dtype.to_ascii_lowercase(),
        weights: first.weights.clone(),
        engine: ProfileEngine {
            block_size: 16,
            num_blocks: (max_batch * (max_ctx + 1)).div_ceil(16) + 1,
            max_num_batched_tokens: longest.max(max_batch),
            // As a server on the bench's device would run.
            max_prefill_tokens: goodput_engine::prefill_cap(None, first.device.to_ascii_lowercase().starts_with("cpu")),
            max_num_seqs: max_batch,
            max_model_len: spec.max_position_embeddings,
            prefix_caching: true,
        },
        fingerprint: Fingerprint { device: format!("{} ({})", roof.device_name, first.device), ..Default::default() },
        source: format!(
            "{} engine-bench rows of {} ({})",
            samples_n,
            a.from_bench.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "),
            first.device
        ),
        roofline: Some(roofline),
        experts,
        ..Profile::now(spec.name.clone(), fit)
    };
    profile.write(&a.out).map_err(error::write(&a.out))?;
    Ok((profile, samples_n))
}
