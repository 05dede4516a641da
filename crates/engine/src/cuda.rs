//! goodput's own CUDA kernels (`kernels/goodput.cu`, compiled to PTX by `build.rs`), launched
//! on candle's stream: residual add + RMSNorm, SwiGLU, QKV split + RoPE + KV-cache write, paged
//! attention (decode rows and short chunks, split over the context for long ones), causal
//! softmax for the cuBLAS path of long prefill chunks, the small-batch matmul, and sampling.
//!
//! Why our own: candle-flash-attn (FlashAttention-2) takes hours to compile on the 2-core
//! machines goodput is built on and has no paged decode; mistral.rs's `mistralrs-paged-attn`
//! pins candle-core 0.10 (goodput is on 0.11). The kernels here are small, and each is checked
//! on the device against the candle reference path by `goodput engine-check`.

use crate::paged_attention::AttnMeta;
use candle_core::cuda_backend::cudarc::driver::{DevicePtr, LaunchConfig, PushKernelArg};
use candle_core::cuda_backend::{CudaStorageSlice, WrapErr};
use candle_core::op::BackpropOp;
use candle_core::{bail, CudaDevice, CudaStorage, DType, Device, Result, Shape, Storage, Tensor};

const PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/goodput.ptx"));
const MODULE: &str = "goodput";

/// Prefill chunks longer than this go through cuBLAS (matmul, causal softmax, matmul); shorter
/// ones and decode rows through the paged kernel.
pub const LONG_CHUNK: usize = 32;
/// Context positions per partition of the paged kernel (flash-decoding split).
const PART_LEN: usize = 512;
/// Bytes the score matrix of one long chunk may take; longer chunks go in query slices.
const MAX_SCORE_BYTES: usize = 1 << 30;
const SKIP_ROW: u32 = u32::MAX;

/// Whether the kernels cover this attention shape (head dim 64 or 128, at most 8 query heads
/// per KV head) and dtype.
pub fn supports(head_dim: usize, num_heads: usize, num_kv_heads: usize, dtype: DType) -> bool {
    matches!(head_dim, 64 | 128)
        && num_kv_heads > 0
        && num_heads.is_multiple_of(num_kv_heads)
        && num_heads / num_kv_heads <= 8
        && matches!(dtype, DType::F32 | DType::F16 | DType::BF16)
}

/// The GPU's name as the driver reports it (`NVIDIA H200`).
pub fn device_name(device: &Device) -> Option<String> {
    match device {
        Device::Cuda(d) => d.cuda_stream().context().name().ok(),
        _ => None,
    }
}

fn cuda(device: &Device) -> Result<CudaDevice> {
    match device {
        Device::Cuda(d) => Ok(d.clone()),
        _ => bail!("goodput CUDA kernel called on {device:?}"),
    }
}

fn suffix(dtype: DType) -> Result<&'static str> {
    Ok(match dtype {
        DType::F32 => "f32",
        DType::F16 => "f16",
        DType::BF16 => "bf16",
        d => bail!("goodput CUDA kernels take f32, f16 or bf16, not {d:?}"),
    })
}

fn slice_ptr(s: &CudaStorage) -> Result<(u64, usize)> {
    let stream = s.device.cuda_stream();
    Ok(match &s.slice {
        CudaStorageSlice::F32(x) => (x.device_ptr(&stream).0, 4),
        CudaStorageSlice::F16(x) => (x.device_ptr(&stream).0, 2),
        CudaStorageSlice::BF16(x) => (x.device_ptr(&stream).0, 2),
        CudaStorageSlice::U32(x) => (x.device_ptr(&stream).0, 4),
        _ => bail!("goodput CUDA kernels take f32, f16, bf16 or u32 buffers"),
    })
}

/// Device address of the first element of a contiguous CUDA tensor. The tensor must outlive
/// the launch that uses it (it does: launches are stream-ordered before any later free).
fn ptr(t: &Tensor) -> Result<u64> {
    let (st, l) = t.storage_and_layout();
    let Storage::Cuda(s) = &*st else { bail!("goodput CUDA kernel: a tensor is not on the GPU") };
    if !l.is_contiguous() {
        bail!("goodput CUDA kernel: a tensor of shape {:?} is not contiguous", l.shape());
    }
    let (base, size) = slice_ptr(s)?;
    Ok(base + (l.start_offset() * size) as u64)
}

/// A new, uninitialised tensor of `shape` on `dev`, with its device address.
fn alloc(dev: &CudaDevice, dtype: DType, shape: impl Into<Shape>) -> Result<(Tensor, u64)> {
    let shape = shape.into();
    let n = shape.elem_count().max(1);
    // SAFETY: every element is written by the kernel the caller launches next.
    let slice = unsafe {
        match dtype {
            DType::F32 => CudaStorageSlice::F32(dev.alloc::<f32>(n)?),
            DType::F16 => CudaStorageSlice::F16(dev.alloc::<half::f16>(n)?),
            DType::BF16 => CudaStorageSlice::BF16(dev.alloc::<half::bf16>(n)?),
            DType::U32 => CudaStorageSlice::U32(dev.alloc::<u32>(n)?),
            d => bail!("goodput CUDA kernels: cannot allocate {d:?}"),
        }
    };
    let s = CudaStorage { slice, device: dev.clone() };
    let (p, _) = slice_ptr(&s)?;
    Ok((Tensor::from_storage(Storage::Cuda(s), shape, BackpropOp::none(), false), p))
}

fn cfg(grid: (u32, u32), block: u32) -> LaunchConfig {
    LaunchConfig { grid_dim: (grid.0.max(1), grid.1.max(1), 1), block_dim: (block, 1, 1), shared_mem_bytes: 0 }
}

fn i32_of(x: usize, what: &str) -> Result<i32> {
    i32::try_from(x).map_err(|_| candle_core::Error::Msg(format!("goodput CUDA kernel: {what} {x} exceeds i32")))
}

/// `(x + delta, RMSNorm(x + delta) * w)` for `x`, `delta` of shape `(rows, n)` (`x` alone when
/// `delta` is `None`), in one launch.
pub fn add_rms_norm(x: &Tensor, delta: Option<&Tensor>, w: &Tensor, eps: f32) -> Result<(Tensor, Tensor)> {
    let dev = cuda(x.device())?;
    let (rows, n) = x.dims2()?;
    let (x, w) = (x.contiguous()?, w.contiguous()?);
    let delta = delta.map(Tensor::contiguous).transpose()?;
    if let Some(d) = &delta {
        if d.dims() != x.dims() || d.dtype() != x.dtype() {
            bail!("add_rms_norm: x {:?} and delta {:?} differ", x.shape(), d.shape());
        }
    }
    let (out, op) = alloc(&dev, x.dtype(), (2, rows, n))?;
    let (xp, wp) = (ptr(&x)?, ptr(&w)?);
    let dp = match &delta {
        Some(d) => ptr(d)?,
        None => 0u64,
    };
    let (r, nn) = (i32_of(rows, "rows")?, i32_of(n, "width")?);
    let f = dev.get_or_load_custom_func(&format!("add_rms_norm_{}", suffix(x.dtype())?), MODULE, PTX)?;
    let mut b = f.builder();
    b.arg(&xp).arg(&dp).arg(&wp).arg(&op).arg(&r).arg(&nn).arg(&eps);
    unsafe { b.launch(cfg((rows as u32, 1), 512)) }.w()?;
    Ok((out.get(0)?, out.get(1)?))
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
    let f = dev.get_or_load_custom_func(&format!("silu_mul_{}", suffix(gu.dtype())?), MODULE, PTX)?;
    let mut b = f.builder();
    b.arg(&gp).arg(&op).arg(&r).arg(&i);
    unsafe { b.launch(cfg((blocks, 1), 256)) }.w()?;
    Ok(out)
}

/// Rows of `x` up to which [`gemv`] takes a matmul from cuBLAS.
pub const GEMV_MAX_ROWS: usize = 4;
/// Largest weight matrix (elements) [`gemv`] takes. Measured on an H200 (docs/results): for
/// SmolLM2-135M's matrices (≤ 28 M elements) the kernel's lower fixed cost wins (decode at
/// batch 1: 2.82 → 2.23 ms per step); for Llama-3.1-8B's (25–525 M) cuBLAS streams faster
/// (6.71 ms against 10.99 ms), the kernel reaching ~1.4 TB/s to cuBLAS's ~2.2. The break-even,
/// ~5 µs of fixed cost over that bandwidth gap, is near 16 MB of bf16.
pub const GEMV_MAX_ELEMENTS: usize = 1 << 23;

/// `x · wᵀ` for `x` `(m, k)` and a small `w` `(n, k)` in f16/bf16 with `m ≤ GEMV_MAX_ROWS`:
/// the weights streamed in one light launch. `None` when it does not apply (more rows, a
/// larger matrix, f32, unaligned or non-contiguous operands): the caller uses cuBLAS.
pub fn gemv(x: &Tensor, w: &Tensor) -> Result<Option<Tensor>> {
    let (Ok((m, k)), Ok((n, kw))) = (x.dims2(), w.dims2()) else { return Ok(None) };
    let dtype = x.dtype();
    if m == 0 || m > GEMV_MAX_ROWS || k != kw || k % 8 != 0 || !matches!(dtype, DType::BF16 | DType::F16) {
        return Ok(None);
    }
    if n * k > GEMV_MAX_ELEMENTS {
        return Ok(None);
    }
    if w.dtype() != dtype || !x.is_contiguous() || !w.is_contiguous() {
        return Ok(None);
    }
    let dev = cuda(x.device())?;
    let (xp, wp) = (ptr(x)?, ptr(w)?);
    if xp % 16 != 0 || wp % 16 != 0 {
        return Ok(None);
    }
    let (y, yp) = alloc(&dev, dtype, (m, n))?;
    let (mm, nn, kk) = (m as i32, i32_of(n, "rows")?, i32_of(k, "width")?);
    let f = dev.get_or_load_custom_func(&format!("gemv_t_{}", suffix(dtype)?), MODULE, PTX)?;
    let mut b = f.builder();
    b.arg(&xp).arg(&wp).arg(&yp).arg(&mm).arg(&nn).arg(&kk);
    unsafe { b.launch(cfg((n.div_ceil(8) as u32, 1), 256)) }.w()?;
    Ok(Some(y))
}

/// One long chunk attention computes with cuBLAS.
struct LongSeq {
    q_start: usize,
    q_len: usize,
    ctx_len: usize,
    /// Pool slot of each of its `ctx_len` positions, on the device.
    slots: Tensor,
}

/// A step's attention metadata on the device, uploaded once and read by every layer: one u32
/// buffer `[positions | slots | row_seq | seq_info | block_tables]`.
pub struct StepDevice {
    meta: Tensor,
    tokens: usize,
    num_seqs: usize,
    block_size: usize,
    long: Vec<LongSeq>,
    /// Flash-decoding partitions for the paged kernel's longest context (0: no paged rows).
    parts: usize,
}

impl StepDevice {
    pub fn upload(positions: &[u32], meta: &AttnMeta, device: &Device) -> Result<Self> {
        let t = positions.len();
        let mut buf = Vec::with_capacity(3 * t + 4 * meta.seqs.len() + meta.block_tables.len());
        buf.extend_from_slice(positions);
        buf.extend_from_slice(&meta.slot_mapping);
        let mut row_seq = vec![SKIP_ROW; t];
        let (mut long, mut max_ctx) = (Vec::new(), 0);
        for (i, s) in meta.seqs.iter().enumerate() {
            if s.q_len > LONG_CHUNK {
                let bs = meta.block_size;
                let bt = &meta.block_tables[s.bt_start..s.bt_start + s.bt_len];
                let slots: Vec<u32> = (0..s.ctx_len).map(|p| bt[p / bs] * bs as u32 + (p % bs) as u32).collect();
                let slots = Tensor::from_vec(slots, s.ctx_len, device)?;
                long.push(LongSeq { q_start: s.q_start, q_len: s.q_len, ctx_len: s.ctx_len, slots });
            } else {
                row_seq[s.q_start..s.q_start + s.q_len].fill(i as u32);
                max_ctx = max_ctx.max(s.ctx_len);
            }
        }
        buf.extend_from_slice(&row_seq);
        for s in &meta.seqs {
            buf.extend([s.q_start as u32, s.q_len as u32, s.ctx_len as u32, s.bt_start as u32]);
        }
        buf.extend_from_slice(&meta.block_tables);
        if meta.slot_mapping.len() != t {
            bail!("step metadata: {} slots for {t} tokens", meta.slot_mapping.len());
        }
        let n = buf.len();
        Ok(Self {
            meta: Tensor::from_vec(buf, n, device)?,
            tokens: t,
            num_seqs: meta.seqs.len(),
            block_size: meta.block_size,
            long,
            parts: max_ctx.div_ceil(PART_LEN),
        })
    }

    /// Device address of the u32 section starting at `offset`.
    fn at(&self, offset: usize) -> Result<u64> {
        Ok(ptr(&self.meta)? + 4 * offset as u64)
    }
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
    let (pos, slots) = (step.at(0)?, step.at(t)?);
    let (hq, hkv, d) = (i32_of(h.hq, "heads")?, i32_of(h.hkv, "kv heads")?, i32_of(h.d, "head dim")?);
    let il = rope.interleaved as i32;
    let f = dev.get_or_load_custom_func(&format!("qkv_rope_cache_{}", suffix(qkv.dtype())?), MODULE, PTX)?;
    let mut b = f.builder();
    b.arg(&xp).arg(&cp).arg(&sp).arg(&pos).arg(&slots).arg(&qp).arg(&kp).arg(&vp);
    b.arg(&hq).arg(&hkv).arg(&d).arg(&il);
    unsafe { b.launch(cfg((t as u32, 1), 256)) }.w()?;
    Ok(q)
}

/// Causal attention of `q` `(tokens, hq, d)` over the paged pools: decode rows and short
/// chunks in the paged kernel, long chunks through cuBLAS. Returns `(tokens, hq, d)`.
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
    if step.parts > 0 {
        a.paged(&dev, op)?;
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
        let row_seq = step.at(2 * t)?;
        let seq_info = step.at(3 * t)?;
        let bt = step.at(3 * t + 4 * step.num_seqs)?;
        let (hq, hkv) = (i32_of(h.hq, "heads")?, i32_of(h.hkv, "kv heads")?);
        let (bs, pl, np) = (i32_of(step.block_size, "block size")?, PART_LEN as i32, i32_of(parts, "partitions")?);
        let name = format!("paged_attention_d{}_{}", h.d, suffix(q.dtype())?);
        let f = dev.get_or_load_custom_func(&name, MODULE, PTX)?;
        let mut b = f.builder();
        b.arg(&qp).arg(&kp).arg(&vp).arg(&out).arg(&mlp).arg(&accp).arg(&row_seq).arg(&seq_info).arg(&bt);
        b.arg(&hq).arg(&hkv).arg(&bs).arg(&scale).arg(&pl).arg(&np);
        unsafe { b.launch(cfg(((t * h.hkv) as u32, parts as u32), 128)) }.w()?;
        if parts > 1 {
            let name = format!("attn_combine_d{}_{}", h.d, suffix(q.dtype())?);
            let f = dev.get_or_load_custom_func(&name, MODULE, PTX)?;
            let mut b = f.builder();
            b.arg(&mlp).arg(&accp).arg(&row_seq).arg(&out).arg(&hq).arg(&np);
            unsafe { b.launch(cfg(((t * h.hq) as u32, 1), h.d as u32)) }.w()?;
        }
        drop((ml, acc));
        Ok(())
    }

    /// One long chunk: its K/V gathered from the pool, `softmax(q kᵀ) v` with cuBLAS matmuls and
    /// the causal softmax kernel in between, GQA by stacking each KV head's query heads (no K/V
    /// copy per query head). Queries go in slices so the scores stay under [`MAX_SCORE_BYTES`].
    fn long(&self, s: &LongSeq) -> Result<Tensor> {
        let Self { q, k_pool, v_pool, h, scale, .. } = *self;
        let group = h.hq / h.hkv;
        let per_row = group * h.hkv * s.ctx_len * q.dtype().size_in_bytes();
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
            let scores = qs.matmul(&k.t()?)?; // (hkv, group * ql, ctx)
            causal_softmax(&scores, group * ql, ql, ctx, scale)?;
            let o = scores.matmul(&v)?; // (hkv, group * ql, d)
            outs.push(o.reshape((h.hkv, group, ql, h.d))?.permute((2, 0, 1, 3))?.reshape((ql, h.hq, h.d))?);
            a = b;
        }
        Tensor::cat(&outs, 0)?.contiguous()
    }
}

/// In place: the scaled, causally masked softmax of `scores` `(heads, rows_per_head, ctx)`.
fn causal_softmax(scores: &Tensor, rows_per_head: usize, q_len: usize, ctx: usize, scale: f32) -> Result<()> {
    let dev = cuda(scores.device())?;
    let rows = scores.elem_count() / ctx;
    let sp = ptr(scores)?;
    let (rph, ql, c) = (i32_of(rows_per_head, "rows")?, i32_of(q_len, "chunk")?, i32_of(ctx, "context")?);
    let f = dev.get_or_load_custom_func(&format!("causal_softmax_{}", suffix(scores.dtype())?), MODULE, PTX)?;
    let mut b = f.builder();
    b.arg(&sp).arg(&rph).arg(&ql).arg(&c).arg(&scale);
    unsafe { b.launch(cfg((rows as u32, 1), 256)) }.w()?;
    Ok(())
}

/// Samples one token per row of `logits` `(rows, vocab)` on the GPU; `params` per row:
/// `[temperature, top_k (0 = all), top_p, u]` with `u` uniform in `[0, 1)`. Only the ids come
/// back to the host.
pub fn sample(logits: &Tensor, params: &[[f32; 4]]) -> Result<Vec<u32>> {
    if params.is_empty() {
        return Ok(Vec::new());
    }
    let dev = cuda(logits.device())?;
    let logits = logits.to_dtype(DType::F32)?.contiguous()?;
    let (rows, vocab) = logits.dims2()?;
    if rows != params.len() {
        bail!("sample: {rows} rows of logits, {} sets of parameters", params.len());
    }
    let flat: Vec<f32> = params.iter().flatten().copied().collect();
    let params = Tensor::from_vec(flat, rows * 4, logits.device())?;
    let (ids, ip) = alloc(&dev, DType::U32, rows)?;
    let (lp, pp, v) = (ptr(&logits)?, ptr(&params)?, i32_of(vocab, "vocab")?);
    let f = dev.get_or_load_custom_func("sample_rows", MODULE, PTX)?;
    let mut b = f.builder();
    b.arg(&lp).arg(&pp).arg(&ip).arg(&v);
    unsafe { b.launch(cfg((rows as u32, 1), 1024)) }.w()?;
    ids.to_vec1::<u32>()
}
