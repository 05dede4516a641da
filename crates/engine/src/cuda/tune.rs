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
//! (`gemv.rs`). The gate|up shapes are then tuned once more, for SwiGLU: the product by its
//! chosen kernel followed by `silu_mul`, against the `gemv_u` kernels with SwiGLU in their
//! epilogue ([`tune_swiglu`]), so the fusion runs only where it measures faster.

use crate::cuda::gemv::{gemv, gemv_swiglu_with, gemv_with, GEMV_MAX_ROWS};
use crate::cuda::gemv_table::{self, GemvKernel, Timing, TuneRow};
use crate::cuda::kernels::silu_mul;
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
    check_against(&gemv_with(x, &ws[0], kernel, x.dtype())?, want, scale, "cuBLAS")?;
    time_calls(ws, x, &|w| gemv_with(x, w, kernel, x.dtype()).map(drop))
}

/// `got` within 1e-2 of `want`'s largest |value| (`scale`).
fn check_against(got: &Tensor, want: &Tensor, scale: f64, what: &str) -> Result<()> {
    let got = got.to_dtype(DType::F32)?;
    let diff = (got - want)?.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()? as f64 / scale.max(1e-9);
    if diff.is_nan() || diff > 1e-2 {
        candle_core::bail!("differs from {what} by {diff:.2e} of max |y|");
    }
    Ok(())
}

/// Median µs per call of `f` over three passes, each of at least 8 calls cycling over the
/// layers' matrices (so the weights stream from memory).
fn time_calls(ws: &[Tensor], x: &Tensor, f: &dyn Fn(&Tensor) -> Result<()>) -> Result<f64> {
    let sync = || x.device().synchronize();
    let calls = ws.len().max(8);
    let pass = || -> Result<f64> {
        sync()?;
        let t = std::time::Instant::now();
        for i in 0..calls {
            f(&ws[i % ws.len()])?;
        }
        sync()?;
        Ok(t.elapsed().as_secs_f64() * 1e6 / calls as f64)
    };
    pass()?;
    let mut us = [pass()?, pass()?, pass()?];
    us.sort_by(f64::total_cmp);
    Ok(us[1])
}

/// For each group of same-shaped fused gate|up weights `(2 inter, k)` (tuned as products
/// first, by [`tune`]) and 1–4 rows: the product by its chosen kernel then `silu_mul`, against
/// `gemv_u4` and `gemv_u8` with SwiGLU in their epilogue, checked against the pair and timed
/// the same way; the fastest is recorded (`gemv_table::swiglu_choice`).
pub fn tune_swiglu(groups: &[Vec<Tensor>]) -> Result<Vec<TuneRow>> {
    use GemvKernel::{SwigluU4, SwigluU8, Unfused};
    let mut rows = Vec::new();
    for ws in groups {
        let Some(w0) = ws.first() else { continue };
        let (n, k) = w0.dims2()?;
        if !matches!(w0.dtype(), DType::BF16 | DType::F16) || k % 8 != 0 || n % 2 != 0 {
            continue;
        }
        let mut chosen = [Unfused; 4];
        for m in 1..=GEMV_MAX_ROWS {
            let x = (Tensor::rand(-1f32, 1f32, (m, k), w0.device())? * 0.05)?.to_dtype(w0.dtype())?;
            let unfused = |w: &Tensor| -> Result<Tensor> {
                let y = match gemv(&x, w)? {
                    Some(y) => y,
                    None => x.matmul(&w.t()?)?,
                };
                silu_mul(&y)
            };
            let want = unfused(w0)?.to_dtype(DType::F32)?;
            let scale = want.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()? as f64;
            let mut timings = Vec::new();
            for kernel in [Unfused, SwigluU4, SwigluU8] {
                let fused = |w: &Tensor| -> Result<Tensor> {
                    let u = kernel.swiglu_loads().unwrap_or(4);
                    gemv_swiglu_with(&x, w, None, u)?
                        .ok_or_else(|| candle_core::Error::Msg("the SwiGLU kernel does not take this shape".into()))
                };
                let time = || -> Result<f64> {
                    if kernel == Unfused {
                        return time_calls(ws, &x, &|w| unfused(w).map(drop));
                    }
                    check_against(&fused(w0)?, &want, scale, "matmul + silu_mul")?;
                    time_calls(ws, &x, &|w| fused(w).map(drop))
                };
                let mut t = Timing { kernel, us: None, gbytes_per_s: None, error: None };
                match time() {
                    Ok(us) => (t.us, t.gbytes_per_s) = (Some(us), Some((n * k * 2) as f64 / us / 1e3)),
                    Err(e) => t.error = Some(e.to_string()),
                }
                timings.push(t);
            }
            let best = timings.iter().filter_map(|t| Some((t.kernel, t.us?))).min_by(|a, b| a.1.total_cmp(&b.1));
            chosen[m - 1] = best.map_or(Unfused, |(k, _)| k);
            rows.push(TuneRow { n, k, m, matrices: ws.len(), timings, chosen: chosen[m - 1] });
        }
        gemv_table::set_swiglu_choice(n, k, w0.dtype(), chosen)?;
    }
    gemv_table::keep(&rows);
    Ok(rows)
}
