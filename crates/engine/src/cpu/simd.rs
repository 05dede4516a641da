//! The two inner loops of paged attention (dot product, scaled add) with AVX2+FMA chosen at
//! run time, each written once over the load of its second operand (f32, or bf16 widened).
//! Written by hand because candle's CPU vec-ops use SIMD only when the whole crate is compiled
//! for the target CPU, which a portable binary is not.

use std::sync::OnceLock;

/// Whether this CPU has AVX2 and FMA (detected once); the other kernels dispatch on it too.
pub fn has_avx2() -> bool {
    static A: OnceLock<bool> = OnceLock::new();
    *A.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
        }
        #[cfg(not(target_arch = "x86_64"))]
        false
    })
}

/// Σ a[i]·b[i] over `a.len()` elements (`b` at least as long), accumulated in f32; `b` in f32
/// or in bf16 (raw bits, `u16`).
#[inline]
pub fn dot<T: Lane>(a: &[f32], b: &[T]) -> f32 {
    debug_assert!(b.len() >= a.len());
    let b = &b[..a.len()];
    #[cfg(target_arch = "x86_64")]
    if has_avx2() {
        // SAFETY: AVX2 and FMA were detected at run time; both slices hold a.len() values.
        return unsafe { x86::dot_avx2(a, b) };
    }
    dot_scalar(a, b)
}

/// Four dot products of `a[0..4]` with one f32 row `b` (all `b.len()` long): each chunk of `b`
/// loaded once for the four, the four sums reduced together (attention's scores of a query
/// group against one key).
#[inline]
pub fn dot4(a: [&[f32]; 4], b: &[f32]) -> [f32; 4] {
    assert!(a.iter().all(|x| x.len() == b.len()), "dot4: every row must be as long as b");
    #[cfg(target_arch = "x86_64")]
    if has_avx2() {
        // SAFETY: AVX2 and FMA were detected at run time; every slice holds b.len() values.
        return unsafe { x86::dot4_avx2(a, b) };
    }
    a.map(|x| dot_scalar(x, b))
}

/// y[i] += alpha·x[i], `x` in f32 or in bf16 (raw bits, `u16`).
#[inline]
pub fn axpy<T: Lane>(alpha: f32, x: &[T], y: &mut [f32]) {
    debug_assert_eq!(x.len(), y.len());
    let n = x.len().min(y.len());
    let (x, y) = (&x[..n], &mut y[..n]);
    #[cfg(target_arch = "x86_64")]
    if has_avx2() {
        // SAFETY: as in `dot`.
        return unsafe { x86::axpy_avx2(alpha, x, y) };
    }
    axpy_scalar(alpha, x, y)
}

/// What [`dot`] and [`axpy`] read their second operand as: `f32`, or `u16` holding bf16 bits
/// (widened exactly, bf16 being the top half of an f32). The loops are written once over it;
/// only the load differs. Sealed: implemented for these two alone.
pub trait Lane: sealed::Load {}
impl Lane for f32 {}
impl Lane for u16 {}

mod sealed {
    use crate::cpu::common::widen;
    #[cfg(target_arch = "x86_64")]
    use std::arch::x86_64::*;

    pub trait Load: Copy {
        fn to_f32(self) -> f32;
        /// 8 consecutive values at `p` as f32 lanes.
        ///
        /// # Safety
        /// AVX2 must be available and 8 values readable at `p`.
        #[cfg(target_arch = "x86_64")]
        unsafe fn load8(p: *const Self) -> __m256;
    }

    impl Load for f32 {
        #[inline(always)]
        fn to_f32(self) -> f32 {
            self
        }
        #[cfg(target_arch = "x86_64")]
        #[inline]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn load8(p: *const f32) -> __m256 {
            // SAFETY: the caller guarantees 8 readable values at p.
            unsafe { _mm256_loadu_ps(p) }
        }
    }

    impl Load for u16 {
        #[inline(always)]
        fn to_f32(self) -> f32 {
            widen(self)
        }
        #[cfg(target_arch = "x86_64")]
        #[inline]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn load8(p: *const u16) -> __m256 {
            // SAFETY: the caller guarantees 8 readable values at p.
            let h = unsafe { _mm_loadu_si128(p.cast::<__m128i>()) };
            _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16))
        }
    }
}

fn dot_scalar<T: Lane>(a: &[f32], b: &[T]) -> f32 {
    let mut acc = [0f32; 8];
    let ca = a.chunks_exact(8);
    let cb = b.chunks_exact(8);
    let tail: f32 = ca.remainder().iter().zip(cb.remainder()).map(|(x, &y)| x * y.to_f32()).sum();
    for (x, y) in ca.zip(cb) {
        for k in 0..8 {
            acc[k] += x[k] * y[k].to_f32();
        }
    }
    acc.iter().sum::<f32>() + tail
}

fn axpy_scalar<T: Lane>(alpha: f32, x: &[T], y: &mut [f32]) {
    for (yi, &xi) in y.iter_mut().zip(x) {
        *yi += alpha * xi.to_f32();
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::Lane;
    use crate::cpu::common::x86::hsum;
    use std::arch::x86_64::*;

    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn dot_avx2<T: Lane>(a: &[f32], b: &[T]) -> f32 {
        let n = a.len();
        let (pa, pb) = (a.as_ptr(), b.as_ptr());
        let mut acc0 = _mm256_setzero_ps();
        let mut acc1 = _mm256_setzero_ps();
        let mut i = 0;
        // SAFETY (all loads): i + 16 <= n or i + 8 <= n, and both slices hold n elements.
        while i + 16 <= n {
            unsafe {
                acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(i)), T::load8(pb.add(i)), acc0);
                acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(i + 8)), T::load8(pb.add(i + 8)), acc1);
            }
            i += 16;
        }
        while i + 8 <= n {
            unsafe {
                acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(i)), T::load8(pb.add(i)), acc0);
            }
            i += 8;
        }
        let mut r = hsum(_mm256_add_ps(acc0, acc1));
        while i < n {
            r += a[i] * b[i].to_f32();
            i += 1;
        }
        r
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn dot4_avx2(a: [&[f32]; 4], b: &[f32]) -> [f32; 4] {
        let n = b.len();
        let pb = b.as_ptr();
        let p = a.map(|x| x.as_ptr());
        let mut acc = [_mm256_setzero_ps(); 4];
        let mut i = 0;
        while i + 8 <= n {
            // SAFETY: i + 8 <= n and every slice holds n values.
            unsafe {
                let vb = _mm256_loadu_ps(pb.add(i));
                for (acc, p) in acc.iter_mut().zip(&p) {
                    *acc = _mm256_fmadd_ps(_mm256_loadu_ps(p.add(i)), vb, *acc);
                }
            }
            i += 8;
        }
        // [a0+a1, a2+a3, b0+b1, b2+b3 | …] twice, then once more: [Σa, Σb, Σc, Σd] per half.
        let h = _mm256_hadd_ps(_mm256_hadd_ps(acc[0], acc[1]), _mm256_hadd_ps(acc[2], acc[3]));
        let s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
        let mut out = [0f32; 4];
        // SAFETY: out holds 4 f32.
        unsafe { _mm_storeu_ps(out.as_mut_ptr(), s) };
        for (o, x) in out.iter_mut().zip(a) {
            *o += x[i..].iter().zip(&b[i..]).map(|(x, y)| x * y).sum::<f32>();
        }
        out
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn axpy_avx2<T: Lane>(alpha: f32, x: &[T], y: &mut [f32]) {
        let n = x.len();
        let va = _mm256_set1_ps(alpha);
        let (px, py) = (x.as_ptr(), y.as_mut_ptr());
        let mut i = 0;
        while i + 8 <= n {
            // SAFETY: i + 8 <= n and both slices hold n elements.
            unsafe {
                let r = _mm256_fmadd_ps(va, T::load8(px.add(i)), _mm256_loadu_ps(py.add(i)));
                _mm256_storeu_ps(py.add(i), r);
            }
            i += 8;
        }
        while i < n {
            y[i] += alpha * x[i].to_f32();
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::common::widen;

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

    #[test]
    fn dot4_is_four_dots() {
        for n in [1, 7, 8, 16, 64, 100, 576] {
            let rows: Vec<Vec<f32>> =
                (0..4).map(|r| (0..n).map(|i| ((i * 7 + r) as f32 * 0.37).sin()).collect()).collect();
            let b: Vec<f32> = (0..n).map(|i| (i as f32 * 0.11).cos()).collect();
            let got = dot4([&rows[0], &rows[1], &rows[2], &rows[3]], &b);
            for r in 0..4 {
                assert!((got[r] - dot(&rows[r], &b)).abs() < 1e-4, "n={n} row {r}");
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
            assert!((dot(&a, &b) - want).abs() < 1e-4, "n={n}");
            assert!((dot_scalar(&a, &b) - want).abs() < 1e-4, "n={n}");
            let (mut y, mut y_scalar, mut y_f32) = (a.clone(), a.clone(), a.clone());
            axpy(0.5, &b, &mut y);
            axpy_scalar(0.5, &b, &mut y_scalar);
            axpy(0.5, &bw, &mut y_f32);
            for i in 0..n {
                assert!((y[i] - y_f32[i]).abs() < 1e-6 && (y_scalar[i] - y_f32[i]).abs() < 1e-6);
            }
        }
    }
    /// Rows of other lengths are refused, in release builds too, before the kernel reads.
    #[test]
    #[should_panic(expected = "every row must be as long as b")]
    fn dot4_refuses_rows_of_other_lengths() {
        let (a, b) = ([1.0f32; 3], [1.0f32; 64]);
        let _ = dot4([&a, &a, &a, &a], &b);
    }
}
