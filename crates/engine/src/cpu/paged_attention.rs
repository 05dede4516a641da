//! The CPU kernel of attention over the paged KV pool: a candle custom op that reads every
//! sequence's K/V in place where the block table says (f32 pools, or bf16 widened once per K/V
//! row and tile), for decode rows and prefill chunks alike (causal: query `i` of a chunk of
//! `q_len` new tokens in a context of `ctx_len` sees positions `0..=ctx_len - q_len + i`, or
//! the last `window` of them), with an online softmax per query row and head that may start
//! from a sink; one kernel for GQA (a tile holds a KV head's query group, so each K/V row is
//! read once for all of them), sliding windows, sinks and MLA (one latent "KV head" whose
//! first `dv` values are the V row). Also the in-place write of new K/V into a CPU pool. The
//! pool layout is `kv_cache.rs`'s; which path a step takes is `attention.rs`'s.

use crate::cpu::simd;
use crate::kv_cache::AttnMeta;
use candle_core::{CpuStorage, CustomOp3, Layout, Result, Shape, Tensor};
use half::slice::HalfFloatSliceExt;
use rayon::prelude::*;

fn cpu_f32<'a>(s: &'a CpuStorage, l: &Layout, what: &str) -> Result<&'a [f32]> {
    let CpuStorage::F32(data) = s else { candle_core::bail!("paged attention: {what} must be f32") };
    match l.contiguous_offsets() {
        Some((a, b)) => Ok(&data[a..b]),
        None => candle_core::bail!("paged attention: {what} must be contiguous"),
    }
}

/// A KV pool element the kernel reads: f32, or bf16 as raw bits (widened in the products by
/// `simd`'s loops).
trait KvElem: simd::Lane + Send + Sync {
    /// Whether the softmax weights use [`exp_poly`] (vectorized) instead of libm's `expf`:
    /// for bf16 pools, whose results need not match anything bit for bit; f32 keeps `expf`.
    const POLY_EXP: bool;
    fn from_f32(x: f32) -> Self;
    /// The row as f32: itself, or widened into `buf` (once per tile, not once per head).
    fn widen<'a>(row: &'a [Self], buf: &'a mut [f32]) -> &'a [f32];
}

/// `e^x` for `x ≤ 0` (softmax weights) in arithmetic the compiler vectorizes: `x = n ln 2 + r`
/// with `|r| ≤ ln 2 / 2`, a degree-6 Taylor polynomial of `e^r` (relative error < 3e-7 on
/// that interval, about 2 ulp), times `2^n` built in the exponent bits. Below −87 it gives
/// ~1e-38 instead of a denormal or 0.
fn exp_poly(x: f32) -> f32 {
    // Rounding by adding and subtracting 1.5 · 2^23 (nearest, ties to even; |x| < 2^22),
    // not `round()`, which is a libm call on baseline x86-64 and stops vectorization.
    const SHIFT: f32 = 12_582_912.0;
    let x = x.max(-87.0);
    let n = (x * std::f32::consts::LOG2_E + SHIFT) - SHIFT;
    let r = x - n * 0.693_145_75 - n * 1.428_606_8e-6;
    let p = 1.0 + r * (1.0 + r * (0.5 + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0))))));
    p * f32::from_bits(((n as i32 + 127) as u32) << 23)
}

impl KvElem for f32 {
    const POLY_EXP: bool = false;
    fn from_f32(x: f32) -> Self {
        x
    }
    fn widen<'a>(row: &'a [f32], _buf: &'a mut [f32]) -> &'a [f32] {
        row
    }
}

impl KvElem for u16 {
    const POLY_EXP: bool = true;
    fn from_f32(x: f32) -> Self {
        half::bf16::from_f32(x).to_bits()
    }
    fn widen<'a>(row: &'a [u16], buf: &'a mut [f32]) -> &'a [f32] {
        for (b, &x) in buf.iter_mut().zip(row) {
            *b = f32::from_bits(u32::from(x) << 16);
        }
        &buf[..row.len()]
    }
}

/// A pool's values, in place.
enum PoolData<'a> {
    F32(&'a [f32]),
    Bf16(&'a [u16]),
}

fn cpu_pool<'a>(s: &'a CpuStorage, l: &Layout, what: &str) -> Result<PoolData<'a>> {
    let Some((a, b)) = l.contiguous_offsets() else { candle_core::bail!("paged attention: {what} must be contiguous") };
    match s {
        CpuStorage::F32(d) => Ok(PoolData::F32(&d[a..b])),
        CpuStorage::BF16(d) => Ok(PoolData::Bf16(d[a..b].reinterpret_cast())),
        _ => candle_core::bail!("paged attention: {what} must be f32 or bf16"),
    }
}

/// A pool's values, to write.
enum PoolMut<'a> {
    F32(&'a mut [f32]),
    Bf16(&'a mut [u16]),
}

fn mut_pool<'a>(s: &'a mut CpuStorage, l: &Layout) -> Result<PoolMut<'a>> {
    let Some((a, b)) = l.contiguous_offsets() else { candle_core::bail!("kv pool must be contiguous") };
    match s {
        CpuStorage::F32(d) => Ok(PoolMut::F32(&mut d[a..b])),
        CpuStorage::BF16(d) => Ok(PoolMut::Bf16(d[a..b].reinterpret_cast_mut())),
        _ => candle_core::bail!("kv pool must be f32 or bf16"),
    }
}

/// Copies `src`'s rows (`row` values each) into the pool slots, converting to the pool's type.
fn write_rows<E: KvElem>(pool: &mut [E], src: &[f32], slots: &[u32], row: usize) -> Result<()> {
    for (i, &slot) in slots.iter().enumerate() {
        let dst = slot as usize * row;
        if dst + row > pool.len() {
            candle_core::bail!("kv slot {slot} is outside the pool");
        }
        for (d, &x) in pool[dst..dst + row].iter_mut().zip(&src[i * row..(i + 1) * row]) {
            *d = E::from_f32(x);
        }
    }
    Ok(())
}

/// Writes the new tokens' K or V (`(tokens, kv_heads, head_dim)`) into their pool slots.
struct WriteSlots<'a> {
    slots: &'a [u32],
}

impl candle_core::InplaceOp2 for WriteSlots<'_> {
    fn name(&self) -> &'static str {
        "kv-write-slots"
    }
    fn cpu_fwd(&self, pool: &mut CpuStorage, pl: &Layout, src: &CpuStorage, sl: &Layout) -> Result<()> {
        let src = cpu_f32(src, sl, "new K/V")?;
        let row = src.len() / self.slots.len().max(1);
        match mut_pool(pool, pl)? {
            PoolMut::F32(pool) => write_rows(pool, src, self.slots, row),
            PoolMut::Bf16(pool) => write_rows(pool, src, self.slots, row),
        }
    }
}

/// Writes `x` (`(tokens, heads, width)`, f32, contiguous) into the slots of a CPU pool of f32
/// or bf16, converting.
pub(crate) fn write_slots(pool: &Tensor, x: &Tensor, slots: &[u32]) -> Result<()> {
    pool.inplace_op2(x, &WriteSlots { slots })
}

/// What one attention call does besides the causal softmax over its sequence.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AttnOpts {
    /// Factor on `q·k`.
    pub scale: f32,
    /// Positions a query sees, its own included (sliding layers): keys `p - window + 1 ..= p`.
    pub window: Option<usize>,
    /// A logit per query head that joins each softmax and carries no value (gpt-oss's sinks).
    pub sinks: Option<Vec<f32>>,
    /// Read only the first `dv` values of each V row: MLA passes its latent pool as both K
    /// (latent and RoPE key) and V (the latent).
    pub dv: Option<usize>,
}

impl AttnOpts {
    pub fn scaled(scale: f32) -> Self {
        Self { scale, ..Self::default() }
    }

    /// The first position query `i` of sequence `s` sees (0 without a window).
    pub fn first_visible(&self, last: usize) -> usize {
        self.window.map_or(0, |w| (last + 1).saturating_sub(w))
    }
}

struct PagedAttention<'a> {
    meta: &'a AttnMeta,
    opts: &'a AttnOpts,
}

/// Query rows, query heads, KV heads, K width and V width (of a pool row, and read) of one call.
#[derive(Clone, Copy)]
struct Dims {
    hq: usize,
    hkv: usize,
    dk: usize,
    /// Values per V pool row (per head) and values read of each.
    v_row: usize,
    dv: usize,
}

/// One parallel item: `rows` query rows of one sequence from `row0`, query heads
/// `h0..h0 + hn` of KV head `kh`. Each K and V row it reads serves all of them.
#[derive(Clone, Copy)]
struct Tile {
    seq: usize,
    row0: usize,
    rows: usize,
    kh: usize,
    h0: usize,
    hn: usize,
}

/// Query rows per tile of a prefill chunk: a K row read from the pool serves this many rows
/// times the head group.
const TILE_ROWS: usize = 16;

/// Query vectors of a tile from which each K/V row is widened once into f32 (and the scores
/// taken four at a time); below, each product reads the pool row itself, which is cheaper
/// for a decode row's small head group (measured on SmolLM2's group of 3: widening first made
/// a batch-16 decode step 1.5× slower).
const WIDEN_FROM: usize = 4;

impl CustomOp3 for PagedAttention<'_> {
    fn name(&self) -> &'static str {
        "paged-attention"
    }

    fn cpu_fwd(
        &self,
        qs: &CpuStorage,
        ql: &Layout,
        ks: &CpuStorage,
        kl: &Layout,
        vs: &CpuStorage,
        vl: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (t, hq, dk) = ql.shape().dims3()?;
        let (_, hkv, dk_pool) = kl.shape().dims3()?;
        let (_, hkv_v, v_row) = vl.shape().dims3()?;
        let dv = self.opts.dv.unwrap_or(v_row);
        if dk_pool != dk || hkv == 0 || hq % hkv != 0 || hkv_v != hkv || dv > v_row || dv == 0 {
            candle_core::bail!(
                "paged attention: q {:?}, k pool {:?} and v pool {:?} do not match",
                ql.shape(),
                kl.shape(),
                vl.shape()
            );
        }
        if self.opts.sinks.as_ref().is_some_and(|s| s.len() != hq) {
            candle_core::bail!(
                "paged attention: {} sinks for {hq} heads",
                self.opts.sinks.as_ref().map_or(0, Vec::len)
            );
        }
        let q = cpu_f32(qs, ql, "q")?;
        let meta = self.meta;
        for (si, s) in meta.seqs.iter().enumerate() {
            if s.q_start + s.q_len > t || s.q_len > s.ctx_len || s.bt_len < s.ctx_len.div_ceil(meta.block_size) {
                candle_core::bail!("paged attention: sequence {si} does not fit the query tensor");
            }
        }
        let max_slot =
            meta.block_tables.iter().copied().max().unwrap_or(0) as usize * meta.block_size + meta.block_size;
        let dims = Dims { hq, hkv, dk, v_row, dv };
        let out = match (cpu_pool(ks, kl, "k pool")?, cpu_pool(vs, vl, "v pool")?) {
            (PoolData::F32(k), PoolData::F32(v)) => self.attend(q, k, v, dims, t, max_slot)?,
            (PoolData::Bf16(k), PoolData::Bf16(v)) => self.attend(q, k, v, dims, t, max_slot)?,
            _ => candle_core::bail!("paged attention: the k and v pools differ in dtype"),
        };
        Ok((CpuStorage::F32(out), Shape::from((t, hq, dv))))
    }
}

impl PagedAttention<'_> {
    /// The tiles of a call: prefill chunks in blocks of [`TILE_ROWS`] rows; each KV head's
    /// query group split in halves until there are a few tiles per thread (a decode of one
    /// sequence over one latent head would otherwise be one item).
    fn tiles(&self, d: Dims) -> Vec<Tile> {
        let group = d.hq / d.hkv;
        let row_tiles: usize = self.meta.seqs.iter().map(|s| s.q_len.div_ceil(TILE_ROWS)).sum();
        let want = 4 * rayon::current_num_threads();
        let mut hn = group;
        while hn > 1 && row_tiles * d.hkv * group.div_ceil(hn) < want {
            hn = hn.div_ceil(2);
        }
        let mut tiles = Vec::with_capacity(row_tiles * d.hkv * group.div_ceil(hn));
        for (seq, s) in self.meta.seqs.iter().enumerate() {
            for row0 in (s.q_start..s.q_start + s.q_len).step_by(TILE_ROWS) {
                let rows = TILE_ROWS.min(s.q_start + s.q_len - row0);
                for kh in 0..d.hkv {
                    for h0 in (kh * group..(kh + 1) * group).step_by(hn) {
                        tiles.push(Tile { seq, row0, rows, kh, h0, hn: hn.min((kh + 1) * group - h0) });
                    }
                }
            }
        }
        tiles
    }

    /// The kernel over pools of element `E`: tiles in parallel, each an online softmax per
    /// (query row, query head) over the K/V rows its sequence sees, every K and V row widened
    /// once per tile.
    fn attend<E: KvElem>(&self, q: &[f32], k: &[E], v: &[E], d: Dims, t: usize, max_slot: usize) -> Result<Vec<f32>> {
        if max_slot * d.hkv * d.dk > k.len() || max_slot * d.hkv * d.v_row > v.len() {
            candle_core::bail!("paged attention: a block table points outside the kv pool");
        }
        let tiles = self.tiles(d);
        let outs: Vec<Vec<f32>> = tiles.par_iter().map(|tile| self.tile::<E>(q, k, v, d, tile)).collect();
        let mut out = vec![0f32; t * d.hq * d.dv];
        for (tile, o) in tiles.iter().zip(outs) {
            for r in 0..tile.rows {
                let at = ((tile.row0 + r) * d.hq + tile.h0) * d.dv;
                out[at..at + tile.hn * d.dv].copy_from_slice(&o[r * tile.hn * d.dv..(r + 1) * tile.hn * d.dv]);
            }
        }
        Ok(out)
    }

    /// One tile: its `rows × hn` query vectors against the keys the sequence shows them.
    fn tile<E: KvElem>(&self, q: &[f32], k: &[E], v: &[E], d: Dims, tile: &Tile) -> Vec<f32> {
        let (meta, opts) = (self.meta, self.opts);
        let s = &meta.seqs[tile.seq];
        let nq = tile.rows * tile.hn;
        let bs = meta.block_size;
        // Each row's first and last visible position (the last is its own).
        let last: Vec<usize> = (0..tile.rows).map(|r| s.ctx_len - s.q_len + (tile.row0 - s.q_start) + r).collect();
        let first: Vec<usize> = last.iter().map(|&p| opts.first_visible(p)).collect();
        let (lo, hi) = (first[0], last[tile.rows - 1] + 1);
        // Keys every row of the tile sees: no mask to test there.
        let (all_lo, all_hi) = (first[tile.rows - 1], last[0] + 1);
        // Row of each query vector (a lookup, not a division per key).
        let row_of: Vec<usize> = (0..nq).map(|i| i / tile.hn).collect();
        let qv: Vec<&[f32]> = (0..nq)
            .map(|i| {
                let at = ((tile.row0 + i / tile.hn) * d.hq + tile.h0 + i % tile.hn) * d.dk;
                &q[at..at + d.dk]
            })
            .collect();
        let mut m = vec![f32::NEG_INFINITY; nq];
        let mut l = vec![0f32; nq];
        if let Some(sinks) = &opts.sinks {
            // The sink is a key of weight e^sink and no value: the softmax starts from it.
            for i in 0..nq {
                (m[i], l[i]) = (sinks[tile.h0 + i % tile.hn], 1.0);
            }
        }
        let mut acc = vec![0f32; nq * d.dv];
        let mut scores = vec![0f32; nq * bs];
        let (mut kbuf, mut vbuf) = (vec![0f32; d.dk], vec![0f32; d.dv]);
        let mut p0 = lo;
        while p0 < hi {
            let n = (bs - p0 % bs).min(hi - p0);
            let base = meta.slot(s, p0);
            let unmasked = p0 >= all_lo && p0 + n <= all_hi;
            for j in 0..n {
                let off = ((base + j) * d.hkv + tile.kh) * d.dk;
                let pos = p0 + j;
                if nq < WIDEN_FROM {
                    // Few queries: the pool row is read (and widened) in each product itself.
                    for i in 0..nq {
                        let r = row_of[i];
                        let seen = unmasked || (pos <= last[r] && pos >= first[r]);
                        scores[i * bs + j] =
                            if seen { simd::dot(qv[i], &k[off..off + d.dk]) * opts.scale } else { f32::NEG_INFINITY };
                    }
                    continue;
                }
                let krow = E::widen(&k[off..off + d.dk], &mut kbuf);
                let mut i = 0;
                while i < nq {
                    let dots = if i + 4 <= nq {
                        simd::dot4([qv[i], qv[i + 1], qv[i + 2], qv[i + 3]], krow)
                    } else {
                        [0, 1, 2, 3].map(|x| if i + x < nq { simd::dot(qv[i + x], krow) } else { 0.0 })
                    };
                    for (x, dot) in dots.into_iter().enumerate().take(nq - i) {
                        let r = row_of[i + x];
                        let seen = unmasked || (pos <= last[r] && pos >= first[r]);
                        scores[(i + x) * bs + j] = if seen { dot * opts.scale } else { f32::NEG_INFINITY };
                    }
                    i += 4;
                }
            }
            for i in 0..nq {
                softmax_block(
                    &mut scores[i * bs..i * bs + n],
                    &mut m[i],
                    &mut l[i],
                    &mut acc[i * d.dv..(i + 1) * d.dv],
                    E::POLY_EXP,
                );
            }
            for j in 0..n {
                let off = ((base + j) * d.hkv + tile.kh) * d.v_row;
                if nq < WIDEN_FROM {
                    for i in 0..nq {
                        let w = scores[i * bs + j];
                        if w != 0.0 {
                            simd::axpy(w, &v[off..off + d.dv], &mut acc[i * d.dv..(i + 1) * d.dv]);
                        }
                    }
                    continue;
                }
                let vrow = E::widen(&v[off..off + d.dv], &mut vbuf);
                for i in 0..nq {
                    let w = scores[i * bs + j];
                    if w != 0.0 {
                        simd::axpy(w, vrow, &mut acc[i * d.dv..(i + 1) * d.dv]);
                    }
                }
            }
            p0 += n;
        }
        for i in 0..nq {
            let inv = if l[i] > 0.0 { 1.0 / l[i] } else { 0.0 };
            acc[i * d.dv..(i + 1) * d.dv].iter_mut().for_each(|a| *a *= inv);
        }
        acc
    }
}

/// One block of a row's online softmax: the scores `sc` become their weights `e^(s − m)`
/// against the running max `m` (raised, rescaling the sum `l` and the accumulator, when the
/// block holds a larger score); their sum joins `l`.
fn softmax_block(sc: &mut [f32], m: &mut f32, l: &mut f32, acc: &mut [f32], poly: bool) {
    let bmax = sc.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if bmax > *m {
        let c = (*m - bmax).exp();
        *l *= c;
        acc.iter_mut().for_each(|a| *a *= c);
        *m = bmax;
    }
    let mi = *m;
    if mi == f32::NEG_INFINITY {
        sc.iter_mut().for_each(|x| *x = 0.0);
    } else if poly {
        sc.iter_mut().for_each(|x| *x = exp_poly(*x - mi));
    } else {
        sc.iter_mut().for_each(|x| *x = (*x - mi).exp());
    }
    *l += sc.iter().sum::<f32>();
}

/// The kernel alone, for every sequence whatever its length (CPU, f32 queries; f32 or bf16
/// pools). Returns `(tokens, heads, dv)`.
pub fn paged_attention_kernel(
    q: &Tensor,
    k_pool: &Tensor,
    v_pool: &Tensor,
    meta: &AttnMeta,
    opts: &AttnOpts,
) -> Result<Tensor> {
    q.contiguous()?.apply_op3_no_bwd(k_pool, v_pool, &PagedAttention { meta, opts })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::{gather_attention, paged_attention, write_kv, write_rows};

    #[test]
    fn the_polynomial_exp_is_within_a_few_ulp_of_expf() {
        let mut worst = 0f64;
        for i in 0..=20_000 {
            let x = -30.0 * i as f32 / 20_000.0;
            let (got, want) = (exp_poly(x) as f64, (x as f64).exp());
            worst = worst.max((got - want).abs() / want);
        }
        assert!(worst < 5e-7, "relative error {worst}");
        assert_eq!(exp_poly(0.0), 1.0);
        assert!(exp_poly(f32::NEG_INFINITY) < 1e-37);
    }
    use candle_core::{DType, Device};

    fn rand(shape: (usize, usize, usize), seed: u64) -> Tensor {
        let n = shape.0 * shape.1 * shape.2;
        let mut x = seed.wrapping_mul(0x9E3779B97F4A7C15) | 1;
        let v: Vec<f32> = (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x % 2001) as f32 / 1000.0 - 1.0
            })
            .collect();
        Tensor::from_vec(v, shape, &Device::Cpu).unwrap()
    }

    #[test]
    fn kernel_matches_gather_for_decode_and_chunks_with_gqa() {
        let (bs, nb, hkv, hq, d) = (4, 48, 2, 6, 16);
        let k_pool = Tensor::zeros((nb * bs, hkv, d), DType::F32, &Device::Cpu).unwrap();
        let v_pool = Tensor::zeros((nb * bs, hkv, d), DType::F32, &Device::Cpu).unwrap();
        let long: usize = 67;
        let long_blocks: Vec<u32> = (20..20 + long.div_ceil(bs) as u32).collect();
        // (new tokens, context, block table): a decode, a short chunk, a fresh prefill, a long
        // chunk, and another decode.
        let seqs: Vec<(usize, usize, Vec<u32>)> = vec![
            (1, 10, vec![3, 7, 1]),
            (5, 11, vec![2, 9, 11]),
            (7, 7, vec![19, 4]),
            (long - 5, long, long_blocks),
            (1, 3, vec![5]),
        ];
        let mut meta = AttnMeta::new(bs);
        let mut fill = AttnMeta::new(bs);
        for (q, c, bt) in &seqs {
            meta.push(*q, *c, bt);
            fill.push(*c, *c, bt);
        }
        let n = fill.num_tokens();
        write_kv(&k_pool, &v_pool, &rand((n, hkv, d), 1), &rand((n, hkv, d), 2), &fill).unwrap();
        let q = rand((meta.num_tokens(), hq, d), 3);
        let a = paged_attention(&q, &k_pool, &v_pool, &meta, &AttnOpts::scaled(0.25)).unwrap();
        let b = gather_attention(&q, &k_pool, &v_pool, &meta, &AttnOpts::scaled(0.25)).unwrap();
        assert_eq!(a.dims(), &[meta.num_tokens(), hq, d]);
        let diff = (a - b).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
        assert!(diff < 1e-5, "max abs diff {diff}");
    }

    /// bf16 pools: the kernel reads them in place and agrees with the gather path over the same
    /// pools (both see the same rounded K/V), and stays close to attention over f32 pools.
    #[test]
    fn bf16_pools_match_gather_and_stay_close_to_f32() {
        let (bs, nb, hkv, hq, d) = (4, 24, 2, 4, 16);
        let mut meta = AttnMeta::new(bs);
        let mut fill = AttnMeta::new(bs);
        for (q, c, bt) in [(1usize, 10usize, vec![3u32, 7, 1]), (6, 13, vec![2, 9, 11, 12]), (1, 2, vec![5])] {
            meta.push(q, c, &bt);
            fill.push(c, c, &bt);
        }
        let n = fill.num_tokens();
        let (k, v) = (rand((n, hkv, d), 4), rand((n, hkv, d), 5));
        let pools = |dt: DType| {
            let kp = Tensor::zeros((nb * bs, hkv, d), dt, &Device::Cpu).unwrap();
            let vp = kp.zeros_like().unwrap();
            write_kv(&kp, &vp, &k, &v, &fill).unwrap();
            (kp, vp)
        };
        let (kb, vb) = pools(DType::BF16);
        let (kf, vf) = pools(DType::F32);
        let q = rand((meta.num_tokens(), hq, d), 6);
        let max_diff =
            |a: Tensor, b: Tensor| (a - b).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
        let paged = paged_attention(&q, &kb, &vb, &meta, &AttnOpts::scaled(0.25)).unwrap();
        assert_eq!(paged.dtype(), DType::F32);
        let gathered = gather_attention(&q, &kb, &vb, &meta, &AttnOpts::scaled(0.25)).unwrap();
        assert!(max_diff(paged.clone(), gathered) < 1e-5);
        let f32_out = paged_attention(&q, &kf, &vf, &meta, &AttnOpts::scaled(0.25)).unwrap();
        let d = max_diff(paged, f32_out);
        assert!(d > 0.0 && d < 2e-2, "bf16 rounding moves the output a little: {d}");
    }

    /// Sliding windows, sinks and a latent pool read as both K and V (MLA), on decode rows and
    /// chunks longer than a tile, f32 and bf16: the kernel agrees with the gather reference.
    #[test]
    fn windows_sinks_and_latent_pools_match_gather() {
        let (bs, nb) = (4, 64);
        let seqs: Vec<(usize, usize, Vec<u32>)> =
            vec![(1, 10, vec![3, 7, 1]), (37, 41, (20..31).collect()), (5, 5, vec![40, 41]), (1, 2, vec![5])];
        let mut meta = AttnMeta::new(bs);
        let mut fill = AttnMeta::new(bs);
        for (q, c, bt) in &seqs {
            meta.push(*q, *c, bt);
            fill.push(*c, *c, bt);
        }
        let n = fill.num_tokens();
        let max_diff =
            |a: &Tensor, b: &Tensor| (a - b).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
        for dt in [DType::F32, DType::BF16] {
            // GQA (6 heads over 2) with a window of 6 and sinks.
            let (hkv, hq, d) = (2, 6, 16);
            let kp = Tensor::zeros((nb * bs, hkv, d), dt, &Device::Cpu).unwrap();
            let vp = kp.zeros_like().unwrap();
            write_kv(&kp, &vp, &rand((n, hkv, d), 7), &rand((n, hkv, d), 8), &fill).unwrap();
            let q = rand((meta.num_tokens(), hq, d), 9);
            let sinks: Vec<f32> = (0..hq).map(|h| h as f32 * 0.7 - 1.5).collect();
            for opts in [
                AttnOpts { window: Some(6), ..AttnOpts::scaled(0.3) },
                AttnOpts { sinks: Some(sinks.clone()), ..AttnOpts::scaled(0.3) },
                AttnOpts { window: Some(3), sinks: Some(sinks.clone()), ..AttnOpts::scaled(0.3) },
            ] {
                let a = paged_attention(&q, &kp, &vp, &meta, &opts).unwrap();
                let b = gather_attention(&q, &kp, &vp, &meta, &opts).unwrap();
                assert!(max_diff(&a, &b) < 1e-5, "{dt:?} {opts:?}: {}", max_diff(&a, &b));
                let plain = paged_attention(&q, &kp, &vp, &meta, &AttnOpts::scaled(0.3)).unwrap();
                assert!(max_diff(&a, &plain) > 1e-3, "{opts:?} changes the output");
            }
            // MLA: one latent head of 24 (16 latent + 8 RoPE key) read as K, its first 16 as V.
            let lp = Tensor::zeros((nb * bs, 1, 24), dt, &Device::Cpu).unwrap();
            write_rows(&lp, &rand((n, 1, 24), 10), &fill).unwrap();
            let q = rand((meta.num_tokens(), 5, 24), 11);
            let opts = AttnOpts { dv: Some(16), ..AttnOpts::scaled(0.2) };
            let a = paged_attention(&q, &lp, &lp, &meta, &opts).unwrap();
            assert_eq!(a.dims(), &[meta.num_tokens(), 5, 16]);
            let b = gather_attention(&q, &lp, &lp, &meta, &opts).unwrap();
            assert!(max_diff(&a, &b) < 1e-5, "{dt:?} latent: {}", max_diff(&a, &b));
        }
    }

    #[test]
    fn a_block_table_outside_the_pool_is_an_error() {
        let k_pool = Tensor::zeros((8, 1, 8), DType::F32, &Device::Cpu).unwrap();
        let mut meta = AttnMeta::new(4);
        meta.push(1, 1, &[5]);
        let q = rand((1, 1, 8), 1);
        assert!(paged_attention(&q, &k_pool, &k_pool, &meta, &AttnOpts::scaled(1.0)).is_err());
    }
}
