//! DeepSeek's multi-head latent attention on the packed step. The paged pool holds, per token
//! and layer, only the normed latent `c` (`kv_lora_rank`) and the RoPE key shared by all heads
//! (`qk_rope_head_dim`): one row of `cache_width()` values. Attention runs in the latent
//! space with `kv_b_proj` absorbed, as vLLM's and FlashMLA's decode does: each head's
//! `q_nope · W_UK` is a query against the latent, so the pool is one "KV head" whose rows are
//! the keys (latent ‖ RoPE key) and whose first `kv_lora_rank` values are the values; the
//! latent output goes through `W_UV` per head, then `o_proj`. Prefill takes the same path.
//! [`Mla::decompressed`] is the textbook form (K and V expanded per head, as transformers
//! keeps them), for the reference forward.

use crate::attention::AttnOpts;
use crate::error::Result;
use crate::linear::Linear;
use crate::weights::{Init, TensorSource};
use candle_core::{DType, Tensor};
use goodput_core::{MlaSpec, ModelSpec};

pub(crate) struct Mla {
    pub(crate) spec: MlaSpec,
    pub(crate) heads: usize,
    /// `q_a_proj` and `q_a_layernorm` (absent without `q_lora_rank`).
    pub(crate) q_a: Option<(Linear, Tensor)>,
    /// `q_b_proj` (or `q_proj`): heads × (nope + rope).
    pub(crate) q_b: Linear,
    /// `kv_a_proj_with_mqa`: latent ‖ RoPE key.
    pub(crate) kv_a: Linear,
    pub(crate) kv_a_norm: Tensor,
    /// `kv_b_proj`: heads × (nope + v) from the latent (kept for [`Mla::decompressed`]).
    pub(crate) kv_b: Linear,
    /// `W_UK` `(heads, nope, latent)` and `W_UVᵀ` `(heads, latent, v)`, in the activation dtype.
    pub(crate) w_uk: Tensor,
    pub(crate) w_uv_t: Tensor,
    pub(crate) o: Linear,
    pub(crate) eps: f64,
}

/// The new rows of one MLA step before attention.
pub(crate) struct MlaRows {
    /// `(tokens, heads, nope)` and `(tokens, heads, rope)` (RoPE applied).
    pub q_nope: Tensor,
    pub q_pe: Tensor,
    /// `(tokens, 1, latent + rope)`: what the pool stores.
    pub cache: Tensor,
}

impl Mla {
    pub(crate) fn load(spec: &ModelSpec, src: &mut dyn TensorSource, i: usize, act: DType) -> Result<Self> {
        let m = spec.mla.clone().expect("an MLA layer");
        let (h, nh, p) = (spec.hidden_size, spec.num_heads, format!("model.layers.{i}.self_attn"));
        let qk = m.qk_nope_head_dim + m.qk_rope_head_dim;
        let norm = |src: &mut dyn TensorSource, name: &str, n: usize| -> Result<Tensor> {
            Ok(src.tensor(&format!("{p}.{name}.weight"), &[n], Init::Ones)?.to_dtype(act)?)
        };
        let (q_a, q_b) = match m.q_lora_rank {
            Some(r) => {
                let a = Linear::load(src, &format!("{p}.q_a_proj"), r, h, false, act)?;
                let n = norm(src, "q_a_layernorm", r)?;
                (Some((a, n)), Linear::load(src, &format!("{p}.q_b_proj"), nh * qk, r, false, act)?)
            }
            None => (None, Linear::load(src, &format!("{p}.q_proj"), nh * qk, h, false, act)?),
        };
        let kv_a = Linear::load(src, &format!("{p}.kv_a_proj_with_mqa"), m.cache_width(), h, false, act)?;
        let kv_a_norm = norm(src, "kv_a_layernorm", m.kv_lora_rank)?;
        let kv_b = Linear::load(
            src,
            &format!("{p}.kv_b_proj"),
            nh * (m.qk_nope_head_dim + m.v_head_dim),
            m.kv_lora_rank,
            false,
            act,
        )?;
        let o = Linear::load(src, &format!("{p}.o_proj"), h, nh * m.v_head_dim, false, act)?;
        let w = kv_b.dense_weight()?.to_dtype(act)?.reshape((nh, m.qk_nope_head_dim + m.v_head_dim, m.kv_lora_rank))?;
        let w_uk = w.narrow(1, 0, m.qk_nope_head_dim)?.contiguous()?;
        let w_uv_t = w.narrow(1, m.qk_nope_head_dim, m.v_head_dim)?.transpose(1, 2)?.contiguous()?;
        let mut mla =
            Self { spec: m, heads: nh, q_a, q_b, kv_a, kv_a_norm, kv_b, w_uk, w_uv_t, o, eps: spec.rms_norm_eps };
        mla.pack()?;
        Ok(mla)
    }

    fn pack(&mut self) -> Result<()> {
        for l in [&mut self.q_b, &mut self.kv_a, &mut self.o] {
            l.pack()?;
        }
        if let Some((a, _)) = self.q_a.as_mut() {
            a.pack()?;
        }
        Ok(())
    }

    fn norm(&self, x: &Tensor, w: &Tensor) -> Result<Tensor> {
        Ok(candle_nn::ops::rms_norm(&x.contiguous()?, w, self.eps as f32)?)
    }

    /// Queries and the latent rows of the normed rows `h`; `rope` rotates `(tokens, heads, d)`.
    pub(crate) fn rows(&self, h: &Tensor, rope: &dyn Fn(&Tensor) -> Result<Tensor>) -> Result<MlaRows> {
        let m = &self.spec;
        let t = h.dim(0)?;
        let q = match &self.q_a {
            Some((a, n)) => self.q_b.forward(&self.norm(&a.forward(h)?, n)?)?,
            None => self.q_b.forward(h)?,
        };
        let q = q.reshape((t, self.heads, m.qk_nope_head_dim + m.qk_rope_head_dim))?;
        let q_nope = q.narrow(2, 0, m.qk_nope_head_dim)?;
        let q_pe = rope(&q.narrow(2, m.qk_nope_head_dim, m.qk_rope_head_dim)?.contiguous()?)?;
        let ckv = self.kv_a.forward(h)?;
        let c = self.norm(&ckv.narrow(1, 0, m.kv_lora_rank)?, &self.kv_a_norm)?;
        let k_pe = rope(&ckv.narrow(1, m.kv_lora_rank, m.qk_rope_head_dim)?.reshape((t, 1, m.qk_rope_head_dim))?)?;
        let cache = Tensor::cat(&[&c.reshape((t, 1, m.kv_lora_rank))?, &k_pe], 2)?;
        Ok(MlaRows { q_nope, q_pe, cache })
    }

    /// The absorbed queries `(tokens, heads, latent + rope)`: `q_nope · W_UK` ‖ `q_pe`.
    pub(crate) fn absorbed_queries(&self, r: &MlaRows) -> Result<Tensor> {
        let q_lat = r.q_nope.transpose(0, 1)?.contiguous()?.matmul(&self.w_uk)?; // (heads, t, latent)
        Ok(Tensor::cat(&[&q_lat.transpose(0, 1)?, &r.q_pe], 2)?.contiguous()?)
    }

    /// `o_proj` of the latent attention output `(tokens, heads, latent)` through `W_UV`.
    pub(crate) fn output(&self, o_lat: &Tensor) -> Result<Tensor> {
        let t = o_lat.dim(0)?;
        let o = o_lat.transpose(0, 1)?.contiguous()?.matmul(&self.w_uv_t)?; // (heads, t, v)
        self.o.forward(&o.transpose(0, 1)?.reshape((t, self.heads * self.spec.v_head_dim))?)
    }

    /// Attention options of the absorbed form: one latent head whose first `kv_lora_rank`
    /// values are V; the softmax scale of `qk_head_dim`, times YaRN's mscale² where the config
    /// gives `mscale_all_dim`.
    pub(crate) fn opts(&self, spec: &ModelSpec) -> AttnOpts {
        AttnOpts { dv: Some(self.spec.kv_lora_rank), ..AttnOpts::scaled(softmax_scale(spec)) }
    }

    /// K and V of every head from cached rows `(positions, 1, latent + rope)`: `(positions,
    /// heads, nope + rope)` and `(positions, heads, v)`.
    pub(crate) fn decompressed(&self, cache: &Tensor) -> Result<(Tensor, Tensor)> {
        let m = &self.spec;
        let n = cache.dim(0)?;
        let c = cache.narrow(2, 0, m.kv_lora_rank)?.reshape((n, m.kv_lora_rank))?;
        let kv = self.kv_b.forward(&c)?.reshape((n, self.heads, m.qk_nope_head_dim + m.v_head_dim))?;
        let k_pe =
            cache.narrow(2, m.kv_lora_rank, m.qk_rope_head_dim)?.broadcast_as((n, self.heads, m.qk_rope_head_dim))?;
        let k = Tensor::cat(&[&kv.narrow(2, 0, m.qk_nope_head_dim)?, &k_pe.contiguous()?], 2)?;
        Ok((k, kv.narrow(2, m.qk_nope_head_dim, m.v_head_dim)?.contiguous()?))
    }
}

/// DeepSeek's softmax scale: `(nope + rope)^-½`, times `mscale(factor, mscale_all_dim)²` when
/// the RoPE scaling gives `mscale_all_dim`.
pub fn softmax_scale(spec: &ModelSpec) -> f32 {
    let base = 1.0 / (spec.head_dim() as f64).sqrt();
    let m = match &spec.rope_scaling {
        Some(s) if s.rope_type != "default" => match s.mscale_all_dim.filter(|&m| m != 0.0) {
            Some(all) => goodput_core::arch::yarn_mscale(s.factor, all),
            None => 1.0,
        },
        _ => 1.0,
    };
    (base * m * m) as f32
}
