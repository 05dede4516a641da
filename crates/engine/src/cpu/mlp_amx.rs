//! A dense MLP of packed bf16 weights on AMX tiles in two products: the fused gate|up product
//! ends in SwiGLU on each 32 × 32 block while it is in L1 and writes bf16 pairs
//! (`amx::swiglu_pairs`), which the down product reads as its `x`. Unfused, a prefill of 2048
//! rows of SmolLM2 wrote the 2048 × 3072 f32 product (25 MB), read it back for SwiGLU, wrote
//! and re-read its 12.5 MB, and rounded it to pairs again: memory traffic that cost about as
//! much as the down product itself on a core streaming 12–18 GB/s. The values are the unfused
//! tile path's bit for bit (the same products, SwiGLU formula and rounding).

use crate::cpu::amx;
use crate::cpu::bf16_dot::{self, Lines, Packed};
use candle_core::{CpuStorage, CustomOp1, DType, Layout, Result, Shape, Tensor};
use std::sync::Arc;

/// Whether [`fused`] takes `m` rows through `gate_up` (`2i × k`, gate rows then up rows) and
/// `down` (`h × i`): tiles for both products and `i` whole panels.
pub fn takes(m: usize, gate_up: &Packed, down: &Packed) -> bool {
    let ((n2, k), (_, i)) = (gate_up.dims(), down.dims());
    n2 == 2 * i && i.is_multiple_of(amx::PANEL) && bf16_dot::available() && amx::takes(m, k) && amx::takes(m, i)
}

/// `down(silu(x · gateᵀ) ⊙ (x · upᵀ))` for `x` (`m × k` f32), `m × h` f32. Needs [`takes`].
pub fn fused(x: &[f32], m: usize, gate_up: &Packed, down: &Packed) -> Vec<f32> {
    assert!(takes(m, gate_up, down), "mlp_amx: a {m}-row MLP these weights do not fit the tiles");
    let ((_, k), (h, i)) = (gate_up.dims(), down.dims());
    let m16 = m.div_ceil(16) * 16;
    let xa = bf16_dot::pack_x_rows(x, m, k, m16);
    // Rows from m stay zero (the down product's padding); the rows before, SwiGLU's.
    let ya = Lines::filled(m16 * i / 2, m * i / 2, |head| {
        amx::swiglu_pairs(&xa, m, k.div_ceil(2), gate_up.panels(), i, head)
    });
    amx::matmul(&ya, m, i / 2, down.panels(), h)
}

/// The MLP of the rows `h` (`(t, k)` f32 on the CPU) through [`fused`]; `None` where it does
/// not take them (the caller runs the products apart).
pub fn forward(h: &Tensor, gate_up: &Arc<Packed>, down: &Arc<Packed>) -> Result<Option<Tensor>> {
    if !h.device().is_cpu() || h.dtype() != DType::F32 || h.rank() != 2 {
        return Ok(None);
    }
    let (m, k) = h.dims2()?;
    if k != gate_up.dims().1 || !takes(m, gate_up, down) {
        return Ok(None);
    }
    Ok(Some(h.contiguous()?.apply_op1_no_bwd(&FusedMlp(gate_up.clone(), down.clone()))?))
}

struct FusedMlp(Arc<Packed>, Arc<Packed>);

impl CustomOp1 for FusedMlp {
    fn name(&self) -> &'static str {
        "mlp-amx"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let (CpuStorage::F32(x), Some((a, b))) = (s, l.contiguous_offsets()) else {
            candle_core::bail!("mlp-amx: a contiguous f32 tensor only")
        };
        let (m, _) = l.shape().dims2()?;
        let out = fused(&x[a..b], m, &self.0, &self.1);
        Ok((CpuStorage::F32(out), Shape::from((m, self.1.dims().0))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::common::test_values;

    /// The unfused tile path: the gate|up product, SwiGLU, the down product.
    fn apart(x: &[f32], m: usize, gate_up: &Packed, down: &Packed) -> Vec<f32> {
        let i = down.dims().1;
        let y = bf16_dot::matmul_packed_on(x, gate_up, m, true);
        let y = Tensor::from_vec(y, (m, 2 * i), &candle_core::Device::Cpu).unwrap();
        let a = crate::cpu::swiglu::swiglu(&y).unwrap().unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
        bf16_dot::matmul_packed_on(&a, down, m, true)
    }

    #[test]
    #[cfg_attr(not(host_amx), ignore = "this CPU has no AMX: the fused MLP never runs here")]
    fn equals_the_products_apart_bit_for_bit() {
        assert!(
            amx::available() && bf16_dot::available(),
            "built on a CPU with AMX, but the tiles were not granted here"
        );
        let (k, i, h) = (96usize, 64usize, 80usize);
        let mut v = test_values(7);
        let gu: Vec<u16> = (0..2 * i * k).map(|_| half::bf16::from_f32(v()).to_bits()).collect();
        let dw: Vec<u16> = (0..h * i).map(|_| half::bf16::from_f32(v()).to_bits()).collect();
        let (gate_up, down) = (Packed::new(&gu, 2 * i, k), Packed::new(&dw, h, i));
        // Whole blocks of 32 rows, a 16-row tail, rows short of a tile, and a task split.
        for m in [2usize, 17, 32, 48, 77, 300] {
            let x: Vec<f32> = (0..m * k).map(|_| 4.0 * v()).collect();
            assert!(takes(m, &gate_up, &down));
            let (got, want) = (fused(&x, m, &gate_up, &down), apart(&x, m, &gate_up, &down));
            assert_eq!(got.len(), m * h);
            let same = got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "m = {m}: the fused MLP differs from the products apart");
        }
        // i not a multiple of 32, or one row: not taken.
        let odd = Packed::new(&dw[..h * 48], h, 48);
        assert!(!takes(4, &Packed::new(&gu[..96 * k], 96, k), &odd));
        assert!(!takes(1, &gate_up, &down));
    }
}
