//! RMSNorm and the residual add of f32 activations on the CPU (what a CPU step's hidden states
//! are, bf16 weights included: `model::activation_dtype`), row by row on the calling thread's
//! rayon pool, each output written once into a buffer that is never zeroed first.
//!
//! Why not candle's: its CPU `rms_norm` sums a row's squares one value after the other (a chain
//! of dependent adds), and both it and the elementwise add fan out to candle's own spinning
//! barrier pool, sized by the host's physical cores whatever the process is pinned to. With the
//! engine pinned to one core, that pool's thread took the core in turns with the step's: at a
//! 1024-token SmolLM2 prefill, norms and adds were 8 % of the step.
//!
//! The loops are written once ([`rms_body`], [`add_body`]) and compiled for AVX-512 and AVX2,
//! chosen at run time; a row's sum of squares goes into 16 lane sums in a fixed order, so every
//! build gives the same bits.

use candle_core::{DType, Tensor};
use rayon::prelude::*;

/// Rows per parallel task: about 16 KB of f32 each, and at least four tasks per thread when
/// there are rows enough.
fn rows_per_task(rows: usize, n: usize) -> usize {
    let by_size = (4096 / n.max(1)).max(1);
    rows.div_ceil(4 * rayon::current_num_threads()).max(by_size)
}

/// The f32 values of a contiguous CPU f32 tensor, or `None`.
fn f32_values(t: &Tensor) -> candle_core::Result<Option<Vec<f32>>> {
    if !t.device().is_cpu() || t.dtype() != DType::F32 {
        return Ok(None);
    }
    Ok(Some(t.flatten_all()?.to_vec1::<f32>()?))
}

/// `x / sqrt(mean(x²) + eps) · w` over the last dimension of `x`, as transformers computes it
/// (the row times the reciprocal root, then times the weight). `x` and `w` f32 on the CPU, `w`
/// as long as `x`'s last dimension; `None` for anything else (candle's op then).
pub fn rms_norm(x: &Tensor, w: &Tensor, eps: f32) -> candle_core::Result<Option<Tensor>> {
    let Some(&n) = x.dims().last() else { return Ok(None) };
    if n == 0 || w.dims() != [n] || x.dtype() != DType::F32 || !x.device().is_cpu() {
        return Ok(None);
    }
    let Some(wv) = f32_values(w)? else { return Ok(None) };
    let x = x.contiguous()?;
    let (storage, layout) = x.storage_and_layout();
    let candle_core::Storage::Cpu(candle_core::CpuStorage::F32(xs)) = &*storage else { return Ok(None) };
    let Some((o0, o1)) = layout.contiguous_offsets() else { return Ok(None) };
    let xs = &xs[o0..o1];
    let (norm, rows) = (kernel_rms(), xs.len() / n);
    let mut out: Vec<f32> = Vec::with_capacity(xs.len());
    let chunk = rows_per_task(rows, n) * n;
    out.spare_capacity_mut()[..xs.len()].par_chunks_mut(chunk).zip(xs.par_chunks(chunk)).for_each(|(o, x)| {
        for (o, x) in o.chunks_exact_mut(n).zip(x.chunks_exact(n)) {
            // SAFETY: `kernel_rms` chose a build this CPU runs; `o` and `x` are rows of `n`.
            unsafe { norm(x, &wv, eps, o) };
        }
    });
    // SAFETY: every row of `out` was written above (the chunks cover `xs.len()` values).
    unsafe { out.set_len(xs.len()) };
    drop(storage);
    Ok(Some(Tensor::from_vec(out, x.shape(), x.device())?))
}

/// `a + b`: both f32 on the CPU, of one shape; `None` for anything else (candle's op then).
pub fn add(a: &Tensor, b: &Tensor) -> candle_core::Result<Option<Tensor>> {
    let f32_cpu = |t: &Tensor| t.device().is_cpu() && t.dtype() == DType::F32;
    if !(f32_cpu(a) && f32_cpu(b)) || a.dims() != b.dims() || a.elem_count() == 0 {
        return Ok(None);
    }
    let (a, b) = (a.contiguous()?, b.contiguous()?);
    let ((sa, la), (sb, lb)) = (a.storage_and_layout(), b.storage_and_layout());
    let (
        candle_core::Storage::Cpu(candle_core::CpuStorage::F32(va)),
        candle_core::Storage::Cpu(candle_core::CpuStorage::F32(vb)),
    ) = (&*sa, &*sb)
    else {
        return Ok(None);
    };
    let (Some((a0, a1)), Some((b0, b1))) = (la.contiguous_offsets(), lb.contiguous_offsets()) else { return Ok(None) };
    let (va, vb) = (&va[a0..a1], &vb[b0..b1]);
    let (sum, len) = (kernel_add(), va.len());
    let mut out: Vec<f32> = Vec::with_capacity(len);
    let chunk = rows_per_task(len.div_ceil(1024), 1024) * 1024;
    out.spare_capacity_mut()[..len].par_chunks_mut(chunk).zip(va.par_chunks(chunk).zip(vb.par_chunks(chunk))).for_each(
        |(o, (a, b))| {
            // SAFETY: `kernel_add` chose a build this CPU runs; the three chunks are as long.
            unsafe { sum(a, b, o) }
        },
    );
    // SAFETY: every value of `out` was written above.
    unsafe { out.set_len(len) };
    drop((sa, sb));
    Ok(Some(Tensor::from_vec(out, a.shape(), a.device())?))
}

/// One row normalised into `o` (uninitialised on entry, every value written).
type RmsFn = unsafe fn(x: &[f32], w: &[f32], eps: f32, o: &mut [std::mem::MaybeUninit<f32>]);
/// `a + b` into `o`.
type AddFn = unsafe fn(a: &[f32], b: &[f32], o: &mut [std::mem::MaybeUninit<f32>]);

fn kernel_rms() -> RmsFn {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx512f") {
            return x86::rms_avx512;
        }
        if std::is_x86_feature_detected!("avx2") {
            return x86::rms_avx2;
        }
    }
    rms_portable
}

fn kernel_add() -> AddFn {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx512f") {
            return x86::add_avx512;
        }
        if std::is_x86_feature_detected!("avx2") {
            return x86::add_avx2;
        }
    }
    add_portable
}

/// [`rms_body`] for any CPU (`unsafe` only to share [`RmsFn`]'s type).
unsafe fn rms_portable(x: &[f32], w: &[f32], eps: f32, o: &mut [std::mem::MaybeUninit<f32>]) {
    rms_body(x, w, eps, o)
}

/// [`add_body`] for any CPU.
unsafe fn add_portable(a: &[f32], b: &[f32], o: &mut [std::mem::MaybeUninit<f32>]) {
    add_body(a, b, o)
}

/// The sum of the squares of `x` in 16 lane sums (value `i` into lane `i % 16`), the lanes then
/// halved pairwise: the same order, so the same bits, whatever the build.
#[inline(always)]
fn sum_squares(x: &[f32]) -> f32 {
    let mut acc = [0f32; 16];
    let mut chunks = x.chunks_exact(16);
    for c in &mut chunks {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a += v * v;
        }
    }
    for (a, &v) in acc.iter_mut().zip(chunks.remainder()) {
        *a += v * v;
    }
    let mut width = 8;
    while width > 0 {
        for i in 0..width {
            acc[i] += acc[i + width];
        }
        width /= 2;
    }
    acc[0]
}

/// transformers' `LlamaRMSNorm` in f32: `w · (x · 1/sqrt(mean(x²) + eps))`.
#[inline(always)]
fn rms_body(x: &[f32], w: &[f32], eps: f32, o: &mut [std::mem::MaybeUninit<f32>]) {
    let n = x.len();
    let (w, o) = (&w[..n], &mut o[..n]);
    let inv = 1.0 / (sum_squares(x) / n as f32 + eps).sqrt();
    for ((o, &x), &w) in o.iter_mut().zip(x).zip(w) {
        o.write(w * (x * inv));
    }
}

#[inline(always)]
fn add_body(a: &[f32], b: &[f32], o: &mut [std::mem::MaybeUninit<f32>]) {
    let n = a.len();
    let (b, o) = (&b[..n], &mut o[..n]);
    for ((o, &a), &b) in o.iter_mut().zip(a).zip(b) {
        o.write(a + b);
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{add_body, rms_body};
    use std::mem::MaybeUninit;

    /// [`rms_body`] compiled for AVX-512.
    ///
    /// # Safety
    /// AVX-512F must be available.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn rms_avx512(x: &[f32], w: &[f32], eps: f32, o: &mut [MaybeUninit<f32>]) {
        rms_body(x, w, eps, o)
    }

    /// [`rms_body`] compiled for AVX2.
    ///
    /// # Safety
    /// AVX2 must be available.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn rms_avx2(x: &[f32], w: &[f32], eps: f32, o: &mut [MaybeUninit<f32>]) {
        rms_body(x, w, eps, o)
    }

    /// [`add_body`] compiled for AVX-512.
    ///
    /// # Safety
    /// AVX-512F must be available.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn add_avx512(a: &[f32], b: &[f32], o: &mut [MaybeUninit<f32>]) {
        add_body(a, b, o)
    }

    /// [`add_body`] compiled for AVX2.
    ///
    /// # Safety
    /// AVX2 must be available.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn add_avx2(a: &[f32], b: &[f32], o: &mut [MaybeUninit<f32>]) {
        add_body(a, b, o)
    }
}

#[cfg(test)]
mod tests;
