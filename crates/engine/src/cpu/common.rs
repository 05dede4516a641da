//! The small pieces several CPU kernels share: bf16 widening, the AVX2 horizontal sum, the
//! pointer parallel tasks write disjoint parts of one output through, and the turn back of
//! the few-rows kernels' transposed output. A leaf: it imports no other module of the crate.

/// A bf16 value (raw bits) as f32: exact, bf16 is the top half of an f32.
pub(crate) fn widen(b: u16) -> f32 {
    f32::from_bits(u32::from(b) << 16)
}

/// A pointer the parallel tasks of one product write disjoint columns through (the panels of
/// `bf16.rs`, the tiles of `bf16_dot.rs`).
#[derive(Clone, Copy)]
pub(crate) struct OutPtr(pub(crate) *mut f32);
// SAFETY: every task writes its own columns of the output (see `bf16::panels`,
// `bf16_dot::matmul`).
unsafe impl Send for OutPtr {}
unsafe impl Sync for OutPtr {}
impl OutPtr {
    pub(crate) fn get(self) -> *mut f32 {
        self.0
    }
}

/// `(m, n)` row-major from the `(n, m)` the few-rows kernels write (each task a contiguous run).
pub(crate) fn untranspose(out_t: Vec<f32>, m: usize, n: usize) -> Vec<f32> {
    if m == 1 {
        return out_t;
    }
    let mut out = vec![0f32; m * n];
    for (j, row) in out_t.chunks_exact(m).enumerate() {
        for (i, &v) in row.iter().enumerate() {
            out[i * n + j] = v;
        }
    }
    out
}

/// `e^x` for `x ≤ 0` (softmax weights, SiLU's sigmoid) in arithmetic the compiler vectorizes: `x = n ln 2 + r`
/// with `|r| ≤ ln 2 / 2`, a degree-6 Taylor polynomial of `e^r` (relative error < 3e-7 on
/// that interval, about 2 ulp), times `2^n` built in the exponent bits. Below −87 it gives
/// ~1e-38 instead of a denormal or 0.
pub(crate) fn exp_poly(x: f32) -> f32 {
    // Rounding by adding and subtracting 1.5 · 2^23 (nearest, ties to even; |x| < 2^22),
    // not `round()`, which is a libm call on baseline x86-64 and stops vectorization.
    const SHIFT: f32 = 12_582_912.0;
    let x = x.max(-87.0);
    let n = (x * std::f32::consts::LOG2_E + SHIFT) - SHIFT;
    let r = x - n * 0.693_145_75 - n * 1.428_606_8e-6;
    let p = 1.0 + r * (1.0 + r * (0.5 + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0))))));
    p * f32::from_bits(((n as i32 + 127) as u32) << 23)
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

    /// `2^x` for `x ≤ 0` (−∞ and anything below −126 give 0): `x = n + f`, `|f| ≤ 1/2`, a
    /// degree-6 Taylor polynomial of `2^f` (relative error < 2e-7), scaled by `2^n`.
    #[target_feature(enable = "avx512f")]
    pub(crate) unsafe fn exp2(x: __m512) -> __m512 {
        let x = _mm512_max_ps(x, _mm512_set1_ps(-200.0));
        let n = _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(x);
        let f = _mm512_sub_ps(x, n);
        // ln2^k / k!
        const C: [f32; 7] =
            [1.0, std::f32::consts::LN_2, 0.240_226_5, 0.055_504_11, 0.009_618_129, 0.001_333_355_8, 0.000_154_035_3];
        let mut p = _mm512_set1_ps(C[6]);
        for &c in C[..6].iter().rev() {
            p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(c));
        }
        _mm512_scalef_ps(p, n)
    }

    /// `silu(x) · u` on 16 lanes, the sigmoid from `e = e^(−|x|)` ∈ (0, 1] (never overflows):
    /// `1 / (1 + e)` for `x ≥ 0`, `e / (1 + e)` below. SwiGLU's one formula on AVX-512
    /// (`swiglu.rs`, and the tiles' fused gate|up epilogue in `amx.rs`), so both round alike.
    #[target_feature(enable = "avx512f")]
    pub(crate) unsafe fn silu_mul(x: __m512, u: __m512) -> __m512 {
        let one = _mm512_set1_ps(1.0);
        // SAFETY: AVX-512F is enabled for this function; `exp2` needs nothing more.
        let e = unsafe { exp2(_mm512_mul_ps(_mm512_abs_ps(x), _mm512_set1_ps(-std::f32::consts::LOG2_E))) };
        let neg = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(x, _mm512_setzero_ps());
        let s = _mm512_div_ps(_mm512_mask_blend_ps(neg, one, e), _mm512_add_ps(one, e));
        _mm512_mul_ps(_mm512_mul_ps(x, s), u)
    }
}

/// Values in [-1, 1] from a xorshift generator seeded by `seed` (tests of `bf16.rs` and
/// `bf16_dot.rs`).
#[cfg(test)]
pub(crate) fn test_values(seed: u64) -> impl FnMut() -> f32 {
    let mut s = seed | 1;
    move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s % 2001) as f32 / 1000.0 - 1.0
    }
}
