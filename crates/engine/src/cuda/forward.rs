//! The packed step on CUDA with goodput's kernels (`kernels.rs`, `gemv.rs`): per layer,
//! add+RMSNorm on an f32 residual stream, the fused QKV matmul, QKV split + RoPE + KV write,
//! paged attention (and the merge of its partitions), the O matmul, add+RMSNorm, the fused
//! gate|up matmul, SwiGLU and the down matmul (at up to four rows by whichever kernel
//! `tune.rs` measured fastest for the shape, cuBLAS above) — 10 launches where the candle-op
//! path (`Llama::forward` on other devices) takes ~35 and three host uploads. The step's
//! positions, slots and block tables go to the device once, not per layer; a step can also run
//! from static buffers inside a CUDA graph (`step_cuda_static`, `graph_serve.rs`).
//!
//! These are methods on the model's own types: `Llama::forward` and `Llama::load` (model.rs)
//! call [`Llama::uses_cuda_kernels`], `forward_cuda` and `tune_cuda`, which the stub of builds
//! without the feature (`off.rs`) also defines.

use crate::block::{Gqa, Layer, Mlp};
use crate::cuda::blas::matmul_nt_f32;
use crate::cuda::device::{ptr, supports};
use crate::cuda::gemv::{gemv, gemv_fp8, gemv_swiglu, gemv_to};
use crate::cuda::gemv_table;
use crate::cuda::kernels::{self, add_rms_norm, qkv_rope_cache, silu_mul, Heads, Rope};
use crate::cuda::launch::has_mma;
use crate::cuda::layout::{flash_group, Split};
use crate::cuda::meta::StepDevice;
use crate::cuda::tune::{tune, tune_swiglu};
use crate::error::{EngineError, Result};
use crate::kv_cache::KvCache;
use crate::model::{AttentionImpl, Linear, Llama, StepBatch};
use candle_core::quantized::QMatMul;
use candle_core::{DType, Device, Tensor};

impl Linear {
    /// [`Linear::forward`], for a few rows by [`gemv_fp8`] on e4m3 weights or the kernel
    /// [`gemv`] picks.
    fn forward_cuda(&self, x: &Tensor) -> Result<Tensor> {
        let y = match (&self.fp8, &self.w) {
            (Some(f), _) => gemv_fp8(x, f)?,
            _ => None,
        };
        let y = match (y, &self.w) {
            (Some(y), _) => Some(y),
            (None, QMatMul::Tensor(w)) => gemv(x, w)?,
            (None, _) => None,
        };
        match (y, &self.b) {
            (Some(y), Some(b)) => Ok(y.broadcast_add(b)?),
            (Some(y), None) => Ok(y),
            (None, _) => self.forward(x),
        }
    }

    /// `silu(gate) · up` of this fused gate|up projection: in the small-batch matmul's
    /// epilogue where [`gemv_swiglu`] applies (one launch), else the product then `silu_mul`.
    fn swiglu_cuda(&self, x: &Tensor) -> Result<Tensor> {
        if self.b.is_none() {
            if let QMatMul::Tensor(w) = &self.w {
                if let Some(y) = gemv_swiglu(x, w, self.fp8.as_ref())? {
                    return Ok(y);
                }
            }
        }
        Ok(silu_mul(&self.forward_cuda(x)?)?)
    }

    /// [`Self::forward_cuda`] with the output in f32, not rounded to the weights' dtype: the
    /// LM head, whose bf16 logits cost the most top-1 agreement with f32 of any rounding in a
    /// bf16 step (`check/numerics.rs`). f32 accumulation either way; the extra bytes written
    /// are the logits' (vocab × rows × 2).
    fn forward_cuda_f32(&self, x: &Tensor) -> Result<Tensor> {
        let y = match &self.w {
            QMatMul::Tensor(w) if w.dtype() != DType::F32 && w.dtype() == x.dtype() => {
                match gemv_to(x, w, DType::F32)? {
                    Some(y) => y,
                    None => matmul_nt_f32(x, w)?,
                }
            }
            // `forward` adds the bias itself.
            _ => return Ok(self.forward(x)?.to_dtype(DType::F32)?),
        };
        match &self.b {
            Some(b) => Ok(y.broadcast_add(&b.to_dtype(DType::F32)?)?),
            None => Ok(y),
        }
    }
}

impl Llama {
    /// Whether steps run goodput's CUDA kernels (fused layer, paged attention on the GPU,
    /// on-device sampling): on a CUDA device, with the paged attention implementation, dense
    /// weights and an attention shape the kernels cover. Otherwise candle ops (the reference).
    pub fn uses_cuda_kernels(&self) -> bool {
        let s = &self.spec;
        self.device.is_cuda()
            && self.attention == AttentionImpl::Paged
            && self.layers.iter().all(|l| l.llama().is_some_and(|(a, m)| a.qkv.is_some() && m.gate_up.is_some()))
            && supports(s.head_dim(), s.num_heads, s.num_kv_heads, self.dtype)
    }

    /// Measures which kernel multiplies each weight shape at 1–4 rows on this GPU
    /// (`tune.rs`): the layers' fused QKV, O, fused gate|up and down matrices and
    /// the LM head, each shape timed over all its layers; then, for the gate|up shapes, whether
    /// SwiGLU in the product's epilogue beats the product followed by `silu_mul`. A failure is
    /// recorded, not raised.
    pub(crate) fn tune_cuda(&self) {
        let linears = self
            .layers
            .iter()
            .filter_map(Layer::llama)
            .flat_map(|(a, m)| [a.qkv.as_ref(), Some(&a.o), m.gate_up.as_ref(), Some(&m.down)]);
        if let Err(e) = tune(&by_shape(linears.flatten().chain([&self.lm_head]))) {
            gemv_table::set_error(format!("gemv tuning stopped: {e}"));
            return;
        }
        // Then whether SwiGLU pays in the gate|up product's epilogue, per shape.
        let gate_up = self.layers.iter().filter_map(Layer::llama).filter_map(|(_, m)| m.gate_up.as_ref());
        if let Err(e) = tune_swiglu(&by_shape(gate_up)) {
            gemv_table::set_error(format!("SwiGLU tuning stopped: {e}"));
        }
    }

    /// Weight bytes one step's `op` (a label of [`Self::forward_cuda_marked`]) reads.
    pub(crate) fn op_weight_bytes(&self, op: &str) -> Option<u64> {
        let sum = |f: &dyn for<'a> Fn((&'a Gqa, &'a Mlp)) -> Option<&'a Linear>| -> u64 {
            self.layers.iter().filter_map(Layer::llama).filter_map(f).map(Linear::bytes).sum()
        };
        Some(match op {
            "qkv matmul" => sum(&|(a, _)| a.qkv.as_ref()),
            "o matmul" => sum(&|(a, _)| Some(&a.o)),
            "gate|up matmul" => sum(&|(_, m)| m.gate_up.as_ref()),
            "down matmul" => sum(&|(_, m)| Some(&m.down)),
            "lm head" => self.lm_head.bytes(),
            _ => return None,
        })
    }

    /// How this model's steps split their contexts and where their long chunks go: the
    /// tensor-core prefill kernel for f16/bf16 weights on a GPU that has its instructions
    /// (unless turned off), cuBLAS for f32.
    pub(crate) fn split(&self) -> Split {
        let (hq, hkv) = (self.spec.num_heads, self.spec.num_kv_heads);
        let mma = matches!(&self.device, Device::Cuda(d) if has_mma(d));
        Split { hkv, force_part_len: None, flash_group: flash_group(hq, hkv, self.dtype != DType::F32 && mma) }
    }

    pub(crate) fn forward_cuda(&self, batch: &StepBatch, kv: &KvCache) -> Result<Tensor> {
        self.forward_cuda_marked(batch, kv, &mut |_| Ok(()))
    }

    /// [`Self::forward_cuda`], calling `mark(op)` after each op is enqueued (with the op's name:
    /// `kernel_timing.rs` records an event there).
    pub(crate) fn forward_cuda_marked(
        &self,
        batch: &StepBatch,
        kv: &KvCache,
        mark: &mut dyn FnMut(&'static str) -> Result<()>,
    ) -> Result<Tensor> {
        let t = batch.tokens.len();
        let step = StepDevice::upload(&batch.positions, batch.meta(), self.split(), &self.device)?;
        let ids = Tensor::from_slice(&batch.tokens, t, &self.device)?;
        let (x, delta) = self.layers_cuda(&step, &ids, kv, mark)?;
        if batch.sample_rows.is_empty() {
            return Ok(Tensor::zeros((0, self.spec.vocab_size), DType::F32, &Device::Cpu)?);
        }
        let rows = Tensor::from_slice(&batch.sample_rows, batch.sample_rows.len(), &self.device)?;
        let x = x.index_select(&rows, 0)?;
        let delta = delta.map(|dl| dl.index_select(&rows, 0)).transpose()?;
        self.head_cuda(&x, delta.as_ref(), mark)
    }

    /// A step whose inputs are already on the device, the sampled ids written to `out`: what a
    /// CUDA graph captures (no host transfer inside). `ids`, `rows`, `params` and `out` are the
    /// graph's static buffers, `step` its padded metadata; `rows` are the rows to sample (a
    /// mixed step's), `None` to sample every row (a decode step's).
    pub(crate) fn step_cuda_static(
        &self,
        step: &StepDevice,
        ids: &Tensor,
        rows: Option<&Tensor>,
        kv: &KvCache,
        params: &Tensor,
        out: &Tensor,
    ) -> Result<()> {
        let mark = &mut |_| Ok(());
        let (mut x, mut delta) = self.layers_cuda(step, ids, kv, mark)?;
        if let Some(rows) = rows {
            x = x.index_select(rows, 0)?;
            delta = delta.map(|d| d.index_select(rows, 0)).transpose()?;
        }
        let logits = self.head_cuda(&x, delta.as_ref(), mark)?;
        kernels::sample_into(&logits, ptr(params)?, ptr(out)?)?;
        Ok(())
    }

    /// The embedding and every layer: the residual stream and the last MLP output (added by
    /// the final norm).
    fn layers_cuda(
        &self,
        step: &StepDevice,
        ids: &Tensor,
        kv: &KvCache,
        mark: &mut dyn FnMut(&'static str) -> Result<()>,
    ) -> Result<(Tensor, Option<Tensor>)> {
        let spec = &self.spec;
        let (t, d) = (ids.dim(0)?, spec.head_dim());
        let h = Heads { hq: spec.num_heads, hkv: spec.num_kv_heads, d };
        let (eps, scale) = (spec.rms_norm_eps as f32, 1.0 / (d as f32).sqrt());
        let rope = Rope { cos: &self.cos, sin: &self.sin, interleaved: self.interleaved };
        // The residual stream is f32 whatever the weights' dtype (`add_rms_norm`).
        let mut x = self.embed.index_select(ids, 0)?.to_dtype(DType::F32)?;
        mark("upload + embed")?;
        // The MLP output of the layer before, added into the residual by the next norm.
        let mut delta: Option<Tensor> = None;
        for (l, layer) in self.layers.iter().enumerate() {
            let Some((attn, mlp)) = layer.llama() else {
                return Err(EngineError::Unsupported(format!(
                    "layer {l} is not the Llama block goodput's CUDA step runs"
                )));
            };
            let (Some(qkv), Some(gate_up)) = (&attn.qkv, &mlp.gate_up) else {
                return Err(EngineError::Internal(format!("layer {l} has no fused projections")));
            };
            let (x1, hn) = add_rms_norm(&x, delta.as_ref(), &layer.attn_norm, eps)?;
            mark("add + rms norm")?;
            let qkv = qkv.forward_cuda(&hn)?;
            mark("qkv matmul")?;
            // Llama layers only: one KV-cache group, layer l in pool l.
            let (k_pool, v_pool, _) = kv.layer(l);
            let q = qkv_rope_cache(&qkv, rope, step, k_pool, v_pool, h)?;
            mark("rope + kv write")?;
            let a = kernels::attention(&q, k_pool, v_pool, step, h, scale)?;
            mark("attention")?;
            let o = attn.o.forward_cuda(&a.reshape((t, h.hq * d))?)?;
            mark("o matmul")?;
            let (x2, hn) = add_rms_norm(&x1, Some(&o), &layer.mlp_norm, eps)?;
            mark("add + rms norm")?;
            x = x2;
            // Where SwiGLU runs in the matmul's epilogue, the step profile's "silu · mul" is 0
            // and its time is the matmul's.
            let act = gate_up.swiglu_cuda(&hn)?;
            mark("gate|up matmul")?;
            mark("silu · mul")?;
            delta = Some(mlp.down.forward_cuda(&act)?);
            mark("down matmul")?;
        }
        Ok((x, delta))
    }

    /// The final norm and the LM head: f32 logits of each row of `x`, never rounded to bf16.
    fn head_cuda(
        &self,
        x: &Tensor,
        delta: Option<&Tensor>,
        mark: &mut dyn FnMut(&'static str) -> Result<()>,
    ) -> Result<Tensor> {
        let (_, hn) = add_rms_norm(x, delta, &self.norm, self.spec.rms_norm_eps as f32)?;
        mark("final norm")?;
        let logits = self.lm_head.forward_cuda_f32(&hn)?;
        mark("lm head")?;
        Ok(logits)
    }
}

/// The dense weights of `linears` grouped by shape and dtype: each shape is tuned over all its
/// layers' matrices.
fn by_shape<'a>(linears: impl Iterator<Item = &'a Linear>) -> Vec<Vec<Tensor>> {
    let mut groups: Vec<Vec<Tensor>> = Vec::new();
    for lin in linears {
        let QMatMul::Tensor(w) = &lin.w else { continue };
        match groups.iter_mut().find(|g| g[0].dims() == w.dims() && g[0].dtype() == w.dtype()) {
            Some(g) => g.push(w.clone()),
            None => groups.push(vec![w.clone()]),
        }
    }
    groups
}
