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
pub mod disagg;
pub mod export;
pub mod fleet;
pub mod overhead;
pub mod replay;
pub mod search;

use crate::hardware::{DType, Gpu, HardwareCatalog};
use crate::layout::Layout;
use crate::roofline::{Efficiencies, ProjectedCost};
use anyhow::{bail, Context, Result};
use goodput_core::{Catalog, ModelSpec};
use goodput_workload::Scenario;
use search::{Load, Sim};
use serde::Serialize;
use std::path::PathBuf;
use std::sync::Arc;

/// A plan to make, checked once from the command line (or built by a program): every
/// setting the planner's modes read. The mode is chosen by what is given: `export_profile`,
/// `trace` (with `disaggregate`), `curve`, else the load (`rate` or `users`).
#[derive(Clone, Debug)]
pub struct PlanSpec {
    /// Model from the catalog.
    pub model: String,
    /// Read the model catalog from this TOML file.
    pub catalog: Option<PathBuf>,
    /// Single-request scenario: built in (short-qa, long-gen, long-context, reasoning) or a TOML file of
    /// `kind = "single"` (fixed lengths such as 128 in / 128 out: `{ kind = "fixed", n = 128 }`).
    pub scenario: String,
    /// The load to serve, requests per second (Poisson).
    pub rate: Option<f64>,
    /// The load to serve, concurrent users (closed loop).
    pub users: Option<usize>,
    /// SLOs of usable capacity.
    pub slo: String,
    /// GPUs to consider (`goodput hardware` lists them).
    pub gpus: Vec<String>,
    /// Tensor-parallel sizes to consider (within a node).
    pub tp: Vec<usize>,
    /// Attention data-parallel groups per stage to consider (the wide-EP layout: each group its
    /// own batch and KV cache, the experts shared).
    pub dp_attention: Vec<usize>,
    /// Expert-parallel degrees to consider: a number, or `all` (EP over every GPU of a
    /// stage). A dense model has EP 1 whatever is given.
    pub ep: Vec<Ep>,
    /// Pipeline-parallel stages to consider.
    pub pp: Vec<usize>,
    /// Most nodes one replica may span (across nodes: the catalog's network between them).
    pub nodes: usize,
    /// Weight dtype: bf16, fp16, fp8 (every linear layer), mxfp4 (the experts, as gpt-oss),
    /// nvfp4 (every linear layer).
    pub dtype: DType,
    /// KV-cache dtype: bf16, fp16 or fp8 (default: fp8 with fp8 weights, else bf16).
    pub kv_dtype: Option<DType>,
    /// Run weights the GPU has no tensor cores for (FP8 before Hopper, FP4 before Blackwell)
    /// on bf16 math, as vLLM's weight-only kernels do, instead of refusing them.
    pub emulate: bool,
    /// Power-law exponent of expert popularity (0: uniform routing; 1: the most popular
    /// expert twice as busy as the second).
    pub expert_skew: f64,
    /// Instead of a capacity per configuration: sweep concurrency on each and write output
    /// throughput per GPU against tokens per second per user and against TTFT P95, with the
    /// Pareto frontier across configurations.
    pub curve: bool,
    /// Instead of planning: write the roofline step costs of this GPU (with one --tp, --ep,
    /// --dp-attention, --pp and --dtype) as a profile for `goodput run --simulate`.
    pub export_profile: Option<String>,
    /// The profile `--export-profile` writes.
    pub out: Option<PathBuf>,
    /// Instead of one replica's capacity: serve this trace (Azure CSV or Mooncake JSONL) with a
    /// fleet of one configuration behind each `--router`, and say per router how many
    /// requests met the SLOs, on how many GPU-hours.
    pub trace: Option<PathBuf>,
    /// `--trace`: prompt tokens per hash id of a Mooncake trace (as `run --trace-block-size`).
    pub trace_block_size: usize,
    /// `--trace`: the routers to compare.
    pub router: Vec<crate::fleet::router::Policy>,
    /// `--trace`: replicas (with `--autoscale`, those serving at the start).
    pub replicas: usize,
    /// `--trace`: add and remove replicas by a rule, e.g.
    /// `requests=6,min=1,max=8,interval=15s,cooldown=60s,startup=120s` (or `kv=0.7,…`).
    pub autoscale: Option<crate::fleet::autoscale::Rule>,
    /// `--trace`: how often routers read the replicas' load.
    pub scrape_interval: std::time::Duration,
    /// `--trace`: serve the trace also with prefill and decode on separate replicas, as
    /// `xPyD` splits (`2P6D,3P5D`), or every split of `--replicas` when no split is given;
    /// the aggregated fleet of `--replicas` is beside them.
    pub disaggregate: Option<String>,
    /// `--disaggregate`: the fixed time of one K/V hand-over (connection, descriptors, the
    /// decode side's acknowledgement), beyond its bytes over the link.
    pub transfer_latency: std::time::Duration,
    /// `--trace`: replay the trace this many times faster.
    pub speedup: f64,
    /// `--trace`: each request's time outside the engines — the load generator, the HTTP hops
    /// through the router and a server, tokenization, the first text's hold (first tokens that
    /// are not yet a whole character), the way back — added to its TTFT and end (BLIS's
    /// per-request overhead). A duration for every request, or a run directory of goodput
    /// against goodput serve replicas: each simulated request then takes one measured
    /// request's lag behind its engine's first and last token (their stamps give it), so the
    /// tail is in it too (`scripts/router-check.sh` measures it on a calibration trace).
    pub request_overhead: overhead::Overhead,
    /// `--trace`: the tokens a server's chat template adds around each prompt, `HEAD,TAIL`
    /// (the head shared by every request): what an engine behind `--api chat` computes and
    /// caches beyond the trace's own tokens. Read them from a server's `/tokenize` of a chat
    /// (`scripts/router-check.sh` does).
    pub chat_template_tokens: replay::TemplateTokens,
    /// Price per GPU-hour, `GPU=USD` (e.g. h100-sxm=2.5,l40s=0.9).
    pub price: Vec<String>,
    /// Spare capacity to keep: replicas are sized for the load × (1 + headroom).
    pub headroom: f64,
    /// Carry this measured profile's efficiencies (measured ÷ roofline per term) over to the
    /// GPUs, instead of the stated defaults.
    pub calibrate: Option<PathBuf>,
    /// Add or replace GPUs from this TOML file (as hardware.toml).
    pub hardware: Option<PathBuf>,
    /// Fraction of GPU memory the engine may use (vLLM's gpu_memory_utilization).
    pub memory_utilization: f64,
    /// Engine settings of each replica.
    pub max_num_batched_tokens: usize,
    pub max_num_seqs: usize,
    pub block_size: usize,
    /// Measured requests per simulated level.
    pub requests: usize,
    /// Seed of the simulated workload.
    pub seed: u64,
    /// `--trace`: write each simulated replica's steps into this directory, as `serve --steps`
    /// writes a replica's (`ROUTER-R.jsonl`; the aggregated fleets', not a split's), to set
    /// beside a run's with `profile --from-steps … --price-with PROFILE`.
    pub steps_out: Option<PathBuf>,
    /// A measured profile whose replicas a fleet plan (`trace`) simulates, in place of the
    /// roofline projection of `gpus`.
    pub profile: Option<PathBuf>,
    /// Activation memory to reserve per GPU beyond the estimate (e.g. 2GiB).
    pub extra_reserve: u64,
}

/// An expert-parallel degree of `--ep`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ep {
    /// Over every GPU of a stage.
    All,
    Ways(usize),
}

impl Ep {
    /// `all`, or a degree from 1 to 1024.
    pub fn parse(s: &str) -> Result<Ep, String> {
        match s.trim() {
            "all" => Ok(Ep::All),
            n => match n.parse::<usize>() {
                Ok(n) if (1..=1024).contains(&n) => Ok(Ep::Ways(n)),
                _ => Err(format!("`{s}`: an expert-parallel degree is a number from 1 to 1024, or `all`")),
            },
        }
    }
}

/// One GPU × layout configuration of the plan.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub gpu: String,
    pub tp: usize,
    pub layout: Layout,
    /// `TP8`, `TP1·DP8·EP8`, …
    pub layout_label: String,
    pub gpus_per_replica: usize,
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
}

/// The whole plan, as written to JSON.
#[derive(Debug, Serialize)]
pub struct Plan {
    pub model: String,
    pub scenario: String,
    pub load: Load,
    pub slos: Vec<String>,
    pub dtype: DType,
    pub kv_dtype: DType,
    pub expert_skew: f64,
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
    if !(0.0..=10.0).contains(&a.headroom) || !(0.05..=1.0).contains(&a.memory_utilization) {
        bail!("--headroom must be within 0–10 and --memory-utilization within 0.05–1");
    }
    let degrees = |v: &[usize]| v.is_empty() || v.iter().any(|&t| t == 0 || t > 1024);
    if a.tp.iter().any(|&t| t > 64) || degrees(&a.tp) {
        bail!("--tp: tensor-parallel sizes between 1 and 64");
    }
    if degrees(&a.dp_attention) || degrees(&a.pp) || a.ep.is_empty() {
        bail!("--dp-attention and --pp: degrees between 1 and 1024; --ep: at least one degree");
    }
    if a.nodes == 0 || a.nodes > 128 {
        bail!("--nodes: between 1 and 128 nodes per replica");
    }
    if !(a.expert_skew.is_finite() && (0.0..=4.0).contains(&a.expert_skew)) {
        bail!("--expert-skew: a power-law exponent between 0 (uniform) and 4");
    }
    if let Some(kv) = a.kv_dtype {
        if !matches!(kv, DType::Bf16 | DType::Fp16 | DType::Fp8) {
            bail!("--kv-dtype {kv}: a KV cache is bf16, fp16 or fp8");
        }
    }
    if a.dtype == DType::F32 {
        bail!("--dtype f32: the hardware catalog gives no f32 tensor peak; plan in bf16, fp16, fp8, mxfp4 or nvfp4");
    }
    if a.block_size == 0 || a.max_num_seqs == 0 || a.max_num_batched_tokens == 0 {
        bail!("--block-size, --max-num-seqs and --max-num-batched-tokens must be at least 1");
    }
    if a.requests == 0 || a.requests > 50_000 {
        bail!("--requests: between 1 and 50000 measured requests per simulated level");
    }
    if a.trace.is_none() && !a.request_overhead.is_zero() {
        bail!("--request-overhead is the time outside the engines of a fleet: it needs --trace");
    }
    if a.trace.is_none() && a.chat_template_tokens != replay::TemplateTokens::default() {
        bail!("--chat-template-tokens wraps a trace's prompts: it needs --trace");
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
    let scenario = scenario(&a.scenario, spec.max_position_embeddings)?;
    let slos = goodput_metrics::slo::parse_slos(&a.slo)?;
    let (eff, error_bar) = efficiencies(a)?;
    let (mean_in, mean_out) = mean_lengths(&scenario, spec.vocab_size, a.seed);
    Ok(Setting { spec, hw, eff, error_bar, scenario, slos, prices, mean_in, mean_out })
}

fn efficiencies(a: &PlanSpec) -> Result<(Efficiencies, String)> {
    Ok(match &a.calibrate {
        Some(p) => {
            let profile = crate::profile::Profile::read(p)?;
            let eff = crate::profile::calibrated(&profile).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?;
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
    if let Some(gpu) = &a.export_profile {
        return Ok(Answer::Projection(export::run(a, &set, set.hw.get(gpu)?)?));
    }
    let gpus: Vec<Gpu> = a.gpus.iter().map(|g| set.hw.get(g).cloned()).collect::<Result<_, _>>()?;
    if let Some(trace) = &a.trace {
        if let Some(splits) = &a.disaggregate {
            return Ok(Answer::Fleet(disagg::run(a, &set, &gpus, trace, splits, say)?));
        }
        return Ok(Answer::Fleet(fleet::run(a, &set, &gpus, trace, say)?));
    }
    if a.curve {
        return Ok(Answer::Curve(curve::run(a, &set, &gpus, say)?));
    }
    let load = match (a.rate, a.users) {
        (Some(r), None) if r.is_finite() && r > 0.0 && r <= MAX_PLAN_RATE => Load::Rate(r),
        (None, Some(u)) if u > 0 && u <= MAX_PLAN_USERS => Load::Users(u),
        (None, None) => bail!("give the load to serve: --rate REQ_PER_S or --users N"),
        _ => bail!(
            "--rate must be a positive number of requests per second up to {MAX_PLAN_RATE}, --users a positive count up to {MAX_PLAN_USERS}"
        ),
    };
    let mut rows = Vec::new();
    for g in &gpus {
        for layout in config::layouts(a, &set.spec) {
            say(Said::Step(&format!("plan: {} {layout}", g.name)));
            let mut row = evaluate(a, &set, g, layout, load);
            cost(&mut row, load, a.headroom, set.prices.get(&g.name).copied(), set.mean_out);
            rows.push(row);
        }
    }
    Ok(Answer::Plan(answer::assemble(a, &set, load, rows)))
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
        other => bail!("{name} is a {} scenario; plan simulates single requests", other.name()),
    }
}

fn parse_prices(items: &[String], hw: &HardwareCatalog) -> Result<std::collections::HashMap<String, f64>> {
    let mut out = std::collections::HashMap::new();
    for item in items {
        let (g, p) = item.split_once('=').with_context(|| format!("--price `{item}`: expected GPU=USD_PER_HOUR"))?;
        let gpu = hw.get(g.trim())?;
        let usd: f64 = p
            .trim()
            .parse()
            .ok()
            .filter(|x: &f64| x.is_finite() && *x >= 0.0)
            .with_context(|| format!("--price `{item}`: `{p}` is not a price per hour"))?;
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

fn empty_row(g: &Gpu, layout: Layout) -> Row {
    Row {
        gpu: g.name.clone(),
        tp: layout.tp,
        layout,
        layout_label: layout.label(),
        gpus_per_replica: layout.gpus(),
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
    }
}

/// One configuration's usable capacity: one engine simulated to its capacity under the SLOs,
/// times the engines of a replica (each takes an equal share of the load).
fn evaluate(a: &PlanSpec, set: &Setting, g: &Gpu, layout: Layout, load: Load) -> Row {
    let mut row = empty_row(g, layout);
    let p = match config::prepare(a, &set.spec, g, layout, &set.eff, set.mean_in + set.mean_out) {
        Ok(p) => p,
        Err(why) => {
            row.unfit = Some(why);
            return row;
        }
    };
    row.weight_gb_per_gpu = p.weight_gb_per_gpu;
    row.kv_tokens = p.kv_tokens;
    row.kv_sequences = p.kv_sequences;
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

/// Replicas and GPUs for the load with headroom, and what they cost.
fn cost(row: &mut Row, load: Load, headroom: f64, price: Option<f64>, mean_out: f64) {
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
        }
    }
}
