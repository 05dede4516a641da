//! goodput's own CUDA kernels (`kernels/goodput.cu`, compiled to PTX by `build.rs`), launched
//! on candle's stream: residual add + RMSNorm, SwiGLU, QKV split + RoPE + KV-cache write, paged
//! attention (decode rows and short chunks, split over the context for long ones), prefill
//! attention on tensor cores for long chunks in f16/bf16 (`kernels/flash.cuh`), causal softmax
//! for the cuBLAS path of long chunks (f32, or the prefill kernel off), and sampling (the
//! small-batch matmul is `gemv.rs`).
//!
//! Why our own: candle-flash-attn (FlashAttention-2) takes hours to compile on the 2-core
//! machines goodput is built on and has no paged decode; mistral.rs's `mistralrs-paged-attn`
//! pins candle-core 0.10 (goodput is on 0.11). The kernels here are small, and each is checked
//! on the device against the candle reference path by `goodput engine-check` (`check.rs`).

use crate::cuda::blas::matmul_nt_f32;
use crate::cuda::device::{alloc, cfg, cuda, i32_of, ptr, suffix};
use crate::cuda::launch::launch;
use crate::cuda::meta::{LongSeq, StepDevice};
use crate::cuda::params::Arg;
use candle_core::{bail, CudaDevice, DType, Result, Tensor};

/// Bytes the score matrix of one long chunk may take; longer chunks go in query slices.
const MAX_SCORE_BYTES: usize = 1 << 30;

/// `(x + delta, RMSNorm(x + delta) * w)` for the f32 residual stream `x` and the matmul output
/// `delta` of shape `(rows, n)` (`x` alone when `delta` is `None`), in one launch: the sum stays
/// f32, the normed rows come in `w`'s dtype (the next matmul's input).
pub fn add_rms_norm(x: &Tensor, delta: Option<&Tensor>, w: &Tensor, eps: f32) -> Result<(Tensor, Tensor)> {
    let dev = cuda(x.device())?;
    let (rows, n) = x.dims2()?;
    if x.dtype() != DType::F32 {
        bail!("add_rms_norm: the residual stream is f32, not {:?}", x.dtype());
    }
    let (x, w) = (x.contiguous()?, w.contiguous()?);
    let delta = delta.map(Tensor::contiguous).transpose()?;
    if let Some(d) = &delta {
        if d.dims() != x.dims() || d.dtype() != w.dtype() {
            bail!("add_rms_norm: x {:?} and delta {:?} {:?} differ", x.shape(), d.shape(), d.dtype());
        }
    }
    let (res, rp) = alloc(&dev, DType::F32, (rows, n))?;
    let (out, op) = alloc(&dev, w.dtype(), (rows, n))?;
    let (xp, wp) = (ptr(&x)?, ptr(&w)?);
    let dp = match &delta {
        Some(d) => ptr(d)?,
        None => 0u64,
    };
    let nn = i32_of(n, "width")?;
    launch(
        &dev,
        &format!("add_rms_norm_{}", suffix(w.dtype())?),
        cfg((rows as u32, 1), 512),
        &[Arg::Ptr(xp), Arg::Ptr(dp), Arg::Ptr(wp), Arg::Ptr(rp), Arg::Ptr(op), Arg::I32(nn), Arg::F32(eps)],
    )?;
    Ok((res, out))
}

/// `silu(gate) * up` for the fused gate|up projection `gu` of shape `(rows, 2 * inter)`.
pub fn silu_mul(gu: &Tensor) -> Result<Tensor> {
    let dev = cuda(gu.device())?;
    let gu = gu.contiguous()?;
    let (rows, two_inter) = gu.dims2()?;
    let inter = two_inter / 2;
    let (out, op) = alloc(&dev, gu.dtype(), (rows, inter))?;
    let gp = ptr(&gu)?;
    let (r, i) = (i32_of(rows, "rows")?, i32_of(inter, "width")?);
    let blocks = (rows * inter).div_ceil(256).min(65_535) as u32;
    launch(
        &dev,
        &format!("silu_mul_{}", suffix(gu.dtype())?),
        cfg((blocks, 1), 256),
        &[Arg::Ptr(gp), Arg::Ptr(op), Arg::I32(r), Arg::I32(i)],
    )?;
    Ok(out)
}

/// The shape of one layer's attention.
#[derive(Clone, Copy, Debug)]
pub struct Heads {
    pub hq: usize,
    pub hkv: usize,
    pub d: usize,
}

/// The model's RoPE tables `(positions, head_dim / 2)` and their pair layout.
#[derive(Clone, Copy)]
pub struct Rope<'a> {
    pub cos: &'a Tensor,
    pub sin: &'a Tensor,
    /// Pairs (2j, 2j+1) (GGUF checkpoints) instead of (j, j + d/2).
    pub interleaved: bool,
}

/// Splits the fused QKV output `(tokens, (hq + 2 hkv) * d)` into heads, applies RoPE to q and k
/// at each token's position, writes k and v into their pool slots and returns q
/// `(tokens, hq, d)`.
pub fn qkv_rope_cache(
    qkv: &Tensor,
    rope: Rope<'_>,
    step: &StepDevice,
    k_pool: &Tensor,
    v_pool: &Tensor,
    h: Heads,
) -> Result<Tensor> {
    let dev = cuda(qkv.device())?;
    let qkv = qkv.contiguous()?;
    let t = step.tokens;
    if qkv.dims2()? != (t, (h.hq + 2 * h.hkv) * h.d) {
        bail!("qkv_rope_cache: qkv {:?} is not ({t}, {})", qkv.shape(), (h.hq + 2 * h.hkv) * h.d);
    }
    let (q, qp) = alloc(&dev, qkv.dtype(), (t, h.hq, h.d))?;
    let (xp, cp, sp, kp, vp) = (ptr(&qkv)?, ptr(rope.cos)?, ptr(rope.sin)?, ptr(k_pool)?, ptr(v_pool)?);
    let (pos, slots) = (step.positions()?, step.slots()?);
    let (hq, hkv, d) = (i32_of(h.hq, "heads")?, i32_of(h.hkv, "kv heads")?, i32_of(h.d, "head dim")?);
    let il = rope.interleaved as i32;
    launch(
        &dev,
        &format!("qkv_rope_cache_{}", suffix(qkv.dtype())?),
        cfg((t as u32, 1), 256),
        &[
            Arg::Ptr(xp),
            Arg::Ptr(cp),
            Arg::Ptr(sp),
            Arg::Ptr(pos),
            Arg::Ptr(slots),
            Arg::Ptr(qp),
            Arg::Ptr(kp),
            Arg::Ptr(vp),
            Arg::I32(hq),
            Arg::I32(hkv),
            Arg::I32(d),
            Arg::I32(il),
        ],
    )?;
    Ok(q)
}

/// Causal attention of `q` `(tokens, hq, d)` over the paged pools: decode rows and short
/// chunks in the paged kernel, long chunks in the prefill kernel or through cuBLAS, as the
/// step's metadata planned them. Returns `(tokens, hq, d)`.
pub fn attention(
    q: &Tensor,
    k_pool: &Tensor,
    v_pool: &Tensor,
    step: &StepDevice,
    h: Heads,
    scale: f32,
) -> Result<Tensor> {
    let dev = cuda(q.device())?;
    let a = Attn { q, k_pool, v_pool, step, h, scale };
    let t = step.tokens;
    if let [only] = step.long.as_slice() {
        if only.q_len == t {
            return a.long(only);
        }
    }
    let (out, op) = alloc(&dev, q.dtype(), (t, h.hq, h.d))?;
    if step.paged_rows > 0 {
        a.paged(&dev, op)?;
    }
    if step.flash_items > 0 {
        a.flash(&dev, op)?;
    }
    for s in &step.long {
        out.slice_set(&a.long(s)?, 0, s.q_start)?;
    }
    Ok(out)
}

/// One layer's attention: the queries, the layer's pools, the step's metadata, the shape.
struct Attn<'a> {
    q: &'a Tensor,
    k_pool: &'a Tensor,
    v_pool: &'a Tensor,
    step: &'a StepDevice,
    h: Heads,
    scale: f32,
}

impl Attn<'_> {
    /// The paged kernel over every row not in a long chunk, written to `out` (then the
    /// partitions merged when the context is split).
    fn paged(&self, dev: &CudaDevice, out: u64) -> Result<()> {
        let Self { q, k_pool, v_pool, step, h, scale } = *self;
        let t = step.tokens;
        let parts = step.parts;
        let (ml, mlp) = alloc(dev, DType::F32, if parts > 1 { t * h.hq * parts * 2 } else { 1 })?;
        let (acc, accp) = alloc(dev, DType::F32, if parts > 1 { t * h.hq * parts * h.d } else { 1 })?;
        let (qp, kp, vp) = (ptr(q)?, ptr(k_pool)?, ptr(v_pool)?);
        let (row_seq, seq_info, bt, pl) = (step.row_seq()?, step.seq_info()?, step.block_tables()?, step.part_len()?);
        let (hq, hkv) = (i32_of(h.hq, "heads")?, i32_of(h.hkv, "kv heads")?);
        let (bs, np) = (i32_of(step.block_size, "block size")?, i32_of(parts, "partitions")?);
        let name = format!("paged_attention_d{}_g{}_{}", h.d, h.hq / h.hkv, suffix(q.dtype())?);
        launch(
            dev,
            &name,
            cfg(((t * h.hkv) as u32, parts as u32), 128),
            &[
                Arg::Ptr(qp),
                Arg::Ptr(kp),
                Arg::Ptr(vp),
                Arg::Ptr(out),
                Arg::Ptr(mlp),
                Arg::Ptr(accp),
                Arg::Ptr(row_seq),
                Arg::Ptr(seq_info),
                Arg::Ptr(bt),
                Arg::I32(hq),
                Arg::I32(hkv),
                Arg::I32(bs),
                Arg::F32(scale),
                Arg::Ptr(pl),
                Arg::I32(np),
            ],
        )?;
        if parts > 1 {
            let name = format!("attn_combine_d{}_{}", h.d, suffix(q.dtype())?);
            launch(
                dev,
                &name,
                cfg(((t * h.hq) as u32, 1), h.d as u32),
                &[Arg::Ptr(mlp), Arg::Ptr(accp), Arg::Ptr(row_seq), Arg::Ptr(out), Arg::I32(hq), Arg::I32(np)],
            )?;
        }
        drop((ml, acc));
        Ok(())
    }

    /// The long chunks' rows on tensor cores, written to `out`: one block per planned item
    /// (64 query rows of one sequence) and KV head, K/V read in place through the block tables.
    fn flash(&self, dev: &CudaDevice, out: u64) -> Result<()> {
        let Self { q, k_pool, v_pool, step, h, scale } = *self;
        if q.dtype() == DType::F32 {
            bail!("the prefill kernel takes f16 or bf16 operands, not f32");
        }
        let (qp, kp, vp) = (ptr(q)?, ptr(k_pool)?, ptr(v_pool)?);
        let (items, seq_info, bt) = (step.flash_items_ptr()?, step.seq_info()?, step.block_tables()?);
        let (hq, hkv, bs) =
            (i32_of(h.hq, "heads")?, i32_of(h.hkv, "kv heads")?, i32_of(step.block_size, "block size")?);
        launch(
            dev,
            &format!("flash_prefill_d{}_{}", h.d, suffix(q.dtype())?),
            cfg((step.flash_items as u32, h.hkv as u32), 128),
            &[
                Arg::Ptr(qp),
                Arg::Ptr(kp),
                Arg::Ptr(vp),
                Arg::Ptr(out),
                Arg::Ptr(items),
                Arg::Ptr(seq_info),
                Arg::Ptr(bt),
                Arg::I32(hq),
                Arg::I32(hkv),
                Arg::I32(bs),
                Arg::F32(scale),
            ],
        )
    }

    /// One long chunk: its K/V gathered from the pool, `softmax(q kᵀ) v` with cuBLAS matmuls and
    /// the causal softmax kernel in between, GQA by stacking each KV head's query heads (no K/V
    /// copy per query head). Queries go in slices so the scores stay under [`MAX_SCORE_BYTES`].
    fn long(&self, s: &LongSeq) -> Result<Tensor> {
        let Self { q, k_pool, v_pool, h, scale, .. } = *self;
        let group = h.hq / h.hkv;
        // f32 scores, and for f16/bf16 their probabilities in the operands' dtype.
        let score_bytes = if q.dtype() == DType::F32 { 4 } else { 4 + q.dtype().size_in_bytes() };
        let per_row = group * h.hkv * s.ctx_len * score_bytes;
        let slice = (MAX_SCORE_BYTES / per_row.max(1)).clamp(1, s.q_len);
        let mut outs = Vec::new();
        let mut a = 0;
        while a < s.q_len {
            let b = (a + slice).min(s.q_len);
            // Rows a..b of the chunk see the first `ctx` positions at most.
            let ctx = s.ctx_len - s.q_len + b;
            let ql = b - a;
            let qs = q
                .narrow(0, s.q_start + a, ql)?
                .reshape((ql, h.hkv, group, h.d))?
                .permute((1, 2, 0, 3))?
                .contiguous()?
                .reshape((h.hkv, group * ql, h.d))?;
            let slots = s.slots.narrow(0, 0, ctx)?;
            let k = k_pool.index_select(&slots, 0)?.transpose(0, 1)?.contiguous()?; // (hkv, ctx, d)
            let v = v_pool.index_select(&slots, 0)?.transpose(0, 1)?.contiguous()?;
            let scores = if q.dtype() == DType::F32 { qs.matmul(&k.t()?)? } else { matmul_nt_f32(&qs, &k)? }; // (hkv, group * ql, ctx) f32
            let probs = causal_softmax(&scores, q.dtype(), group * ql, ql, ctx, scale)?;
            let o = probs.matmul(&v)?; // (hkv, group * ql, d)
            outs.push(o.reshape((h.hkv, group, ql, h.d))?.permute((2, 0, 1, 3))?.reshape((ql, h.hq, h.d))?);
            a = b;
        }
        Tensor::cat(&outs, 0)?.contiguous()
    }
}

/// The scaled, causally masked softmax of the f32 `scores` `(heads, rows_per_head, ctx)` as
/// probabilities in `dtype` (in place when that is f32).
fn causal_softmax(
    scores: &Tensor,
    dtype: DType,
    rows_per_head: usize,
    q_len: usize,
    ctx: usize,
    scale: f32,
) -> Result<Tensor> {
    let dev = cuda(scores.device())?;
    let rows = scores.elem_count() / ctx;
    let sp = ptr(scores)?;
    let (rph, ql, c) = (i32_of(rows_per_head, "rows")?, i32_of(q_len, "chunk")?, i32_of(ctx, "context")?);
    if dtype == DType::F32 {
        launch(
            &dev,
            "causal_softmax_f32",
            cfg((rows as u32, 1), 256),
            &[Arg::Ptr(sp), Arg::I32(rph), Arg::I32(ql), Arg::I32(c), Arg::F32(scale)],
        )?;
        return Ok(scores.clone());
    }
    let (probs, pp) = alloc(&dev, dtype, scores.shape().clone())?;
    launch(
        &dev,
        &format!("causal_softmax_f32_to_{}", suffix(dtype)?),
        cfg((rows as u32, 1), 256),
        &[Arg::Ptr(sp), Arg::Ptr(pp), Arg::I32(rph), Arg::I32(ql), Arg::I32(c), Arg::F32(scale)],
    )?;
    Ok(probs)
}

/// Samples one token per row of `logits` `(rows, vocab)` on the GPU; `params` per row:
/// `[temperature, top_k (0 = all), top_p, u]` with `u` uniform in `[0, 1)`. Only the ids come
/// back to the host.
pub fn sample(logits: &Tensor, params: &[[f32; 4]]) -> Result<Vec<u32>> {
    if params.is_empty() {
        return Ok(Vec::new());
    }
    let dev = cuda(logits.device())?;
    let rows = logits.dim(0)?;
    if rows != params.len() {
        bail!("sample: {rows} rows of logits, {} sets of parameters", params.len());
    }
    let flat: Vec<f32> = params.iter().flatten().copied().collect();
    let params = Tensor::from_vec(flat, rows * 4, logits.device())?;
    let (ids, ip) = alloc(&dev, DType::U32, rows)?;
    sample_into(logits, ptr(&params)?, ip)?;
    ids.to_vec1::<u32>()
}

/// [`sample`] with the parameters already on the device at `params` (`4 × rows` f32) and the
/// ids written to `out` (`rows` u32): what a captured graph runs.
pub(crate) fn sample_into(logits: &Tensor, params: u64, out: u64) -> Result<()> {
    let dev = cuda(logits.device())?;
    let logits = logits.to_dtype(DType::F32)?.contiguous()?;
    let (rows, vocab) = logits.dims2()?;
    let (lp, v) = (ptr(&logits)?, i32_of(vocab, "vocab")?);
    launch(
        &dev,
        "sample_rows",
        cfg((rows as u32, 1), 1024),
        &[Arg::Ptr(lp), Arg::Ptr(params), Arg::Ptr(out), Arg::I32(v)],
    )?;
    Ok(())
}
