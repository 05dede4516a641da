//! The one dense reference forward: a deliberately simple single-sequence runner over a
//! contiguous KV cache, the reference the packed, paged, batched engine is compared with in
//! tests and by engine-check. It shares the weights (the linear layers are the same math) but
//! not the batching, positions, paging or attention code: dense causal attention in plain
//! candle ops.
//!
//! With a [`Rounding`] other than [`Rounding::NONE`], the values a GPU bf16 step holds in bf16
//! are rounded to bf16 at the chosen points, in f32 arithmetic otherwise: the rounding study
//! (`numerics.rs`) runs this forward once per scheme.

use crate::error::Result;
use crate::model::{Layer, Llama};
use candle_core::{DType, Tensor};

/// The points of a step whose values are rounded to bf16.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rounding {
    /// Every matmul's input: the normed rows, the attention output, the SwiGLU product.
    pub matmul_in: bool,
    /// The output of each layer matmul (QKV, O, gate|up, down).
    pub matmul_out: bool,
    /// q, k and v after RoPE (k and v as stored in a bf16 KV pool).
    pub heads: bool,
    /// Attention scores `q·kᵀ` (the output of a cuBLAS bf16 score matmul; flash and paged
    /// kernels keep them in f32).
    pub scores: bool,
    /// Attention probabilities (softmax written in place over bf16 scores; FlashAttention-2
    /// also rounds them, as the bf16 operand of its P·V product).
    pub probs: bool,
    /// The LM head's output.
    pub logits: bool,
}

impl Rounding {
    /// Nothing rounded: the model's own arithmetic on its weights.
    pub const NONE: Self =
        Self { matmul_in: false, matmul_out: false, heads: false, scores: false, probs: false, logits: false };
    /// Every value bf16 but the f32 residual stream: goodput's CUDA bf16 step before the LM
    /// head and the long-chunk scores got f32 outputs.
    pub const ALL: Self =
        Self { matmul_in: true, matmul_out: true, heads: true, scores: true, probs: true, logits: true };
    /// goodput's CUDA bf16 step: bf16 matmul operands and outputs, q/k/v and probabilities;
    /// f32 scores (as in the paged kernel and flash kernels) and f32 logits.
    pub const CUDA_BF16: Self = Self { scores: false, logits: false, ..Self::ALL };
}

/// `t` rounded to bf16 (nearest, ties to even) and widened back when `on`.
pub(crate) fn round(t: Tensor, on: bool) -> Result<Tensor> {
    Ok(if on { t.to_dtype(DType::BF16)?.to_dtype(DType::F32)? } else { t })
}

/// One sequence through the dense forward, token batch after token batch.
pub struct ReferenceRunner<'a> {
    model: &'a Llama,
    rounding: Rounding,
    /// Each layer's K and V so far `(positions, kv_heads, head_dim)`.
    k: Vec<Option<Tensor>>,
    v: Vec<Option<Tensor>>,
    pos: usize,
}

impl<'a> ReferenceRunner<'a> {
    pub fn new(model: &'a Llama) -> Self {
        Self::with_rounding(model, Rounding::NONE)
    }

    /// A runner that rounds the values of `rounding` to bf16 (for an f32 model).
    pub fn with_rounding(model: &'a Llama, rounding: Rounding) -> Self {
        let n = model.layers.len();
        Self { model, rounding, k: vec![None; n], v: vec![None; n], pos: 0 }
    }

    /// Feeds `tokens` after those already seen; returns the last position's logits (f32).
    pub fn forward(&mut self, tokens: &[u32]) -> Result<Vec<f32>> {
        let x = self.layers(tokens)?;
        let logits = self.head(&x.narrow(0, tokens.len() - 1, 1)?)?;
        Ok(logits.to_dtype(DType::F32)?.flatten_all()?.to_vec1()?)
    }

    /// Feeds `tokens` after those already seen; returns the logits of each of them (f32).
    pub fn forward_all(&mut self, tokens: &[u32]) -> Result<Vec<Vec<f32>>> {
        let x = self.layers(tokens)?;
        Llama::logits_rows(&self.head(&x)?)
    }

    /// Greedy generation of `n` tokens after `prompt`, with the logits of each step.
    pub fn generate(&mut self, prompt: &[u32], n: usize) -> Result<(Vec<u32>, Vec<Vec<f32>>)> {
        let mut out = Vec::with_capacity(n);
        let mut all = Vec::with_capacity(n);
        let mut logits = self.forward(prompt)?;
        for i in 0..n {
            let tok = crate::sampler::argmax(&logits);
            out.push(tok);
            all.push(logits);
            if i + 1 < n {
                logits = self.forward(&[tok])?;
            } else {
                logits = Vec::new();
            }
        }
        let _ = logits;
        Ok((out, all))
    }

    /// The residual stream `(tokens, hidden)` after every layer, the new tokens' K/V kept.
    fn layers(&mut self, tokens: &[u32]) -> Result<Tensor> {
        let (m, r) = (self.model, self.rounding);
        let t = tokens.len();
        let ids = Tensor::from_slice(tokens, t, &m.device)?;
        let cos = m.cos.narrow(0, self.pos, t)?;
        let sin = m.sin.narrow(0, self.pos, t)?;
        let mut x = m.embed.index_select(&ids, 0)?.to_dtype(m.act_dtype)?;
        for (l, layer) in m.layers.iter().enumerate() {
            let h = round(m.rms_norm(&x, &layer.attn_norm)?, r.matmul_in)?;
            let a = self.attention(l, &h, (&cos, &sin))?;
            x = (x + round(layer.o.forward(&round(a, r.matmul_in)?)?, r.matmul_out)?)?;
            x = (&x + self.mlp(layer, &x)?)?;
        }
        self.pos += t;
        Ok(x)
    }

    /// Dense causal attention of the new rows `h` of layer `l` over every position so far:
    /// `(tokens, heads · head_dim)`.
    fn attention(&mut self, l: usize, h: &Tensor, (cos, sin): (&Tensor, &Tensor)) -> Result<Tensor> {
        let (m, r) = (self.model, self.rounding);
        let (layer, s) = (&m.layers[l], &m.spec);
        let (t, d, group) = (h.dim(0)?, s.head_dim(), s.num_heads / s.num_kv_heads);
        let proj = |lin: &crate::model::Linear, heads: usize| -> Result<Tensor> {
            Ok(round(lin.forward(h)?, r.matmul_out)?.reshape((t, heads, d))?)
        };
        let q = round(m.rope(&proj(&layer.q, s.num_heads)?, cos, sin)?, r.heads)?;
        let k = round(m.rope(&proj(&layer.k, s.num_kv_heads)?, cos, sin)?, r.heads)?;
        let v = round(proj(&layer.v, s.num_kv_heads)?, r.heads)?;
        let append = |prev: &Option<Tensor>, new: Tensor| -> Result<Tensor> {
            Ok(match prev {
                Some(prev) => Tensor::cat(&[prev, &new], 0)?,
                None => new,
            })
        };
        let (k, v) = (append(&self.k[l], k)?, append(&self.v[l], v)?);
        (self.k[l], self.v[l]) = (Some(k.clone()), Some(v.clone()));
        let ctx = self.pos + t;
        // (heads, positions, d), each KV head repeated for its query heads.
        let q = q.transpose(0, 1)?.contiguous()?;
        let kv_heads = |x: Tensor| -> Result<Tensor> {
            let x = x.transpose(0, 1)?.contiguous()?; // (hkv, ctx, d)
            Ok(x.unsqueeze(1)?.repeat((1, group, 1, 1))?.reshape((s.num_heads, ctx, d))?)
        };
        let (k, v) = (kv_heads(k)?, kv_heads(v)?);
        // kᵀ made contiguous: a single decode row against a transposed view takes another
        // gemm path, which sums in another order.
        let scores = round(q.matmul(&k.t()?.contiguous()?)?, r.scores)?;
        // New row i sits at position pos + i and sees positions 0..=pos + i.
        let pos = self.pos;
        let mask: Vec<f32> =
            (0..t).flat_map(|i| (0..ctx).map(move |j| if j <= pos + i { 0.0 } else { f32::NEG_INFINITY })).collect();
        let mask = Tensor::from_vec(mask, (t, ctx), &m.device)?.to_dtype(scores.dtype())?;
        let scores = (scores * (1.0 / (d as f64).sqrt()))?.broadcast_add(&mask)?;
        let probs = round(candle_nn::ops::softmax_last_dim(&scores)?, r.probs)?;
        Ok(probs.matmul(&v)?.transpose(0, 1)?.reshape((t, s.num_heads * d))?)
    }

    /// The MLP's output for the residual rows `x` (gate and up by one matmul where the layer
    /// fused them).
    fn mlp(&self, layer: &Layer, x: &Tensor) -> Result<Tensor> {
        let (m, r) = (self.model, self.rounding);
        let h = round(m.rms_norm(x, &layer.mlp_norm)?, r.matmul_in)?;
        let (g, u) = m.gate_up(layer, &h)?;
        let (g, u) = (round(g, r.matmul_out)?, round(u, r.matmul_out)?);
        let act = round((candle_nn::ops::silu(&g)? * u)?, r.matmul_in)?;
        round(layer.down.forward(&act)?, r.matmul_out)
    }

    /// The final norm and the LM head of the rows `x`.
    fn head(&self, x: &Tensor) -> Result<Tensor> {
        let (m, r) = (self.model, self.rounding);
        let h = round(m.rms_norm(x, &m.norm)?, r.matmul_in)?;
        round(m.lm_head.forward(&h)?, r.logits)
    }
}
