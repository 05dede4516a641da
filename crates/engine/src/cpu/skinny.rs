//! Matrix product for the few-row case of decode (`x · Wᵀ` with `x` of a few rows).
//!
//! candle's gemm is built for large matrices: with a handful of rows it is far from the memory
//! bound (measured here, 2 threads, on the `tiny` LM head 256 × 32000: 1.5 ms for one row but
//! 3.5 ms for 4 rows, while streaming the 33 MB of weights takes ~1 ms). This kernel walks
//! the weight matrix once, sequentially, and keeps `x` in L1: each weight row is dotted with
//! two rows of `x` at a time (4 AVX2 accumulators each, for the FMA latency). Weight rows are
//! split across threads. Measured (`cargo run --release -p goodput-engine --example mm`):
//! 256 × 32000 at 1/4/8 rows 0.83/1.59/2.48 ms against gemm's 1.52/3.47/4.07 ms; the SmolLM2
//! LM head 576 × 49152 at 1/4 rows 3.2/3.6 ms against 5.2/9.8 ms. Past 8 rows gemm wins on
//! large matrices, past 16 on small ones. Used only on CPU, f32, with AVX2+FMA; everything
//! else goes to candle's matmul.

use crate::cpu::common::untranspose;
use candle_core::{CpuStorage, CustomOp2, Layout, Result, Shape, Tensor};
use rayon::prelude::*;

/// Largest row count the kernel takes; above it candle's gemm is faster.
pub const MAX_ROWS: usize = 16;

/// Largest row count for weight matrices above [`SMALL_WEIGHTS`] elements.
const MAX_ROWS_LARGE: usize = 8;
const SMALL_WEIGHTS: usize = 1 << 20;

/// Weight rows per parallel task.
const ROWS_PER_TASK: usize = 64;

fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static OK: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *OK.get_or_init(|| std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma"))
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// `x · wᵀ` for `x (m, k)` and `w (n, k)` when the kernel applies; `None` otherwise.
pub fn matmul_t(x: &Tensor, w: &Tensor) -> Result<Option<Tensor>> {
    if !available()
        || !x.device().is_cpu()
        || x.dtype() != candle_core::DType::F32
        || w.dtype() != candle_core::DType::F32
    {
        return Ok(None);
    }
    let (Ok((m, k)), Ok((_, kw))) = (x.dims2(), w.dims2()) else { return Ok(None) };
    let limit = if w.elem_count() > SMALL_WEIGHTS { MAX_ROWS_LARGE } else { MAX_ROWS };
    if m == 0 || m > limit || k != kw || !w.is_contiguous() {
        return Ok(None);
    }
    let x = x.contiguous()?;
    Ok(Some(x.apply_op2_no_bwd(w, &SkinnyMatmul)?))
}

struct SkinnyMatmul;

impl CustomOp2 for SkinnyMatmul {
    fn name(&self) -> &'static str {
        "skinny-matmul"
    }

    fn cpu_fwd(&self, xs: &CpuStorage, xl: &Layout, ws: &CpuStorage, wl: &Layout) -> Result<(CpuStorage, Shape)> {
        let (CpuStorage::F32(x), CpuStorage::F32(w)) = (xs, ws) else { candle_core::bail!("skinny matmul: f32 only") };
        let (Some((x0, x1)), Some((w0, w1))) = (xl.contiguous_offsets(), wl.contiguous_offsets()) else {
            candle_core::bail!("skinny matmul: contiguous inputs only")
        };
        let (x, w) = (&x[x0..x1], &w[w0..w1]);
        let (m, k) = xl.shape().dims2()?;
        let (n, _) = wl.shape().dims2()?;
        // Output transposed (n, m): each task writes a contiguous run of it.
        let mut out_t = vec![0f32; n * m];
        out_t.par_chunks_mut(ROWS_PER_TASK * m).enumerate().for_each(|(task, out)| {
            let r0 = task * ROWS_PER_TASK;
            let rows = out.len() / m;
            let wb = &w[r0 * k..(r0 + rows) * k];
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `available()` checked AVX2 and FMA; slices are sized rows × k and m × k.
            unsafe {
                x86::block(x, m, k, wb, rows, out)
            }
            #[cfg(not(target_arch = "x86_64"))]
            let _ = (x, wb, rows);
        });
        Ok((CpuStorage::F32(untranspose(out_t, m, n)), Shape::from((m, n))))
    }
}

// Raw SIMD over pointers whose bounds `block` establishes from the slice lengths (checked
// in debug builds); every function here needs AVX2+FMA, which `available()` verified.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_op_in_unsafe_fn)]
mod x86 {
    use crate::cpu::common::x86::hsum;
    use std::arch::x86_64::*;

    /// Dot products of one weight row with one or two rows of `x`, 4 accumulators each
    /// (FMA latency), walking the weight row once.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn row_dots<const TWO: bool>(wr: *const f32, xa: *const f32, xb: *const f32, k: usize) -> (f32, f32) {
        let mut a = [_mm256_setzero_ps(); 4];
        let mut b = [_mm256_setzero_ps(); 4];
        let mut t = 0;
        while t + 32 <= k {
            for u in 0..4 {
                let wv = _mm256_loadu_ps(wr.add(t + 8 * u));
                a[u] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(xa.add(t + 8 * u)), a[u]);
                if TWO {
                    b[u] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(xb.add(t + 8 * u)), b[u]);
                }
            }
            t += 32;
        }
        while t + 8 <= k {
            let wv = _mm256_loadu_ps(wr.add(t));
            a[0] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(xa.add(t)), a[0]);
            if TWO {
                b[0] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(xb.add(t)), b[0]);
            }
            t += 8;
        }
        let sum = |v: [__m256; 4]| hsum(_mm256_add_ps(_mm256_add_ps(v[0], v[1]), _mm256_add_ps(v[2], v[3])));
        let (mut sa, mut sb) = (sum(a), if TWO { sum(b) } else { 0.0 });
        while t < k {
            let wv = *wr.add(t);
            sa += wv * *xa.add(t);
            if TWO {
                sb += wv * *xb.add(t);
            }
            t += 1;
        }
        (sa, sb)
    }

    /// `out[r * m + i] = dot(w[r], x[i])` for `rows` weight rows, walking `w` sequentially.
    ///
    /// # Safety
    /// AVX2 and FMA must be available; `x` holds m × k, `w` rows × k and `out` rows × m floats.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn block(x: &[f32], m: usize, k: usize, w: &[f32], rows: usize, out: &mut [f32]) {
        debug_assert!(x.len() >= m * k && w.len() >= rows * k && out.len() >= rows * m);
        let (xp, wp) = (x.as_ptr(), w.as_ptr());
        for r in 0..rows {
            let wr = wp.add(r * k);
            let mut i = 0;
            while i + 2 <= m {
                let (a, b) = row_dots::<true>(wr, xp.add(i * k), xp.add((i + 1) * k), k);
                out[r * m + i] = a;
                out[r * m + i + 1] = b;
                i += 2;
            }
            if i < m {
                out[r * m + i] = row_dots::<false>(wr, xp.add(i * k), xp, k).0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    #[test]
    #[cfg_attr(not(host_avx2), ignore = "this CPU has no AVX2 and FMA: the kernel cannot run here")]
    fn matches_candle_matmul_on_odd_shapes() {
        assert!(available(), "built on a CPU with AVX2, run on one without: the kernel did not run");
        for (m, k, n) in [(1, 8, 1), (3, 13, 7), (4, 256, 130), (16, 72, 65), (5, 1000, 3)] {
            let x = Tensor::randn(0f32, 1.0, (m, k), &Device::Cpu).unwrap();
            let w = Tensor::randn(0f32, 1.0, (n, k), &Device::Cpu).unwrap();
            let a = matmul_t(&x, &w).unwrap().unwrap();
            let b = x.matmul(&w.t().unwrap()).unwrap();
            let d = (a - b).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
            assert!(d < 1e-3, "{m}x{k}x{n}: {d}");
        }
        let x = Tensor::zeros((MAX_ROWS + 1, 8), candle_core::DType::F32, &Device::Cpu).unwrap();
        let w = Tensor::zeros((4, 8), candle_core::DType::F32, &Device::Cpu).unwrap();
        assert!(matmul_t(&x, &w).unwrap().is_none(), "too many rows");
    }
}
