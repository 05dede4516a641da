//! What goodput's CUDA measurements and checks report (engine-bench's and engine-check's JSON):
//! the graph probe, the per-op kernel timing of a step and the on-device kernel checks (the
//! gemv tuning's rows are `gemv_table.rs`'s). The same types in every build: without CUDA the
//! lists stay empty.

use serde::Serialize;

/// One decode step eager against replayed from a captured CUDA graph (`graph_probe.rs`).
#[derive(Clone, Debug, Serialize)]
pub struct GraphProbe {
    /// Mean time of one step launched kernel by kernel, synchronised at the end, in ms.
    pub eager_ms: f64,
    /// Whether capture and instantiation succeeded.
    pub captured: bool,
    /// Why not, or what failed on replay.
    pub error: Option<String>,
    /// Mean time of one replay of the captured step, in ms.
    pub replay_ms: Option<f64>,
    /// Kernel launches in the captured step (kernel nodes of the graph): the launch count of
    /// one decode step, measured.
    pub kernel_nodes: Option<usize>,
    /// Every node of the captured step (kernels, copies, memsets, allocations, frees).
    pub nodes: Option<usize>,
    pub iterations: usize,
}

/// One op's share of a decode step.
#[derive(Clone, Debug, Serialize)]
pub struct OpTime {
    pub op: &'static str,
    /// Launches of the op per step (one per layer for most).
    pub calls: usize,
    /// GPU time per step, µs (mean over the timed steps).
    pub us: f64,
    /// Weight bytes the op reads per step (matmuls), for its achieved GB/s.
    pub weight_bytes: Option<u64>,
}

/// The ops of a step, and their sum: a decode step of `batch` sequences at `context` tokens, or
/// (`prefill`) one sequence's prompt of `context` tokens.
#[derive(Clone, Debug, Serialize)]
pub struct StepTiming {
    pub prefill: bool,
    pub batch: usize,
    pub context: usize,
    pub steps: usize,
    pub ops: Vec<OpTime>,
    /// Sum of the ops' times, µs.
    pub total_us: f64,
}

/// One kernel check: the largest absolute difference from the reference and the bound.
#[derive(Clone, Debug, Serialize)]
pub struct KernelCheck {
    pub name: String,
    pub max_abs_diff: f64,
    pub tolerance: f64,
    pub passed: bool,
}
