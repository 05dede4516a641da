//! FP8 weights (`--dtype fp8`): the dense layers' projections (q|k|v, o, gate|up, down) stored
//! as e4m3 with one f32 scale per output channel (max |w| of the row ÷ 448, the largest e4m3
//! value), as vLLM's per-channel FP8 checkpoints are; embeddings, norms, the LM head,
//! activations and the KV cache stay bf16, and the experts of a mixture and MLA's projections
//! keep their own format.
//!
//! What each device does with them:
//! - CUDA: the small-batch matmuls (1–4 rows: decode) read the e4m3 bytes, half of bf16's, and
//!   widen them in registers, the row's scale applied to the f32 sum (`gemv_fp8` in
//!   `kernels/gemv.cuh`); larger products (prefill) multiply a bf16 copy of the dequantized
//!   weights `q · scale` with cuBLAS (no FP8 tensor-core GEMM yet, so the weights take 1.5×
//!   bf16's memory there, not 0.5×). The copy rounds each `q · scale` to bf16, up to 2⁻⁹ of it
//!   away from what the small-batch kernel multiplies.
//! - CPU: the weights are that dequantized copy (at bf16's speed): what the format costs in
//!   accuracy, which `engine-check --dtype fp8` measures.

use crate::error::Result;
use candle_core::{DType, Device, Tensor};
use float8::F8E4M3;
use rayon::prelude::*;

/// The largest finite e4m3 value.
pub const E4M3_MAX: f32 = 448.0;

/// A weight `(out, in)` in e4m3 with one f32 scale per output row, on the weight's device:
/// `w[j][i] ≈ q[j][i] · scale[j]`.
#[derive(Clone, Debug)]
pub struct Fp8Weight {
    /// `(out, in)`, candle's `F8E4M3`.
    pub q: Tensor,
    /// `(out,)`, f32.
    pub scale: Tensor,
}

impl Fp8Weight {
    /// Bytes stored: one per weight and four per row.
    pub fn bytes(&self) -> u64 {
        (self.q.elem_count() + 4 * self.scale.elem_count()) as u64
    }
}

/// The scale of one row: max |w| ÷ 448, so the largest weight maps to e4m3's largest value
/// (1 for a row of zeros, which any scale keeps at zero).
pub fn row_scale(row: &[f32]) -> f32 {
    let amax = row.iter().fold(0f32, |a, x| a.max(x.abs()));
    if amax > 0.0 && amax.is_finite() {
        amax / E4M3_MAX
    } else {
        1.0
    }
}

/// `w` `(out, in)` quantized row by row (e4m3 rounds to nearest, ties to even), and the
/// dequantized weight `q · scale` in `w`'s dtype on `w`'s device (what every product computes
/// with). The rounding runs on the host, one matrix at a time.
pub fn quantize(w: &Tensor) -> Result<(Fp8Weight, Tensor)> {
    let dev = w.device().clone();
    let (n, k) = w.dims2()?;
    let flat = w.to_device(&Device::Cpu)?.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?;
    let mut q = vec![F8E4M3::ZERO; n * k];
    let mut deq = vec![0f32; n * k];
    let mut scales = vec![0f32; n];
    q.par_chunks_mut(k.max(1))
        .zip(deq.par_chunks_mut(k.max(1)))
        .zip(scales.par_iter_mut())
        .zip(flat.par_chunks(k.max(1)))
        .for_each(|(((qr, dr), s), wr)| {
            *s = row_scale(wr);
            for ((q, d), x) in qr.iter_mut().zip(dr.iter_mut()).zip(wr) {
                *q = F8E4M3::from_f32(x / *s);
                *d = q.to_f32() * *s;
            }
        });
    let fp8 = Fp8Weight { q: Tensor::from_vec(q, (n, k), &dev)?, scale: Tensor::from_vec(scales, n, &dev)? };
    let deq = Tensor::from_vec(deq, (n, k), &Device::Cpu)?.to_dtype(w.dtype())?.to_device(&dev)?;
    Ok((fp8, deq))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_scale_to_448_and_round_within_e4m3s_step() {
        // Row 0 peaks at 2.24: scale 0.005, so 2.24 → 448 exactly; row 1 is zeros.
        let w = Tensor::new(&[[2.24f32, -1.1, 0.3, 0.0012], [0.0, 0.0, 0.0, 0.0]], &Device::Cpu).unwrap();
        let (f, deq) = quantize(&w).unwrap();
        let scale = f.scale.to_vec1::<f32>().unwrap();
        assert!((scale[0] - 0.005).abs() < 1e-9);
        assert_eq!(scale[1], 1.0);
        assert_eq!(f.q.dtype(), DType::F8E4M3);
        let q: Vec<f32> = f.q.to_dtype(DType::F32).unwrap().flatten_all().unwrap().to_vec1().unwrap();
        assert_eq!(q[0], 448.0);
        // -1.1 / 0.005 = -220: e4m3 holds 208 and 224 there (step 16 in [128, 256)).
        assert_eq!(q[1], -224.0);
        // 0.3 / 0.005 = 60: on the grid (step 4 in [32, 64)). 0.0012 / 0.005 = 0.24: step 2⁻⁶
        // in [0.125, 0.25), so 15 × 2⁻⁶.
        assert_eq!(q[2], 60.0);
        assert_eq!(q[3], 0.234_375);
        assert_eq!(&q[4..], &[0.0; 4]);
        let deq = deq.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        // Every normal value within half a step: 2⁻⁴ of its size.
        for (x, d) in [2.24f32, -1.1, 0.3, 0.0012].iter().zip(&deq) {
            assert!((x - d).abs() <= x.abs() / 16.0 + 1e-9, "{x} → {d}");
        }
        assert_eq!(f.bytes(), 8 + 8);
    }
}
