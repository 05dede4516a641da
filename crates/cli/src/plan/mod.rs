//! `goodput plan`: its arguments consumed once into the planner's [`PlanSpec`]
//! ([`goodput_sizing::plan`]), one call, and the answer shown through `goodput_report::plan`
//! and written as JSON and a page where asked. `--check RUN_DIR --profile P` instead simulates
//! a measured run's sweep ([`check`]).

mod check;

use crate::args::parse_bytes;
use anyhow::{bail, Context, Result};
use clap::Args;
use goodput_sizing::hardware::DType;
use goodput_sizing::plan::deploy::Emit;
use goodput_sizing::plan::fleet::{parse_policy, parse_rule};
use goodput_sizing::plan::overhead::Overhead;
use goodput_sizing::plan::replay::TemplateTokens;
use goodput_sizing::plan::{Answer, Ep, FleetSpec, Load, Mode, PlanSpec, Said};
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct PlanArgs {
    /// Model from the catalog.
    #[arg(long, short = 'm', default_value = "llama-3.1-8b")]
    pub model: String,
    /// Read the model catalog from this TOML file.
    #[arg(long)]
    pub catalog: Option<PathBuf>,
    /// Single-request scenario: built in (short-qa, long-gen, long-context, reasoning) or a TOML file of
    /// `kind = "single"` (fixed lengths such as 128 in / 128 out: `{ kind = "fixed", n = 128 }`).
    #[arg(long, default_value = "short-qa")]
    pub scenario: String,
    #[command(flatten)]
    pub lengths: crate::workload::LengthArgs,
    /// The load to serve, requests per second (Poisson).
    #[arg(long, conflicts_with = "users")]
    pub rate: Option<f64>,
    /// The load to serve, concurrent users (closed loop).
    #[arg(long)]
    pub users: Option<usize>,
    /// SLOs of usable capacity.
    #[arg(long, default_value = "ttft_p95=1s,tpot_p95=50ms,e2e_p95=30s,error_rate=1%")]
    pub slo: String,
    /// GPUs to consider (`goodput hardware` lists them); by default the data-centre GPUs of
    /// the last two generations.
    #[arg(long, value_delimiter = ',', default_value = "h100-sxm,h200,b200,mi300x,a100-80gb,l40s")]
    pub gpus: Vec<String>,
    /// Tensor-parallel sizes to consider (within a node).
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8")]
    pub tp: Vec<usize>,
    /// Attention data-parallel groups per stage to consider (the wide-EP layout: each group its
    /// own batch and KV cache, the experts shared).
    #[arg(long, value_delimiter = ',', default_value = "1")]
    pub dp_attention: Vec<usize>,
    /// Expert-parallel degrees to consider: a number, or `all` (EP over every GPU of a
    /// stage). A dense model has EP 1 whatever is given.
    #[arg(long, value_delimiter = ',', default_value = "1,all", value_parser = Ep::parse)]
    pub ep: Vec<Ep>,
    /// Pipeline-parallel stages to consider.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    pub pp: Vec<usize>,
    /// Most nodes one replica may span (across nodes: the catalog's network between them).
    #[arg(long, default_value_t = 1)]
    pub nodes: usize,
    /// Weight dtype: bf16, fp16, fp8 (every linear layer), mxfp4 (the experts, as gpt-oss),
    /// nvfp4 (every linear layer). Default: a plan tries bf16, fp8 where a GPU has fp8 tensor
    /// cores and nvfp4 on Blackwell; gpt-oss in mxfp4, as published (weight-only before
    /// Blackwell); the other modes take bf16.
    #[arg(long)]
    pub dtype: Option<DType>,
    /// Write what to deploy for the picked row (or --emit-row's) on stdout, the plan then on
    /// stderr: `vllm` or `sglang` (the launch command, each flag's source above it) or `k8s` (a
    /// Deployment, or a LeaderWorkerSet where a replica spans nodes; JSON, which kubectl reads).
    #[arg(long, value_delimiter = ',')]
    pub emit: Vec<Emit>,
    /// The row --emit writes for, `GPU/DTYPE/LAYOUT` (`h200/fp8/TP4`); default: the pick.
    #[arg(long, value_name = "GPU/DTYPE/LAYOUT", requires = "emit")]
    pub emit_row: Option<String>,
    /// Simulate and print every configuration: those that do not fit (with why), and the
    /// larger layouts of a GPU that cannot need fewer GPUs than a smaller one.
    #[arg(long)]
    pub all: bool,
    /// KV-cache dtype: bf16, fp16 or fp8 (default: fp8 with fp8 weights, else bf16).
    #[arg(long)]
    pub kv_dtype: Option<DType>,
    /// Run weights the GPU has no tensor cores for (FP8 before Hopper, FP4 before Blackwell)
    /// on bf16 math, as vLLM's weight-only kernels do, instead of refusing them.
    #[arg(long)]
    pub emulate: bool,
    /// Power-law exponent of expert popularity (0: uniform routing; 1: the most popular
    /// expert twice as busy as the second).
    #[arg(long, default_value_t = 0.0)]
    pub expert_skew: f64,
    /// Instead of a capacity per configuration: sweep concurrency on each and write output
    /// throughput per GPU against tokens per second per user and against TTFT P95, with the
    /// Pareto frontier across configurations.
    #[arg(long, conflicts_with_all = ["trace", "rate", "users", "export_profile"])]
    pub curve: bool,
    /// Instead of planning: write the roofline step costs of this GPU (with one --tp, --ep,
    /// --dp-attention, --pp and --dtype) as a profile for `goodput run --simulate`.
    #[arg(long, value_name = "GPU", requires = "out")]
    pub export_profile: Option<String>,
    /// The profile `--export-profile` writes.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Instead of one replica's capacity: serve this trace (Azure CSV or Mooncake JSONL) with a
    /// fleet of one configuration behind each `--router`, and say per router how many
    /// requests met the SLOs, on how many GPU-hours.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["rate", "users", "export_profile"])]
    pub trace: Option<PathBuf>,
    /// `--trace`: prompt tokens per hash id of a Mooncake trace (as `run --trace-block-size`).
    #[arg(long, default_value_t = 512, requires = "trace")]
    pub trace_block_size: usize,
    /// `--trace`: the routers to compare.
    #[arg(long, value_delimiter = ',', default_value = "round-robin,least-loaded,cache-aware", value_parser = parse_policy)]
    pub router: Vec<goodput_sizing::fleet::router::Policy>,
    /// `--trace`: replicas (with `--autoscale`, those serving at the start).
    #[arg(long, default_value_t = 1)]
    pub replicas: usize,
    /// `--trace`: add and remove replicas by a rule, e.g.
    /// `requests=6,min=1,max=8,interval=15s,cooldown=60s,startup=120s` (or `kv=0.7,…`).
    #[arg(long, value_parser = parse_rule)]
    pub autoscale: Option<goodput_sizing::fleet::autoscale::Rule>,
    /// `--trace`: how often routers read the replicas' load.
    #[arg(long, value_parser = crate::args::parse_duration, default_value = "5s")]
    pub scrape_interval: std::time::Duration,
    /// `--trace`: serve the trace also with prefill and decode on separate replicas, as
    /// `xPyD` splits (`2P6D,3P5D`), or every split of `--replicas` when no split is given;
    /// the aggregated fleet of `--replicas` is beside them.
    #[arg(long, value_name = "SPLITS", num_args = 0..=1, default_missing_value = "all", requires = "trace")]
    pub disaggregate: Option<String>,
    /// `--disaggregate`: the fixed time of one K/V hand-over (connection, descriptors, the
    /// decode side's acknowledgement), beyond its bytes over the link.
    #[arg(long, value_parser = crate::args::parse_duration_or_zero, default_value = "500us")]
    pub transfer_latency: std::time::Duration,
    /// `--trace`: replay the trace this many times faster.
    #[arg(long, default_value_t = 1.0)]
    pub speedup: f64,
    /// `--trace`: each request's time outside the engines — the load generator, the HTTP hops
    /// through the router and a server, tokenization, the first text's hold (first tokens that
    /// are not yet a whole character), the way back — added to its TTFT and end (BLIS's
    /// per-request overhead). A duration for every request, or a run directory of goodput
    /// against goodput serve replicas: each simulated request then takes one measured
    /// request's lag behind its engine's first and last token (their stamps give it), so the
    /// tail is in it too (`scripts/router-check.sh` measures it on a calibration trace).
    /// None by default.
    #[arg(long, value_name = "DURATION|RUN_DIR", value_parser = Overhead::parse, requires = "trace")]
    pub request_overhead: Option<Overhead>,
    /// `--trace`: the tokens a server's chat template adds around each prompt, `HEAD,TAIL`
    /// (the head shared by every request): what an engine behind `--api chat` computes and
    /// caches beyond the trace's own tokens. Read them from a server's `/tokenize` of a chat
    /// (`scripts/router-check.sh` does). None by default.
    #[arg(long, value_parser = TemplateTokens::parse, requires = "trace")]
    pub chat_template_tokens: Option<TemplateTokens>,
    /// Price per GPU-hour, `GPU=USD` (e.g. h100-sxm=2.5,l40s=0.9).
    #[arg(long, value_delimiter = ',')]
    pub price: Vec<String>,
    /// Spare capacity to keep: replicas are sized for the load × (1 + headroom).
    #[arg(long, default_value_t = 0.2)]
    pub headroom: f64,
    /// Carry this measured profile's efficiencies (measured ÷ roofline per term) over to the
    /// GPUs, instead of the stated defaults.
    #[arg(long, value_name = "PROFILE")]
    pub calibrate: Option<PathBuf>,
    /// Add or replace GPUs from this TOML file (as hardware.toml).
    #[arg(long)]
    pub hardware: Option<PathBuf>,
    /// Fraction of GPU memory the engine may use (vLLM's gpu_memory_utilization).
    #[arg(long, default_value_t = 0.9)]
    pub memory_utilization: f64,
    /// Engine settings of each replica.
    #[arg(long, default_value_t = 8192)]
    pub max_num_batched_tokens: usize,
    #[arg(long, default_value_t = 256)]
    pub max_num_seqs: usize,
    #[arg(long, default_value_t = 16)]
    pub block_size: usize,
    /// Measured requests per simulated level.
    #[arg(long, default_value_t = 400)]
    pub requests: usize,
    /// Seed of the simulated workload.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Write the plan as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// `--trace`: write each simulated replica's steps into this directory, as `serve --steps`
    /// writes a replica's (`ROUTER-R.jsonl`; the aggregated fleets', not a split's), to set
    /// beside a run's with `profile --from-steps … --price-with PROFILE`.
    #[arg(long, value_name = "DIR", requires = "trace")]
    pub steps_out: Option<PathBuf>,
    /// Write the plan as an HTML page here.
    #[arg(long)]
    pub html: Option<PathBuf>,
    /// Instead of planning: simulate measured runs' sweeps with --profile and set each
    /// prediction beside its measurement.
    ///
    /// Each run's prediction is written to its prediction.json. Several
    /// directories (or a `--repeats` directory, whose repeats are one family) make an
    /// accuracy suite: per family and metric the MAPE over the levels beside the run-to-run
    /// spread, the levels beyond it, the capacities and the steps priced by kind (--json
    /// writes it; scripts/accuracy.sh measures the families).
    #[arg(long, value_name = "RUN_DIR", requires = "profile", num_args = 1..)]
    pub check: Vec<PathBuf>,
    /// The profile of `--check`.
    #[arg(long, value_name = "PROFILE")]
    pub profile: Option<PathBuf>,
    /// Activation memory to reserve per GPU beyond the estimate (e.g. 2GiB).
    #[arg(long, value_parser = parse_bytes, default_value = "0")]
    pub extra_reserve: u64,
}

impl PlanArgs {
    /// The plan these flags ask for, as the planner takes it: the mode chosen by what is
    /// given (`--export-profile`, `--trace`, `--curve`, else the load).
    fn spec(self) -> Result<PlanSpec> {
        // clap drops `requires = "trace"` where a flag conflicting with --trace is given.
        let fleet_only = [
            ("--request-overhead", self.request_overhead.is_some()),
            ("--chat-template-tokens", self.chat_template_tokens.is_some()),
            ("--steps-out", self.steps_out.is_some()),
            ("--autoscale", self.autoscale.is_some()),
            ("--disaggregate", self.disaggregate.is_some()),
        ];
        if let (None, Some((flag, _))) = (&self.trace, fleet_only.iter().find(|f| f.1)) {
            bail!("{flag} is a fleet plan's: it needs --trace");
        }
        let mode = match (self.export_profile, self.trace) {
            (Some(gpu), _) => Mode::Export { gpu, out: self.out.context("--export-profile needs --out FILE")? },
            (None, Some(trace)) => Mode::Fleet(Box::new(FleetSpec {
                trace,
                trace_block_size: self.trace_block_size,
                router: self.router,
                replicas: self.replicas,
                autoscale: self.autoscale,
                scrape_interval: self.scrape_interval,
                disaggregate: self.disaggregate,
                transfer_latency: self.transfer_latency,
                speedup: self.speedup,
                request_overhead: self.request_overhead.unwrap_or_default(),
                chat_template_tokens: self.chat_template_tokens.unwrap_or_default(),
                steps_out: self.steps_out,
                profile: self.profile,
            })),
            (None, None) if self.curve => Mode::Curve,
            (None, None) => Mode::Capacity { load: Load::of(self.rate, self.users)?, headroom: self.headroom },
        };
        let lengths = self.lengths.lengths()?;
        Ok(PlanSpec {
            model: self.model,
            catalog: self.catalog,
            // The scenario's name as the answer shows it: the lengths' when given.
            scenario: lengths.as_ref().map_or(self.scenario, |l| l.scenario().name),
            lengths,
            slo: self.slo,
            gpus: self.gpus,
            tp: self.tp,
            dp_attention: self.dp_attention,
            ep: self.ep,
            pp: self.pp,
            nodes: self.nodes,
            dtype: self.dtype.unwrap_or(DType::Bf16),
            try_dtypes: self.dtype.is_none(),
            every_layout: self.all,
            kv_dtype: self.kv_dtype,
            emulate: self.emulate,
            expert_skew: self.expert_skew,
            price: self.price,
            calibrate: self.calibrate,
            hardware: self.hardware,
            memory_utilization: self.memory_utilization,
            max_num_batched_tokens: self.max_num_batched_tokens,
            max_num_seqs: self.max_num_seqs,
            block_size: self.block_size,
            extra_reserve: self.extra_reserve,
            requests: self.requests,
            seed: self.seed,
            mode,
        })
    }
}

pub fn run(a: PlanArgs) -> Result<()> {
    if !a.check.is_empty() {
        return check::run(&a.check, a.profile.as_ref().context("--check needs --profile")?, a.json.as_deref());
    }
    let (json, html, all, emit, row) = (a.json.clone(), a.html.clone(), a.all, a.emit.clone(), a.emit_row.clone());
    let mut stepped = false;
    let spec = a.spec()?;
    // A terminal's step line is overwritten in place; elsewhere each is a line of its own.
    let terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let answer = goodput_sizing::plan::plan(&spec, &mut |said| match said {
        Said::Step(s) if terminal => {
            eprint!("\r{s}        ");
            stepped = true;
        }
        Said::Step(s) | Said::Line(s) => eprintln!("{s}"),
    });
    if stepped {
        eprintln!();
    }
    let answer = answer?;
    match (&answer, emit.is_empty()) {
        (_, true) => show(&answer, json, html, all),
        // The plan on stderr, each asked deployment of its row on stdout.
        (Answer::Plan(p), false) => {
            eprintln!("{}", goodput_report::plan::answer::text(p, false));
            let emitted = goodput_sizing::plan::deploy::emit(p, &spec, row.as_deref(), &emit);
            emitted.map(|text| println!("{text}")).map_err(anyhow::Error::from)
        }
        _ => bail!("--emit writes a capacity plan's deployment (--rate or --users)"),
    }
}

/// The answer printed, then written as JSON and as a page where asked (the page rendered only
/// then).
fn show(answer: &Answer, json: Option<PathBuf>, html: Option<PathBuf>, all: bool) -> Result<()> {
    use goodput_report::plan as page;
    let width = goodput_report::text::console_width(std::io::IsTerminal::is_terminal(&std::io::stdout()));
    println!("{}", goodput_report::text::wrap_to(&page::text(answer, all), width));
    let (value, what) = page::json(answer)?;
    if let Some(path) = &json {
        std::fs::write(path, value + "\n").with_context(|| format!("writing {}", path.display()))?;
    }
    let (Some(path), Some(body)) = (&html, html.as_ref().and_then(|_| page::html(answer))) else { return Ok(()) };
    std::fs::write(path, body?).with_context(|| format!("writing {}", path.display()))?;
    eprintln!("{what} page in {}", path.display());
    Ok(())
}
