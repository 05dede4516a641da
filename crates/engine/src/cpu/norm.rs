//! RMSNorm and the residual add of f32 activations on the CPU (what a CPU step's hidden states
//! are, bf16 weights included: `model::activation_dtype`) as candle custom ops, row by row on
//! the calling thread's rayon pool, each output written once into a buffer never zeroed first.
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

use candle_core::{CpuStorage, CustomOp2, DType, Layout, Result, Shape, Tensor};
use rayon::prelude::*;
use std::mem::MaybeUninit;

/// `x / sqrt(mean(x²) + eps) · w` over the last dimension of `x`, as transformers computes it
/// (the row times the reciprocal root, then times the weight). `x` and `w` f32 on the CPU, `w`
/// as long as `x`'s last dimension; `None` for anything else (candle's op then).
pub fn rms_norm(x: &Tensor, w: &Tensor, eps: f32) -> Result<Option<Tensor>> {
    let Some(&n) = x.dims().last() else { return Ok(None) };
    if n == 0 || w.dims() != [n] || !(f32_cpu(x) && f32_cpu(w)) {
        return Ok(None);
    }
    Ok(Some(x.contiguous()?.apply_op2_no_bwd(&w.contiguous()?, &RmsNorm { eps })?))
}

/// `a + b`: both f32 on the CPU, of one shape; `None` for anything else (candle's op then).
pub fn add(a: &Tensor, b: &Tensor) -> Result<Option<Tensor>> {
    if !(f32_cpu(a) && f32_cpu(b)) || a.dims() != b.dims() || a.elem_count() == 0 {
        return Ok(None);
    }
    Ok(Some(a.contiguous()?.apply_op2_no_bwd(&b.contiguous()?, &Add)?))
}

fn f32_cpu(t: &Tensor) -> bool {
    t.device().is_cpu() && t.dtype() == DType::F32
}

/// The values of a contiguous f32 storage.
fn values<'a>(s: &'a CpuStorage, l: &Layout, op: &str) -> Result<&'a [f32]> {
    match (s, l.contiguous_offsets()) {
        (CpuStorage::F32(v), Some((o0, o1))) => Ok(&v[o0..o1]),
        _ => candle_core::bail!("{op}: contiguous f32 inputs only"),
    }
}

/// `len` values written by `f(start, chunk)` for chunks of `chunk` values in parallel (the
/// calling thread's pool), into a buffer never zeroed: `f` must write every value of its chunk.
fn par_fill(len: usize, chunk: usize, f: impl Fn(usize, &mut [MaybeUninit<f32>]) + Sync) -> Vec<f32> {
    let (mut out, chunk) = (Vec::<f32>::with_capacity(len), chunk.max(1));
    out.spare_capacity_mut()[..len].par_chunks_mut(chunk).enumerate().for_each(|(i, o)| f(i * chunk, o));
    // SAFETY: the chunks cover `len` values and `f` wrote each of them.
    unsafe { out.set_len(len) };
    out
}

/// Rows per parallel task: about 16 KB of f32 each, and at least four tasks per thread when
/// there are rows enough.
fn rows_per_task(rows: usize, n: usize) -> usize {
    let by_size = (4096 / n.max(1)).max(1);
    rows.div_ceil(4 * rayon::current_num_threads()).max(by_size)
}

struct RmsNorm {
    eps: f32,
}

impl CustomOp2 for RmsNorm {
    fn name(&self) -> &'static str {
        "rms-norm-rows"
    }

    fn cpu_fwd(&self, xs: &CpuStorage, xl: &Layout, ws: &CpuStorage, wl: &Layout) -> Result<(CpuStorage, Shape)> {
        let (x, w) = (values(xs, xl, "rms-norm-rows")?, values(ws, wl, "rms-norm-rows")?);
        let n = w.len();
        if n == 0 || x.len() % n != 0 {
            candle_core::bail!("rms-norm-rows: rows of {} values against a weight of {n}", x.len());
        }
        let (norm, eps) = (kernel_rms(), self.eps);
        let chunk = rows_per_task(x.len() / n, n) * n;
        let out = par_fill(x.len(), chunk, |start, o| {
            for (o, x) in o.chunks_exact_mut(n).zip(x[start..].chunks_exact(n)) {
                // SAFETY: `kernel_rms` chose a build this CPU runs; `o` and `x` are rows of `n`.
                unsafe { norm(x, w, eps, o) };
            }
        });
        Ok((CpuStorage::F32(out), xl.shape().clone()))
    }
}

struct Add;

impl CustomOp2 for Add {
    fn name(&self) -> &'static str {
        "add-f32"
    }

    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout) -> Result<(CpuStorage, Shape)> {
        let (a, b) = (values(s1, l1, "add-f32")?, values(s2, l2, "add-f32")?);
        if a.len() != b.len() {
            candle_core::bail!("add-f32: {} values against {}", a.len(), b.len());
        }
        let sum = kernel_add();
        let chunk = rows_per_task(a.len().div_ceil(1024), 1024) * 1024;
        let out = par_fill(a.len(), chunk, |start, o| {
            let end = start + o.len();
            // SAFETY: `kernel_add` chose a build this CPU runs; the three slices are as long.
            unsafe { sum(&a[start..end], &b[start..end], o) }
        });
        Ok((CpuStorage::F32(out), l1.shape().clone()))
    }
}

/// One row normalised into `o` (uninitialised on entry, every value written).
type RmsFn = unsafe fn(x: &[f32], w: &[f32], eps: f32, o: &mut [MaybeUninit<f32>]);
/// `a + b` into `o`.
type AddFn = unsafe fn(a: &[f32], b: &[f32], o: &mut [MaybeUninit<f32>]);

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
unsafe fn rms_portable(x: &[f32], w: &[f32], eps: f32, o: &mut [MaybeUninit<f32>]) {
    rms_body(x, w, eps, o)
}

/// [`add_body`] for any CPU.
unsafe fn add_portable(a: &[f32], b: &[f32], o: &mut [MaybeUninit<f32>]) {
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
fn rms_body(x: &[f32], w: &[f32], eps: f32, o: &mut [MaybeUninit<f32>]) {
    let n = x.len();
    let (w, o) = (&w[..n], &mut o[..n]);
    let inv = 1.0 / (sum_squares(x) / n as f32 + eps).sqrt();
    for ((o, &x), &w) in o.iter_mut().zip(x).zip(w) {
        o.write(w * (x * inv));
    }
}

#[inline(always)]
fn add_body(a: &[f32], b: &[f32], o: &mut [MaybeUninit<f32>]) {
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
