//! The packed step on CUDA with goodput's kernels (`crate::cuda`): per layer, add+RMSNorm,
//! the fused QKV matmul, QKV split + RoPE + KV write, paged attention, the O matmul,
//! add+RMSNorm, the fused gate|up matmul, SwiGLU and the down matmul (the matmuls of up to
//! four rows streamed by `cuda::gemv`, more by cuBLAS) — 9 launches where the
//! candle-op path (`Llama::forward` on other devices) takes ~35 and three host uploads. The
//! step's positions, slots and block tables go to the device once, not per layer.

use crate::cuda::{self, Heads, Rope, StepDevice};
use crate::error::{EngineError, Result};
use crate::kv_cache::KvCache;
use crate::model::{Linear, Llama, StepBatch};
use candle_core::quantized::QMatMul;
use candle_core::{DType, Device, Tensor};

impl Linear {
    /// [`Linear::forward`], with the weights streamed by [`cuda::gemv`] for a few rows.
    fn forward_cuda(&self, x: &Tensor) -> Result<Tensor> {
        let y = match &self.w {
            QMatMul::Tensor(w) => cuda::gemv(x, w)?,
            _ => None,
        };
        match (y, &self.b) {
            (Some(y), Some(b)) => Ok(y.broadcast_add(b)?),
            (Some(y), None) => Ok(y),
            (None, _) => self.forward(x),
        }
    }
}

impl Llama {
    pub(crate) fn forward_cuda(&self, batch: &StepBatch, kv: &KvCache) -> Result<Tensor> {
        let spec = &self.spec;
        let (t, d) = (batch.tokens.len(), spec.head_dim());
        let h = Heads { hq: spec.num_heads, hkv: spec.num_kv_heads, d };
        let (eps, scale) = (spec.rms_norm_eps as f32, 1.0 / (d as f32).sqrt());
        let step = StepDevice::upload(&batch.positions, &batch.meta, &self.device)?;
        let ids = Tensor::from_slice(&batch.tokens, t, &self.device)?;
        let rope = Rope { cos: &self.cos, sin: &self.sin, interleaved: self.interleaved };
        let mut x = self.embed.index_select(&ids, 0)?;
        // The MLP output of the layer before, added into the residual by the next norm.
        let mut delta: Option<Tensor> = None;
        for (l, layer) in self.layers.iter().enumerate() {
            let (Some(qkv), Some(gate_up)) = (&layer.qkv, &layer.gate_up) else {
                return Err(EngineError::Other(format!("layer {l} has no fused projections")));
            };
            let (x1, hn) = cuda::add_rms_norm(&x, delta.as_ref(), &layer.attn_norm, eps)?;
            let qkv = qkv.forward_cuda(&hn)?;
            let q = cuda::qkv_rope_cache(&qkv, rope, &step, &kv.k[l], &kv.v[l], h)?;
            let a = cuda::attention(&q, &kv.k[l], &kv.v[l], &step, h, scale)?;
            let o = layer.o.forward_cuda(&a.reshape((t, h.hq * d))?)?;
            let (x2, hn) = cuda::add_rms_norm(&x1, Some(&o), &layer.mlp_norm, eps)?;
            x = x2;
            delta = Some(layer.down.forward_cuda(&cuda::silu_mul(&gate_up.forward_cuda(&hn)?)?)?);
        }
        if batch.sample_rows.is_empty() {
            return Ok(Tensor::zeros((0, spec.vocab_size), DType::F32, &Device::Cpu)?);
        }
        let rows = Tensor::from_slice(&batch.sample_rows, batch.sample_rows.len(), &self.device)?;
        let x = x.index_select(&rows, 0)?;
        let delta = delta.map(|dl| dl.index_select(&rows, 0)).transpose()?;
        let (_, hn) = cuda::add_rms_norm(&x, delta.as_ref(), &self.norm, eps)?;
        Ok(self.lm_head.forward_cuda(&hn)?.to_dtype(DType::F32)?)
    }
}
