//! The CPU kernel of attention over the paged KV pool: a candle custom op that reads every
//! sequence's K/V in place where the block table says (f32 pools, or bf16 widened once per K/V
//! row and tile), for decode rows and prefill chunks alike (causal: query `i` of a chunk of
//! `q_len` new tokens in a context of `ctx_len` sees positions `0..=ctx_len - q_len + i`, or
//! the last `window` of them), with an online softmax per query row and head that may start
//! from a sink; one kernel for GQA (a tile holds a KV head's query group, so each K/V row is
//! read once for all of them), sliding windows, sinks and MLA (one latent "KV head" whose
//! first `dv` values are the V row). Also the in-place write of new K/V into a CPU pool. The
//! pool layout is `kv_cache.rs`'s; which path a step takes is `attention.rs`'s.

use crate::cpu::common::exp_poly;
use crate::cpu::{flash_amx, simd};

mod few;
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
    /// The pool as bf16 bits, where it is bf16 (`few`'s block kernels read those).
    fn bf16(pool: &[Self]) -> Option<&[u16]>;
}

impl KvElem for f32 {
    const POLY_EXP: bool = false;
    fn from_f32(x: f32) -> Self {
        x
    }
    fn widen<'a>(row: &'a [f32], _buf: &'a mut [f32]) -> &'a [f32] {
        row
    }
    fn bf16(_: &[f32]) -> Option<&[u16]> {
        None
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
    fn bf16(pool: &[u16]) -> Option<&[u16]> {
        Some(pool)
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
/// `h0..h0 + hn` of KV head `kh`. Each K and V row it reads serves all of them. A decode row's
/// tile may hold every head (`hn` = all, `kh` 0): then it walks each block's slots whole.
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

/// Blocks of K/V rows a decode tile asks the caches for ahead of the one it computes.
const PREFETCH_BLOCKS: usize = 2;

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
            (PoolData::F32(k), PoolData::F32(v)) => self.attend(q, k, v, dims, t, max_slot, &[])?,
            (PoolData::Bf16(k), PoolData::Bf16(v)) => {
                let plain = self.opts.window.is_none() && self.opts.sinks.is_none();
                let flash: Vec<bool> =
                    meta.seqs.iter().map(|s| flash_amx::takes(s.q_len, dk, dv, v_row, plain)).collect();
                let mut out = self.attend(q, k, v, dims, t, max_slot, &flash)?;
                let seqs: Vec<usize> = (0..flash.len()).filter(|&i| flash[i]).collect();
                if !seqs.is_empty() {
                    let d = flash_amx::Dims { hq, hkv, dk };
                    flash_amx::attend(q, k, v, meta, &seqs, d, self.opts.scale, &mut out);
                }
                out
            }
            _ => candle_core::bail!("paged attention: the k and v pools differ in dtype"),
        };
        Ok((CpuStorage::F32(out), Shape::from((t, hq, dv))))
    }
}

impl PagedAttention<'_> {
    /// The tiles of a call: prefill chunks in blocks of [`TILE_ROWS`] rows; each KV head's
    /// query group split in halves until there are a few tiles per thread (a decode of one
    /// sequence over one latent head would otherwise be one item).
    /// `wide`: a decode row's tile may take every head (`few`'s block kernels run its groups),
    /// when there are enough rows to keep the threads busy.
    fn tiles(&self, d: Dims, skip: &[bool], wide: bool) -> Vec<Tile> {
        let group = d.hq / d.hkv;
        let row_tiles: usize = self.meta.seqs.iter().map(|s| s.q_len.div_ceil(TILE_ROWS)).sum();
        let want = 4 * rayon::current_num_threads();
        let wide = wide && d.hkv > 1 && row_tiles >= want;
        let mut hn = group;
        while hn > 1 && row_tiles * d.hkv * group.div_ceil(hn) < want {
            hn = hn.div_ceil(2);
        }
        let mut tiles = Vec::with_capacity(row_tiles * d.hkv * group.div_ceil(hn));
        for (seq, s) in self.meta.seqs.iter().enumerate() {
            if skip.get(seq) == Some(&true) {
                continue;
            }
            if wide && s.q_len == 1 {
                // The K/V slots of a block hold every KV head side by side: one tile reads
                // them in order (a tile per KV head read a third of each, a stride the
                // prefetchers did not follow).
                tiles.push(Tile { seq, row0: s.q_start, rows: 1, kh: 0, h0: 0, hn: d.hq });
                continue;
            }
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
    /// Sequences marked in `skip` are left zero (the tiles of `flash_amx` take them).
    #[allow(clippy::too_many_arguments)]
    fn attend<E: KvElem>(
        &self,
        q: &[f32],
        k: &[E],
        v: &[E],
        d: Dims,
        t: usize,
        max_slot: usize,
        skip: &[bool],
    ) -> Result<Vec<f32>> {
        if max_slot * d.hkv * d.dk > k.len() || max_slot * d.hkv * d.v_row > v.len() {
            candle_core::bail!("paged attention: a block table points outside the kv pool");
        }
        let group = d.hq / d.hkv;
        let wide = E::bf16(k).is_some() && group < WIDEN_FROM && few::takes(group, d.dk, d.dv);
        let tiles = self.tiles(d, skip, wide);
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
        // A decode tile over a bf16 pool: each group against whole blocks at once. A wide tile
        // (every head of a decode row) holds all KV heads' groups, `nq / hkv` vectors each.
        let few = (nq < WIDEN_FROM || tile.hn == d.hq && tile.rows == 1)
            .then(|| E::bf16(k).zip(E::bf16(v)))
            .flatten()
            .filter(|_| few::takes(nq.min(d.hq / d.hkv), d.dk, d.dv));
        let groups: Vec<(usize, std::ops::Range<usize>)> = match tile.hn == d.hq && d.hkv > 1 && tile.rows == 1 {
            true => (0..d.hkv).map(|kh| (kh, kh * (nq / d.hkv)..(kh + 1) * (nq / d.hkv))).collect(),
            false => vec![(tile.kh, 0..nq)],
        };
        let mut p0 = lo;
        while p0 < hi {
            let n = (bs - p0 % bs).min(hi - p0);
            let base = meta.slot(s, p0);
            let unmasked = p0 >= all_lo && p0 + n <= all_hi;
            // The block PREFETCH_BLOCKS ahead: its rows asked for one per key computed.
            let at = (p0 / bs + PREFETCH_BLOCKS) * bs;
            let ahead = (at < hi).then(|| (meta.slot(s, at), (hi - at).min(bs)));
            if let Some((kb, vb)) = few {
                if p0 == lo {
                    self.prefetch_ahead((kb, vb), d, (p0, hi), s, &groups);
                }
                few::group_scores(&qv, kb, &groups, (d.hkv, d.dk), (base, n, bs), ahead, opts.scale, &mut scores);
                if !unmasked {
                    hide_unseen(&mut scores, (p0, n, bs), &row_of, &first, &last);
                }
            } else {
                self.key_scores(
                    &qv,
                    k,
                    d,
                    tile,
                    (p0, n, base),
                    (unmasked, &first, &last, &row_of),
                    &mut kbuf,
                    &mut scores,
                );
            }
            if few.is_some() {
                few::softmax(&mut scores, bs, n, nq, &mut m, &mut l, &mut acc, d.dv);
            } else {
                for i in 0..nq {
                    softmax_block(
                        &mut scores[i * bs..i * bs + n],
                        &mut m[i],
                        &mut l[i],
                        &mut acc[i * d.dv..(i + 1) * d.dv],
                        E::POLY_EXP,
                    );
                }
            }
            if let Some((_, vb)) = few {
                few::group_weigh(vb, &groups, (d.hkv, d.v_row, d.dv), (base, n, bs), ahead, &scores, &mut acc);
            } else {
                weigh_values(v, d, tile.kh, (n, base, bs), &scores, &mut vbuf, &mut acc);
            }
            p0 += n;
        }
        for i in 0..nq {
            let inv = if l[i] > 0.0 { 1.0 / l[i] } else { 0.0 };
            acc[i * d.dv..(i + 1) * d.dv].iter_mut().for_each(|a| *a *= inv);
        }
        acc
    }

    /// At a tile's first block `p0`: asks the caches for the K and V rows of the blocks before
    /// the one [`PREFETCH_BLOCKS`] ahead, for the KV heads of `groups` (from then on the block
    /// kernels ask for that one's rows as they go, one per key: `few::prefetch_row`).
    fn prefetch_ahead(
        &self,
        (kb, vb): (&[u16], &[u16]),
        d: Dims,
        (p0, hi): (usize, usize),
        s: &crate::kv_cache::AttnSeq,
        groups: &[(usize, std::ops::Range<usize>)],
    ) {
        let bs = self.meta.block_size;
        // Every head of a slot, or one head's rows.
        let (h, heads) = match groups {
            [(kh, _)] => (*kh, 1),
            _ => (0, d.hkv),
        };
        for a in 1..PREFETCH_BLOCKS {
            let at = (p0 / bs + a) * bs;
            if at >= hi {
                break;
            }
            let (next, n) = (self.meta.slot(s, at), (hi - at).min(bs));
            let (kr, vr) = (d.hkv * d.dk, d.hkv * d.v_row);
            let v_len = if heads == 1 { d.dv } else { vr };
            few::prefetch(few::Rows { data: kb, off: (next * d.hkv + h) * d.dk, stride: kr, n, len: heads * d.dk });
            few::prefetch(few::Rows { data: vb, off: (next * d.hkv + h) * d.v_row, stride: vr, n, len: v_len });
        }
    }

    /// The scores of a block of `n` keys from `p0` (slots from `base`) for the tile's query
    /// vectors `qv`, one key at a time; keys a row does not see are −∞.
    #[allow(clippy::too_many_arguments)]
    fn key_scores<E: KvElem>(
        &self,
        qv: &[&[f32]],
        k: &[E],
        d: Dims,
        tile: &Tile,
        (p0, n, base): (usize, usize, usize),
        (unmasked, first, last, row_of): (bool, &[usize], &[usize], &[usize]),
        kbuf: &mut [f32],
        scores: &mut [f32],
    ) {
        let (nq, bs) = (qv.len(), self.meta.block_size);
        for j in 0..n {
            let off = ((base + j) * d.hkv + tile.kh) * d.dk;
            let pos = p0 + j;
            if nq < WIDEN_FROM {
                // Few queries: the pool row is read (and widened) in each product itself.
                for i in 0..nq {
                    let r = row_of[i];
                    let seen = unmasked || (pos <= last[r] && pos >= first[r]);
                    scores[i * bs + j] =
                        if seen { simd::dot(qv[i], &k[off..off + d.dk]) * self.opts.scale } else { f32::NEG_INFINITY };
                }
                continue;
            }
            let krow = E::widen(&k[off..off + d.dk], kbuf);
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
                    scores[(i + x) * bs + j] = if seen { dot * self.opts.scale } else { f32::NEG_INFINITY };
                }
                i += 4;
            }
        }
    }
}

/// The scores of keys `p0..p0 + n` a query vector's row does not see (before `first`, after
/// `last` of its row) set to −∞.
fn hide_unseen(
    scores: &mut [f32],
    (p0, n, bs): (usize, usize, usize),
    row_of: &[usize],
    first: &[usize],
    last: &[usize],
) {
    for (i, &r) in row_of.iter().enumerate() {
        for (j, sc) in scores[i * bs..i * bs + n].iter_mut().enumerate() {
            if p0 + j > last[r] || p0 + j < first[r] {
                *sc = f32::NEG_INFINITY;
            }
        }
    }
}

/// `acc` (each query vector's `dv` values) plus the block's value rows weighed by `scores`,
/// one value row at a time (widened once where the tile has many query vectors).
fn weigh_values<E: KvElem>(
    v: &[E],
    d: Dims,
    kh: usize,
    (n, base, bs): (usize, usize, usize),
    scores: &[f32],
    vbuf: &mut [f32],
    acc: &mut [f32],
) {
    let nq = acc.len() / d.dv;
    for j in 0..n {
        let off = ((base + j) * d.hkv + kh) * d.v_row;
        if nq < WIDEN_FROM {
            for i in 0..nq {
                let w = scores[i * bs + j];
                if w != 0.0 {
                    simd::axpy(w, &v[off..off + d.dv], &mut acc[i * d.dv..(i + 1) * d.dv]);
                }
            }
            continue;
        }
        let vrow = E::widen(&v[off..off + d.dv], vbuf);
        for i in 0..nq {
            let w = scores[i * bs + j];
            if w != 0.0 {
                simd::axpy(w, vrow, &mut acc[i * d.dv..(i + 1) * d.dv]);
            }
        }
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
mod tests;
