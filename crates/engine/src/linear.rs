//! A linear layer of the model (dense or quantized weights, an optional bias, a packed bf16
//! copy for `vdpbf16ps`) and the fusing of several into one matmul.

use crate::cpu::bf16_dot::{self, Packed};
use crate::cpu::{bf16, skinny};
use crate::error::Result;
use crate::fp8::{self, Fp8Weight};
use crate::weights::{Init, TensorSource};
use candle_core::quantized::QMatMul;
use candle_core::{DType, Module, Tensor};

/// A linear layer, possibly quantized, with an optional bias.
pub struct Linear {
    pub(crate) w: QMatMul,
    pub(crate) b: Option<Tensor>,
    /// bf16 weights packed for `vdpbf16ps` on CPUs with AVX-512 BF16 ([`Linear::pack`]): a
    /// second copy, so prefill and batched decode products skip packing per call.
    pub(crate) packed: Option<std::sync::Arc<Packed>>,
    /// On CUDA with `--dtype fp8`: the weight in e4m3 with per-row scales, which the
    /// small-batch kernels read (`w` then holds `q · scale` rounded to bf16, for the rest).
    pub(crate) fp8: Option<Fp8Weight>,
}

impl Linear {
    /// Bytes of the weight (as a small-batch product reads it: quantized blocks, e4m3 with its
    /// scales, or dense) and the bias.
    pub fn bytes(&self) -> u64 {
        let t = |t: &Tensor| (t.elem_count() * t.dtype().size_in_bytes()) as u64;
        let w = match (&self.fp8, &self.w) {
            (Some(f), _) => f.bytes(),
            (None, QMatMul::QTensor(q)) => q.storage_size_in_bytes() as u64,
            (None, QMatMul::Tensor(x) | QMatMul::TensorF16(x)) => t(x),
        };
        w + self.b.as_ref().map_or(0, t)
    }

    /// The weight as a dense tensor `(out, in)` (quantized blocks dequantized).
    pub(crate) fn dense_weight(&self) -> Result<Tensor> {
        Ok(match &self.w {
            QMatMul::QTensor(q) => q.dequantize(&q.device())?,
            QMatMul::Tensor(x) | QMatMul::TensorF16(x) => x.clone(),
        })
    }

    /// Multiply-accumulates per input row (out × in).
    pub fn macs(&self) -> u64 {
        let dims = match &self.w {
            QMatMul::QTensor(q) => q.shape().dims().to_vec(),
            QMatMul::Tensor(x) | QMatMul::TensorF16(x) => x.dims().to_vec(),
        };
        dims.iter().product::<usize>() as u64
    }

    /// Loads `name.weight` (and `name.bias`, in the activation dtype `act`).
    pub(crate) fn load(
        src: &mut dyn TensorSource,
        name: &str,
        out: usize,
        inp: usize,
        bias: bool,
        act: DType,
    ) -> Result<Self> {
        let w = src.linear(&format!("{name}.weight"), out, inp)?;
        let b = if bias {
            Some(src.tensor(&format!("{name}.bias"), &[out], Init::Std(0.02))?.to_dtype(act)?)
        } else {
            None
        };
        Ok(Self { w, b, packed: None, fp8: None })
    }

    /// Rounds a dense weight through e4m3 with per-row scales ([`fp8::quantize`]), keeping the
    /// e4m3 bytes on CUDA for the small-batch kernels; a quantized weight is left as it is
    /// (`false`). Re-packs for `vdpbf16ps` where it was packed.
    pub(crate) fn quantize_fp8(&mut self) -> Result<bool> {
        let QMatMul::Tensor(w) = &self.w else { return Ok(false) };
        let (f, deq) = fp8::quantize(w)?;
        self.fp8 = deq.device().is_cuda().then_some(f);
        self.w = QMatMul::Tensor(deq);
        if self.packed.take().is_some() {
            self.pack()?;
        }
        Ok(true)
    }

    /// Packs a bf16 weight on the CPU for `vdpbf16ps` where the CPU has it (a no-op
    /// elsewhere). Bytes added.
    pub(crate) fn pack(&mut self) -> Result<usize> {
        let QMatMul::Tensor(w) = &self.w else { return Ok(0) };
        if !w.device().is_cpu() || w.dtype() != DType::BF16 || !bf16_dot::available() {
            return Ok(0);
        }
        let (n, k) = w.dims2()?;
        let bits: Vec<u16> = w.flatten_all()?.to_vec1::<half::bf16>()?.iter().map(|b| b.to_bits()).collect();
        let p = Packed::new(&bits, n, k);
        let bytes = p.bytes();
        self.packed = Some(std::sync::Arc::new(p));
        Ok(bytes)
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let fast = match &self.w {
            QMatMul::Tensor(w) if w.dtype() == DType::BF16 && x.dtype() == DType::F32 => {
                bf16::matmul_t_packed(x, w, self.packed.clone(), bf16::Path::Auto)?
            }
            QMatMul::Tensor(w) => skinny::matmul_t(x, w)?,
            _ => None,
        };
        let y = match fast {
            Some(y) => y,
            None => self.w.forward(x)?,
        };
        Ok(match &self.b {
            Some(b) => y.broadcast_add(b)?,
            None => y,
        })
    }
}

/// One linear layer whose output is the parts' outputs side by side; the parts become views
/// of its weight rows. `None` when a part is quantized or the dtypes differ.
pub(crate) fn fuse<const N: usize>(parts: [&mut Linear; N]) -> Result<Option<Linear>> {
    let mut ws = Vec::with_capacity(N);
    for p in &parts {
        match &p.w {
            QMatMul::Tensor(w) => ws.push(w.clone()),
            _ => return Ok(None),
        }
    }
    if ws.iter().any(|w| w.dtype() != ws[0].dtype()) || parts.iter().any(|p| p.b.is_some() != parts[0].b.is_some()) {
        return Ok(None);
    }
    let w = Tensor::cat(&ws, 0)?;
    let b = match parts[0].b {
        Some(_) => Some(Tensor::cat(&parts.iter().filter_map(|p| p.b.clone()).collect::<Vec<_>>(), 0)?),
        None => None,
    };
    let mut row = 0;
    for (p, part_w) in parts.into_iter().zip(&ws) {
        let n = part_w.dim(0)?;
        p.w = QMatMul::Tensor(w.narrow(0, row, n)?);
        p.b = b.as_ref().map(|b| b.narrow(0, row, n)).transpose()?;
        row += n;
    }
    Ok(Some(Linear { w: QMatMul::Tensor(w), b, packed: None, fp8: None }))
}

/// Rounds a projection through e4m3 ([`Linear::quantize_fp8`]): the fused linear when there is
/// one (its parts then views of its new weight again), else each part. How many it rounded.
pub(crate) fn quantize_fused<const N: usize>(fused: &mut Option<Linear>, parts: [&mut Linear; N]) -> Result<usize> {
    match fused {
        Some(f) => {
            let rounded = f.quantize_fp8()?;
            renarrow(f, parts)?;
            Ok(rounded as usize)
        }
        None => {
            let mut n = 0;
            for p in parts {
                n += p.quantize_fp8()? as usize;
            }
            Ok(n)
        }
    }
}

/// Points the parts of a fused linear at its rows again (after its weight was replaced, as
/// [`Linear::quantize_fp8`] does), so they hold no copy of the old one.
fn renarrow<const N: usize>(fused: &Linear, parts: [&mut Linear; N]) -> Result<()> {
    let QMatMul::Tensor(w) = &fused.w else { return Ok(()) };
    let mut row = 0;
    for p in parts {
        let n = match &p.w {
            QMatMul::Tensor(x) => x.dim(0)?,
            _ => return Ok(()),
        };
        p.w = QMatMul::Tensor(w.narrow(0, row, n)?);
        p.packed = None;
        row += n;
    }
    Ok(())
}
