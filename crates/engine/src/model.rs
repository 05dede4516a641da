//! One Llama-family decoder (Llama 2/3, Mistral, Qwen2, SmolLM2, TinyLlama) written for a
//! packed step: the new tokens of every scheduled sequence — prefill chunks and single decode
//! tokens together — go through each linear layer as one `(tokens, hidden)` matrix; RoPE uses
//! each token's own position; attention runs per sequence over its K/V in the paged pool; the
//! LM head runs only on the rows that sample.
//!
//! This is the step on candle ops and goodput's CPU kernels (`crate::cpu`). Where goodput's
//! CUDA kernels apply ([`Llama::uses_cuda_kernels`]), [`Llama::forward`] hands the step to
//! `forward_cuda`, and [`Llama::load`] tunes the small-batch matmuls (`tune_cuda`): methods
//! the `cuda` module adds to [`Llama`] (its stub, in builds without the feature, says no
//! kernels apply). This file names no CUDA item.

use crate::attention::{gather_attention, paged_attention, write_kv};
use crate::cpu::bf16_dot::{self, Packed};
use crate::cpu::{bf16, skinny};
use crate::error::{EngineError, Result};
use crate::kv_cache::{AttnMeta, KvCache};
use crate::weights::{Init, TensorSource};
use candle_core::quantized::QMatMul;
use candle_core::{DType, Device, Module, Tensor, D};
use goodput_core::ModelSpec;

/// A linear layer, possibly quantized, with an optional bias.
pub struct Linear {
    pub(crate) w: QMatMul,
    pub(crate) b: Option<Tensor>,
    /// bf16 weights packed for `vdpbf16ps` on CPUs with AVX-512 BF16 ([`Linear::pack`]): a
    /// second copy, so prefill and batched decode products skip packing per call.
    pub(crate) packed: Option<std::sync::Arc<Packed>>,
}

impl Linear {
    /// Bytes of the weight (as stored: quantized blocks or dense) and the bias.
    pub fn bytes(&self) -> u64 {
        let t = |t: &Tensor| (t.elem_count() * t.dtype().size_in_bytes()) as u64;
        let w = match &self.w {
            QMatMul::QTensor(q) => q.storage_size_in_bytes() as u64,
            QMatMul::Tensor(x) | QMatMul::TensorF16(x) => t(x),
        };
        w + self.b.as_ref().map_or(0, t)
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
    fn load(src: &mut dyn TensorSource, name: &str, out: usize, inp: usize, bias: bool, act: DType) -> Result<Self> {
        let w = src.linear(&format!("{name}.weight"), out, inp)?;
        let b = if bias {
            Some(src.tensor(&format!("{name}.bias"), &[out], Init::Std(0.02))?.to_dtype(act)?)
        } else {
            None
        };
        Ok(Self { w, b, packed: None })
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

pub(crate) struct Layer {
    pub(crate) q: Linear,
    pub(crate) k: Linear,
    pub(crate) v: Linear,
    pub(crate) o: Linear,
    pub(crate) gate: Linear,
    pub(crate) up: Linear,
    pub(crate) down: Linear,
    pub(crate) attn_norm: Tensor,
    pub(crate) mlp_norm: Tensor,
    /// q, k and v as one matmul (their weights concatenated at load; `q`, `k`, `v` are then
    /// views of it). Built on CUDA, where each launch costs, and for bf16 weights on CPU,
    /// where each parallel matmul costs a fork-join of the thread pool (f32 weights on CPU stay
    /// apart, so f32 results do not move).
    pub(crate) qkv: Option<Linear>,
    /// gate and up as one matmul, likewise.
    pub(crate) gate_up: Option<Linear>,
}

impl Layer {
    /// Packs the linears a step multiplies by (the fused ones where they exist) for
    /// `vdpbf16ps` ([`Linear::pack`]; a no-op but for bf16 weights on CPUs with AVX-512 BF16).
    pub(crate) fn pack(&mut self) -> Result<()> {
        let mut used: Vec<&mut Linear> = vec![&mut self.o, &mut self.down];
        match self.qkv.as_mut() {
            Some(f) => used.push(f),
            None => used.extend([&mut self.q, &mut self.k, &mut self.v]),
        }
        match self.gate_up.as_mut() {
            Some(f) => used.push(f),
            None => used.extend([&mut self.gate, &mut self.up]),
        }
        for l in used {
            l.pack()?;
        }
        Ok(())
    }

    /// Concatenates q|k|v and gate|up into one weight each (dense weights only; quantized
    /// ones stay apart), leaving the parts as views of the fused tensors: no extra memory.
    pub(crate) fn fuse(&mut self) -> Result<()> {
        self.qkv = fuse([&mut self.q, &mut self.k, &mut self.v])?;
        self.gate_up = fuse([&mut self.gate, &mut self.up])?;
        Ok(())
    }
}

/// One linear layer whose output is the parts' outputs side by side; the parts become views
/// of its weight rows. `None` when a part is quantized or the dtypes differ.
fn fuse<const N: usize>(parts: [&mut Linear; N]) -> Result<Option<Linear>> {
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
    Ok(Some(Linear { w: QMatMul::Tensor(w), b, packed: None }))
}

/// How attention reads the paged pool (the kernel, or the gather reference).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AttentionImpl {
    #[default]
    Paged,
    Gather,
}

/// The inputs of one packed step.
#[derive(Clone, Debug)]
pub struct StepBatch {
    /// New tokens of every sequence, one after the other.
    pub tokens: Vec<u32>,
    /// Position of each new token.
    pub positions: Vec<u32>,
    /// Where each sequence's queries and K/V are.
    pub meta: AttnMeta,
    /// Rows whose logits are wanted (the last new token of each sampling sequence).
    pub sample_rows: Vec<u32>,
}

impl StepBatch {
    pub fn new(block_size: usize) -> Self {
        Self { tokens: Vec::new(), positions: Vec::new(), meta: AttnMeta::new(block_size), sample_rows: Vec::new() }
    }

    /// Adds a sequence computing `tokens` at positions `start..`, over `block_table`.
    pub fn push(&mut self, tokens: &[u32], start: usize, block_table: &[u32], samples: bool) {
        self.tokens.extend_from_slice(tokens);
        self.positions.extend((start..start + tokens.len()).map(|p| p as u32));
        self.meta.push(tokens.len(), start + tokens.len(), block_table);
        if samples {
            self.sample_rows.push(self.tokens.len() as u32 - 1);
        }
    }
}

/// The model: weights and the RoPE tables.
pub struct Llama {
    pub spec: ModelSpec,
    pub(crate) embed: Tensor,
    pub(crate) layers: Vec<Layer>,
    pub(crate) norm: Tensor,
    pub(crate) lm_head: Linear,
    pub(crate) cos: Tensor,
    pub(crate) sin: Tensor,
    pub(crate) interleaved: bool,
    pub device: Device,
    /// The weights' (and KV pool's) dtype.
    pub dtype: DType,
    /// The dtype of activations, norms and RoPE: f32 for bf16 weights on CPU (see
    /// [`activation_dtype`]), else `dtype`.
    pub act_dtype: DType,
    pub attention: AttentionImpl,
}

/// The dtype activations run in for weights of `dtype` on `device`: on CPU, bf16 weights are
/// multiplied by goodput's kernels against f32 activations (`bf16.rs`: bf16 products are
/// exact in f32), so norms, RoPE, softmax and residuals stay in f32; elsewhere the weights'
/// dtype.
pub fn activation_dtype(device: &Device, dtype: DType) -> DType {
    if device.is_cpu() && dtype == DType::BF16 {
        DType::F32
    } else {
        dtype
    }
}

/// RoPE inverse frequencies, with Llama 3 frequency scaling when the spec asks for it.
pub fn rope_inv_freq(spec: &ModelSpec) -> Vec<f64> {
    let d = spec.head_dim();
    let mut f: Vec<f64> = (0..d / 2).map(|i| 1.0 / spec.rope_theta.powf(2.0 * i as f64 / d as f64)).collect();
    if let Some(s) = &spec.rope_scaling {
        let orig = s.original_max_position_embeddings as f64;
        let low_wavelen = orig / s.low_freq_factor;
        let high_wavelen = orig / s.high_freq_factor;
        for x in &mut f {
            let wavelen = 2.0 * std::f64::consts::PI / *x;
            if wavelen > low_wavelen {
                *x /= s.factor;
            } else if wavelen >= high_wavelen {
                let smooth = (orig / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
                *x = (1.0 - smooth) * *x / s.factor + smooth * *x;
            }
        }
    }
    f
}

impl Llama {
    /// Loads every tensor from `src`, checking shapes against `spec`; RoPE tables cover
    /// positions `0..max_len`.
    pub fn load(
        spec: &ModelSpec,
        src: &mut dyn TensorSource,
        max_len: usize,
        device: &Device,
        dtype: DType,
    ) -> Result<Self> {
        let h = spec.hidden_size;
        let d = spec.head_dim();
        let (nq, nkv) = (spec.num_heads * d, spec.num_kv_heads * d);
        let bias = spec.has_qkv_bias();
        let act = activation_dtype(device, dtype);
        let embed = src.tensor("model.embed_tokens.weight", &[spec.vocab_size, h], Init::Std(1.0))?;
        let mut layers = Vec::with_capacity(spec.num_layers);
        for i in 0..spec.num_layers {
            let p = format!("model.layers.{i}");
            let mut layer = Layer {
                q: Linear::load(src, &format!("{p}.self_attn.q_proj"), nq, h, bias, act)?,
                k: Linear::load(src, &format!("{p}.self_attn.k_proj"), nkv, h, bias, act)?,
                v: Linear::load(src, &format!("{p}.self_attn.v_proj"), nkv, h, bias, act)?,
                o: Linear::load(src, &format!("{p}.self_attn.o_proj"), h, nq, false, act)?,
                gate: Linear::load(src, &format!("{p}.mlp.gate_proj"), spec.intermediate_size, h, false, act)?,
                up: Linear::load(src, &format!("{p}.mlp.up_proj"), spec.intermediate_size, h, false, act)?,
                down: Linear::load(src, &format!("{p}.mlp.down_proj"), h, spec.intermediate_size, false, act)?,
                attn_norm: src.tensor(&format!("{p}.input_layernorm.weight"), &[h], Init::Ones)?.to_dtype(act)?,
                mlp_norm: src
                    .tensor(&format!("{p}.post_attention_layernorm.weight"), &[h], Init::Ones)?
                    .to_dtype(act)?,
                qkv: None,
                gate_up: None,
            };
            if device.is_cuda() || act != dtype {
                layer.fuse()?;
            }
            if device.is_cpu() {
                layer.pack()?;
            }
            layers.push(layer);
        }
        let norm = src.tensor("model.norm.weight", &[h], Init::Ones)?.to_dtype(act)?;
        let mut lm_head = if spec.tie_word_embeddings && !src.contains("lm_head.weight") {
            match src.tied_lm_head(spec.vocab_size, h) {
                Some(w) => Linear { w: w?, b: None, packed: None },
                None => Linear { w: QMatMul::Tensor(embed.clone()), b: None, packed: None },
            }
        } else {
            Linear::load(src, "lm_head", spec.vocab_size, h, false, act)?
        };
        if device.is_cpu() {
            lm_head.pack()?;
        }
        let inv = rope_inv_freq(spec);
        let max_len = max_len.max(1);
        let mut angles = Vec::with_capacity(max_len * d / 2);
        for p in 0..max_len {
            angles.extend(inv.iter().map(|f| (p as f64 * f) as f32));
        }
        let angles = Tensor::from_vec(angles, (max_len, d / 2), device)?;
        let model = Self {
            spec: spec.clone(),
            embed,
            layers,
            norm,
            lm_head,
            cos: angles.cos()?.to_dtype(act)?,
            sin: angles.sin()?.to_dtype(act)?,
            interleaved: src.rope_interleaved(),
            device: device.clone(),
            dtype,
            act_dtype: act,
            attention: AttentionImpl::Paged,
        };
        if model.uses_cuda_kernels() && matches!(dtype, DType::BF16 | DType::F16) {
            model.tune_cuda();
        }
        Ok(model)
    }

    fn layer_linears(&self) -> impl Iterator<Item = &Linear> {
        self.layers.iter().flat_map(|l| [&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down])
    }

    /// Bytes of weights one forward step reads: every layer's linear and norm weights, the
    /// final norm and the LM head (the embedding is only gathered row by row).
    pub fn weight_bytes_per_step(&self) -> u64 {
        let t = |t: &Tensor| (t.elem_count() * t.dtype().size_in_bytes()) as u64;
        self.layer_linears().map(Linear::bytes).sum::<u64>()
            + self.layers.iter().map(|l| t(&l.attn_norm) + t(&l.mlp_norm)).sum::<u64>()
            + t(&self.norm)
            + self.lm_head.bytes()
    }

    /// Multiply-accumulates of the linear layers per token, without the LM head.
    pub fn layer_macs_per_token(&self) -> u64 {
        self.layer_linears().map(Linear::macs).sum()
    }

    /// Multiply-accumulates of the LM head per sampled row.
    pub fn lm_head_macs(&self) -> u64 {
        self.lm_head.macs()
    }

    pub(crate) fn rms_norm(&self, x: &Tensor, w: &Tensor) -> Result<Tensor> {
        Ok(candle_nn::ops::rms_norm(x, w, self.spec.rms_norm_eps as f32)?)
    }

    /// Applies RoPE to `x` of shape `(tokens, heads, head_dim)` with per-token `cos`/`sin`
    /// rows `(tokens, head_dim / 2)`.
    pub(crate) fn rope(&self, x: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
        let (t, h, d) = x.dims3()?;
        if self.interleaved {
            let x = x.reshape((1, t, h, d))?.transpose(1, 2)?.contiguous()?;
            let y = candle_nn::rotary_emb::rope_i(&x, cos, sin)?;
            Ok(y.transpose(1, 2)?.reshape((t, h, d))?)
        } else {
            let x = x.reshape((1, t, h, d))?.contiguous()?;
            Ok(candle_nn::rotary_emb::rope_thd(&x, cos, sin)?.reshape((t, h, d))?)
        }
    }

    pub(crate) fn mlp(&self, layer: &Layer, x: &Tensor) -> Result<Tensor> {
        let (g, u) = self.gate_up(layer, &self.rms_norm(x, &layer.mlp_norm)?)?;
        layer.down.forward(&(candle_nn::ops::silu(&g)? * u)?)
    }

    /// The gate and up projections of the normed rows `h`, with one matmul where the layer's
    /// projections are fused.
    pub(crate) fn gate_up(&self, layer: &Layer, h: &Tensor) -> Result<(Tensor, Tensor)> {
        Ok(match &layer.gate_up {
            Some(f) => {
                let y = f.forward(h)?;
                let i = self.spec.intermediate_size;
                (y.narrow(1, 0, i)?, y.narrow(1, i, i)?)
            }
            None => (layer.gate.forward(h)?, layer.up.forward(h)?),
        })
    }

    /// q, k and v of `h` (`(tokens, hidden)`) as `(tokens, heads, head_dim)`, with one matmul
    /// where the layer's projections are fused.
    pub(crate) fn qkv(&self, layer: &Layer, h: &Tensor) -> Result<(Tensor, Tensor, Tensor)> {
        let s = &self.spec;
        let (t, d) = (h.dim(0)?, s.head_dim());
        let (nq, nkv) = (s.num_heads * d, s.num_kv_heads * d);
        let (q, k, v) = match &layer.qkv {
            Some(f) => {
                let y = f.forward(h)?;
                (y.narrow(1, 0, nq)?, y.narrow(1, nq, nkv)?, y.narrow(1, nq + nkv, nkv)?)
            }
            None => (layer.q.forward(h)?, layer.k.forward(h)?, layer.v.forward(h)?),
        };
        Ok((q.reshape((t, s.num_heads, d))?, k.reshape((t, s.num_kv_heads, d))?, v.reshape((t, s.num_kv_heads, d))?))
    }

    /// Runs one packed step: writes the new tokens' K/V into the pool and returns the logits
    /// `(sample_rows, vocab)` in f32.
    pub fn forward(&self, batch: &StepBatch, kv: &KvCache) -> Result<Tensor> {
        let t = batch.tokens.len();
        if t == 0 {
            return Err(EngineError::Other("empty step".into()));
        }
        let spec = &self.spec;
        let d = spec.head_dim();
        if let Some(&p) = batch.positions.iter().max() {
            if p as usize >= self.cos.dim(0)? {
                return Err(EngineError::Other(format!(
                    "position {p} is beyond the RoPE table ({})",
                    self.cos.dim(0)?
                )));
            }
        }
        if self.uses_cuda_kernels() {
            return self.forward_cuda(batch, kv);
        }
        let ids = Tensor::from_slice(&batch.tokens, t, &self.device)?;
        let pos = Tensor::from_slice(&batch.positions, t, &self.device)?;
        let cos = self.cos.index_select(&pos, 0)?;
        let sin = self.sin.index_select(&pos, 0)?;
        let scale = 1.0 / (d as f32).sqrt();
        let mut x = self.embed.index_select(&ids, 0)?.to_dtype(self.act_dtype)?;
        for (l, layer) in self.layers.iter().enumerate() {
            let h = self.rms_norm(&x, &layer.attn_norm)?;
            let (q, k, v) = self.qkv(layer, &h)?;
            let q = self.rope(&q, &cos, &sin)?;
            let k = self.rope(&k, &cos, &sin)?;
            write_kv(&kv.k[l], &kv.v[l], &k, &v, &batch.meta)?;
            let a = match self.attention {
                AttentionImpl::Paged => paged_attention(&q, &kv.k[l], &kv.v[l], &batch.meta, scale)?,
                AttentionImpl::Gather => gather_attention(&q, &kv.k[l], &kv.v[l], &batch.meta, scale)?,
            };
            x = (x + layer.o.forward(&a.reshape((t, spec.num_heads * d))?)?)?;
            x = (&x + self.mlp(layer, &x)?)?;
        }
        if batch.sample_rows.is_empty() {
            // A step of prefill chunks only: nothing to sample (and no zero-sized kernels).
            return Ok(Tensor::zeros((0, spec.vocab_size), DType::F32, &Device::Cpu)?);
        }
        let rows = Tensor::from_slice(&batch.sample_rows, batch.sample_rows.len(), &self.device)?;
        let x = x.index_select(&rows, 0)?;
        let x = self.rms_norm(&x, &self.norm)?;
        Ok(self.lm_head.forward(&x)?.to_dtype(DType::F32)?)
    }

    /// Positions the RoPE tables cover (the longest sequence this model instance runs).
    pub fn max_positions(&self) -> usize {
        self.cos.dim(0).unwrap_or(0)
    }

    /// Every row of logits as a `Vec` (for samplers and tests).
    pub fn logits_rows(logits: &Tensor) -> Result<Vec<Vec<f32>>> {
        Ok(logits.to_dtype(DType::F32)?.to_vec2::<f32>()?)
    }

    /// Greedy token of each row.
    pub fn argmax_rows(logits: &Tensor) -> Result<Vec<u32>> {
        Ok(logits.argmax(D::Minus1)?.to_vec1::<u32>()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::weights::DummySource;
    use goodput_core::Catalog;

    /// Fusing q|k|v and gate|up leaves every part computing what it did (the parts are now
    /// views of the fused weight) and the fused matmul their outputs side by side — with a
    /// bias too (Qwen2's q/k/v).
    #[test]
    fn fused_projections_equal_their_parts() {
        let spec = Catalog::builtin().get("tiny").unwrap().clone();
        let mut src = DummySource { seed: 3, dtype: DType::F32, device: Device::Cpu };
        let m = Llama::load(&spec, &mut src, 8, &Device::Cpu, DType::F32).unwrap();
        let x = Tensor::randn(0f32, 1.0, (3, spec.hidden_size), &Device::Cpu).unwrap();
        let mut layer = Layer {
            q: Linear {
                w: m.layers[0].q.w.clone(),
                b: Some(Tensor::ones(spec.hidden_size, DType::F32, &Device::Cpu).unwrap()),
                packed: None,
            },
            k: Linear {
                w: m.layers[0].k.w.clone(),
                b: Some(Tensor::zeros(spec.num_kv_heads * spec.head_dim(), DType::F32, &Device::Cpu).unwrap()),
                packed: None,
            },
            v: Linear {
                w: m.layers[0].v.w.clone(),
                b: Some(Tensor::full(2f32, spec.num_kv_heads * spec.head_dim(), &Device::Cpu).unwrap()),
                packed: None,
            },
            o: Linear { w: m.layers[0].o.w.clone(), b: None, packed: None },
            gate: Linear { w: m.layers[0].gate.w.clone(), b: None, packed: None },
            up: Linear { w: m.layers[0].up.w.clone(), b: None, packed: None },
            down: Linear { w: m.layers[0].down.w.clone(), b: None, packed: None },
            attn_norm: m.layers[0].attn_norm.clone(),
            mlp_norm: m.layers[0].mlp_norm.clone(),
            qkv: None,
            gate_up: None,
        };
        let before: Vec<Tensor> =
            [&layer.q, &layer.k, &layer.v, &layer.gate, &layer.up].iter().map(|l| l.forward(&x).unwrap()).collect();
        layer.fuse().unwrap();
        let after: Vec<Tensor> =
            [&layer.q, &layer.k, &layer.v, &layer.gate, &layer.up].iter().map(|l| l.forward(&x).unwrap()).collect();
        let same = |a: &Tensor, b: &Tensor| {
            let d = (a - b).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
            assert!(d < 1e-5, "max |Δ| {d}");
        };
        for (a, b) in before.iter().zip(&after) {
            same(a, b);
        }
        let qkv = layer.qkv.as_ref().unwrap().forward(&x).unwrap();
        same(&qkv, &Tensor::cat(&before[..3], 1).unwrap());
        let gate_up = layer.gate_up.as_ref().unwrap().forward(&x).unwrap();
        same(&gate_up, &Tensor::cat(&before[3..], 1).unwrap());
        // No extra memory: the parts are views of the fused weights.
        let QMatMul::Tensor(k) = &layer.k.w else { panic!("k is dense") };
        let QMatMul::Tensor(fused) = &layer.qkv.as_ref().unwrap().w else { panic!("qkv is dense") };
        assert_eq!(k.layout().start_offset(), spec.hidden_size * spec.hidden_size, "k starts after q's rows");
        let (storage, _) = k.storage_and_layout();
        let candle_core::Storage::Cpu(candle_core::CpuStorage::F32(data)) = &*storage else { panic!("f32 on the CPU") };
        assert_eq!(data.len(), fused.elem_count());
    }
}
