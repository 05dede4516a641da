//! A plan to make: what every mode reads ([`PlanSpec`]: the model, the layouts searched, the
//! precision, each replica's engine, the scenario and SLOs, the simulation, the calibration)
//! and what only its mode reads ([`Mode`]: the load of a capacity plan, a fleet's trace and
//! routers, the GPU a projection is exported for). Built once from the command line (or by a
//! program); a flag of one mode has no place in another's spec.

use super::error::refuse;
use super::overhead::Overhead;
use super::replay::TemplateTokens;
use super::search::Load;
use super::Result;
use super::{Ep, MAX_PLAN_RATE, MAX_PLAN_USERS};
use crate::fleet::autoscale::Rule;
use crate::fleet::router::Policy;
use crate::hardware::DType;
use std::path::PathBuf;
use std::time::Duration;

/// A plan to make: the settings every mode reads, and the mode with its own.
#[derive(Clone, Debug)]
pub struct PlanSpec {
    /// Model from the catalog.
    pub model: String,
    /// Read the model catalog from this TOML file.
    pub catalog: Option<PathBuf>,
    /// Single-request scenario: built in (short-qa, long-gen, long-context, reasoning) or a TOML file of
    /// `kind = "single"`.
    pub scenario: String,
    /// `--input-len`/`--output-len`: a single-request scenario of these lengths, in place of
    /// `scenario`.
    pub lengths: Option<goodput_workload::lengths::Lengths>,
    /// SLOs of usable capacity.
    pub slo: String,
    /// GPUs to consider (`goodput hardware` lists them).
    pub gpus: Vec<String>,
    /// Tensor-parallel sizes to consider (within a node).
    pub tp: Vec<usize>,
    /// Attention data-parallel groups per stage to consider (the wide-EP layout).
    pub dp_attention: Vec<usize>,
    /// Expert-parallel degrees to consider. A dense model has EP 1 whatever is given.
    pub ep: Vec<Ep>,
    /// Pipeline-parallel stages to consider.
    pub pp: Vec<usize>,
    /// Most nodes one replica may span.
    pub nodes: usize,
    /// Weight dtype: bf16, fp16, fp8, mxfp4 (the experts), nvfp4.
    pub dtype: DType,
    /// No dtype was asked: a capacity plan tries the recommended ones on each GPU
    /// ([`super::config::dtypes`]) in place of `dtype` alone.
    pub try_dtypes: bool,
    /// Simulate every layout, also those whose replica alone holds more GPUs than a smaller
    /// layout of the same GPU needs in all.
    pub every_layout: bool,
    /// KV-cache dtype (default: fp8 with fp8 weights, else bf16).
    pub kv_dtype: Option<DType>,
    /// Run weights the GPU has no tensor cores for on bf16 math instead of refusing them.
    pub emulate: bool,
    /// Power-law exponent of expert popularity (0: uniform routing).
    pub expert_skew: f64,
    /// Price per GPU-hour, `GPU=USD`.
    pub price: Vec<String>,
    /// Carry this measured profile's efficiencies over to the GPUs.
    pub calibrate: Option<PathBuf>,
    /// Add or replace GPUs from this TOML file (as hardware.toml).
    pub hardware: Option<PathBuf>,
    /// Fraction of GPU memory the engine may use (vLLM's gpu_memory_utilization).
    pub memory_utilization: f64,
    /// Engine settings of each replica.
    pub max_num_batched_tokens: usize,
    pub max_num_seqs: usize,
    pub block_size: usize,
    /// Activation memory to reserve per GPU beyond the estimate, bytes.
    pub extra_reserve: u64,
    /// Measured requests per simulated level.
    pub requests: usize,
    /// Seed of the simulated workload.
    pub seed: u64,
    /// What to plan, with what only that needs.
    pub mode: Mode,
}

/// What a plan answers.
#[derive(Clone, Debug)]
pub enum Mode {
    /// GPUs per model for a load, replicas sized for the load × (1 + `headroom`).
    Capacity { load: Load, headroom: f64 },
    /// Output throughput per GPU against tokens per second per user and TTFT P95.
    Curve,
    /// A fleet replaying a trace behind routers.
    Fleet(Box<FleetSpec>),
    /// One layout's roofline step costs on `gpu`, written as a profile to `out`.
    Export { gpu: String, out: PathBuf },
}

/// A fleet plan: the trace, the replicas, the routers compared, and the time outside engines.
#[derive(Clone, Debug)]
pub struct FleetSpec {
    /// The trace (Azure CSV or Mooncake JSONL).
    pub trace: PathBuf,
    /// Prompt tokens per hash id of a Mooncake trace.
    pub trace_block_size: usize,
    /// The routers to compare.
    pub router: Vec<Policy>,
    /// Replicas (with `autoscale`, those serving at the start).
    pub replicas: usize,
    /// Add and remove replicas by a rule.
    pub autoscale: Option<Rule>,
    /// How often routers read the replicas' load.
    pub scrape_interval: Duration,
    /// Also serve the trace with prefill and decode on separate replicas: `xPyD` splits, or
    /// `all` for every split of `replicas`.
    pub disaggregate: Option<String>,
    /// The fixed time of one K/V hand-over, beyond its bytes over the link.
    pub transfer_latency: Duration,
    /// Replay the trace this many times faster.
    pub speedup: f64,
    /// Each request's time outside the engines.
    pub request_overhead: Overhead,
    /// The tokens a server's chat template adds around each prompt.
    pub chat_template_tokens: TemplateTokens,
    /// Write each simulated replica's steps into this directory.
    pub steps_out: Option<PathBuf>,
    /// A measured profile whose replicas the fleet simulates, in place of the roofline
    /// projection of the GPUs.
    pub profile: Option<PathBuf>,
}

impl Load {
    /// The load to plan for: a rate up to [`MAX_PLAN_RATE`] requests per second, or users up
    /// to [`MAX_PLAN_USERS`]; exactly one of them.
    pub fn of(rate: Option<f64>, users: Option<usize>) -> Result<Load> {
        match (rate, users) {
            (Some(r), None) if r.is_finite() && r > 0.0 && r <= MAX_PLAN_RATE => Ok(Load::Rate(r)),
            (None, Some(u)) if u > 0 && u <= MAX_PLAN_USERS => Ok(Load::Users(u)),
            (None, None) => refuse!("give the load to serve: --rate REQ_PER_S or --users N"),
            _ => refuse!(
                "--rate must be a positive number of requests per second up to {MAX_PLAN_RATE}, --users a positive count up to {MAX_PLAN_USERS}"
            ),
        }
    }
}
