//! Which kernel multiplies each weight shape at 1–4 rows on this GPU, measured at load: cuBLAS,
//! goodput's `gemv_t`, `gemv_u` with 4 or 8 loads in flight per lane, or `gemv_s2` (each row
//! split over two warps: more, smaller waves for matrices of few rows). The best choice
//! depends on the matrix (a light launch wins on small ones, bandwidth on large ones) and on
//! the device, so it is timed where it runs, as cuBLASLt's heuristics, TensorRT's tactics and
//! Triton's autotuner do, instead of a threshold guessed on one GPU.
//!
//! For each shape every candidate is first compared with cuBLAS's product (relative error
//! ≤ 1e-2 of the largest output); one that differs or fails to launch is not chosen. Each is
//! then timed over every layer's matrix of that shape in turn (so the weights stream from
//! memory, as in a step, rather than sitting in L2), three times; the median wins. The table
//! is per process and per (rows, columns, dtype); shapes it has not seen keep the default
//! (`gemv.rs`).

use crate::cuda::gemv::{gemv_with, GEMV_MAX_ROWS};
use crate::cuda::gemv_table::{self, GemvKernel, Timing, TuneRow};
use candle_core::{DType, Result, Tensor};

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
        for m in 1..=GEMV_MAX_ROWS {
            let row = tune_shape(ws, m)?;
            chosen[m - 1] = row.chosen;
            rows.push(row);
        }
        gemv_table::set_choice(n, k, dtype, chosen)?;
    }
    gemv_table::keep(&rows);
    Ok(rows)
}

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

/// Checks `kernel` against cuBLAS's `want`, then returns its median µs per call.
fn measure(ws: &[Tensor], x: &Tensor, kernel: GemvKernel, want: &Tensor, scale: f64) -> Result<f64> {
    let got = gemv_with(x, &ws[0], kernel, x.dtype())?.to_dtype(DType::F32)?;
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
            gemv_with(x, &ws[i % ws.len()], kernel, x.dtype())?;
        }
        sync()?;
        Ok(t.elapsed().as_secs_f64() * 1e6 / calls as f64)
    };
    pass()?;
    let mut us = [pass()?, pass()?, pass()?];
    us.sort_by(f64::total_cmp);
    Ok(us[1])
}
