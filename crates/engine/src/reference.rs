//! A deliberately simple single-sequence runner over a contiguous KV cache: the reference the
//! packed, paged, batched engine is compared with in tests. It shares the weights (the linear
//! layers are the same math) but not the batching, positions, paging or attention code.

use crate::error::Result;
use crate::model::Llama;
use candle_core::{Tensor, D};

pub struct ReferenceRunner<'a> {
    model: &'a Llama,
    k: Vec<Option<Tensor>>,
    v: Vec<Option<Tensor>>,
    pos: usize,
}

impl<'a> ReferenceRunner<'a> {
    pub fn new(model: &'a Llama) -> Self {
        let n = model.layers.len();
        Self { model, k: vec![None; n], v: vec![None; n], pos: 0 }
    }

    /// Feeds `tokens` after those already seen; returns the last position's logits (f32).
    pub fn forward(&mut self, tokens: &[u32]) -> Result<Vec<f32>> {
        let m = self.model;
        let spec = &m.spec;
        let (t, d) = (tokens.len(), spec.head_dim());
        let (hq, hkv) = (spec.num_heads, spec.num_kv_heads);
        let ids = Tensor::from_slice(tokens, t, &m.device)?;
        let cos = m.cos.narrow(0, self.pos, t)?;
        let sin = m.sin.narrow(0, self.pos, t)?;
        let mut x = m.embed.index_select(&ids, 0)?.to_dtype(m.act_dtype)?;
        let ctx = self.pos + t;
        let pos = self.pos;
        let mask: Vec<f32> =
            (0..t).flat_map(|i| (0..ctx).map(move |j| if j <= pos + i { 0.0 } else { f32::NEG_INFINITY })).collect();
        let mask = Tensor::from_vec(mask, (1, t, ctx), &m.device)?.to_dtype(m.act_dtype)?;
        for (l, layer) in m.layers.iter().enumerate() {
            let h = m.rms_norm(&x, &layer.attn_norm)?;
            let q = m.rope(&layer.q.forward(&h)?.reshape((t, hq, d))?, &cos, &sin)?;
            let k = m.rope(&layer.k.forward(&h)?.reshape((t, hkv, d))?, &cos, &sin)?;
            let v = layer.v.forward(&h)?.reshape((t, hkv, d))?;
            let k = match &self.k[l] {
                Some(prev) => Tensor::cat(&[prev, &k], 0)?,
                None => k,
            };
            let v = match &self.v[l] {
                Some(prev) => Tensor::cat(&[prev, &v], 0)?,
                None => v,
            };
            self.k[l] = Some(k.clone());
            self.v[l] = Some(v.clone());
            // (hq, t, d) against (hq, ctx, d): repeat each kv head for its query heads.
            let rep = |x: &Tensor| -> Result<Tensor> {
                let x = x.transpose(0, 1)?.contiguous()?; // (hkv, ctx, d)
                let mut parts = Vec::with_capacity(hq);
                for h in 0..hkv {
                    let head = x.get(h)?;
                    parts.extend(std::iter::repeat_n(head, hq / hkv));
                }
                Ok(Tensor::stack(&parts, 0)?)
            };
            let (k, v) = (rep(&k)?, rep(&v)?);
            let q = q.transpose(0, 1)?.contiguous()?;
            let att = (q.matmul(&k.transpose(1, 2)?.contiguous()?)? / (d as f64).sqrt())?;
            let att = candle_nn::ops::softmax(&att.broadcast_add(&mask)?, D::Minus1)?;
            let a = att.matmul(&v)?.transpose(0, 1)?.reshape((t, hq * d))?;
            x = (x + layer.o.forward(&a)?)?;
            x = (&x + m.mlp(layer, &x)?)?;
        }
        self.pos = ctx;
        let last = x.narrow(0, t - 1, 1)?;
        let logits = m.lm_head.forward(&m.rms_norm(&last, &m.norm)?)?;
        Ok(logits.to_dtype(candle_core::DType::F32)?.flatten_all()?.to_vec1()?)
    }

    /// Greedy generation of `n` tokens after `prompt`, with the logits of each step.
    pub fn generate(&mut self, prompt: &[u32], n: usize) -> Result<(Vec<u32>, Vec<Vec<f32>>)> {
        let mut out = Vec::with_capacity(n);
        let mut all = Vec::with_capacity(n);
        let mut logits = self.forward(prompt)?;
        for i in 0..n {
            let tok = argmax(&logits);
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
}

/// Index of the largest value (first on ties).
pub fn argmax(v: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x > v[best] {
            best = i;
        }
    }
    best as u32
}
