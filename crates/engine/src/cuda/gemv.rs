//! `x · wᵀ` at 1 to [`GEMV_MAX_ROWS`] rows (decode) by goodput's small-batch kernels
//! (`gemv_t`, `gemv_u` with 4 or 8 loads in flight) or cuBLAS, whichever the load-time tuning
//! (`tune.rs`) measured fastest for the shape; an f32 output where it must not be rounded.

use crate::cuda::blas::matmul_nt_f32;
use crate::cuda::device::{alloc, cfg, cuda, i32_of, ptr, suffix};
use crate::cuda::gemv_table::{self, GemvKernel};
use crate::cuda::launch::launch;
use crate::cuda::params::Arg;
use candle_core::{bail, DType, Result, Tensor};

/// Rows of `x` up to which [`gemv`] takes a matmul from cuBLAS.
pub const GEMV_MAX_ROWS: usize = 4;
/// Largest weight matrix (elements) [`gemv`] gives `gemv_t` when the shape was not tuned
/// (`tune.rs`). Measured on an H200 (docs/results): for
/// SmolLM2-135M's matrices (≤ 28 M elements) the kernel's lower fixed cost wins (decode at
/// batch 1: 2.82 → 2.23 ms per step); for Llama-3.1-8B's (25–525 M) cuBLAS streams faster
/// (6.71 ms against 10.99 ms), the kernel reaching ~1.4 TB/s to cuBLAS's ~2.2. The break-even,
/// ~5 µs of fixed cost over that bandwidth gap, is near 16 MB of bf16.
pub const GEMV_MAX_ELEMENTS: usize = 1 << 23;

/// `x · wᵀ` for `x` `(m, k)` and `w` `(n, k)` in f16/bf16 with `m ≤ GEMV_MAX_ROWS`, by the
/// kernel measured fastest for this shape at load (`tune.rs`), or for shapes not
/// measured, `gemv_t` on matrices up to [`GEMV_MAX_ELEMENTS`]. `None` when cuBLAS should do
/// it (chosen, more rows, f32, unaligned or non-contiguous operands).
pub fn gemv(x: &Tensor, w: &Tensor) -> Result<Option<Tensor>> {
    gemv_to(x, w, x.dtype())
}

/// [`gemv`] with the output in `out`: `x`'s dtype, or f32 where it must not be rounded (the
/// LM head's logits).
pub fn gemv_to(x: &Tensor, w: &Tensor, out: DType) -> Result<Option<Tensor>> {
    let Some(op) = GemvOperands::of(x, w)? else { return Ok(None) };
    let default = if op.n * op.k <= GEMV_MAX_ELEMENTS { GemvKernel::GemvT } else { GemvKernel::Cublas };
    match gemv_table::choice(op.n, op.k, x.dtype(), op.m).unwrap_or(default) {
        GemvKernel::Cublas => Ok(None),
        kernel => op.launch(x, kernel, out).map(Some),
    }
}

/// `x · wᵀ` by `kernel` (cuBLAS: candle's matmul, or `cublasGemmEx` for an f32 output of
/// f16/bf16 operands), the output in `out` (`x`'s dtype or f32); an error where the kernel
/// does not apply (see [`gemv`]).
pub fn gemv_with(x: &Tensor, w: &Tensor, kernel: GemvKernel, out: DType) -> Result<Tensor> {
    if kernel == GemvKernel::Cublas {
        return if out == x.dtype() { x.matmul(&w.t()?) } else { matmul_nt_f32(x, w) };
    }
    match GemvOperands::of(x, w)? {
        Some(op) => op.launch(x, kernel, out),
        None => bail!(
            "gemv: x {:?} {:?} and w {:?} {:?} do not fit {} (≤ {GEMV_MAX_ROWS} rows, f16/bf16, width a multiple of 8, contiguous, 16-byte aligned)",
            x.shape(),
            x.dtype(),
            w.shape(),
            w.dtype(),
            kernel.name()
        ),
    }
}

/// The shape and device addresses of `x (m, k) · w (n, k)ᵀ` where goodput's small-batch
/// kernels apply: 1 to [`GEMV_MAX_ROWS`] rows, f16/bf16 on both sides, `k % 8 == 0`,
/// contiguous, 16-byte aligned.
struct GemvOperands {
    m: usize,
    n: usize,
    k: usize,
    xp: u64,
    wp: u64,
}

impl GemvOperands {
    fn of(x: &Tensor, w: &Tensor) -> Result<Option<Self>> {
        let (Ok((m, k)), Ok((n, kw))) = (x.dims2(), w.dims2()) else { return Ok(None) };
        let dtype = x.dtype();
        if m == 0 || m > GEMV_MAX_ROWS || k != kw || k % 8 != 0 || !matches!(dtype, DType::BF16 | DType::F16) {
            return Ok(None);
        }
        if w.dtype() != dtype || !x.is_contiguous() || !w.is_contiguous() {
            return Ok(None);
        }
        let (xp, wp) = (ptr(x)?, ptr(w)?);
        Ok((xp % 16 == 0 && wp % 16 == 0).then_some(Self { m, n, k, xp, wp }))
    }

    /// Launches `kernel` (not cuBLAS) on candle's stream; `x` gives the device and dtype, the
    /// output is in `out` (`x`'s dtype or f32).
    fn launch(&self, x: &Tensor, kernel: GemvKernel, out: DType) -> Result<Tensor> {
        let Self { m, n, k, xp, wp } = *self;
        let dev = cuda(x.device())?;
        let sfx = match out {
            DType::F32 => format!("{}_of32", suffix(x.dtype())?),
            d if d == x.dtype() => suffix(d)?.to_string(),
            d => bail!("gemv: {d:?} output of {:?} operands", x.dtype()),
        };
        let (y, yp) = alloc(&dev, out, (m, n))?;
        let (mm, nn, kk) = (m as i32, i32_of(n, "rows")?, i32_of(k, "width")?);
        match kernel {
            GemvKernel::Cublas => bail!("gemv: cuBLAS is not a goodput kernel"),
            GemvKernel::GemvT => {
                launch(
                    &dev,
                    &format!("gemv_t_{sfx}"),
                    cfg((n.div_ceil(8) as u32, 1), 256),
                    &[Arg::Ptr(xp), Arg::Ptr(wp), Arg::Ptr(yp), Arg::I32(mm), Arg::I32(nn), Arg::I32(kk)],
                )?;
            }
            GemvKernel::U4 | GemvKernel::U8 => {
                let u = if kernel == GemvKernel::U4 { 4 } else { 8 };
                launch(
                    &dev,
                    &format!("gemv_u{u}_m{m}_{sfx}"),
                    cfg((n.div_ceil(4) as u32, 1), 128),
                    &[Arg::Ptr(xp), Arg::Ptr(wp), Arg::Ptr(yp), Arg::I32(nn), Arg::I32(kk)],
                )?;
            }
        }
        Ok(y)
    }
}
