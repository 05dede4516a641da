//! The planner (`goodput plan`): GPUs per model for a load under SLOs. For each GPU × TP: whether the model
//! fits, the KV left for sequences, the usable capacity of one replica simulated on the real
//! scheduler with roofline step costs (stated efficiencies, or calibrated from a measured
//! profile), what bounds it, and the replicas, GPUs and cost for the load with headroom.
//! Its other modes: the interactivity curve ([`curve`]), a fleet replaying a trace behind
//! routers ([`fleet`], [`disagg`]), and a layout's step costs exported as a profile
//! ([`export`]). A checked [`PlanSpec`] in, a typed [`Answer`] out; its text, tables and pages
//! are `goodput-report`'s (`report::plan`).

pub mod answer;
pub mod config;
pub mod curve;
pub mod deploy;
pub mod disagg;
mod error;
pub mod export;
pub mod fleet;
pub mod overhead;
pub mod replay;
pub mod search;
mod spec;
pub mod why;

use crate::hardware::{DType, Gpu, HardwareCatalog};
use crate::layout::Layout;
use crate::roofline::{Efficiencies, ProjectedCost};
use error::refuse;
pub use error::PlanError;
use goodput_core::{Catalog, ModelSpec};
use goodput_workload::Scenario;
pub use search::Load;
use search::Sim;
use serde::Serialize;
pub use spec::{FleetSpec, Mode, PlanSpec};

type Result<T, E = PlanError> = std::result::Result<T, E>;
use std::sync::Arc;

/// An expert-parallel degree of `--ep`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ep {
    /// Over every GPU of a stage.
    All,
    Ways(usize),
}

impl Ep {
    /// `all`, or a degree from 1 to 1024.
    pub fn parse(s: &str) -> Result<Ep, goodput_core::ValueError> {
        match s.trim() {
            "all" => Ok(Ep::All),
            n => match n.parse::<usize>() {
                Ok(n) if (1..=1024).contains(&n) => Ok(Ep::Ways(n)),
                _ => Err(goodput_core::ValueError::new(
                    s,
                    "an expert-parallel degree is a number from 1 to 1024, or `all`",
                )),
            },
        }
    }
}

/// One GPU × layout configuration of the plan.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub gpu: String,
    /// The weights' dtype, and whether they run on bf16 math (weight-only kernels: FP8 or FP4
    /// weights on a GPU without tensor cores for them, as vLLM serves them).
    pub dtype: DType,
    pub weight_only: bool,
    pub tp: usize,
    pub layout: Layout,
    /// `TP8`, `TP1·DP8·EP8`, …
    pub layout_label: String,
    pub gpus_per_replica: usize,
    /// Nodes one replica spans.
    pub nodes: usize,
    /// Attention groups × pipeline slots: the engines one replica runs side by side.
    pub engines_per_replica: usize,
    /// Why it cannot serve the model (does not fit, TP does not divide, no such dtype).
    pub unfit: Option<String>,
    pub weight_gb_per_gpu: f64,
    /// KV tokens of one engine.
    pub kv_tokens: usize,
    /// Sequences of the scenario's mean length one engine's KV holds.
    pub kv_sequences: f64,
    /// Usable capacity of one replica (req/s or users, all its engines) and the output tok/s there.
    pub capacity: Option<f64>,
    pub capacity_output_tps: Option<f64>,
    /// At the capacity: completed req/s (all its engines) and mean output tokens per
    /// completed request; their product is `capacity_output_tps`. Under a rate capacity the
    /// completed rate may fall short of the offered one (requests still in flight at the
    /// window's end).
    pub capacity_completed: Option<f64>,
    pub capacity_mean_output: Option<f64>,
    /// The same capacity in the other unit: concurrent requests in flight at the capacity rate
    /// (Little's law: req/s × mean E2E), or the req/s the capacity users complete.
    pub capacity_other: Option<f64>,
    /// What breaks first above it.
    pub bound: String,
    pub replicas: Option<usize>,
    pub gpus: Option<usize>,
    pub cost_per_hour: Option<f64>,
    pub cost_per_million_output_tokens: Option<f64>,
    /// Per million tokens in and out together, at the load served.
    pub cost_per_million_tokens: Option<f64>,
    /// Where the time of a step goes at the usable capacity (the passing level's steps).
    pub step: Option<why::StepShares>,
}

/// The whole plan, as written to JSON.
#[derive(Debug, Serialize)]
pub struct Plan {
    pub model: String,
    /// The model's repository (what a server loads), where the catalog names one.
    pub hf_repo: Option<String>,
    pub scenario: String,
    pub load: Load,
    pub slos: Vec<String>,
    /// The dtype asked; with `try_dtypes`, each row's own instead.
    pub dtype: DType,
    pub try_dtypes: bool,
    pub kv_dtype: DType,
    pub expert_skew: f64,
    /// How the answer picks among the rows that serve the load.
    pub criterion: String,
    /// Layouts not simulated: their replica alone holds more GPUs than a smaller layout of the
    /// same GPU needs in all.
    pub skipped: usize,
    pub headroom: f64,
    pub efficiencies: Efficiencies,
    pub mean_input_tokens: f64,
    pub mean_output_tokens: f64,
    pub rows: Vec<Row>,
    pub answer: String,
    pub assumptions: Vec<String>,
}

/// What every plan needs: the model, the GPUs, the efficiencies and the scenario.
pub struct Setting {
    pub spec: ModelSpec,
    pub hw: HardwareCatalog,
    pub eff: Efficiencies,
    pub error_bar: String,
    pub scenario: Scenario,
    pub slos: Vec<goodput_metrics::slo::Slo>,
    pub prices: std::collections::HashMap<String, f64>,
    pub mean_in: f64,
    pub mean_out: f64,
}

impl Setting {
    /// One engine of a configuration, simulated on this setting's scenario and SLOs.
    pub fn sim(&self, a: &PlanSpec, cost: ProjectedCost, sched: goodput_scheduler::SchedulerConfig) -> Sim<'_> {
        Sim {
            cost: Arc::new(cost),
            sched,
            scenario: &self.scenario,
            vocab: self.spec.vocab_size,
            slos: &self.slos,
            requests: a.requests,
            seed: a.seed,
        }
    }
}

fn check_args(a: &PlanSpec) -> Result<()> {
    let headroom = match a.mode {
        Mode::Capacity { headroom, .. } => headroom,
        _ => 0.0,
    };
    if !(0.0..=10.0).contains(&headroom) || !(0.05..=1.0).contains(&a.memory_utilization) {
        refuse!("--headroom must be within 0–10 and --memory-utilization within 0.05–1");
    }
    let degrees = |v: &[usize]| v.is_empty() || v.iter().any(|&t| t == 0 || t > 1024);
    if a.tp.iter().any(|&t| t > 64) || degrees(&a.tp) {
        refuse!("--tp: tensor-parallel sizes between 1 and 64");
    }
    if degrees(&a.dp_attention) || degrees(&a.pp) || a.ep.is_empty() {
        refuse!("--dp-attention and --pp: degrees between 1 and 1024; --ep: at least one degree");
    }
    if a.nodes == 0 || a.nodes > 128 {
        refuse!("--nodes: between 1 and 128 nodes per replica");
    }
    if !(a.expert_skew.is_finite() && (0.0..=4.0).contains(&a.expert_skew)) {
        refuse!("--expert-skew: a power-law exponent between 0 (uniform) and 4");
    }
    if let Some(kv) = a.kv_dtype {
        if !matches!(kv, DType::Bf16 | DType::Fp16 | DType::Fp8) {
            refuse!("--kv-dtype {kv}: a KV cache is bf16, fp16 or fp8");
        }
    }
    if a.dtype == DType::F32 {
        refuse!("--dtype f32: the hardware catalog gives no f32 tensor peak; plan in bf16, fp16, fp8, mxfp4 or nvfp4");
    }
    if a.block_size == 0 || a.max_num_seqs == 0 || a.max_num_batched_tokens == 0 {
        refuse!("--block-size, --max-num-seqs and --max-num-batched-tokens must be at least 1");
    }
    if a.requests == 0 || a.requests > 50_000 {
        refuse!("--requests: between 1 and 50000 measured requests per simulated level");
    }
    Ok(())
}

fn setting(a: &PlanSpec) -> Result<Setting> {
    let catalog = match &a.catalog {
        Some(p) => Catalog::from_path(p)?,
        None => Catalog::builtin(),
    };
    let spec = catalog.get(&a.model)?.clone();
    let mut hw = HardwareCatalog::builtin();
    if let Some(p) = &a.hardware {
        hw.extend(HardwareCatalog::from_path(p)?);
    }
    let prices = parse_prices(&a.price, &hw)?;
    let scenario = match &a.lengths {
        Some(l) => {
            let s = l.scenario();
            s.validate(spec.max_position_embeddings)?;
            s
        }
        None => scenario(&a.scenario, spec.max_position_embeddings)?,
    };
    let slos = goodput_metrics::slo::parse_slos(&a.slo)?;
    let (eff, error_bar) = efficiencies(a)?;
    let (mean_in, mean_out) = mean_lengths(&scenario, spec.vocab_size, a.seed);
    Ok(Setting { spec, hw, eff, error_bar, scenario, slos, prices, mean_in, mean_out })
}

fn efficiencies(a: &PlanSpec) -> Result<(Efficiencies, String)> {
    Ok(match &a.calibrate {
        Some(p) => {
            let profile = crate::profile::Profile::read(p)?;
            let eff = crate::profile::calibrated(&profile)
                .map_err(|source| PlanError::ProfileUse { path: p.display().to_string(), source })?;
            let r = &profile.fit.residuals;
            let bar = format!(
                "the calibrating profile's step times are within {:.0} % (P50) and {:.0} % (P90) on the machine it measured; the carry-over to these GPUs is not itself validated",
                r.p50 * 100.0,
                r.p90 * 100.0
            );
            (eff, bar)
        }
        None => (
            Efficiencies::default(),
            "none measured — stated efficiencies, not validated against a measurement of these GPUs (calibrate with --calibrate PROFILE; check a run with plan --check)".to_string(),
        ),
    })
}

/// The highest `--rate` planned for, requests per second: a thousand times the busiest
/// public LLM services' rates; beyond it replica counts stop meaning anything (and 1e308
/// would wrap them).
pub const MAX_PLAN_RATE: f64 = 1e6;
/// The most `--users` planned for.
pub const MAX_PLAN_USERS: usize = 100_000_000;

/// What the planner says as it goes: the configuration being simulated (a view overwrites
/// it in place), or a line to keep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Said<'a> {
    Step(&'a str),
    Line(&'a str),
}

/// The planner's answer, by mode.
#[derive(Debug)]
pub enum Answer {
    /// GPUs per model for a load (`rate` or `users`).
    Plan(Plan),
    /// Throughput per GPU against interactivity (`curve`).
    Curve(curve::Curve),
    /// A fleet replaying a trace behind each router (`trace`, and `disaggregate`).
    Fleet(fleet::FleetPlan),
    /// A layout's roofline step costs written as a profile (`export_profile`).
    Projection(export::Projection),
}

/// Plans `a`: checks it, then runs the mode it asks for, saying how it goes through `say`.
pub fn plan(a: &PlanSpec, say: &mut dyn FnMut(Said)) -> Result<Answer> {
    check_args(a)?;
    let set = setting(a)?;
    if let Mode::Export { gpu, out } = &a.mode {
        return Ok(Answer::Projection(export::run(a, &set, set.hw.get(gpu)?, out)?));
    }
    let gpus: Vec<Gpu> = a.gpus.iter().map(|g| set.hw.get(g).cloned()).collect::<Result<_, _>>()?;
    Ok(match &a.mode {
        Mode::Fleet(f) => match &f.disaggregate {
            Some(splits) => Answer::Fleet(disagg::run(a, f, &set, &gpus, splits, say)?),
            None => Answer::Fleet(fleet::run(a, f, &set, &gpus, say)?),
        },
        Mode::Curve => Answer::Curve(curve::run(a, &set, &gpus, say)?),
        Mode::Capacity { load, headroom } => Answer::Plan(capacity(a, &set, &gpus, *load, *headroom, say)),
        Mode::Export { .. } => unreachable!("answered above"),
    })
}

/// Each GPU × dtype × layout's usable capacity, and the replicas for `load` with `headroom`;
/// the GPUs simulated side by side on the machine's cores, each GPU's configurations from the
/// smallest replica up. A layout whose replica alone holds more GPUs than a smaller one of the
/// same GPU needs in all is not simulated (it cannot need fewer GPUs, nor cost less), unless
/// [`PlanSpec::every_layout`].
fn capacity(a: &PlanSpec, set: &Setting, gpus: &[Gpu], load: Load, headroom: f64, say: &mut dyn FnMut(Said)) -> Plan {
    use rayon::prelude::*;
    let per_gpu: Vec<(&Gpu, Vec<(PlanSpec, Layout)>)> = gpus
        .iter()
        .map(|g| {
            let mut configs = Vec::new();
            for (dtype, emulate) in config::dtypes(a, &set.spec, g) {
                let a = PlanSpec { dtype, emulate, ..a.clone() };
                configs.extend(config::layouts(&a, &set.spec).into_iter().map(|l| (a.clone(), l)));
            }
            configs.sort_by_key(|(_, l)| l.gpus());
            (g, configs)
        })
        .collect();
    let n: usize = per_gpu.iter().map(|(_, c)| c.len()).sum();
    say(Said::Step(&format!("plan: up to {n} configurations on {} GPUs", gpus.len())));
    let done: Vec<(Vec<Row>, usize)> = per_gpu
        .into_par_iter()
        .map(|(g, configs)| {
            let (mut rows, mut skipped, mut fewest) = (Vec::new(), 0, usize::MAX);
            for (a, layout) in configs {
                if !a.every_layout && layout.gpus() > fewest {
                    skipped += 1;
                    continue;
                }
                let mut row = evaluate(&a, set, g, layout, load);
                row.weight_only = a.emulate && g.flops_per_s(a.dtype).is_none();
                cost(&mut row, load, headroom, set.prices.get(&g.name).copied(), (set.mean_in, set.mean_out));
                fewest = fewest.min(row.gpus.unwrap_or(usize::MAX));
                rows.push(row);
            }
            (rows, skipped)
        })
        .collect();
    let skipped = done.iter().map(|d| d.1).sum();
    let mut plan = answer::assemble(a, set, load, headroom, done.into_iter().flat_map(|d| d.0).collect());
    plan.skipped = skipped;
    plan
}

/// A built-in scenario, or a single-request scenario file.
fn scenario(name: &str, max_len: usize) -> Result<Scenario> {
    let path = std::path::Path::new(name);
    if !(name.ends_with(".toml") || path.exists()) {
        return Ok(Scenario::builtin(name, max_len)?);
    }
    match goodput_workload::load_scenario(path)? {
        goodput_workload::ScenarioFile::Single(s) => {
            s.validate(max_len)?;
            Ok(s)
        }
        other => refuse!("{name} is a {} scenario; plan simulates single requests", other.name()),
    }
}

fn parse_prices(items: &[String], hw: &HardwareCatalog) -> Result<std::collections::HashMap<String, f64>> {
    let mut out = std::collections::HashMap::new();
    for item in items {
        let Some((g, p)) = item.split_once('=') else { refuse!("--price `{item}`: expected GPU=USD_PER_HOUR") };
        let gpu = hw.get(g.trim())?;
        let usd = p.trim().parse().ok().filter(|x: &f64| x.is_finite() && *x >= 0.0);
        let Some(usd) = usd else { refuse!("--price `{item}`: `{p}` is not a price per hour") };
        out.insert(gpu.name.clone(), usd);
    }
    for g in hw.gpus.values() {
        if let Some(p) = g.price_per_hour {
            out.entry(g.name.clone()).or_insert(p);
        }
    }
    Ok(out)
}

/// Mean input and output tokens of the scenario's requests (1000 of them, as the run draws).
fn mean_lengths(s: &Scenario, vocab: usize, seed: u64) -> (f64, f64) {
    let n = 1000;
    let (mut i, mut o) = (0usize, 0usize);
    for id in 0..n {
        let r = s.request(seed, id, vocab);
        i += r.prompt.len();
        o += r.params.max_tokens;
    }
    (i as f64 / n as f64, o as f64 / n as f64)
}

/// A layout that cannot serve the model on `g`, and why.
fn unfit(set: &Setting, g: &Gpu, layout: Layout, why: config::Unfit) -> PlanError {
    PlanError::Unfit { model: set.spec.name.clone(), gpu: g.name.clone(), layout: layout.to_string(), why }
}

/// An empty row of `layout` on an H100 SXM, for tests.
#[cfg(test)]
pub(crate) fn empty_row_for_tests(layout: Layout, dtype: DType) -> Row {
    empty_row(HardwareCatalog::builtin().get("h100-sxm").expect("in the catalog"), dtype, layout)
}

fn empty_row(g: &Gpu, dtype: DType, layout: Layout) -> Row {
    Row {
        gpu: g.name.clone(),
        dtype,
        weight_only: false,
        tp: layout.tp,
        layout,
        layout_label: layout.label(),
        gpus_per_replica: layout.gpus(),
        nodes: layout.nodes(g.gpus_per_node),
        engines_per_replica: layout.dp * layout.pp,
        unfit: None,
        weight_gb_per_gpu: 0.0,
        kv_tokens: 0,
        kv_sequences: 0.0,
        capacity: None,
        capacity_output_tps: None,
        capacity_completed: None,
        capacity_mean_output: None,
        capacity_other: None,
        bound: String::new(),
        replicas: None,
        gpus: None,
        cost_per_hour: None,
        cost_per_million_output_tokens: None,
        cost_per_million_tokens: None,
        step: None,
    }
}

/// One configuration's usable capacity: one engine simulated to its capacity under the SLOs,
/// times the engines of a replica (each takes an equal share of the load).
fn evaluate(a: &PlanSpec, set: &Setting, g: &Gpu, layout: Layout, load: Load) -> Row {
    let mut row = empty_row(g, a.dtype, layout);
    let p = match config::prepare(a, &set.spec, g, layout, &set.eff, set.mean_in + set.mean_out) {
        Ok(p) => p,
        Err(why) => {
            row.unfit = Some(why.to_string());
            return row;
        }
    };
    row.weight_gb_per_gpu = p.weight_gb_per_gpu;
    row.kv_tokens = p.kv_tokens;
    row.kv_sequences = p.kv_sequences;
    let priced = p.cost.clone();
    let sim = set.sim(a, p.cost, p.sched);
    let start = match load {
        Load::Rate(_) => Load::Rate(0.5),
        Load::Users(_) => Load::Users(1),
    };
    let (pass, fail) = match sim.capacity(start, 6) {
        Ok(x) => x,
        Err(e) => {
            row.unfit = Some(format!("the simulated engine: {e}"));
            return row;
        }
    };
    let n = p.engines as f64;
    row.step = pass.as_ref().map(|p| why::StepShares::of(&priced, &p.work));
    row.capacity = pass.as_ref().map(|p| p.summary.load * n);
    row.capacity_output_tps = pass.as_ref().map(|p| p.summary.output_throughput * n);
    row.capacity_completed = pass.as_ref().map(|p| p.summary.request_throughput * n);
    row.capacity_mean_output = pass.as_ref().map(|p| p.summary.mean_output_tokens);
    row.capacity_other = pass.as_ref().and_then(|p| match load {
        Load::Rate(_) => Some(p.summary.load * n * p.summary.e2e.as_ref()?.mean),
        Load::Users(_) => Some(p.summary.request_throughput * n),
    });
    row.bound = match &fail {
        Some(f) => search::binding(f),
        None => match load {
            Load::Users(_) => "throughput (more users only queue)".into(),
            Load::Rate(_) => "nothing within the search".into(),
        },
    };
    if pass.is_none() {
        row.unfit = Some(format!("misses the SLOs even at the lowest load ({})", row.bound));
    }
    row
}

/// Replicas and GPUs for the load with headroom, and what they cost per hour and per million
/// tokens (output, and input and output together) at the load served.
fn cost(row: &mut Row, load: Load, headroom: f64, price: Option<f64>, (mean_in, mean_out): (f64, f64)) {
    let Some(cap) = row.capacity.filter(|c| *c > 0.0) else { return };
    let replicas = (load.value() * (1.0 + headroom) / cap).ceil().max(1.0) as usize;
    row.replicas = Some(replicas);
    row.gpus = Some(replicas * row.gpus_per_replica);
    if let Some(p) = price {
        let per_hour = p * (replicas * row.gpus_per_replica) as f64;
        row.cost_per_hour = Some(per_hour);
        // Output tokens per hour at the load served: req/s × mean output, or the users'
        // throughput scaled from one replica's at capacity.
        let out_tps = match load {
            Load::Rate(r) => r * mean_out,
            Load::Users(u) => row.capacity_output_tps.unwrap_or(0.0) * u as f64 / cap,
        };
        if out_tps > 0.0 {
            row.cost_per_million_output_tokens = Some(per_hour / (out_tps * 3600.0) * 1e6);
            // Input tokens in the requests' proportion: the same requests carry both.
            let all_tps = out_tps * (mean_in + mean_out) / mean_out.max(1e-9);
            row.cost_per_million_tokens = Some(per_hour / (all_tps * 3600.0) * 1e6);
        }
    }
}
