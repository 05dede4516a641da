//! SwiGLU on the CPU in one pass: `silu(gate) · up` from the fused gate|up product's rows,
//! 16 values per AVX-512 vector where the CPU has it (`common::x86::exp2`), elsewhere with the
//! sigmoid's exponential a polynomial the compiler vectorizes (`common::exp_poly`) instead of
//! libm's `expf` one value at a time, and no tensor for `silu(gate)` between. (The portable
//! loop alone, on the baseline x86-64 target, cost a third of the MLP's products at prefill.) Taken
//! only where the weights are bf16 (their results need not match f32 bit for bit); f32 runs
//! keep candle's ops.

use crate::cpu::common::exp_poly;
use candle_core::{CpuStorage, CustomOp1, DType, Layout, Result, Shape, Tensor};
use rayon::prelude::*;
use std::mem::MaybeUninit;

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

/// `o[j] = silu(g[j]) · u[j]` for every `j`.
fn fill_row(o: &mut [MaybeUninit<f32>], g: &[f32], u: &[f32]) {
    let mut j0 = 0;
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx512f") {
        // SAFETY: AVX-512F was detected; the slices are as long as `g`.
        j0 = unsafe { x86::fill_row(o, g, u) };
    }
    for j in j0..g.len() {
        o[j].write(silu(g[j]) * u[j]);
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use crate::cpu::common::x86::silu_mul;
    use std::arch::x86_64::*;
    use std::mem::MaybeUninit;

    /// [`super::fill_row`] over whole vectors of 16; returns how many values it wrote.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn fill_row(o: &mut [MaybeUninit<f32>], g: &[f32], u: &[f32]) -> usize {
        let n = g.len().min(u.len()).min(o.len()) / 16 * 16;
        // SAFETY: whole vectors of 16 below n, within the three slices.
        for j in (0..n).step_by(16) {
            unsafe {
                let v = silu_mul(_mm512_loadu_ps(g.as_ptr().add(j)), _mm512_loadu_ps(u.as_ptr().add(j)));
                _mm512_storeu_ps(o.as_mut_ptr().add(j).cast(), v);
            }
        }
        n
    }
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
        let mut out = Vec::<f32>::with_capacity(m * i);
        let rows = out.spare_capacity_mut()[..m * i].par_chunks_mut(i.max(1));
        rows.zip(y[a..b].par_chunks(two_i.max(1))).for_each(|(o, row)| {
            let (g, u) = row.split_at(i);
            fill_row(o, g, u);
        });
        // SAFETY: `fill_row` wrote every one of the m rows of i values.
        unsafe { out.set_len(m * i) };
        Ok((CpuStorage::F32(out), Shape::from((m, i))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    #[test]
    fn the_vector_path_agrees_with_the_portable_one() {
        // Both paths on an AVX-512 host (vectors, then the 7-value tail); the portable one
        // everywhere else.
        let g: Vec<f32> = (0..103).map(|k| ((k * 7919) % 4001) as f32 / 40.0 - 50.0).collect();
        let u: Vec<f32> = (0..103).map(|k| ((k * 104_729) % 997) as f32 / 99.7 - 5.0).collect();
        let mut o = vec![MaybeUninit::new(f32::NAN); g.len()];
        fill_row(&mut o, &g, &u);
        for j in 0..g.len() {
            // SAFETY: every value was initialised above.
            let (got, want) = (unsafe { o[j].assume_init() }, silu(g[j]) * u[j]);
            assert!((got - want).abs() <= 1e-6 * want.abs().max(1.0), "{j}: {got} vs {want}");
        }
    }

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
