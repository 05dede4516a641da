//! Why a plan could not be made, by what failed: a setting out of bounds (named by its flag),
//! a catalog, the scenario or a trace, the SLOs, a profile, a layout that cannot serve the
//! model ([`Unfit`]), the simulated engine, or a file written. A leaf of `plan`: it imports
//! nothing of it.

use crate::error::SizingError;
use crate::hardware::HardwareError;
use crate::layout::ShardError;
use crate::profile::ProfileError;
use crate::roofline::NoTensorCores;

/// Why a plan could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// A setting out of its bounds or in conflict with another, named by its flag.
    #[error("{0}")]
    Spec(String),
    /// A flag's value refused by its parser.
    #[error(transparent)]
    Value(#[from] goodput_core::ValueError),
    /// The model is not in the catalog, or the catalog file cannot be read.
    #[error(transparent)]
    Catalog(#[from] goodput_core::CatalogError),
    /// A GPU is not in the hardware catalog, or its file cannot be read.
    #[error(transparent)]
    Hardware(#[from] HardwareError),
    /// The scenario or a trace cannot be read or is not what the plan simulates.
    #[error(transparent)]
    Workload(#[from] goodput_workload::WorkloadError),
    #[error(transparent)]
    Slo(#[from] goodput_metrics::slo::SloError),
    /// A profile (calibrating, or a fleet's replicas) cannot be read.
    #[error(transparent)]
    Profile(#[from] ProfileError),
    /// A profile's figures that cannot be used here: the file and why.
    #[error("{path}: {source}")]
    ProfileUse { path: String, source: SizingError },
    /// A measured run (`--request-overhead`) cannot be read.
    #[error("--request-overhead {path}: {source}")]
    Run { path: String, source: goodput_results::ResultsError },
    /// A layout cannot serve the model on a GPU (it does not fit, it does not shard).
    #[error("{model} on {gpu} {layout}: {why}")]
    Unfit { model: String, gpu: String, layout: String, why: Unfit },
    /// The simulated engine refused its settings.
    #[error("the simulated engine: {0}")]
    Simulation(#[from] SizingError),
    /// A file could not be written (`what`: the path, or what it is).
    #[error("{what}: {source}")]
    Write { what: String, source: std::io::Error },
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

/// Why a layout cannot serve a model on a GPU.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum Unfit {
    /// The layout does not shard the model (heads, experts, GPUs per node).
    #[error(transparent)]
    Shard(#[from] ShardError),
    #[error("needs {nodes} nodes of {per_node} GPUs, beyond --nodes {allowed} (raise it to consider them)")]
    Nodes { nodes: usize, per_node: usize, allowed: usize },
    #[error(transparent)]
    Math(#[from] NoTensorCores),
    #[error(
        "does not fit: {weights_gb:.1} GB of weights + activations per GPU exceed {percent:.0} % of {memory_gb:.0} GB"
    )]
    Memory { weights_gb: f64, percent: f64, memory_gb: f64 },
}

/// `Err(PlanError::Spec)` of a formatted message, returned.
macro_rules! refuse {
    ($($t:tt)*) => {
        return Err($crate::plan::PlanError::Spec(format!($($t)*)))
    };
}
pub(crate) use refuse;
