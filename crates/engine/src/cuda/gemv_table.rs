//! Which kernel multiplies each weight shape at 1–4 rows on this GPU: the kernels, the table
//! the load-time tuning (`tune.rs`) fills and `gemv.rs` reads, and the rows it measured (for
//! engine-bench's report). Plain host state, the same in every build: without CUDA the table
//! stays empty.

use candle_core::DType;
use serde::Serialize;
use std::collections::HashMap;
use std::sync::{Mutex, RwLock};

/// A kernel for `x (m, k) · w (n, k)ᵀ` with `m ≤ 4`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GemvKernel {
    Cublas,
    GemvT,
    /// `gemv_u` with 4 loads of 16 bytes in flight per lane.
    U4,
    /// `gemv_u` with 8.
    U8,
    /// `gemv_split`: each row's width in 2 parts, one warp each (8 loads in flight per lane).
    S2,
    /// The gate|up product by the kernel chosen for its shape, then `silu_mul` (SwiGLU tuning).
    Unfused,
    /// `gemv_u` with 4 loads in flight and SwiGLU in its epilogue (SwiGLU tuning).
    SwigluU4,
    /// The same with 8.
    SwigluU8,
}

impl GemvKernel {
    pub const ALL: [GemvKernel; 5] =
        [GemvKernel::Cublas, GemvKernel::GemvT, GemvKernel::U4, GemvKernel::U8, GemvKernel::S2];

    pub fn name(self) -> &'static str {
        match self {
            GemvKernel::Cublas => "cublas",
            GemvKernel::GemvT => "gemv_t",
            GemvKernel::U4 => "gemv_u4",
            GemvKernel::U8 => "gemv_u8",
            GemvKernel::S2 => "gemv_s2",
            GemvKernel::Unfused => "matmul + silu_mul",
            GemvKernel::SwigluU4 => "gemv_u4 + swiglu",
            GemvKernel::SwigluU8 => "gemv_u8 + swiglu",
        }
    }

    /// The loads in flight of a SwiGLU-epilogue kernel (`None` for the others).
    pub fn swiglu_loads(self) -> Option<usize> {
        match self {
            GemvKernel::SwigluU4 => Some(4),
            GemvKernel::SwigluU8 => Some(8),
            _ => None,
        }
    }
}

/// One candidate's measurement for a shape and row count.
#[derive(Clone, Debug, Serialize)]
pub struct Timing {
    pub kernel: GemvKernel,
    /// Median time per call in µs, over every layer's matrix of the shape.
    pub us: Option<f64>,
    /// Weight bytes / time, in GB/s.
    pub gbytes_per_s: Option<f64>,
    /// Why it was not timed: a launch error, or its product differs from cuBLAS's.
    pub error: Option<String>,
}

/// The measurements of one weight shape at one row count, and the kernel chosen.
#[derive(Clone, Debug, Serialize)]
pub struct TuneRow {
    /// Output features (weight rows).
    pub n: usize,
    /// Input features.
    pub k: usize,
    /// Rows of `x`.
    pub m: usize,
    /// Matrices of this shape timed in turn (one per layer).
    pub matrices: usize,
    pub timings: Vec<Timing>,
    pub chosen: GemvKernel,
}

type Key = (usize, usize, DType);

static TABLE: RwLock<Option<HashMap<Key, [GemvKernel; 4]>>> = RwLock::new(None);
/// The gate|up shapes' SwiGLU choice per row count: `Unfused` or a `Swiglu*` kernel.
static SWIGLU: RwLock<Option<HashMap<Key, [GemvKernel; 4]>>> = RwLock::new(None);
static RESULTS: Mutex<Vec<TuneRow>> = Mutex::new(Vec::new());
static ERROR: Mutex<Option<String>> = Mutex::new(None);

/// Why the last tuning stopped early, if it did (its shapes keep the default).
pub fn error() -> Option<String> {
    ERROR.lock().ok()?.clone()
}

/// Records a tuning failure (the model still loads: untuned shapes keep the default).
pub fn set_error(e: String) {
    if let Ok(mut x) = ERROR.lock() {
        *x = Some(e);
    }
}

/// The kernel measured fastest for `m` rows times a `(n, k)` weight, if this shape was tuned.
pub fn choice(n: usize, k: usize, dtype: DType, m: usize) -> Option<GemvKernel> {
    let t = TABLE.read().ok()?;
    t.as_ref()?.get(&(n, k, dtype)).and_then(|c| c.get(m.checked_sub(1)?).copied())
}

/// How a fused gate|up weight `(n, k)` times `m` rows is best followed by SwiGLU, if measured:
/// `Unfused` (the product, then `silu_mul`) or a kernel with SwiGLU in its epilogue.
pub fn swiglu_choice(n: usize, k: usize, dtype: DType, m: usize) -> Option<GemvKernel> {
    let t = SWIGLU.read().ok()?;
    t.as_ref()?.get(&(n, k, dtype)).and_then(|c| c.get(m.checked_sub(1)?).copied())
}

/// Records the SwiGLU choices for 1–4 rows times a gate|up weight `(n, k)` of `dtype`.
pub(crate) fn set_swiglu_choice(n: usize, k: usize, dtype: DType, chosen: [GemvKernel; 4]) -> candle_core::Result<()> {
    let mut t = SWIGLU.write().map_err(|_| candle_core::Error::Msg("swiglu tuning table poisoned".into()))?;
    t.get_or_insert_with(HashMap::new).insert((n, k, dtype), chosen);
    Ok(())
}

/// Every row measured so far in this process (for engine-bench's report).
pub fn results() -> Vec<TuneRow> {
    RESULTS.lock().map(|r| r.clone()).unwrap_or_default()
}

/// Records the kernels chosen for 1–4 rows times a `(n, k)` weight of `dtype`.
pub(crate) fn set_choice(n: usize, k: usize, dtype: DType, chosen: [GemvKernel; 4]) -> candle_core::Result<()> {
    let mut t = TABLE.write().map_err(|_| candle_core::Error::Msg("gemv tuning table poisoned".into()))?;
    t.get_or_insert_with(HashMap::new).insert((n, k, dtype), chosen);
    Ok(())
}

/// Keeps measured rows for [`results`].
pub(crate) fn keep(rows: &[TuneRow]) {
    if let Ok(mut r) = RESULTS.lock() {
        r.extend(rows.iter().cloned());
    }
}
