//! `goodput profile`: the engine's step costs measured on a grid designed for the fit (or read
//! from a run's steps.jsonl), fitted into a step-cost model with intervals, residuals and each
//! term against this machine's roofline, and written as `profile.json` for the simulator.

mod bench;
mod grid;
mod machine;
mod price;

use crate::args::{CpuList, EngineArgs, ModelArgs};
use anyhow::{bail, Context, Result};
use clap::Args;
use goodput_core::{Clock, ModelSpec, StepRecord};
use goodput_engine::Engine;
use goodput_report::console as table;
use goodput_sizing::cost::{StepWork, Term};
use goodput_sizing::fit::{fit, Fit, FitOptions, Sample};
use goodput_sizing::profile::{Fingerprint, MachineRoofline, Profile, ProfileEngine, TermFloor};
use goodput_sizing::roofline::{term_floor, DeviceLimits, ModelWork};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[derive(Args, Debug)]
pub struct ProfileArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Pin the engine to these CPUs (as `run --engine-cpus`; a profile is only valid for runs
    /// pinned the same way).
    #[arg(long, value_parser = crate::args::parse_cpus)]
    pub engine_cpus: Option<CpuList>,
    /// Pin the thread that submits the grid's requests and follows their tokens (as `run
    /// --harness-cpus`; left unpinned, it wakes for every token on the engine's CPUs too and
    /// slows the steps it measures).
    #[arg(long, value_parser = crate::args::parse_cpus)]
    pub harness_cpus: Option<CpuList>,
    /// Where to write the profile.
    #[arg(long, short = 'o', default_value = "profile.json")]
    pub out: PathBuf,
    /// Fit the steps of this run (its steps.jsonl) instead of measuring the grid.
    #[arg(long, value_name = "RUN_DIR")]
    pub from: Option<PathBuf>,
    /// Fit these files of step records (`serve --steps`: a replica's steps under its real
    /// load, several replicas' together) instead of measuring the grid; the engine settings
    /// are the flags given here, as the replicas were started with.
    #[arg(long, value_name = "FILE", value_delimiter = ',', num_args = 1.., conflicts_with_all = ["from", "from_bench"])]
    pub from_steps: Vec<PathBuf>,
    /// Fit the rows of these `engine-bench --json` files (a GPU's, measured elsewhere)
    /// instead of measuring the grid.
    #[arg(long, value_name = "FILE", value_delimiter = ',', num_args = 1.., conflicts_with = "from")]
    pub from_bench: Vec<PathBuf>,
    /// Time spent measuring the grid (whole probes; the fit uses every round begun).
    #[arg(long, value_parser = crate::args::parse_duration, default_value = "60s")]
    pub time: Duration,
    /// An earlier profile to check for drift (default: the file at --out, if any).
    #[arg(long)]
    pub baseline: Option<PathBuf>,
    /// Bootstrap resamples for the coefficient intervals.
    #[arg(long, default_value_t = 200)]
    pub bootstrap: usize,
    /// Seed of the grid's prompts and order, and of the bootstrap.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Also write the measured steps the fit used (JSON lines of step records).
    #[arg(long, value_name = "FILE")]
    pub save_steps: Option<PathBuf>,
    /// Skip measuring this machine's bandwidth and FLOP/s (no roofline column).
    #[arg(long)]
    pub no_roofline: bool,
    /// No progress on stderr.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// Instead of fitting: price the `--from-steps` files' steps by this profile and print,
    /// per file, what its engine did and its step periods against their price, by kind of
    /// step (a run's replicas beside a simulation's from `plan --trace --steps-out`).
    #[arg(long, value_name = "PROFILE", requires = "from_steps")]
    pub price_with: Option<PathBuf>,
    /// `--price-with`: also write the tables as JSON here.
    #[arg(long, requires = "price_with")]
    pub json: Option<PathBuf>,
    /// The decode-context term: a table over Σ context (the default), or one linear term (as
    /// profiles before the table were fitted: for comparing the two on the same steps).
    #[arg(long, hide = true, default_value = "table", value_parser = ["table", "linear"])]
    pub context_term: String,
    /// The sampled-rows term: one linear term (the default), or a table over the rows a step
    /// samples (as profiles before were fitted: for comparing the two on the same steps). In
    /// every decode probe a step samples as many rows as it has tokens, so a rows table is not
    /// identified beside the tokens table: the fit split decode cost between the two at random
    /// (smollm2 on an AVX2 CPU: rows@3 42 ms, rows@4 6 ms) and mispriced a run's mixed steps
    /// by 5–9 %, which the linear term prices within 2 %; tiny's accuracy table is the same
    /// with either (docs/sizing.md).
    #[arg(long, hide = true, default_value = "linear", value_parser = ["table", "linear"])]
    pub rows_term: String,
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

pub fn run(a: ProfileArgs) -> Result<()> {
    if a.bootstrap > 10_000 {
        bail!("--bootstrap: {} resamples is more than needed (at most 10000)", a.bootstrap);
    }
    let spec = a.model.source().spec()?;
    if !a.from_bench.is_empty() {
        return bench::run(&a, &spec);
    }
    if let Some(profile) = &a.price_with {
        return price::run(&a.from_steps, profile, a.json.as_deref());
    }
    let baseline = read_baseline(&a)?;
    let m = match &a.from {
        Some(dir) => from_run(&a, dir, &spec)?,
        None if !a.from_steps.is_empty() => from_steps(&a, &spec)?,
        None => measure_grid(&a, &spec)?,
    };
    if let Some(path) = &a.save_steps {
        save_steps(path, &m.steps)?;
    }
    let gap = goodput_sizing::price::gap(&m.steps);
    let samples = subsample(samples(&m.steps, gap), 20_000, a.seed);
    // Tables over the batch shapes the steps reached (kernels switch with the batch).
    let max_tokens = m.steps.iter().map(|s| s.prefill_tokens + s.decode_seqs).max().unwrap_or(1);
    let max_rows = m.steps.iter().map(|s| s.sampled).max().unwrap_or(1);
    let max_context = m.steps.iter().filter(|s| s.decode_seqs > 0).map(|s| s.decode_context).max().unwrap_or(0);
    let mut terms = Term::table(max_tokens, max_rows, usize::try_from(max_context).unwrap_or(usize::MAX));
    if a.context_term == "linear" {
        terms.retain(|t| !matches!(t, Term::Context(_)));
        terms.push(Term::DecodeContext);
    }
    if a.rows_term == "linear" {
        terms.retain(|t| !matches!(t, Term::Rows(_)));
        terms.push(Term::SampledRows);
    }
    // A mixture of experts reads the experts its tokens reach: recorded per step, expected
    // when simulated.
    let experts = goodput_sizing::cost::ExpertShape::of(&spec);
    if experts.is_some() {
        terms.push(Term::ExpertsTouched);
    }
    let options = FitOptions { bootstrap: a.bootstrap, seed: a.seed };
    let mut fit = fit(&samples, &terms, &options).with_context(|| format!("fitting {} steps", samples.len()))?;
    // A knot no step reached prices its shapes at 0 (a 64-token chunk between measured 33
    // and 65 costs nothing). A load's steps (a run's, a replica's) cover only the few shapes
    // its requests make: they get the linear terms, which interpolate and extrapolate from
    // what was measured. The grid probes every knot in a whole round; a cut round is said.
    let unreached = fit.terms.iter().filter(|f| !f.measured && is_knot(f.term)).count();
    let grid = a.from.is_none() && a.from_steps.is_empty();
    if unreached > 0 && grid {
        eprintln!("warning: the grid reached {unreached} of the table's knots not at all: shapes near them are priced low (raise --time)");
    }
    if unreached > 0 && !grid {
        eprintln!(
            "profile: the steps reach {unreached} of the table's knots not at all: fitting the linear terms instead"
        );
        let mut linear = Term::ALL.to_vec();
        linear.extend(experts.map(|_| Term::ExpertsTouched));
        fit = goodput_sizing::fit::fit(&samples, &linear, &options)
            .with_context(|| format!("fitting {} steps", samples.len()))?;
    }
    let roofline = if !a.no_roofline && m.device == "cpu" { roofline(&a, &spec, &m.dtype, &fit) } else { None };
    let profile = Profile {
        dtype: m.dtype.clone(),
        weights: m.weights.clone(),
        engine: m.engine.clone(),
        fingerprint: m.fingerprint.clone().unwrap_or_else(|| fingerprint(&a, &m.device)),
        source: m.source.clone(),
        // The fit's target is the step period, which holds the gap already (gap_s 0).
        roofline,
        experts,
        ..Profile::now(spec.name.clone(), fit)
    };
    print(&profile, gap);
    if let Some(old) = &baseline {
        for line in profile.drift(old) {
            eprintln!("warning: drift from the earlier profile: {line}");
        }
    }
    profile.write(&a.out).with_context(|| format!("writing {}", a.out.display()))?;
    println!("profile written to {}", a.out.display());
    Ok(())
}

fn read_baseline(a: &ProfileArgs) -> Result<Option<Profile>> {
    match &a.baseline {
        Some(p) => Ok(Some(Profile::read(p)?)),
        // The file about to be replaced, when it is a profile.
        None => Ok(a.out.exists().then(|| Profile::read(&a.out).ok()).flatten()),
    }
}

/// The grid, measured on the engine thread pinned as asked.
fn measure_grid(a: &ProfileArgs, spec: &ModelSpec) -> Result<Measured> {
    let max_len = a.engine.max_model_len.unwrap_or(spec.max_position_embeddings);
    a.engine.options().apply_before_load();
    let loaded = crate::args::load(&a.model.source(), max_len)?;
    let dtype = format!("{:?}", loaded.model.dtype).to_lowercase();
    let device = if loaded.model.device.is_cpu() { "cpu".to_string() } else { format!("{:?}", loaded.model.device) };
    let weights = format!("{} ({})", loaded.weights_kind, loaded.weights_origin);
    let mut cfg = a.engine.options().config()?;
    // Chunks at a context are measured through the prefix cache; the cost of a step does not
    // depend on whether the cache is on, only on what the step computes.
    cfg.enable_prefix_caching = true;
    cfg.cpus = a.engine_cpus.as_ref().map(|c| c.0.clone());
    let sc = cfg.scheduler_config(&loaded.model)?;
    let (tx, rx) = flume::unbounded();
    let engine = Engine::start(loaded.model, cfg, Clock::new(), Some(tx))?;
    if let Some(h) = &a.harness_cpus {
        goodput_engine::affinity::pin_current(&h.0)?;
    }
    let limits = grid::Limits {
        max_model_len: sc.max_model_len,
        budget: sc.max_num_batched_tokens,
        max_seqs: sc.max_num_seqs,
        pool_tokens: (sc.num_blocks - 1) * sc.block_size,
        wide: device != "cpu",
    };
    let probes = grid::probes(&limits);
    if !a.quiet {
        eprintln!("profile: {} on {device} {dtype}: {} probes per round for {:?}", spec.name, probes.len(), a.time);
    }
    let t0 = Instant::now();
    let handle = engine.handle();
    let mut g = grid::Grid::new(&handle, &rx, spec.vocab_size, a.seed);
    let quiet = a.quiet;
    let n = probes.len();
    let (steps, rounds) = g.run(&probes, a.time, |round, i| {
        if !quiet {
            eprint!("\rprofile: round {round}, probe {i}/{n}   ");
        }
    })?;
    engine.shutdown(false);
    if !quiet {
        eprintln!();
    }
    if rounds < 2 {
        eprintln!(
            "warning: the grid's first round did not finish within {:?}: the costliest probes were not measured (raise --time)",
            a.time
        );
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
        max_num_seqs: sc.max_num_seqs,
        max_model_len: sc.max_model_len,
        prefix_caching: !a.engine.no_prefix_caching,
    };
    Ok(Measured { steps, engine, source, weights, dtype, device, fingerprint: None })
}

/// The steps of a run, with the run's engine settings.
fn from_run(a: &ProfileArgs, dir: &Path, spec: &ModelSpec) -> Result<Measured> {
    let summary = goodput_results::read_summary(dir)?;
    if summary.device.starts_with("simulated") {
        bail!("{} is a simulated run: a profile is fitted on measured steps", dir.display());
    }
    if summary.model != spec.name {
        bail!("{} is a run of `{}`, not of --model `{}`", dir.display(), summary.model, spec.name);
    }
    let rows: Vec<goodput_results::StepRow> =
        goodput_results::files::read_jsonl(&dir.join(goodput_results::files::STEPS))?;
    let steps: Vec<StepRecord> = rows.into_iter().map(|r| r.step).collect();
    if let Some(why) = StepRecord::implausible_run(&steps) {
        bail!("{}: {why}; a fit on it would be decided by it", dir.join(goodput_results::files::STEPS).display());
    }
    if steps.iter().any(|s| s.prefill_tokens > 0) && steps.iter().all(|s| s.prefill_attention == 0) {
        bail!(
            "{}: its steps predate the attention work in step records (prefill_attention); fit a newer run",
            dir.display()
        );
    }
    let e = &summary.engine;
    let first = steps.first().context("the run has no engine steps (was its target another process's server?)")?;
    let engine = ProfileEngine {
        block_size: e.block_size,
        num_blocks: first.usable_blocks + 1,
        max_num_batched_tokens: e.max_num_batched_tokens,
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
fn from_steps(a: &ProfileArgs, spec: &ModelSpec) -> Result<Measured> {
    let mut steps: Vec<StepRecord> = Vec::new();
    for path in &a.from_steps {
        if !path.exists() {
            bail!("--from-steps {}: no such file", path.display());
        }
        let these: Vec<StepRecord> = goodput_results::files::read_jsonl(path)?;
        if these.is_empty() {
            bail!("{}: no step records (was the replica started with --steps and sent requests?)", path.display());
        }
        if let Some(why) = StepRecord::implausible_run(&these) {
            bail!("{}: {why}; a fit on it would be decided by it", path.display());
        }
        // A step's period runs to the next step of the same engine: each file's steps count
        // from 0, so no period runs from one file into the next.
        steps.extend(these);
    }
    let first = &steps[0];
    let cfg = a.engine.options().config()?;
    let engine = ProfileEngine {
        block_size: first.block_size,
        num_blocks: first.usable_blocks + 1,
        max_num_batched_tokens: cfg.max_num_batched_tokens,
        max_num_seqs: cfg.max_num_seqs,
        max_model_len: cfg.max_model_len.unwrap_or(spec.max_position_embeddings).min(spec.max_position_embeddings),
        prefix_caching: cfg.enable_prefix_caching,
    };
    let names: Vec<String> = a.from_steps.iter().map(|p| p.display().to_string()).collect();
    Ok(Measured {
        source: format!("steps of {} ({} steps)", names.join(", "), steps.len()),
        steps,
        engine,
        weights: a.model.weights.clone().unwrap_or_else(|| "dummy".into()),
        dtype: dtype_name(a)?,
        // The replicas' device, as --device names it (they ran with the same flags).
        device: a.model.device.clone(),
        fingerprint: None,
    })
}

/// Whether `t` is a knot of one of a table's terms.
fn is_knot(t: Term) -> bool {
    matches!(t, Term::Tokens(_) | Term::Rows(_) | Term::Context(_))
}

/// The dtype the engine runs at with these flags (`--dtype`, or the device's default), named
/// as a measured profile names it.
fn dtype_name(a: &ProfileArgs) -> Result<String> {
    let (_, dtype) = a.model.source().device_dtype()?;
    Ok(format!("{dtype:?}").to_lowercase())
}

fn save_steps(path: &Path, steps: &[StepRecord]) -> Result<()> {
    let mut text = String::new();
    for s in steps {
        text += &serde_json::to_string(s)?;
        text.push('\n');
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// Each step as a sample of the fit: what it did and its period.
fn samples(steps: &[StepRecord], gap: f64) -> Vec<Sample> {
    goodput_sizing::price::periods(steps, gap)
        .into_iter()
        .map(|(s, seconds)| Sample { work: StepWork::of_record(s), seconds })
        .collect()
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

fn fingerprint(a: &ProfileArgs, device: &str) -> Fingerprint {
    let m = goodput_bench::run::machine();
    Fingerprint {
        cpu: m.cpu,
        logical_cpus: m.logical_cpus,
        memory_gib: m.memory_gib,
        kernel: m.kernel,
        device: device.into(),
        engine_cpus: a.engine_cpus.as_ref().map(|c| goodput_engine::affinity::format_cpu_list(&c.0)),
    }
}

/// This machine's bandwidth and FLOP/s, measured, and each term against them: every fitted
/// term, a one-token decode step against weights ÷ bandwidth (MBU), and the marginal token of
/// the largest batches against linear FLOPs ÷ FLOP/s (MFU).
fn roofline(a: &ProfileArgs, spec: &ModelSpec, dtype: &str, fit: &Fit) -> Option<MachineRoofline> {
    use goodput_sizing::cost::StepCost;
    let (bandwidth, flops) = machine::measure(a.engine_cpus.as_ref().map(|c| c.0.clone()));
    if !(bandwidth.is_finite() && bandwidth > 0.0 && flops.is_finite() && flops > 0.0) {
        eprintln!("warning: this machine's bandwidth or FLOP/s could not be measured; the profile has no roofline");
        return None;
    }
    let Some(bytes) = goodput_sizing::hardware::DType::of_engine(dtype).map(goodput_sizing::hardware::DType::bytes)
    else {
        eprintln!("warning: dtype `{dtype}` has no known size; the profile has no roofline");
        return None;
    };
    let dev = DeviceLimits::uniform(bandwidth, flops, 0.0);
    let work = ModelWork::of(spec, bytes, 1).ok()?;
    let terms = fit
        .terms
        .iter()
        .map(|f| {
            let floor_s = term_floor(f.term, &work, &dev);
            let efficiency = (f.measured && f.coefficient > 0.0).then(|| floor_s / f.coefficient);
            let memory = match f.term {
                Term::Fixed | Term::DecodeContext | Term::Context(_) | Term::ExpertsTouched => true,
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
    Some(MachineRoofline { bandwidth, flops, how: machine::HOW.into(), terms, memory_efficiency, compute_efficiency })
}

/// The fitted terms, their intervals and their place against the roofline, on stdout.
fn print(p: &Profile, gap: f64) {
    let mut t = table::new(&["term", "per", "coefficient", "95 % interval", "floor", "of roofline"]);
    for f in &p.fit.terms {
        let floor = p.roofline.as_ref().and_then(|r| r.terms.iter().find(|x| x.term == f.term));
        t.add_row(vec![
            f.term.name(),
            f.term.unit().to_string(),
            if f.measured { secs(f.coefficient) } else { "not measured".into() },
            if f.measured { format!("{} – {}", secs(f.lo), secs(f.hi)) } else { String::new() },
            floor.map_or(String::new(), |x| secs(x.floor_s)),
            floor
                .and_then(|x| x.efficiency)
                .map_or(String::new(), |e| format!("{:.1} % ({})", e * 100.0, floor.map_or("", |x| x.bound.as_str()))),
        ]);
    }
    let r = &p.fit.residuals;
    println!("Step-cost model of {} ({}, {}), {}\n{t}", p.model, p.dtype, p.fingerprint.device, p.source);
    println!(
        "R² {:.4} over {} step periods (start to the next start while busy); |relative residual| P50 {:.1} %, P90 {:.1} %, P99 {:.1} %, median bias {:+.1} %; median gap between busy steps {}",
        p.fit.r2,
        p.fit.samples,
        r.p50 * 100.0,
        r.p90 * 100.0,
        r.p99 * 100.0,
        r.bias * 100.0,
        secs(gap)
    );
    if let Some(m) = &p.roofline {
        let pct = |x: Option<f64>| x.map_or("-".to_string(), |x| format!("{:.0} %", x * 100.0));
        println!(
            "roofline: {:.1} GB/s, {:.1} GFLOP/s ({}); a one-token decode step reaches {} of weights ÷ bandwidth (MBU), a token of the largest batches {} of its FLOPs ÷ FLOP/s (MFU)",
            m.bandwidth / 1e9,
            m.flops / 1e9,
            m.how,
            pct(m.memory_efficiency),
            pct(m.compute_efficiency)
        );
    }
}

/// Seconds in the unit that reads best (s, ms, µs, ns).
pub fn secs(s: f64) -> String {
    let a = s.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1.0 {
        format!("{s:.3} s")
    } else if a >= 1e-3 {
        format!("{:.3} ms", s * 1e3)
    } else if a >= 1e-6 {
        format!("{:.3} µs", s * 1e6)
    } else {
        format!("{:.3} ns", s * 1e9)
    }
}
