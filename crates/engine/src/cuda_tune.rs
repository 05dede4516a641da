//! Which kernel multiplies each weight shape at 1–4 rows on this GPU, measured at load: cuBLAS,
//! goodput's `gemv_t`, or `gemv_u` with 4 or 8 loads in flight per lane. The best choice
//! depends on the matrix (a light launch wins on small ones, bandwidth on large ones) and on
//! the device, so it is timed where it runs, as cuBLASLt's heuristics, TensorRT's tactics and
//! Triton's autotuner do, instead of a threshold guessed on one GPU.
//!
//! For each shape every candidate is first compared with cuBLAS's product (relative error
//! ≤ 1e-2 of the largest output); one that differs or fails to launch is not chosen. Each is
//! then timed over every layer's matrix of that shape in turn (so the weights stream from
//! memory, as in a step, rather than sitting in L2), three times; the median wins. The table
//! is per process and per (rows, columns, dtype); shapes it has not seen keep the default
//! ([`crate::cuda::GEMV_MAX_ELEMENTS`]).

use candle_core::DType;
#[cfg(feature = "cuda")]
use candle_core::{Result, Tensor};
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
}

impl GemvKernel {
    pub const ALL: [GemvKernel; 4] = [GemvKernel::Cublas, GemvKernel::GemvT, GemvKernel::U4, GemvKernel::U8];

    pub fn name(self) -> &'static str {
        match self {
            GemvKernel::Cublas => "cublas",
            GemvKernel::GemvT => "gemv_t",
            GemvKernel::U4 => "gemv_u4",
            GemvKernel::U8 => "gemv_u8",
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

/// Every row measured so far in this process (for engine-bench's report).
pub fn results() -> Vec<TuneRow> {
    RESULTS.lock().map(|r| r.clone()).unwrap_or_default()
}

#[cfg(feature = "cuda")]
/// Tunes each group of same-shaped f16/bf16 weights `(n, k)` for 1–4 rows and records the
/// choices. Failures of single candidates are recorded, not returned: cuBLAS always remains.
pub fn tune(groups: &[Vec<Tensor>]) -> Result<Vec<TuneRow>> {
    let mut rows = Vec::new();
    for ws in groups {
        let Some(w0) = ws.first() else { continue };
        let (n, k) = w0.dims2()?;
        let dtype = w0.dtype();
        if !matches!(dtype, DType::BF16 | DType::F16) || k % 8 != 0 {
            continue;
        }
        let mut chosen = [GemvKernel::Cublas; 4];
        for m in 1..=crate::cuda::GEMV_MAX_ROWS {
            let row = tune_shape(ws, m)?;
            chosen[m - 1] = row.chosen;
            rows.push(row);
        }
        let mut t = TABLE.write().map_err(|_| candle_core::Error::Msg("gemv tuning table poisoned".into()))?;
        t.get_or_insert_with(HashMap::new).insert((n, k, dtype), chosen);
    }
    if let Ok(mut r) = RESULTS.lock() {
        r.extend(rows.iter().cloned());
    }
    Ok(rows)
}

#[cfg(feature = "cuda")]
fn tune_shape(ws: &[Tensor], m: usize) -> Result<TuneRow> {
    let w0 = &ws[0];
    let (n, k) = w0.dims2()?;
    let x = (Tensor::rand(-1f32, 1f32, (m, k), w0.device())? * 0.05)?.to_dtype(w0.dtype())?;
    let want = x.matmul(&w0.t()?)?.to_dtype(DType::F32)?;
    let scale = want.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()? as f64;
    let bytes = (n * k * w0.dtype().size_in_bytes()) as f64;
    let mut timings = Vec::new();
    for kernel in GemvKernel::ALL {
        let mut t = Timing { kernel, us: None, gbytes_per_s: None, error: None };
        match measure(ws, &x, kernel, &want, scale) {
            Ok(us) => {
                t.us = Some(us);
                t.gbytes_per_s = Some(bytes / us / 1e3);
            }
            Err(e) => t.error = Some(e.to_string()),
        }
        timings.push(t);
    }
    let chosen = timings
        .iter()
        .filter_map(|t| Some((t.kernel, t.us?)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map_or(GemvKernel::Cublas, |(k, _)| k);
    Ok(TuneRow { n, k, m, matrices: ws.len(), timings, chosen })
}

#[cfg(feature = "cuda")]
/// Checks `kernel` against cuBLAS's `want`, then returns its median µs per call.
fn measure(ws: &[Tensor], x: &Tensor, kernel: GemvKernel, want: &Tensor, scale: f64) -> Result<f64> {
    let got = crate::cuda::gemv_with(x, &ws[0], kernel, x.dtype())?.to_dtype(DType::F32)?;
    let diff = (got - want)?.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()? as f64 / scale.max(1e-9);
    if diff.is_nan() || diff > 1e-2 {
        candle_core::bail!("differs from cuBLAS by {diff:.2e} of max |y|");
    }
    let sync = || x.device().synchronize();
    // At least 8 calls per pass, cycling over the layers' matrices.
    let calls = ws.len().max(8);
    let pass = || -> Result<f64> {
        sync()?;
        let t = std::time::Instant::now();
        for i in 0..calls {
            crate::cuda::gemv_with(x, &ws[i % ws.len()], kernel, x.dtype())?;
        }
        sync()?;
        Ok(t.elapsed().as_secs_f64() * 1e6 / calls as f64)
    };
    pass()?;
    let mut us = [pass()?, pass()?, pass()?];
    us.sort_by(f64::total_cmp);
    Ok(us[1])
}
