//! `x · Wᵀ` with `W` in MXFP4, read in place: blocks of 32 FP4 E2M1 values per weight row (two
//! per byte, the even element in the low nibble), each with an E8M0 scale, decoded with AVX2
//! where the CPU has it (a byte shuffle looks the 16 codes up as small integers, 32 values in a
//! few instructions). Up to 15 rows of `x`, each block is decoded in registers and dotted at
//! once with four rows at a time; from 16 rows, panels of weight rows are decoded for gemm;
//! without AVX2, each row is decoded once into L1 and dotted with every row of `x`. A gpt-oss
//! expert takes 4.25 bits a weight this way instead of 16 (bf16) or 32 (f32): gpt-oss-20b's
//! experts in 10 GiB. Output rows are split across threads.

use crate::cpu::common::untranspose;
use crate::cpu::simd;
use rayon::prelude::*;

/// FP4 E2M1: sign, two exponent bits, one mantissa bit.
pub const FP4: [f32; 16] = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0];

/// A matrix `(n, k)` in MXFP4: `k / 2` bytes and `k / 32` scales per row.
#[derive(Clone, Debug)]
pub struct Mxfp4Matrix {
    pub n: usize,
    pub k: usize,
    pub blocks: Vec<u8>,
    pub scales: Vec<u8>,
}

/// Weight rows per parallel task.
const ROWS_PER_TASK: usize = 16;

/// Rows of `x` up to which each weight block is decoded in registers, once per four rows
/// (`cargo bench --bench engine -- mxfp4`, one gpt-oss-20b expert: 8 rows 3.2 ms and 12 rows
/// 4.6 ms this way, against 4.4 and 6.4 ms decoding each row once and dotting it four rows at a
/// time); from [`PANEL_FROM`] on, panels for gemm.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
const FUSED_UPTO: usize = PANEL_FROM - 1;

/// Rows of `x` from which the weight is decoded by panels and multiplied by gemm (below, each
/// decoded row is dotted with four rows of `x` at a time).
const PANEL_FROM: usize = 16;

/// Bytes and scales that do not make an MXFP4 matrix of `(n, k)`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("MXFP4 matrix ({n}, {k}): {bytes} bytes and {scales} scales do not make whole blocks of 32")]
pub struct Mxfp4Shape {
    pub n: usize,
    pub k: usize,
    pub bytes: usize,
    pub scales: usize,
}

impl Mxfp4Matrix {
    /// Checks the sizes: `k` a multiple of 32, `n·k/2` bytes and `n·k/32` scales.
    pub fn new(n: usize, k: usize, blocks: Vec<u8>, scales: Vec<u8>) -> Result<Self, Mxfp4Shape> {
        if !k.is_multiple_of(32) || blocks.len() != n * k / 2 || scales.len() != n * k / 32 {
            return Err(Mxfp4Shape { n, k, bytes: blocks.len(), scales: scales.len() });
        }
        Ok(Self { n, k, blocks, scales })
    }

    /// The matrix of rows `order` (each row's bytes and scales moved whole).
    pub fn rows(&self, order: &[usize]) -> Self {
        let (rb, rs) = (self.k / 2, self.k / 32);
        let mut blocks = Vec::with_capacity(order.len() * rb);
        let mut scales = Vec::with_capacity(order.len() * rs);
        for &j in order {
            blocks.extend_from_slice(&self.blocks[j * rb..(j + 1) * rb]);
            scales.extend_from_slice(&self.scales[j * rs..(j + 1) * rs]);
        }
        Self { n: order.len(), k: self.k, blocks, scales }
    }

    pub fn bytes(&self) -> usize {
        self.blocks.len() + self.scales.len()
    }

    /// Row `j` decoded into `out` (`k` values).
    pub fn decode_row(&self, j: usize, out: &mut [f32]) {
        let nb = self.k / 32;
        let bytes = &self.blocks[j * self.k / 2..(j + 1) * self.k / 2];
        let scales = &self.scales[j * nb..(j + 1) * nb];
        let out = &mut out[..self.k];
        #[cfg(target_arch = "x86_64")]
        if simd::has_avx2() {
            // SAFETY: AVX2 was detected at run time; `bytes` holds 16 and `out` 32 values per scale.
            return unsafe { x86::decode_row(bytes, scales, out) };
        }
        Self::decode_row_scalar(bytes, scales, out)
    }

    /// [`Mxfp4Matrix::decode_row`] without SIMD: a table lookup and a product per value.
    pub fn decode_row_scalar(bytes: &[u8], scales: &[u8], out: &mut [f32]) {
        for (b, (chunk, &s)) in bytes.chunks_exact(16).zip(scales).enumerate() {
            let f = f32::from_bits(u32::from(s) << 23); // 2^(s − 127); s = 0 gives 0, as subnormal scales round
            let dst = &mut out[b * 32..(b + 1) * 32];
            for (i, &byte) in chunk.iter().enumerate() {
                dst[2 * i] = FP4[usize::from(byte & 0x0f)] * f;
                dst[2 * i + 1] = FP4[usize::from(byte >> 4)] * f;
            }
        }
    }

    /// `x · Wᵀ` for `x` of `m` rows of `k` values: `(m, n)`, row-major.
    pub fn matmul_t(&self, x: &[f32], m: usize) -> Vec<f32> {
        let (n, k) = (self.n, self.k);
        assert_eq!(x.len(), m * k, "mxfp4 matmul_t: x must hold m rows of k values");
        // Column-major while computing (each task owns whole weight rows), then turned.
        let mut out_t = vec![0f32; n * m];
        #[cfg(target_arch = "x86_64")]
        if m <= FUSED_UPTO && simd::has_avx2() {
            // Few rows of x (decode steps, an expert's share of a short prefill): each weight
            // block decoded in registers and used at once, never stored.
            out_t.par_chunks_mut(ROWS_PER_TASK * m).enumerate().for_each(|(task, chunk)| {
                for (i, out) in chunk.chunks_mut(m).enumerate() {
                    let j = task * ROWS_PER_TASK + i;
                    let (bytes, scales) =
                        (&self.blocks[j * k / 2..(j + 1) * k / 2], &self.scales[j * k / 32..(j + 1) * k / 32]);
                    for (c, o) in out.chunks_mut(4).enumerate() {
                        // SAFETY: AVX2 and FMA were detected; every x row holds k = 32 · scales values.
                        unsafe { x86::dot_rows(bytes, scales, &x[4 * c * k..], k, o) };
                    }
                }
            });
            return untranspose(out_t, m, n);
        }
        if m >= PANEL_FROM {
            // Many rows (prefill): panels of rows decoded to f32 once, multiplied by gemm.
            return crate::cpu::bf16::panels_with(x, m, k, n, |r0, rows, buf| {
                buf.resize(rows * k, 0.0);
                for (i, row) in buf.chunks_exact_mut(k).enumerate() {
                    self.decode_row(r0 + i, row);
                }
            });
        }
        out_t.par_chunks_mut(ROWS_PER_TASK * m).enumerate().for_each(|(task, chunk)| {
            let mut row = vec![0f32; k];
            for (i, out) in chunk.chunks_mut(m).enumerate() {
                self.decode_row(task * ROWS_PER_TASK + i, &mut row);
                let mut quads = out.chunks_exact_mut(4);
                for (q, o) in (&mut quads).enumerate() {
                    let r = |i: usize| &x[(4 * q + i) * k..(4 * q + i + 1) * k];
                    o.copy_from_slice(&simd::dot4([r(0), r(1), r(2), r(3)], &row));
                }
                let done = m - quads.into_remainder().len();
                for (r, o) in out.iter_mut().enumerate().skip(done) {
                    *o = simd::dot(&x[r * k..(r + 1) * k], &row);
                }
            }
        });
        untranspose(out_t, m, n)
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use crate::cpu::common::x86::hsum;
    use std::arch::x86_64::*;

    /// FP4 E2M1 codes as twice their value (all integers): the shuffle's table.
    const TWICE: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

    /// Block `b` of a row as 32 f32 lanes of twice its codes' values (unscaled).
    ///
    /// # Safety
    /// AVX2 must be available and 16 bytes readable at `p`.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn block(p: *const u8, table: __m128i) -> [__m256; 4] {
        // SAFETY: as the caller promised.
        unsafe {
            let nibble = _mm_set1_epi8(0x0f);
            let v = _mm_loadu_si128(p.cast());
            let lo = _mm_shuffle_epi8(table, _mm_and_si128(v, nibble));
            let hi = _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(v, 4), nibble));
            let (e0, e1) = (_mm_unpacklo_epi8(lo, hi), _mm_unpackhi_epi8(lo, hi));
            let f = |e: __m128i| _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(e));
            [f(e0), f(_mm_srli_si128(e0, 8)), f(e1), f(_mm_srli_si128(e1, 8))]
        }
    }

    /// `out[r] = x_r · w` for the `out.len()` (≤ 4) rows of `x` (each `k` long) and one weight
    /// row: per block, its 32 values decoded in registers, dotted with each x row unscaled and
    /// the block's sum added at its scale.
    ///
    /// # Safety
    /// AVX2 and FMA must be available; `bytes` must hold 16 bytes per scale, `x` `out.len()`
    /// rows of `k = 32 · scales.len()` values.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn dot_rows(bytes: &[u8], scales: &[u8], x: &[f32], k: usize, out: &mut [f32]) {
        let m = out.len();
        debug_assert!(m <= 4 && k == scales.len() * 32 && x.len() >= m * k && bytes.len() >= k / 2);
        // SAFETY (all below): the lengths are as the caller promised; loads unaligned.
        unsafe {
            let table = _mm_loadu_si128(TWICE.as_ptr().cast());
            let mut acc = [_mm256_setzero_ps(); 4];
            for (b, &s) in scales.iter().enumerate() {
                let half = _mm256_set1_ps(f32::from_bits(u32::from(s) << 23) * 0.5);
                let w = block(bytes.as_ptr().add(b * 16), table);
                for (r, a) in acc.iter_mut().enumerate().take(m) {
                    let xp = x.as_ptr().add(r * k + b * 32);
                    let mut t = _mm256_mul_ps(w[0], _mm256_loadu_ps(xp));
                    t = _mm256_fmadd_ps(w[1], _mm256_loadu_ps(xp.add(8)), t);
                    t = _mm256_fmadd_ps(w[2], _mm256_loadu_ps(xp.add(16)), t);
                    t = _mm256_fmadd_ps(w[3], _mm256_loadu_ps(xp.add(24)), t);
                    *a = _mm256_fmadd_ps(t, half, *a);
                }
            }
            for (o, a) in out.iter_mut().zip(acc) {
                *o = hsum(a);
            }
        }
    }

    /// Each block: 16 bytes → 32 codes (low nibbles the even elements) → twice their values
    /// as i8 by one shuffle each → f32 × half the block's scale (exact: a power of two).
    ///
    /// # Safety
    /// AVX2 must be available; `bytes` must hold 16 bytes and `out` 32 values per scale.
    #[target_feature(enable = "avx2")]
    pub unsafe fn decode_row(bytes: &[u8], scales: &[u8], out: &mut [f32]) {
        debug_assert!(bytes.len() >= scales.len() * 16 && out.len() >= scales.len() * 32);
        // SAFETY (all below): the lengths are as the caller promised; loads and stores unaligned.
        unsafe {
            let table = _mm_loadu_si128(TWICE.as_ptr().cast());
            for (b, &s) in scales.iter().enumerate() {
                let half = _mm256_set1_ps(f32::from_bits(u32::from(s) << 23) * 0.5);
                let dst = out.as_mut_ptr().add(b * 32);
                for (i, w) in block(bytes.as_ptr().add(b * 16), table).into_iter().enumerate() {
                    _mm256_storeu_ps(dst.add(8 * i), _mm256_mul_ps(w, half));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every byte value under every scale: the dispatched decoder (AVX2 here when the CPU has
    /// it) gives the scalar one's values; products of up to 9 rows (quads and a remainder)
    /// match a dense reference.
    #[test]
    fn the_dispatched_decoder_and_products_match_the_scalar_path() {
        let (n, k) = (3, 256 * 2);
        let blocks: Vec<u8> = (0..n * k / 2).map(|i| (i % 256) as u8).collect();
        let scales: Vec<u8> = (0..n * k / 32).map(|i| [0u8, 1, 100, 127, 130, 200, 254][i % 7]).collect();
        let w = Mxfp4Matrix::new(n, k, blocks, scales).unwrap();
        let (mut fast, mut slow) = (vec![0f32; k], vec![0f32; k]);
        for j in 0..n {
            w.decode_row(j, &mut fast);
            let nb = k / 32;
            Mxfp4Matrix::decode_row_scalar(
                &w.blocks[j * k / 2..(j + 1) * k / 2],
                &w.scales[j * nb..(j + 1) * nb],
                &mut slow,
            );
            assert_eq!(fast, slow, "row {j}");
        }
        // Products under scales that keep every sum finite.
        let scales: Vec<u8> = (0..n * k / 32).map(|i| [120u8, 127, 130][i % 3]).collect();
        let w = Mxfp4Matrix::new(n, k, w.blocks.clone(), scales).unwrap();
        let x: Vec<f32> = (0..20 * k).map(|i| ((i * 7919) % 13) as f32 * 0.25 - 1.5).collect();
        for m in [1, 3, 4, 9, 20] {
            products_match(&w, &x, m);
        }
    }

    /// `w.matmul_t` of the first `m` rows of `x` against a dense f64 reference.
    fn products_match(w: &Mxfp4Matrix, x: &[f32], m: usize) {
        let (n, k) = (w.n, w.k);
        let mut slow = vec![0f32; k];
        let y = w.matmul_t(&x[..m * k], m);
        for r in 0..m {
            for j in 0..n {
                w.decode_row(j, &mut slow);
                let want: f64 =
                    x[r * k..(r + 1) * k].iter().zip(&slow).map(|(a, b)| f64::from(*a) * f64::from(*b)).sum();
                let tol = 1e-5 * slow.iter().map(|v| f64::from(v.abs())).sum::<f64>().max(1.0);
                assert!((f64::from(y[r * n + j]) - want).abs() <= tol, "{m} rows: row {r} col {j}");
            }
        }
    }

    /// By hand: byte 0x21 holds 0.5 (code 1, low nibble: element 0) and 1.0 (code 2, element 1);
    /// 0xF8 holds −0 (code 8) and −6 (code 15); scale 128 doubles them.
    #[test]
    fn decoding_and_products_by_hand() {
        let mut blocks = vec![0u8; 32]; // two rows of one block
        blocks[0] = 0x21;
        blocks[1] = 0xF8;
        blocks[16] = 0x77; // row 1: 6, 6 (× 0.5)
        let w = Mxfp4Matrix::new(2, 32, blocks, vec![128, 126]).unwrap();
        let mut row = vec![0f32; 32];
        w.decode_row(0, &mut row);
        assert_eq!(&row[..4], &[1.0, 2.0, -0.0, -12.0]);
        w.decode_row(1, &mut row);
        assert_eq!(&row[..2], &[3.0, 3.0]);
        // x = [1, 1, 1, 1, 0…] and [0, 2, 0, 0, 0…].
        let mut x = vec![0f32; 64];
        x[..4].fill(1.0);
        x[33] = 2.0;
        assert_eq!(w.matmul_t(&x, 2), vec![1.0 + 2.0 - 12.0, 6.0, 4.0, 6.0]);
        assert!(Mxfp4Matrix::new(2, 30, vec![0; 30], vec![0; 2]).is_err());
    }
    /// A safe call with a short `x` panics, in release builds too, before the kernel reads.
    #[test]
    #[should_panic(expected = "x must hold m rows of k values")]
    fn a_short_x_is_refused_before_the_kernel_reads() {
        let (n, k) = (2, 64);
        let w = Mxfp4Matrix::new(n, k, vec![0; n * k / 2], vec![127; n * k / 32]).unwrap();
        let _ = w.matmul_t(&[1.0; 10], 1);
    }
}
