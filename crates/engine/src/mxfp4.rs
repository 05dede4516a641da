//! gpt-oss's MXFP4 expert weights, read as stored: `{name}_blocks` (u8, `(…, in / 32, 16)`:
//! 32 FP4 E2M1 values per block, two per byte, the even element in the low nibble) and
//! `{name}_scales` (u8, `(…, in / 32)`: E8M0, the power of two `scale − 127`), as
//! openai/gpt-oss-20b stores them and transformers' `convert_moe_packed_tensors` reads them.
//! The engine keeps them packed and multiplies in place (`cpu/mxfp4.rs`, whose
//! `Mxfp4Matrix::decode_row` is the one decoder).

use crate::cpu::mxfp4::Mxfp4Matrix;
use crate::error::{EngineError, Result, TensorProblem};
use crate::weights::TensorSource;
use candle_core::DType;

/// The `experts` matrices `(out, in)` of `name`, packed as stored.
pub fn packed(
    src: &mut dyn TensorSource,
    name: &str,
    experts: usize,
    out: usize,
    inp: usize,
) -> Result<Vec<Mxfp4Matrix>> {
    if !inp.is_multiple_of(32) {
        return Err(EngineError::tensor(name, TensorProblem::NotMxfp4(inp)));
    }
    let nb = inp / 32;
    let blocks =
        src.raw(&format!("{name}_blocks"), &[experts, out, nb, 16], DType::U8)?.flatten_all()?.to_vec1::<u8>()?;
    let scales = src.raw(&format!("{name}_scales"), &[experts, out, nb], DType::U8)?.flatten_all()?.to_vec1::<u8>()?;
    let (eb, es) = (out * inp / 2, out * nb);
    (0..experts)
        .map(|j| {
            Mxfp4Matrix::new(out, inp, blocks[j * eb..(j + 1) * eb].to_vec(), scales[j * es..(j + 1) * es].to_vec())
                .map_err(|e| EngineError::tensor(name, TensorProblem::Mxfp4(e)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// By hand: byte 0x21 holds 0.5 (code 1, low nibble: element 0) and 1.0 (code 2, element 1);
    /// 0xF8 holds −0 (code 8) and −6 (code 15); scale 128 doubles them, 125 divides by 4.
    #[test]
    fn nibbles_and_scales_by_hand() {
        let mut bytes = vec![0u8; 16];
        bytes[0] = 0x21;
        bytes[1] = 0xF8;
        let block = |scale: u8| {
            let m = Mxfp4Matrix::new(1, 32, bytes.clone(), vec![scale]).unwrap();
            let mut row = vec![0f32; 32];
            m.decode_row(0, &mut row);
            row
        };
        assert_eq!(&block(128)[..4], &[1.0, 2.0, -0.0, -12.0]);
        assert_eq!(block(127)[0], 0.5);
        assert_eq!(block(125)[1], 0.25);
    }
}
