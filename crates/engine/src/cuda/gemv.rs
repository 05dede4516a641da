//! `x · wᵀ` at 1 to [`GEMV_MAX_ROWS`] rows (decode) by goodput's small-batch kernels
//! (`gemv_t`, `gemv_u` with 4 or 8 loads in flight, `gemv_s2` split over the width) or cuBLAS, whichever the load-time tuning
//! (`tune.rs`) measured fastest for the shape; an f32 output where it must not be rounded;
//! `gemv_fp8` for e4m3 weights with per-row scales (`--dtype fp8`).

use crate::cuda::blas::matmul_nt_f32;
use crate::cuda::device::{alloc, cfg, cuda, i32_of, ptr, suffix};
use crate::cuda::gemv_table::{self, GemvKernel};
use crate::cuda::launch::launch;
use crate::cuda::params::{Arg, FUSED_SWIGLU};
use crate::fp8::Fp8Weight;
use candle_core::{bail, DType, Result, Tensor};
use std::sync::atomic::Ordering;

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

/// `x · (q · scale)ᵀ` for `x` `(m, k)` in f16/bf16 with `m ≤ GEMV_MAX_ROWS` and e4m3 weights
/// `(n, k)` with per-row scales: the weights read as bytes (half of bf16's) and widened in
/// registers, f32 accumulation, the scale applied to each output. `None` where the kernel
/// does not apply (more rows, f32, `k` not a multiple of 16, unaligned): the caller multiplies
/// the bf16 copy of the rounded weights.
pub fn gemv_fp8(x: &Tensor, w: &Fp8Weight) -> Result<Option<Tensor>> {
    let Some(Fp8Operands { m, n, k, xp, wp, sp }) = fp8_operands(x, w)? else { return Ok(None) };
    let dev = cuda(x.device())?;
    let (y, yp) = alloc(&dev, x.dtype(), (m, n))?;
    launch(
        &dev,
        &format!("gemv_fp8_m{m}_{}", suffix(x.dtype())?),
        cfg((n.div_ceil(4) as u32, 1), 128),
        &[
            Arg::Ptr(xp),
            Arg::Ptr(wp),
            Arg::Ptr(sp),
            Arg::Ptr(yp),
            Arg::I32(i32_of(n, "rows")?),
            Arg::I32(i32_of(k, "width")?),
        ],
    )?;
    Ok(Some(y))
}

/// `silu(x · gateᵀ) · (x · upᵀ)` for the fused gate|up weight `w` `(2 inter, k)` (gate rows
/// first) in one launch (`*_swiglu` kernels): on its e4m3 copy when `fp8` is given, else where
/// the load-time tuning chose a `gemv_u` kernel for the shape. `None` where it does not apply
/// (turned off, more rows, cuBLAS chosen): the caller multiplies, then runs `silu_mul`.
pub fn gemv_swiglu(x: &Tensor, w: &Tensor, fp8: Option<&Fp8Weight>) -> Result<Option<Tensor>> {
    if !FUSED_SWIGLU.load(Ordering::Relaxed) {
        return Ok(None);
    }
    // e4m3 weights: always (the alternative is gemv_fp8 and silu_mul, one launch more). Else
    // as measured at load (`tune.rs`); an untuned shape where the plain product would be a
    // gemv_u kernel anyway.
    let u = match (fp8, x.dims2(), w.dims2()) {
        (Some(_), _, _) => 4,
        (None, Ok((m, k)), Ok((n, _))) => {
            let measured = gemv_table::swiglu_choice(n, k, x.dtype(), m);
            match measured.map(GemvKernel::swiglu_loads) {
                Some(Some(u)) => u,
                Some(None) => return Ok(None),
                None => match gemv_table::choice(n, k, x.dtype(), m) {
                    Some(GemvKernel::U4) => 4,
                    Some(GemvKernel::U8) => 8,
                    _ => return Ok(None),
                },
            }
        }
        _ => return Ok(None),
    };
    gemv_swiglu_with(x, w, fp8, u)
}

/// [`gemv_swiglu`] by `gemv_u{u}_*_swiglu` (`u` 4 or 8; `gemv_fp8_*_swiglu` with `fp8`),
/// whatever the tuning chose.
pub fn gemv_swiglu_with(x: &Tensor, w: &Tensor, fp8: Option<&Fp8Weight>, u: usize) -> Result<Option<Tensor>> {
    let dev = cuda(x.device())?;
    let sfx = suffix(x.dtype())?;
    let (name, m, n, k, mut args) = match fp8 {
        Some(f) => {
            let Some(Fp8Operands { m, n, k, xp, wp, sp }) = fp8_operands(x, f)? else { return Ok(None) };
            (format!("gemv_fp8_m{m}_swiglu_{sfx}"), m, n, k, vec![Arg::Ptr(xp), Arg::Ptr(wp), Arg::Ptr(sp)])
        }
        None => {
            let Some(op) = GemvOperands::of(x, w)? else { return Ok(None) };
            if !matches!(u, 4 | 8) {
                bail!("gemv_swiglu: no gemv_u{u} kernel (4 or 8)");
            }
            (format!("gemv_u{u}_m{}_swiglu_{sfx}", op.m), op.m, op.n, op.k, vec![Arg::Ptr(op.xp), Arg::Ptr(op.wp)])
        }
    };
    let inter = n / 2;
    if inter == 0 || n % 2 != 0 {
        return Ok(None);
    }
    let (y, yp) = alloc(&dev, x.dtype(), (m, inter))?;
    args.extend([Arg::Ptr(yp), Arg::I32(i32_of(inter, "rows")?), Arg::I32(i32_of(k, "width")?)]);
    launch(&dev, &name, cfg((inter.div_ceil(4) as u32, 1), 128), &args)?;
    Ok(Some(y))
}

/// The shape and device addresses (x, q, scale) of `x · (q · scale)ᵀ`.
struct Fp8Operands {
    m: usize,
    n: usize,
    k: usize,
    xp: u64,
    wp: u64,
    sp: u64,
}

/// [`Fp8Operands`] where `gemv_fp8` applies: 1 to [`GEMV_MAX_ROWS`] rows of f16/bf16,
/// `k % 16 == 0`, contiguous, 16-byte aligned.
fn fp8_operands(x: &Tensor, w: &Fp8Weight) -> Result<Option<Fp8Operands>> {
    let (Ok((m, k)), Ok((n, kw))) = (x.dims2(), w.q.dims2()) else { return Ok(None) };
    if m == 0 || m > GEMV_MAX_ROWS || k != kw || k % 16 != 0 || !matches!(x.dtype(), DType::BF16 | DType::F16) {
        return Ok(None);
    }
    let scale_ok = w.scale.dims() == [n] && w.scale.dtype() == DType::F32;
    if !x.is_contiguous() || !w.q.is_contiguous() || w.q.dtype() != DType::F8E4M3 || !scale_ok {
        return Ok(None);
    }
    let (xp, wp, sp) = (ptr(x)?, ptr(&w.q)?, ptr(&w.scale)?);
    Ok((xp % 16 == 0 && wp % 16 == 0).then_some(Fp8Operands { m, n, k, xp, wp, sp }))
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
            GemvKernel::Unfused | GemvKernel::SwigluU4 | GemvKernel::SwigluU8 => {
                bail!("gemv: {} is a SwiGLU choice, not a product (gemv_swiglu)", kernel.name())
            }
            GemvKernel::GemvT => {
                launch(
                    &dev,
                    &format!("gemv_t_{sfx}"),
                    cfg((n.div_ceil(8) as u32, 1), 256),
                    &[Arg::Ptr(xp), Arg::Ptr(wp), Arg::Ptr(yp), Arg::I32(mm), Arg::I32(nn), Arg::I32(kk)],
                )?;
            }
            GemvKernel::S2 => {
                launch(
                    &dev,
                    &format!("gemv_s2_m{m}_{sfx}"),
                    cfg((n.div_ceil(4) as u32, 1), 256),
                    &[Arg::Ptr(xp), Arg::Ptr(wp), Arg::Ptr(yp), Arg::I32(nn), Arg::I32(kk)],
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
