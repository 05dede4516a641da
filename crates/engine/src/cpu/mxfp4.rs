//! `x · Wᵀ` with `W` in MXFP4, read in place: each weight row's blocks of 32 FP4 E2M1 values
//! (two per byte, the even element in the low nibble) and its E8M0 scales are decoded once
//! into an f32 row in L1, then dotted with every row of `x`. A gpt-oss expert takes 4.25 bits
//! a weight this way instead of 16 (bf16) or 32 (f32): gpt-oss-20b's experts in 10 GiB.
//! Output rows are split across threads.

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

impl Mxfp4Matrix {
    /// Checks the sizes: `k` a multiple of 32, `n·k/2` bytes and `n·k/32` scales.
    pub fn new(n: usize, k: usize, blocks: Vec<u8>, scales: Vec<u8>) -> Result<Self, String> {
        if !k.is_multiple_of(32) || blocks.len() != n * k / 2 || scales.len() != n * k / 32 {
            return Err(format!(
                "MXFP4 matrix ({n}, {k}): {} bytes and {} scales do not make whole blocks of 32",
                blocks.len(),
                scales.len()
            ));
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
        for (b, (chunk, &s)) in bytes.chunks_exact(16).zip(&self.scales[j * nb..(j + 1) * nb]).enumerate() {
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
        debug_assert_eq!(x.len(), m * k);
        // Column-major while computing (each task owns whole weight rows), then turned.
        let mut out_t = vec![0f32; n * m];
        out_t.par_chunks_mut(ROWS_PER_TASK * m).enumerate().for_each(|(task, chunk)| {
            let mut row = vec![0f32; k];
            for (i, out) in chunk.chunks_mut(m).enumerate() {
                self.decode_row(task * ROWS_PER_TASK + i, &mut row);
                for (r, o) in out.iter_mut().enumerate() {
                    *o = simd::dot(&x[r * k..(r + 1) * k], &row);
                }
            }
        });
        if m == 1 {
            return out_t;
        }
        let mut out = vec![0f32; m * n];
        for (j, col) in out_t.chunks(m).enumerate() {
            for (r, &v) in col.iter().enumerate() {
                out[r * n + j] = v;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
