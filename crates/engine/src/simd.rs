//! The two inner loops of paged attention (dot product, scaled add) with AVX2+FMA chosen at
//! run time. Written by hand because candle's CPU vec-ops use SIMD only when the whole crate
//! is compiled for the target CPU, which a portable binary is not.

use std::sync::OnceLock;

type DotFn = unsafe fn(&[f32], &[f32]) -> f32;
type AxpyFn = unsafe fn(f32, &[f32], &mut [f32]);
type DotBf16Fn = unsafe fn(&[f32], &[u16]) -> f32;
type AxpyBf16Fn = unsafe fn(f32, &[u16], &mut [f32]);

struct Kernels {
    dot: DotFn,
    axpy: AxpyFn,
    dot_bf16: DotBf16Fn,
    axpy_bf16: AxpyBf16Fn,
}

fn kernels() -> &'static Kernels {
    static K: OnceLock<Kernels> = OnceLock::new();
    K.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
            return Kernels {
                dot: x86::dot_avx2,
                axpy: x86::axpy_avx2,
                dot_bf16: x86::dot_bf16_avx2,
                axpy_bf16: x86::axpy_bf16_avx2,
            };
        }
        Kernels { dot: dot_scalar, axpy: axpy_scalar, dot_bf16: dot_bf16_scalar, axpy_bf16: axpy_bf16_scalar }
    })
}

/// Σ a[i]·b[i] over `a.len()` elements (`b` at least as long).
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    debug_assert!(b.len() >= a.len());
    // SAFETY: the chosen kernel's CPU features were detected at run time; lengths are checked.
    unsafe { (kernels().dot)(a, &b[..a.len()]) }
}

/// y[i] += alpha·x[i].
#[inline]
pub fn axpy(alpha: f32, x: &[f32], y: &mut [f32]) {
    debug_assert_eq!(x.len(), y.len());
    let n = x.len().min(y.len());
    // SAFETY: as in `dot`.
    unsafe { (kernels().axpy)(alpha, &x[..n], &mut y[..n]) }
}

/// Σ a[i]·b[i] with `b` in bf16 (raw bits), accumulated in f32 (`b` at least as long).
#[inline]
pub fn dot_bf16(a: &[f32], b: &[u16]) -> f32 {
    debug_assert!(b.len() >= a.len());
    // SAFETY: as in `dot`.
    unsafe { (kernels().dot_bf16)(a, &b[..a.len()]) }
}

/// y[i] += alpha·x[i] with `x` in bf16 (raw bits).
#[inline]
pub fn axpy_bf16(alpha: f32, x: &[u16], y: &mut [f32]) {
    debug_assert_eq!(x.len(), y.len());
    let n = x.len().min(y.len());
    // SAFETY: as in `dot`.
    unsafe { (kernels().axpy_bf16)(alpha, &x[..n], &mut y[..n]) }
}

/// A bf16 value (raw bits) as f32: exact, bf16 is the top half of an f32.
pub(crate) fn widen(b: u16) -> f32 {
    f32::from_bits(u32::from(b) << 16)
}

fn dot_bf16_scalar(a: &[f32], b: &[u16]) -> f32 {
    let mut acc = [0f32; 8];
    let ca = a.chunks_exact(8);
    let cb = b.chunks_exact(8);
    let tail: f32 = ca.remainder().iter().zip(cb.remainder()).map(|(x, &y)| x * widen(y)).sum();
    for (x, y) in ca.zip(cb) {
        for k in 0..8 {
            acc[k] += x[k] * widen(y[k]);
        }
    }
    acc.iter().sum::<f32>() + tail
}

fn axpy_bf16_scalar(alpha: f32, x: &[u16], y: &mut [f32]) {
    for (yi, &xi) in y.iter_mut().zip(x) {
        *yi += alpha * widen(xi);
    }
}

fn dot_scalar(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let ca = a.chunks_exact(8);
    let cb = b.chunks_exact(8);
    let tail: f32 = ca.remainder().iter().zip(cb.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in ca.zip(cb) {
        for k in 0..8 {
            acc[k] += x[k] * y[k];
        }
    }
    acc.iter().sum::<f32>() + tail
}

fn axpy_scalar(alpha: f32, x: &[f32], y: &mut [f32]) {
    for (yi, xi) in y.iter_mut().zip(x) {
        *yi += alpha * xi;
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use std::arch::x86_64::*;

    /// The sum of the 8 lanes (the same order everywhere: halves, pairs, then the last two).
    #[target_feature(enable = "avx2,fma")]
    pub(crate) fn hsum(v: __m256) -> f32 {
        let s = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps(s, s, 1)))
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn dot_avx2(a: &[f32], b: &[f32]) -> f32 {
        let n = a.len();
        let (pa, pb) = (a.as_ptr(), b.as_ptr());
        let mut acc0 = _mm256_setzero_ps();
        let mut acc1 = _mm256_setzero_ps();
        let mut i = 0;
        // SAFETY (all loads): i + 16 <= n or i + 8 <= n, and both slices hold n elements.
        while i + 16 <= n {
            unsafe {
                acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(i)), _mm256_loadu_ps(pb.add(i)), acc0);
                acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(i + 8)), _mm256_loadu_ps(pb.add(i + 8)), acc1);
            }
            i += 16;
        }
        while i + 8 <= n {
            unsafe {
                acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(i)), _mm256_loadu_ps(pb.add(i)), acc0);
            }
            i += 8;
        }
        let mut r = hsum(_mm256_add_ps(acc0, acc1));
        while i < n {
            r += a[i] * b[i];
            i += 1;
        }
        r
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn axpy_avx2(alpha: f32, x: &[f32], y: &mut [f32]) {
        let n = x.len();
        let va = _mm256_set1_ps(alpha);
        let (px, py) = (x.as_ptr(), y.as_mut_ptr());
        let mut i = 0;
        while i + 8 <= n {
            // SAFETY: i + 8 <= n and both slices hold n elements.
            unsafe {
                let r = _mm256_fmadd_ps(va, _mm256_loadu_ps(px.add(i)), _mm256_loadu_ps(py.add(i)));
                _mm256_storeu_ps(py.add(i), r);
            }
            i += 8;
        }
        while i < n {
            y[i] += alpha * x[i];
            i += 1;
        }
    }

    /// 8 bf16 values at `p` as f32 (exact).
    #[target_feature(enable = "avx2,fma")]
    unsafe fn widen8(p: *const u16) -> __m256 {
        // SAFETY: the caller guarantees 8 readable values at p.
        let h = unsafe { _mm_loadu_si128(p.cast::<__m128i>()) };
        _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16))
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn dot_bf16_avx2(a: &[f32], b: &[u16]) -> f32 {
        let n = a.len();
        let (pa, pb) = (a.as_ptr(), b.as_ptr());
        let mut acc0 = _mm256_setzero_ps();
        let mut acc1 = _mm256_setzero_ps();
        let mut i = 0;
        // SAFETY (all loads): i + 16 <= n or i + 8 <= n, and both slices hold n elements.
        while i + 16 <= n {
            unsafe {
                acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(i)), widen8(pb.add(i)), acc0);
                acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(i + 8)), widen8(pb.add(i + 8)), acc1);
            }
            i += 16;
        }
        while i + 8 <= n {
            unsafe {
                acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(i)), widen8(pb.add(i)), acc0);
            }
            i += 8;
        }
        let mut r = hsum(_mm256_add_ps(acc0, acc1));
        while i < n {
            r += a[i] * super::widen(b[i]);
            i += 1;
        }
        r
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn axpy_bf16_avx2(alpha: f32, x: &[u16], y: &mut [f32]) {
        let n = x.len();
        let va = _mm256_set1_ps(alpha);
        let (px, py) = (x.as_ptr(), y.as_mut_ptr());
        let mut i = 0;
        while i + 8 <= n {
            // SAFETY: i + 8 <= n and both slices hold n elements.
            unsafe {
                let r = _mm256_fmadd_ps(va, widen8(px.add(i)), _mm256_loadu_ps(py.add(i)));
                _mm256_storeu_ps(py.add(i), r);
            }
            i += 8;
        }
        while i < n {
            y[i] += alpha * super::widen(x[i]);
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simd_matches_scalar() {
        for n in [1, 7, 8, 15, 16, 64, 100, 128] {
            let a: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin()).collect();
            let b: Vec<f32> = (0..n).map(|i| (i as f32 * 0.11).cos()).collect();
            let want: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
            assert!((dot(&a, &b) - want).abs() < 1e-4, "n={n}");
            let mut y = b.clone();
            axpy(0.5, &a, &mut y);
            for i in 0..n {
                assert!((y[i] - (b[i] + 0.5 * a[i])).abs() < 1e-6);
            }
        }
    }

    /// The bf16 kernels (dispatched and scalar) against the f32 ones on widened values: the
    /// same sums, as widening is exact.
    #[test]
    fn bf16_kernels_match_f32_on_widened_values() {
        for n in [1, 7, 8, 15, 16, 64, 100, 129] {
            let a: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin()).collect();
            let b: Vec<u16> = (0..n).map(|i| half::bf16::from_f32((i as f32 * 0.11).cos()).to_bits()).collect();
            let bw: Vec<f32> = b.iter().map(|&x| widen(x)).collect();
            let want = dot(&a, &bw);
            assert!((dot_bf16(&a, &b) - want).abs() < 1e-4, "n={n}");
            assert!((dot_bf16_scalar(&a, &b) - want).abs() < 1e-4, "n={n}");
            let (mut y, mut y_scalar, mut y_f32) = (a.clone(), a.clone(), a.clone());
            axpy_bf16(0.5, &b, &mut y);
            axpy_bf16_scalar(0.5, &b, &mut y_scalar);
            axpy(0.5, &bw, &mut y_f32);
            for i in 0..n {
                assert!((y[i] - y_f32[i]).abs() < 1e-6 && (y_scalar[i] - y_f32[i]).abs() < 1e-6);
            }
        }
    }
}
