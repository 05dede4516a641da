//! The engine's step costs measured (`goodput profile`) on a grid designed for the fit (or read
//! from a run's steps.jsonl), fitted into a step-cost model with intervals, residuals and each
//! term against this machine's roofline, and written as `profile.json` for the simulator.

mod bench;
mod error;
pub mod grid;
pub mod machine;
mod price;
pub mod speed;
mod terms;

use crate::progress::Progress;
pub use error::ProfilingError;
use goodput_core::{Clock, ModelSpec, StepRecord};
use goodput_engine::source::{EngineOptions, ModelSource};
use goodput_engine::Engine;
use goodput_sizing::cost::{StepWork, Term};
use goodput_sizing::fit::{fit, Fit, FitOptions, Sample};
use goodput_sizing::price::Priced;
use goodput_sizing::profile::{Fingerprint, MachineRoofline, Profile, ProfileEngine, TermFloor};
use goodput_sizing::roofline::{term_floor, DeviceLimits, ModelWork};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

type Result<T, E = ProfilingError> = std::result::Result<T, E>;

/// What `goodput profile` does: measure the grid on the engine (or read a run's steps,
/// replicas' step files or `engine-bench` files), fit the step-cost model and write it; or
/// price step files by a profile (`price_with`).
#[derive(Clone, Debug)]
pub struct ProfileSpec {
    pub model: ModelSource,
    pub engine: EngineOptions,
    /// Pin the engine to these CPUs (a profile is only valid for runs pinned the same way).
    pub engine_cpus: Option<Vec<usize>>,
    /// Pin the thread that submits the grid's requests and follows their tokens.
    pub harness_cpus: Option<Vec<usize>>,
    /// Where to write the profile.
    pub out: PathBuf,
    /// Fit the steps of this run (its steps.jsonl) instead of measuring the grid.
    pub from: Option<PathBuf>,
    /// Fit these files of step records instead of measuring the grid.
    pub from_steps: Vec<PathBuf>,
    /// Fit the rows of these `engine-bench --json` files instead of measuring the grid.
    pub from_bench: Vec<PathBuf>,
    /// Time spent measuring the grid.
    pub time: Duration,
    /// An earlier profile to check for drift (`None`: the file at `out`, if any).
    pub baseline: Option<PathBuf>,
    /// Bootstrap resamples for the coefficient intervals.
    pub bootstrap: usize,
    /// Seed of the grid's prompts and order, and of the bootstrap.
    pub seed: u64,
    /// Also write the measured steps the fit used.
    pub save_steps: Option<PathBuf>,
    /// Measure this machine's bandwidth and FLOP/s for the roofline column.
    pub roofline: bool,
    /// Instead of fitting: price the `from_steps` files' steps by this profile.
    pub price_with: Option<PathBuf>,
    /// The decode-context term: `table` (the default) or `linear`.
    pub context_term: String,
    /// The sampled-rows term: `linear` (the default) or `table`.
    pub rows_term: String,
}

/// What `goodput profile` did.
#[derive(Debug)]
pub enum Profiled {
    /// A profile fitted and written to `out`: the median gap between busy steps, its drift from
    /// the baseline a line each, and the bench rows it was fitted from (`from_bench`).
    Fitted { profile: Box<Profile>, gap: f64, drift: Vec<String>, bench_rows: Option<usize> },
    /// `price_with`: each file's steps priced by the profile.
    Priced(Vec<Priced>),
}

/// Measured steps and what they were measured with.
struct Measured {
    steps: Vec<StepRecord>,
    engine: ProfileEngine,
    source: String,
    weights: String,
    dtype: String,
    device: String,
    /// The machine the steps were measured on, when not this one (a run's).
    fingerprint: Option<Fingerprint>,
}

/// Profiles as `a` asks, saying how it goes through `progress`.
pub fn profile(a: &ProfileSpec, progress: &dyn Progress) -> Result<Profiled> {
    if a.bootstrap > 10_000 {
        return Err(ProfilingError::Bootstrap(a.bootstrap));
    }
    let spec = a.model.spec()?;
    if !a.from_bench.is_empty() {
        let (profile, rows) = bench::run(a, &spec)?;
        return Ok(Profiled::Fitted {
            profile: Box::new(profile),
            gap: 0.0,
            drift: Vec::new(),
            bench_rows: Some(rows),
        });
    }
    if let Some(profile) = &a.price_with {
        return Ok(Profiled::Priced(price::run(&a.from_steps, profile)?));
    }
    let baseline = read_baseline(a)?;
    let m = match &a.from {
        Some(dir) => from_run(a, dir, &spec)?,
        None if !a.from_steps.is_empty() => from_steps(a, &spec)?,
        None => measure_grid(a, &spec, progress)?,
    };
    if let Some(path) = &a.save_steps {
        save_steps(path, &m.steps)?;
    }
    let gap = goodput_sizing::price::gap(&m.steps);
    let samples = subsample(samples(&m.steps, gap), 20_000, a.seed);
    let experts = goodput_sizing::cost::ExpertShape::of(&spec);
    let (terms, mut selection) = terms::choose(&m.steps, &samples, experts, &a.context_term, &a.rows_term);
    let options = FitOptions { bootstrap: a.bootstrap, seed: a.seed };
    let fitting = |source| ProfilingError::Fit { what: format!("{} steps", samples.len()), source };
    let mut fit = fit(&samples, &terms, &options).map_err(fitting)?;
    // A knot no step reached prices its shapes at 0 (a 64-token chunk between measured 33
    // and 65 costs nothing). A load's steps (a run's, a replica's) cover only the few shapes
    // its requests make: they get the linear terms, which interpolate and extrapolate from
    // what was measured. The grid probes every knot in a whole round; a cut round is said.
    let unreached = fit.terms.iter().filter(|f| !f.measured && is_knot(f.term)).count();
    let grid = a.from.is_none() && a.from_steps.is_empty();
    if unreached > 0 && grid {
        progress.line(&format!("warning: the grid reached {unreached} of the table's knots not at all: shapes near them are priced low (raise --time)"), true);
    }
    if unreached > 0 && !grid {
        // Said even when quiet: it changes what the profile is.
        progress.line(
            &format!("profile: the steps reach {unreached} of the table's knots not at all: fitting the linear terms instead"),
            true,
        );
        let mut linear = Term::ALL.to_vec();
        linear.extend(experts.map(|_| Term::ExpertsTouched));
        linear.extend(Term::after_prefill());
        linear.extend(Term::after_idle());
        linear.extend(terms::repeats(&m.steps).then_some(Term::RepeatedContext));
        fit = goodput_sizing::fit::fit(&samples, &linear, &options).map_err(fitting)?;
        selection.clear();
    }
    let roofline = if a.roofline && m.device == "cpu" { roofline(a, &spec, &m.dtype, &fit, progress) } else { None };
    let profile = Profile {
        dtype: m.dtype.clone(),
        weights: m.weights.clone(),
        engine: m.engine.clone(),
        fingerprint: m.fingerprint.clone().unwrap_or_else(|| fingerprint(a, &m.device)),
        source: m.source.clone(),
        // The fit's target is the step period, which holds the gap already (gap_s 0).
        roofline,
        experts,
        selection,
        ..Profile::now(spec.name.clone(), fit)
    };
    let drift = baseline.as_ref().map(|old| profile.drift(old)).unwrap_or_default();
    profile.write(&a.out).map_err(error::write(&a.out))?;
    Ok(Profiled::Fitted { profile: Box::new(profile), gap, drift, bench_rows: None })
}

fn read_baseline(a: &ProfileSpec) -> Result<Option<Profile>> {
    match &a.baseline {
        Some(p) => Ok(Some(Profile::read(p)?)),
        // The file about to be replaced, when it is a profile.
        None => Ok(a.out.exists().then(|| Profile::read(&a.out).ok()).flatten()),
    }
}

/// The grid, measured on the engine thread pinned as asked.
fn measure_grid(a: &ProfileSpec, spec: &ModelSpec, progress: &dyn Progress) -> Result<Measured> {
    let max_len = a.engine.max_model_len.unwrap_or(spec.max_position_embeddings);
    a.engine.apply_before_load();
    let mut warnings = Vec::new();
    let loaded = a.model.load(max_len, &mut warnings)?;
    warnings.iter().for_each(|w| progress.line(&format!("goodput: warning: {w}"), true));
    let dtype = format!("{:?}", loaded.model.dtype).to_lowercase();
    let device = if loaded.model.device.is_cpu() { "cpu".to_string() } else { format!("{:?}", loaded.model.device) };
    let weights = loaded.weights_text();
    let mut cfg = a.engine.config()?;
    // Chunks at a context are measured through the prefix cache; the cost of a step does not
    // depend on whether the cache is on, only on what the step computes.
    cfg.enable_prefix_caching = true;
    cfg.cpus = a.engine_cpus.clone();
    // The probes are built whole (every prompt of a probe in one step), as before the cap;
    // the profile records the cap a server on this device would run with.
    let serving_cap = cfg.prefill_cap(&loaded.model.device);
    cfg.max_prefill_tokens = Some(cfg.max_num_batched_tokens);
    let sc = cfg.scheduler_config(&loaded.model)?;
    let (tx, rx) = flume::unbounded();
    let engine = Engine::start(loaded.model, cfg, Clock::new(), Some(tx))?;
    if let Some(h) = &a.harness_cpus {
        goodput_engine::affinity::pin_current(h)?;
    }
    let limits = grid::Limits {
        max_model_len: sc.max_model_len,
        budget: sc.max_num_batched_tokens,
        max_seqs: sc.max_num_seqs,
        pool_tokens: (sc.num_blocks - 1) * sc.block_size,
        wide: device != "cpu",
    };
    let probes = grid::probes(&limits);
    let line =
        format!("profile: {} on {device} {dtype}: {} probes per round for {:?}", spec.name, probes.len(), a.time);
    progress.line(&line, false);
    let t0 = Instant::now();
    let handle = engine.handle();
    let mut g = grid::Grid::new(&handle, &rx, spec.vocab_size, a.seed);
    let n = probes.len();
    progress.levels(n);
    let (steps, rounds) = g.run(&probes, a.time, |round, i| {
        progress.level_started(&format!("round {round}, probe {i}/{n}"), None);
    })?;
    engine.shutdown(false);
    progress.finish();
    if rounds < 2 {
        let line = format!(
            "warning: the grid's first round did not finish within {:?}: the costliest probes were not measured (raise --time)",
            a.time
        );
        progress.line(&line, true);
    }
    let source = format!(
        "grid: {} of {n} probes (the rest too long for the time), {rounds} round(s) begun, {} steps in {:.1} s",
        g.kept,
        steps.len(),
        t0.elapsed().as_secs_f64()
    );
    let engine = ProfileEngine {
        block_size: sc.block_size,
        num_blocks: sc.num_blocks,
        max_num_batched_tokens: sc.max_num_batched_tokens,
        max_prefill_tokens: serving_cap,
        max_num_seqs: sc.max_num_seqs,
        max_model_len: sc.max_model_len,
        prefix_caching: a.engine.prefix_caching,
    };
    Ok(Measured { steps, engine, source, weights, dtype, device, fingerprint: None })
}

/// The steps of a run, with the run's engine settings.
fn from_run(a: &ProfileSpec, dir: &Path, spec: &ModelSpec) -> Result<Measured> {
    let summary = goodput_results::read_summary(dir)?;
    if summary.device.starts_with("simulated") {
        return Err(ProfilingError::Simulated { dir: dir.into() });
    }
    if summary.model != spec.name {
        return Err(ProfilingError::RunOfOther { dir: dir.into(), found: summary.model, model: spec.name.clone() });
    }
    let rows: Vec<goodput_results::StepRow> =
        goodput_results::files::read_jsonl(&dir.join(goodput_results::files::STEPS))?;
    let steps: Vec<StepRecord> = rows.into_iter().map(|r| r.step).collect();
    if let Some(why) = StepRecord::implausible_run(&steps) {
        return Err(ProfilingError::Implausible { path: dir.join(goodput_results::files::STEPS), why });
    }
    if steps.iter().any(|s| s.prefill_tokens > 0) && steps.iter().all(|s| s.prefill_attention == 0) {
        return Err(ProfilingError::NoAttention { dir: dir.into() });
    }
    let e = &summary.engine;
    let first = steps.first().ok_or(ProfilingError::NoSteps)?;
    let engine = ProfileEngine {
        block_size: e.block_size,
        num_blocks: first.usable_blocks + 1,
        max_num_batched_tokens: e.max_num_batched_tokens,
        max_prefill_tokens: e.max_prefill_tokens,
        max_num_seqs: e.max_num_seqs,
        max_model_len: e.max_model_len,
        prefix_caching: e.prefix_caching,
    };
    let source = format!("run {} ({} steps)", dir.display(), steps.len());
    let m = &summary.machine;
    let fingerprint = Fingerprint {
        cpu: m.cpu.clone(),
        logical_cpus: m.logical_cpus,
        memory_gib: m.memory_gib,
        kernel: m.kernel.clone(),
        device: summary.device.clone(),
        engine_cpus: summary.cpus.engine.clone(),
    };
    let dtype = dtype_name(a)?;
    Ok(Measured {
        steps,
        engine,
        source,
        weights: summary.weights,
        dtype,
        device: summary.device,
        fingerprint: Some(fingerprint),
    })
}

/// The steps of `--from-steps` files, with the engine settings of the flags.
fn from_steps(a: &ProfileSpec, spec: &ModelSpec) -> Result<Measured> {
    let mut steps: Vec<StepRecord> = Vec::new();
    // Each later file's step times against those of the files before it on the decode shapes
    // both measured: two grids of one machine at different times say how far its speed moved.
    let mut ratios: Vec<String> = Vec::new();
    for path in &a.from_steps {
        if !path.exists() {
            return Err(ProfilingError::NoFile { path: path.clone() });
        }
        let these: Vec<StepRecord> = goodput_results::files::read_jsonl(path)?;
        if these.is_empty() {
            return Err(ProfilingError::NoStepRecords { path: path.clone() });
        }
        if let Some(why) = StepRecord::implausible_run(&these) {
            return Err(ProfilingError::Implausible { path: path.clone(), why });
        }
        if let Some(r) = speed::speed_ratio(&steps, &these) {
            let (path, ratio, shapes) = (path.display(), r.ratio, r.shapes);
            ratios.push(format!(
                "{path}'s steps took {ratio:.2}× those of the files before it on {shapes} decode shapes"
            ));
        }
        // A step's period runs to the next step of the same engine: each file's steps count
        // from 0, so no period runs from one file into the next.
        steps.extend(these);
    }
    let first = &steps[0];
    let cfg = a.engine.config()?;
    let engine = ProfileEngine {
        block_size: first.block_size,
        num_blocks: first.usable_blocks + 1,
        max_num_batched_tokens: cfg.max_num_batched_tokens,
        max_prefill_tokens: goodput_engine::prefill_cap(cfg.max_prefill_tokens, a.model.on_cpu()),
        max_num_seqs: cfg.max_num_seqs,
        max_model_len: cfg.max_model_len.unwrap_or(spec.max_position_embeddings).min(spec.max_position_embeddings),
        prefix_caching: cfg.enable_prefix_caching,
    };
    let names: Vec<String> = a.from_steps.iter().map(|p| p.display().to_string()).collect();
    Ok(Measured {
        source: format!("steps of {} ({} steps){}", names.join(", "), steps.len(), ratios_text(&ratios)),
        steps,
        engine,
        weights: a.model.weights.clone().unwrap_or_else(|| "dummy".into()),
        dtype: dtype_name(a)?,
        // The replicas' device, as --device names it (they ran with the same flags).
        device: a.model.device.clone(),
        fingerprint: None,
    })
}

/// The later step files' speed ratios, as the profile's source line ends.
fn ratios_text(ratios: &[String]) -> String {
    if ratios.is_empty() {
        String::new()
    } else {
        format!("; {}", ratios.join("; "))
    }
}

/// Whether `t` is a knot of one of a table's terms.
fn is_knot(t: Term) -> bool {
    matches!(t, Term::Tokens(_) | Term::Rows(_) | Term::Context(_))
}

/// The dtype the engine runs at with these flags (`--dtype`, or the device's default), named
/// as a measured profile names it.
fn dtype_name(a: &ProfileSpec) -> Result<String> {
    let (_, dtype) = a.model.device_dtype()?;
    Ok(format!("{dtype:?}").to_lowercase())
}

fn save_steps(path: &Path, steps: &[StepRecord]) -> Result<()> {
    let mut text = String::new();
    for s in steps {
        text += &serde_json::to_string(s)?;
        text.push('\n');
    }
    std::fs::write(path, text).map_err(error::write(path))
}

/// Each step as a sample of the fit: what it did and its period.
fn samples(steps: &[StepRecord], gap: f64) -> Vec<Sample> {
    goodput_sizing::price::periods(steps, gap).into_iter().map(|(_, work, seconds)| Sample { work, seconds }).collect()
}

/// At most `n` samples, drawn evenly (a long run's steps would make the bootstrap slow; 20 000
/// pin the coefficients as well).
fn subsample(samples: Vec<Sample>, n: usize, seed: u64) -> Vec<Sample> {
    if samples.len() <= n {
        return samples;
    }
    let stride = samples.len() as f64 / n as f64;
    let offset = (seed % 1000) as f64 / 1000.0 * stride;
    (0..n).filter_map(|i| samples.get((offset + i as f64 * stride) as usize).copied()).collect()
}

fn fingerprint(a: &ProfileSpec, device: &str) -> Fingerprint {
    let m = crate::run::machine();
    Fingerprint {
        cpu: m.cpu,
        logical_cpus: m.logical_cpus,
        memory_gib: m.memory_gib,
        kernel: m.kernel,
        device: device.into(),
        engine_cpus: a.engine_cpus.as_deref().map(goodput_engine::affinity::format_cpu_list),
    }
}

/// This machine's bandwidth and FLOP/s, measured, and each term against them: every fitted
/// term, a one-token decode step against weights ÷ bandwidth (MBU), and the marginal token of
/// the largest batches against linear FLOPs ÷ FLOP/s (MFU).
fn roofline(
    a: &ProfileSpec,
    spec: &ModelSpec,
    dtype: &str,
    fit: &Fit,
    progress: &dyn Progress,
) -> Option<MachineRoofline> {
    use goodput_sizing::cost::StepCost;
    let (bandwidth, flops, how) = machine::measure(a.engine_cpus.clone(), dtype, progress);
    if !(bandwidth.is_finite() && bandwidth > 0.0 && flops.is_finite() && flops > 0.0) {
        progress.line(
            "warning: this machine's bandwidth or FLOP/s could not be measured; the profile has no roofline",
            true,
        );
        return None;
    }
    let Some(bytes) = goodput_sizing::hardware::DType::of_engine(dtype).map(goodput_sizing::hardware::DType::bytes)
    else {
        progress.line(&format!("warning: dtype `{dtype}` has no known size; the profile has no roofline"), true);
        return None;
    };
    let dev = DeviceLimits::uniform(bandwidth, flops, 0.0);
    let work = ModelWork::of(spec, bytes, 1).ok()?;
    let terms = fit
        .terms
        .iter()
        .map(|f| {
            let floor_s = term_floor(f.term, &work, &dev);
            let efficiency = (f.measured && f.coefficient > 0.0 && floor_s > 0.0).then(|| floor_s / f.coefficient);
            let memory = match f.term {
                Term::Fixed | Term::DecodeContext | Term::Context(_) | Term::ExpertsTouched => true,
                t if t.is_attention_cell() => true,
                Term::Tokens(k) => work.read_bytes / bandwidth >= k as f64 * work.linear_flops_per_token / flops,
                _ => false,
            };
            TermFloor { term: f.term, floor_s, efficiency, bound: if memory { "memory" } else { "compute" }.into() }
        })
        .collect();
    let cost = fit.cost(0.0);
    let one = StepWork { decode_seqs: 1.0, sampled: 1.0, decode_context: 1.0, ..Default::default() };
    let memory_efficiency = Some(term_floor(Term::Fixed, &work, &dev) / cost.step_seconds(&one));
    let knots: Vec<(u32, f64)> = fit
        .terms
        .iter()
        .filter_map(|f| match f.term {
            Term::Tokens(k) if f.measured => Some((k, f.coefficient)),
            _ => None,
        })
        .collect();
    // The slope from the largest measured knot down to half of it: a wide pair, so one
    // noisy knot next to another (p, p + 1) does not decide it.
    let compute_efficiency = knots.last().and_then(|&(k1, c1)| {
        let &(k0, c0) = knots.iter().rev().find(|(k, _)| *k <= k1 / 2)?;
        (c1 > c0).then(|| term_floor(Term::PrefillTokens, &work, &dev) / ((c1 - c0) / (k1 - k0) as f64))
    });
    Some(MachineRoofline { bandwidth, flops, how: how.into(), terms, memory_efficiency, compute_efficiency })
}
