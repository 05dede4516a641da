//! The one dense reference forward: a deliberately simple single-sequence runner over a
//! contiguous KV cache, the reference the packed, paged, batched engine is compared with in
//! tests and by engine-check. It shares the weights (the linear layers are the same math) but
//! not the batching, positions, paging or attention code: dense causal attention in plain
//! candle ops.
//!
//! With a [`Rounding`] other than [`Rounding::NONE`], the values a GPU bf16 step holds in bf16
//! are rounded to bf16 at the chosen points, in f32 arithmetic otherwise: the rounding study
//! (`numerics.rs`) runs this forward once per scheme.

use crate::attention::{contiguous_attention, AttnOpts};
use crate::block::{Attn, Ffn, Gqa, Layer};
use crate::error::Result;
use crate::mla::{softmax_scale, Mla};
use crate::model::Llama;
use crate::moe::{route, Moe};
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
            let a = match &layer.attn {
                Attn::Gqa(g) => {
                    let a = self.attention(l, g, &h, (&cos, &sin))?;
                    round(g.o.forward(&round(a, r.matmul_in)?)?, r.matmul_out)?
                }
                Attn::Mla(mla) => self.latent(l, mla, &h, (&cos, &sin))?,
            };
            x = (x + a)?;
            x = (&x + self.ffn(layer, &x)?)?;
        }
        self.pos += t;
        Ok(x)
    }

    /// Appends `new` rows to the history `prev` of a layer.
    fn append(prev: &Option<Tensor>, new: Tensor) -> Result<Tensor> {
        Ok(match prev {
            Some(prev) => Tensor::cat(&[prev, &new], 0)?,
            None => new,
        })
    }

    /// Dense causal attention of the new rows `h` of layer `l` over every position so far (or
    /// its window, with its sinks): `(tokens, heads · head_dim)`.
    fn attention(&mut self, l: usize, g: &Gqa, h: &Tensor, (cos, sin): (&Tensor, &Tensor)) -> Result<Tensor> {
        let (m, r) = (self.model, self.rounding);
        let s = &m.spec;
        let (t, d, group) = (h.dim(0)?, s.head_dim(), s.num_heads / s.num_kv_heads);
        let proj = |lin: &crate::model::Linear, heads: usize| -> Result<Tensor> {
            Ok(round(lin.forward(h)?, r.matmul_out)?.reshape((t, heads, d))?)
        };
        let (mut q, mut k) = (proj(&g.q, s.num_heads)?, proj(&g.k, s.num_kv_heads)?);
        if let (Some(qn), Some(kn)) = (&g.q_norm, &g.k_norm) {
            (q, k) = (m.rms_norm(&q, qn)?, m.rms_norm(&k, kn)?);
        }
        let q = round(m.rope(&q, cos, sin)?, r.heads)?;
        let k = round(m.rope(&k, cos, sin)?, r.heads)?;
        let v = round(proj(&g.v, s.num_kv_heads)?, r.heads)?;
        let (k, v) = (Self::append(&self.k[l], k)?, Self::append(&self.v[l], v)?);
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
        // New row i sits at position pos + i and sees positions 0..=pos + i (or its window).
        let (pos, opts) = (self.pos, &g.opts);
        let seen = |i: usize, j: usize| j <= pos + i && j >= opts.first_visible(pos + i);
        let mask: Vec<f32> =
            (0..t).flat_map(|i| (0..ctx).map(move |j| if seen(i, j) { 0.0 } else { f32::NEG_INFINITY })).collect();
        let mask = Tensor::from_vec(mask, (t, ctx), &m.device)?.to_dtype(scores.dtype())?;
        let scores = (scores * f64::from(opts.scale))?.broadcast_add(&mask)?;
        let probs = match &opts.sinks {
            // Each head's sink joins the softmax as one more column, dropped after.
            Some(sinks) => {
                let sink = Tensor::from_slice(sinks, (s.num_heads, 1, 1), &m.device)?.to_dtype(scores.dtype())?;
                let with = Tensor::cat(&[&scores, &sink.broadcast_as((s.num_heads, t, 1))?], 2)?;
                candle_nn::ops::softmax_last_dim(&with.contiguous()?)?.narrow(2, 0, ctx)?
            }
            None => candle_nn::ops::softmax_last_dim(&scores)?,
        };
        let probs = round(probs, r.probs)?;
        Ok(probs.matmul(&v)?.transpose(0, 1)?.reshape((t, s.num_heads * d))?)
    }

    /// MLA as transformers runs it: the latent rows kept, K and V decompressed per head for
    /// every position, dense attention, `o_proj`. (The engine attends in the latent space.)
    fn latent(&mut self, l: usize, mla: &Mla, h: &Tensor, (cos, sin): (&Tensor, &Tensor)) -> Result<Tensor> {
        let m = self.model;
        let t = h.dim(0)?;
        let rows = mla.rows(h, &|x| m.rope(x, cos, sin))?;
        let cache = Self::append(&self.k[l], rows.cache)?;
        self.k[l] = Some(cache.clone());
        let (k, v) = mla.decompressed(&cache)?;
        let q = Tensor::cat(&[&rows.q_nope, &rows.q_pe], 2)?.contiguous()?;
        let o = contiguous_attention(&q, &k, &v, &AttnOpts::scaled(softmax_scale(&m.spec)))?;
        mla.o.forward(&o.reshape((t, ()))?)
    }

    /// The MLP's output for the residual rows `x`: the dense MLP (gate and up by one matmul
    /// where the layer fused them), or the experts token by token.
    fn ffn(&self, layer: &Layer, x: &Tensor) -> Result<Tensor> {
        let (m, r) = (self.model, self.rounding);
        let h = round(m.rms_norm(x, &layer.mlp_norm)?, r.matmul_in)?;
        let mlp = match &layer.ffn {
            Ffn::Dense(mlp) => mlp,
            Ffn::Moe(moe) => return Self::experts(moe, &h),
        };
        let (g, u) = mlp.gate_up(&h)?;
        let (g, u) = (round(g, r.matmul_out)?, round(u, r.matmul_out)?);
        let act = round((candle_nn::ops::silu(&g)? * u)?, r.matmul_in)?;
        round(mlp.down.forward(&act)?, r.matmul_out)
    }

    /// Each token through its own experts, one by one (no grouping), plus the shared expert.
    fn experts(moe: &Moe, h: &Tensor) -> Result<Tensor> {
        let logits = moe.router.forward(h)?.to_dtype(DType::F32)?.to_vec2::<f32>()?;
        let mut rows = Vec::with_capacity(logits.len());
        for (i, row) in logits.iter().enumerate() {
            let x = h.narrow(0, i, 1)?;
            let mut y = x.zeros_like()?;
            for (e, w) in route(&moe.spec, row, moe.correction.as_deref()) {
                y = (y + (moe.expert(&moe.experts[e], &x)? * f64::from(w))?)?;
            }
            if let Some(shared) = &moe.shared {
                y = (y + moe.expert(shared, &x)?)?;
            }
            rows.push(y);
        }
        Ok(Tensor::cat(&rows, 0)?)
    }

    /// The final norm and the LM head of the rows `x`.
    fn head(&self, x: &Tensor) -> Result<Tensor> {
        let (m, r) = (self.model, self.rounding);
        let h = round(m.rms_norm(x, &m.norm)?, r.matmul_in)?;
        round(m.lm_head.forward(&h)?, r.logits)
    }
}
