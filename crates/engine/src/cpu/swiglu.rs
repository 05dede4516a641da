//! SwiGLU on the CPU in one pass: `silu(gate) · up` from the fused gate|up product's rows,
//! with the sigmoid's exponential a polynomial the compiler vectorizes (`common::exp_poly`)
//! instead of libm's `expf` one value at a time, and no tensor for `silu(gate)` between. Taken
//! only where the weights are bf16 (their results need not match f32 bit for bit); f32 runs
//! keep candle's ops.

use crate::cpu::common::exp_poly;
use candle_core::{CpuStorage, CustomOp1, DType, Layout, Result, Shape, Tensor};
use rayon::prelude::*;

/// `silu(y[:, :i]) · y[:, i:]` for `y` `(m, 2i)` f32 on the CPU; `None` for other inputs.
pub fn swiglu(y: &Tensor) -> Result<Option<Tensor>> {
    if !y.device().is_cpu() || y.dtype() != DType::F32 || y.rank() != 2 || y.dim(1)? % 2 != 0 {
        return Ok(None);
    }
    Ok(Some(y.contiguous()?.apply_op1_no_bwd(&SwiGlu)?))
}

/// `x · sigmoid(x)`, the sigmoid from `e^(−|x|)` (never overflows).
#[inline(always)]
fn silu(x: f32) -> f32 {
    let e = exp_poly(-x.abs());
    let s = if x >= 0.0 { 1.0 / (1.0 + e) } else { e / (1.0 + e) };
    x * s
}

struct SwiGlu;

impl CustomOp1 for SwiGlu {
    fn name(&self) -> &'static str {
        "swiglu"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let (CpuStorage::F32(y), Some((a, b))) = (s, l.contiguous_offsets()) else {
            candle_core::bail!("swiglu: a contiguous f32 tensor only")
        };
        let (m, two_i) = l.shape().dims2()?;
        let i = two_i / 2;
        let mut out = vec![0f32; m * i];
        out.par_chunks_mut(i.max(1)).zip(y[a..b].par_chunks(two_i.max(1))).for_each(|(o, row)| {
            let (g, u) = row.split_at(i);
            for ((o, &g), &u) in o.iter_mut().zip(g).zip(u) {
                *o = silu(g) * u;
            }
        });
        Ok((CpuStorage::F32(out), Shape::from((m, i))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    #[test]
    fn matches_candle_silu_times_up_and_refuses_other_inputs() {
        let (m, i) = (5usize, 37usize);
        let v: Vec<f32> = (0..m * 2 * i).map(|k| ((k * 7919) % 2001) as f32 / 100.0 - 10.0).collect();
        let y = Tensor::from_vec(v, (m, 2 * i), &Device::Cpu).unwrap();
        let got = swiglu(&y).unwrap().unwrap();
        let want = (candle_nn::ops::silu(&y.narrow(1, 0, i).unwrap()).unwrap() * y.narrow(1, i, i).unwrap()).unwrap();
        let d = (got - want).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
        assert!(d < 1e-5, "max abs diff {d}");
        // Far tails: silu(−100) is about 0 (not NaN: e^−87 is where the exponential stops),
        // silu(100) is 100.
        let t = Tensor::from_vec(vec![-100f32, 100.0, 1.0, 1.0], (1, 4), &Device::Cpu).unwrap();
        let r = swiglu(&t).unwrap().unwrap().to_vec2::<f32>().unwrap();
        assert!(r[0][0].abs() < 1e-30, "{r:?}");
        assert!((r[0][1] - 100.0).abs() < 1e-4, "{r:?}");
        assert!(swiglu(&t.to_dtype(DType::BF16).unwrap()).unwrap().is_none());
        assert!(swiglu(&Tensor::zeros((2, 3), DType::F32, &Device::Cpu).unwrap()).unwrap().is_none());
    }
}
