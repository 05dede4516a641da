//! RoPE on the CPU in one pass over the rows of a step: each token's heads rotated by its row
//! of the cos and sin tables, read where they lie (q and k as column ranges of the fused
//! q|k|v product, so no copy of them is made first) and written as a new `(tokens, heads,
//! head_dim)` tensor. The loop is the formula candle's `rope_thd` and `rope_i` compute, in the
//! same order (so the values are bit for bit theirs), compiled for AVX-512 and AVX2 and chosen
//! at run time. candle's CPU kernels index every value through the layout one at a time: at a
//! 2048-token SmolLM2 prefill RoPE took 4 % of the step, more than the KV write and the
//! residual add together.

use candle_core::{CpuStorage, CustomOp3, DType, Layout, Result, Shape, Tensor};
use rayon::prelude::*;
use std::mem::MaybeUninit;

/// `x` rotated: `x` is `(tokens, heads · head_dim)` (a column range of a wider product, its
/// rows at any stride) or `(tokens, heads, head_dim)` with each token's heads side by side,
/// f32 on the CPU; `cos` and `sin` are `(tokens, head_dim / 2)` f32. Pairs `(2i, 2i + 1)` when
/// `interleaved`, else `(i, i + head_dim / 2)`. `None` for anything else (candle's ops then).
pub fn apply(x: &Tensor, cos: &Tensor, sin: &Tensor, head_dim: usize, interleaved: bool) -> Result<Option<Tensor>> {
    let f32_cpu = |t: &Tensor| t.device().is_cpu() && t.dtype() == DType::F32;
    if !(f32_cpu(x) && f32_cpu(cos) && f32_cpu(sin)) || head_dim == 0 || !head_dim.is_multiple_of(2) {
        return Ok(None);
    }
    let Some((t, n, _)) = rows(x.layout(), head_dim) else { return Ok(None) };
    if !n.is_multiple_of(head_dim) || cos.dims() != [t, head_dim / 2] || sin.dims() != [t, head_dim / 2] {
        return Ok(None);
    }
    let (cos, sin) = (cos.contiguous()?, sin.contiguous()?);
    Ok(Some(x.apply_op3_no_bwd(&cos, &sin, &Rope { head_dim, interleaved })?))
}

/// `x`'s layout as rows: tokens, values per token (heads · `d`, side by side), and the row
/// stride; `None` for any other layout.
fn rows(l: &Layout, d: usize) -> Option<(usize, usize, usize)> {
    match (l.dims(), l.stride()) {
        (&[t, n], &[rs, 1]) => Some((t, n, rs)),
        (&[t, h, dd], &[rs, sh, 1]) if dd == d && (sh == d || h == 1) => Some((t, h * d, rs)),
        _ => None,
    }
}

struct Rope {
    head_dim: usize,
    interleaved: bool,
}

impl CustomOp3 for Rope {
    fn name(&self) -> &'static str {
        "rope-rows"
    }

    fn cpu_fwd(
        &self,
        x: &CpuStorage,
        xl: &Layout,
        c: &CpuStorage,
        cl: &Layout,
        s: &CpuStorage,
        sl: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (CpuStorage::F32(x), CpuStorage::F32(c), CpuStorage::F32(s)) = (x, c, s) else {
            candle_core::bail!("rope-rows: f32 only")
        };
        let (Some((c0, c1)), Some((s0, s1))) = (cl.contiguous_offsets(), sl.contiguous_offsets()) else {
            candle_core::bail!("rope-rows: contiguous cos and sin only")
        };
        let (d, half) = (self.head_dim, self.head_dim / 2);
        let Some((t, n, rs)) = rows(xl, d) else { candle_core::bail!("rope-rows: rows of heads side by side only") };
        if d == 0 || d % 2 != 0 || n % d != 0 {
            candle_core::bail!("rope-rows: rows of {n} values are not whole heads of an even {d}");
        }
        if t > 0 && (xl.start_offset() + (t - 1) * rs + n > x.len() || c1 - c0 != t * half || s1 - s0 != t * half) {
            candle_core::bail!("rope-rows: {t} rows of {n} do not fit the storage or the tables");
        }
        let (x, c, s) = (&x[xl.start_offset()..], &c[c0..c1], &s[s0..s1]);
        // Every value is written once by its row's rotation: no zeroing pass first.
        let (rotate, mut out) = (kernel(), Vec::<f32>::with_capacity(t * n));
        out.spare_capacity_mut()[..t * n].par_chunks_mut(n.max(1)).enumerate().for_each(|(i, o)| {
            let (ci, si) = (&c[i * half..(i + 1) * half], &s[i * half..(i + 1) * half]);
            // SAFETY: `kernel` chose a build this CPU runs.
            unsafe { rotate(&x[i * rs..i * rs + n], ci, si, d, self.interleaved, o) };
        });
        // SAFETY: the t rows of n values were each written by their rotation (n a multiple of d).
        unsafe { out.set_len(t * n) };
        Ok((CpuStorage::F32(out), Shape::from((t, n / d, d))))
    }
}

/// One token's heads `x` rotated into `o` by its tables `c` and `s` (`d / 2` each).
type RotateFn = unsafe fn(x: &[f32], c: &[f32], s: &[f32], d: usize, interleaved: bool, o: &mut [MaybeUninit<f32>]);

/// The build of [`rotate_body`] for this CPU, chosen once per call (not per token).
fn kernel() -> RotateFn {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx512f") {
            return x86::rotate_avx512;
        }
        if std::is_x86_feature_detected!("avx2") {
            return x86::rotate_avx2;
        }
    }
    rotate_portable
}

/// [`rotate_body`] for any CPU (`unsafe` only to share [`RotateFn`]'s type).
unsafe fn rotate_portable(x: &[f32], c: &[f32], s: &[f32], d: usize, interleaved: bool, o: &mut [MaybeUninit<f32>]) {
    rotate_body(x, c, s, d, interleaved, o)
}

/// candle's formulas: `x1·cos − x2·sin` and `x1·sin + x2·cos` (the sum in either order is
/// the same float). No fused multiply-add: Rust never contracts without being asked.
#[inline(always)]
fn rotate_body(x: &[f32], c: &[f32], s: &[f32], d: usize, interleaved: bool, o: &mut [MaybeUninit<f32>]) {
    let half = d / 2;
    // Every slice cut to its length first, so the loops carry no bounds checks and vectorise.
    let (c, s) = (&c[..half], &s[..half]);
    for (xh, oh) in x.chunks_exact(d).zip(o.chunks_exact_mut(d)) {
        if interleaved {
            for ((o, x), (&c, &s)) in oh.chunks_exact_mut(2).zip(xh.chunks_exact(2)).zip(c.iter().zip(s)) {
                let (a, b) = (x[0], x[1]);
                o[0].write(a * c - b * s);
                o[1].write(a * s + b * c);
            }
        } else {
            let (x1, x2) = xh.split_at(half);
            let (o1, o2) = oh.split_at_mut(half);
            let pairs = o1.iter_mut().zip(o2.iter_mut()).zip(x1.iter().zip(x2));
            for (((o1, o2), (&a, &b)), (&c, &s)) in pairs.zip(c.iter().zip(s)) {
                o1.write(a * c - b * s);
                o2.write(a * s + b * c);
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::rotate_body;
    use std::mem::MaybeUninit;

    /// [`rotate_body`] compiled for AVX-512.
    ///
    /// # Safety
    /// AVX-512F must be available.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn rotate_avx512(
        x: &[f32],
        c: &[f32],
        s: &[f32],
        d: usize,
        interleaved: bool,
        o: &mut [MaybeUninit<f32>],
    ) {
        rotate_body(x, c, s, d, interleaved, o)
    }

    /// [`rotate_body`] compiled for AVX2.
    ///
    /// # Safety
    /// AVX2 must be available.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn rotate_avx2(
        x: &[f32],
        c: &[f32],
        s: &[f32],
        d: usize,
        interleaved: bool,
        o: &mut [MaybeUninit<f32>],
    ) {
        rotate_body(x, c, s, d, interleaved, o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    fn rand(shape: (usize, usize), seed: u64) -> Tensor {
        let mut next = crate::cpu::common::test_values(seed);
        let v: Vec<f32> = (0..shape.0 * shape.1).map(|_| next()).collect();
        Tensor::from_vec(v, shape, &Device::Cpu).unwrap()
    }

    /// Bit for bit candle's `rope_thd` and `rope_i`, on a column range of a wider product (q
    /// and k of a fused q|k|v) and on a contiguous `(tokens, heads, d)`, on every path this
    /// CPU has and on the portable loop.
    #[test]
    fn equals_candle_s_rope_bit_for_bit() {
        let (t, h, d) = (7, 3, 64);
        let y = rand((t, h * d + 40), 1);
        let (cos, sin) = (rand((t, d / 2), 2), rand((t, d / 2), 3));
        let x = y.narrow(1, 8, h * d).unwrap();
        for interleaved in [false, true] {
            let x4 = x.contiguous().unwrap().reshape((1, t, h, d)).unwrap();
            let want = if interleaved {
                let xi = x4.transpose(1, 2).unwrap().contiguous().unwrap();
                candle_nn::rotary_emb::rope_i(&xi, &cos, &sin).unwrap().transpose(1, 2).unwrap()
            } else {
                candle_nn::rotary_emb::rope_thd(&x4, &cos, &sin).unwrap()
            };
            let want: Vec<f32> = want.flatten_all().unwrap().to_vec1().unwrap();
            for input in [x.clone(), x.contiguous().unwrap().reshape((t, h, d)).unwrap()] {
                let got = apply(&input, &cos, &sin, d, interleaved).unwrap().expect("taken");
                assert_eq!(got.dims(), [t, h, d]);
                let got: Vec<f32> = got.flatten_all().unwrap().to_vec1().unwrap();
                assert!(got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()), "interleaved {interleaved}");
            }
            // The portable loop alone, one token.
            let xs: Vec<f32> = x.narrow(0, 2, 1).unwrap().flatten_all().unwrap().to_vec1().unwrap();
            let (c, s): (Vec<f32>, Vec<f32>) = (
                cos.narrow(0, 2, 1).unwrap().flatten_all().unwrap().to_vec1().unwrap(),
                sin.narrow(0, 2, 1).unwrap().flatten_all().unwrap().to_vec1().unwrap(),
            );
            let mut o = vec![std::mem::MaybeUninit::new(0f32); h * d];
            rotate_body(&xs, &c, &s, d, interleaved, &mut o);
            // SAFETY: initialised above (and written by the rotation).
            let o: Vec<f32> = o.iter().map(|v| unsafe { v.assume_init() }).collect();
            assert!(o.iter().zip(&want[2 * h * d..3 * h * d]).all(|(a, b)| a.to_bits() == b.to_bits()));
        }
        // Not taken: bf16, tables of another length, an odd head width.
        let xb = x.to_dtype(DType::BF16).unwrap();
        assert!(apply(&xb, &cos, &sin, d, false).unwrap().is_none());
        assert!(apply(&x, &cos.narrow(0, 0, 3).unwrap(), &sin, d, false).unwrap().is_none());
        assert!(apply(&x, &cos, &sin, 63, false).unwrap().is_none());
    }
}
