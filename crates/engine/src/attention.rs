//! Attention over the paged KV pool (its layout: `kv_cache.rs`), whatever the device: the
//! CPU kernel where it applies (`cpu/paged_attention.rs`), else [`gather_attention`], which
//! copies each sequence's blocks into a contiguous tensor and runs plain candle ops: it is the
//! reference in tests and the path on devices without a kernel. (goodput's CUDA step has its
//! own attention, `cuda/kernels.rs`.)

pub use crate::cpu::paged_attention::AttnOpts;
use crate::cpu::paged_attention::{paged_attention_kernel, write_slots};
use crate::kv_cache::{AttnMeta, AttnSeq};
use candle_core::{DType, Result, Tensor};

/// How attention reads the paged pool (the kernel, or the gather reference).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AttentionImpl {
    #[default]
    Paged,
    Gather,
}

/// Stores `k` and `v` (`(tokens, kv_heads, head_dim)`) of the new tokens in the layer's pools,
/// converted to the pools' dtype.
pub fn write_kv(k_pool: &Tensor, v_pool: &Tensor, k: &Tensor, v: &Tensor, meta: &AttnMeta) -> Result<()> {
    write_rows(k_pool, k, meta)?;
    write_rows(v_pool, v, meta)
}

/// Stores the new tokens' rows `x` (`(tokens, heads, width)`) in `pool`: K or V, or MLA's
/// latent rows.
pub fn write_rows(pool: &Tensor, x: &Tensor, meta: &AttnMeta) -> Result<()> {
    if pool.device().is_cpu() && matches!(pool.dtype(), DType::F32 | DType::BF16) && x.dtype() == DType::F32 {
        return write_slots(pool, &x.contiguous()?, &meta.slot_mapping);
    }
    let (t, h, d) = x.dims3()?;
    let idx = Tensor::from_slice(&meta.slot_mapping, t, x.device())?
        .reshape((t, 1, 1))?
        .broadcast_as((t, h, d))?
        .contiguous()?;
    pool.scatter_set(&idx, &x.to_dtype(pool.dtype())?.contiguous()?, 0)
}

/// Causal attention of the packed queries `q` (`(tokens, heads, head_dim)`, f32) over the
/// paged pools (f32, or bf16 widened in the dot products), read in place by the kernel for
/// decode rows and prefill chunks alike. On other devices or dtypes, the gather path. Returns `(tokens, heads, head_dim)`.
///
/// The kernel beats gathering + candle's matmul/softmax even for long prefill chunks
/// (`cargo bench --bench engine -- attention`, SmolLM2 shape, one layer: 2048-token prefill
/// 0.19 s against 0.39 s; decode at 2048 context 0.33 ms against 9.7 ms).
pub fn paged_attention(
    q: &Tensor,
    k_pool: &Tensor,
    v_pool: &Tensor,
    meta: &AttnMeta,
    opts: &AttnOpts,
) -> Result<Tensor> {
    if !q.device().is_cpu() || q.dtype() != DType::F32 || !matches!(k_pool.dtype(), DType::F32 | DType::BF16) {
        return gather_attention(q, k_pool, v_pool, meta, opts);
    }
    paged_attention_kernel(q, k_pool, v_pool, meta, opts)
}

/// The same attention by gathering each sequence's K/V into a contiguous tensor and using
/// plain candle ops (matmul, mask, softmax). Reference path and non-CPU fallback.
pub fn gather_attention(
    q: &Tensor,
    k_pool: &Tensor,
    v_pool: &Tensor,
    meta: &AttnMeta,
    opts: &AttnOpts,
) -> Result<Tensor> {
    let plain = opts.window.is_none() && opts.sinks.is_none() && opts.dv.is_none();
    let scale = opts.scale;
    // Decode rows (one query each) are gathered and computed together, in one batched
    // matmul: per-sequence ops would cost a handful of kernel launches per sequence and layer
    // on a GPU. Longer chunks go one by one.
    let decodes: Vec<usize> = (0..meta.seqs.len()).filter(|&i| meta.seqs[i].q_len == 1).collect();
    let batched =
        if decodes.len() > 1 && plain { Some(gather_decodes(q, k_pool, v_pool, meta, &decodes, scale)?) } else { None };
    let mut outs = Vec::with_capacity(meta.seqs.len());
    let mut d = 0;
    for (i, s) in meta.seqs.iter().enumerate() {
        match &batched {
            Some(b) if decodes.get(d) == Some(&i) => {
                outs.push(b.narrow(0, d, 1)?);
                d += 1;
            }
            _ => outs.push(gather_one(q, k_pool, v_pool, meta, s, opts)?),
        }
    }
    Tensor::cat(&outs, 0)?.contiguous()
}

/// Single-query sequences `which` at once: their contexts gathered into a padded
/// `(batch, kv_heads, max_ctx, head_dim)`, padding masked. Returns `(batch, heads, head_dim)`.
fn gather_decodes(
    q: &Tensor,
    k_pool: &Tensor,
    v_pool: &Tensor,
    meta: &AttnMeta,
    which: &[usize],
    scale: f32,
) -> Result<Tensor> {
    let (_, hq, d) = q.dims3()?;
    let hkv = k_pool.dim(1)?;
    let group = hq / hkv;
    let b = which.len();
    let max_ctx = which.iter().map(|&i| meta.seqs[i].ctx_len).max().unwrap_or(1);
    let mut slots = Vec::with_capacity(b * max_ctx);
    let mut mask = Vec::with_capacity(b * max_ctx);
    let mut rows = Vec::with_capacity(b);
    for &i in which {
        let s = &meta.seqs[i];
        rows.push(s.q_start as u32);
        for p in 0..max_ctx {
            // Padding reads slot 0 (the null block) and is masked out.
            slots.push(if p < s.ctx_len { meta.slot(s, p) as u32 } else { 0 });
            mask.push(if p < s.ctx_len { 0f32 } else { f32::NEG_INFINITY });
        }
    }
    let dev = q.device();
    let idx = Tensor::from_vec(slots, b * max_ctx, dev)?;
    let gather = |pool: &Tensor| -> Result<Tensor> {
        pool.index_select(&idx, 0)?.to_dtype(q.dtype())?.reshape((b, max_ctx, hkv, d))?.transpose(1, 2)?.contiguous()
    };
    let (k, v) = (gather(k_pool)?, gather(v_pool)?); // (b, hkv, ctx, d)
    let rows = Tensor::from_vec(rows, b, dev)?;
    let qb = q.index_select(&rows, 0)?.reshape((b, hkv, group, d))?;
    let att = (qb.matmul(&k.transpose(2, 3)?.contiguous()?)? * scale as f64)?; // (b, hkv, group, ctx)
    let mask = Tensor::from_vec(mask, (b, 1, 1, max_ctx), dev)?.to_dtype(att.dtype())?;
    let att = candle_nn::ops::softmax_last_dim(&att.broadcast_add(&mask)?)?;
    att.matmul(&v)?.reshape((b, hq, d))
}

/// One sequence's attention by gathering its K/V: `(q_len, heads, head_dim)`.
fn gather_one(
    q: &Tensor,
    k_pool: &Tensor,
    v_pool: &Tensor,
    meta: &AttnMeta,
    s: &AttnSeq,
    opts: &AttnOpts,
) -> Result<Tensor> {
    let slots: Vec<u32> = (0..s.ctx_len).map(|p| meta.slot(s, p) as u32).collect();
    let idx = Tensor::from_vec(slots, s.ctx_len, q.device())?;
    let k = k_pool.index_select(&idx, 0)?.to_dtype(q.dtype())?; // (ctx, hkv, d)
    let mut v = v_pool.index_select(&idx, 0)?.to_dtype(q.dtype())?;
    if let Some(dv) = opts.dv {
        v = v.narrow(2, 0, dv)?;
    }
    contiguous_attention(&q.narrow(0, s.q_start, s.q_len)?, &k, &v, opts)
}

/// Causal attention of `q` (`(q_len, heads, head_dim)`, the last `q_len` positions) over a
/// contiguous `k` (`(ctx, kv_heads, head_dim)`) and `v` (`(ctx, kv_heads, v_dim)`) with plain
/// candle ops: matmul, mask (causal, and the window), softmax (with a sink column, dropped
/// after), matmul. Returns `(q_len, heads, v_dim)`.
pub fn contiguous_attention(q: &Tensor, k: &Tensor, v: &Tensor, opts: &AttnOpts) -> Result<Tensor> {
    let (q_len, hq, _) = q.dims3()?;
    let (ctx, hkv, _) = k.dims3()?;
    let scale = opts.scale;
    let group = hq / hkv;
    let expand = |x: &Tensor| -> Result<Tensor> {
        // (ctx, hkv, d) → (hq, ctx, d), each kv head repeated for its group of query heads.
        let d = x.dim(2)?;
        let x = x.transpose(0, 1)?; // (hkv, ctx, d)
        x.unsqueeze(1)?.broadcast_as((hkv, group, ctx, d))?.reshape((hq, ctx, d))
    };
    let k = expand(k)?;
    let v = expand(v)?;
    let qs = q.transpose(0, 1)?.contiguous()?; // (hq, q_len, d)
    let att = (qs.matmul(&k.t()?.contiguous()?)? * scale as f64)?; // (hq, q_len, ctx)
    let offset = ctx - q_len;
    let seen = |i: usize, j: usize| j <= offset + i && j >= opts.first_visible(offset + i);
    let mask: Vec<f32> =
        (0..q_len).flat_map(|i| (0..ctx).map(move |j| if seen(i, j) { 0.0 } else { f32::NEG_INFINITY })).collect();
    let mask = Tensor::from_vec(mask, (1, q_len, ctx), q.device())?.to_dtype(att.dtype())?;
    let att = att.broadcast_add(&mask)?;
    let att = match &opts.sinks {
        Some(sinks) => {
            let sink = Tensor::from_slice(sinks, (hq, 1, 1), q.device())?.to_dtype(att.dtype())?;
            let with = Tensor::cat(&[&att, &sink.broadcast_as((hq, q_len, 1))?], 2)?;
            candle_nn::ops::softmax_last_dim(&with.contiguous()?)?.narrow(2, 0, ctx)?
        }
        None => candle_nn::ops::softmax_last_dim(&att)?,
    };
    let o = att.matmul(&v.contiguous()?)?; // (hq, q_len, v_dim)
    o.transpose(0, 1)
}
