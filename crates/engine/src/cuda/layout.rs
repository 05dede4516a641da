//! A step's attention metadata as goodput's CUDA kernels read it, built on the host: one u32
//! buffer `[positions | slots | row_seq | seq_info | block_tables | part_len]`, and how the
//! paged kernel's grid splits each context into partitions (flash-decoding).
//!
//! Eagerly, each section is as long as the step needs. For a decode step replayed from a
//! CUDA graph (`graph_serve.rs`) the layout is padded to the graph's fixed shape: `rows` rows
//! and sequences, `max_blocks` table entries per sequence, a fixed partition count; padding
//! rows write no KV (slot `SKIP_ROW`) and are skipped by attention. Plain host code, the same
//! in every build (its tests run without CUDA); `meta.rs` uploads it.

use crate::kv_cache::AttnMeta;
use candle_core::{bail, Result};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Prefill chunks longer than this go through cuBLAS (matmul, causal softmax, matmul); shorter
/// ones and decode rows through the paged kernel. [`set_long_chunk`] changes it (engine-bench
/// measures both sides).
pub const LONG_CHUNK: usize = 32;
static LONG_CHUNK_NOW: AtomicUsize = AtomicUsize::new(LONG_CHUNK);

/// Sets the chunk length above which prefill chunks take the cuBLAS path, for the process.
pub fn set_long_chunk(rows: usize) {
    LONG_CHUNK_NOW.store(rows.max(1), Ordering::Relaxed);
}

/// Longest partition of the context one block of the paged kernel walks (flash-decoding split).
pub const MAX_PART_LEN: usize = 512;
/// Shortest partition: 8 positions for each of the block's 4 warps.
const MIN_PART_LEN: usize = 32;
/// Blocks the paged kernel should launch at least (about 8 per SM of an H100/H200) before its
/// partitions stop shrinking: one block per (row, KV head) walks its partition serially, and a
/// decode of one sequence would otherwise occupy a handful of SMs.
const TARGET_BLOCKS: usize = 1024;
pub(crate) const SKIP_ROW: u32 = u32::MAX;

/// Partitions the paged kernel's grid wants for `rows` rows of `hkv` KV heads.
pub fn target_parts(rows: usize, hkv: usize) -> usize {
    TARGET_BLOCKS.div_ceil((rows * hkv).max(1))
}

/// Positions per partition for `rows` rows of `hkv` KV heads whose longest context is
/// `max_ctx`: the longest (≤ [`MAX_PART_LEN`]) that still gives [`TARGET_BLOCKS`] blocks, in
/// steps of [`MIN_PART_LEN`].
pub fn part_len(rows: usize, hkv: usize, max_ctx: usize) -> usize {
    let parts = target_parts(rows, hkv);
    max_ctx.div_ceil(parts).next_multiple_of(MIN_PART_LEN).clamp(MIN_PART_LEN, MAX_PART_LEN)
}

/// Partitions of a captured graph's paged kernel: what [`target_parts`] wants, but no more
/// than its longest context (`capacity` positions) fills at [`MIN_PART_LEN`] each and no
/// fewer than it needs at [`MAX_PART_LEN`] each (as eager steps split long contexts).
pub fn graph_parts(rows: usize, hkv: usize, capacity: usize) -> usize {
    let most = capacity.div_ceil(MIN_PART_LEN);
    let least = capacity.div_ceil(MAX_PART_LEN);
    target_parts(rows, hkv).min(most).max(least).max(1)
}

/// Positions per partition when the partition count is fixed (a captured graph): the context
/// spread evenly over them, at least [`MIN_PART_LEN`].
fn part_len_for(parts: usize, max_ctx: usize) -> usize {
    max_ctx.div_ceil(parts.max(1)).next_multiple_of(MIN_PART_LEN).max(MIN_PART_LEN)
}

/// The fixed shape of a captured decode graph's metadata.
#[derive(Clone, Copy, Debug)]
pub struct Padded {
    /// Rows (= sequences) of the graph's batch.
    pub rows: usize,
    /// Block-table entries per sequence.
    pub max_blocks: usize,
    /// Partitions of the paged kernel's grid.
    pub parts: usize,
}

/// The host side of `meta::StepDevice`: the buffer and its shape, before upload.
pub(crate) struct HostStep {
    pub buf: Vec<u32>,
    pub tokens: usize,
    pub seq_slots: usize,
    pub bt_len: usize,
    pub paged_rows: usize,
    pub parts: usize,
    /// Long chunks: (q_start, q_len, ctx_len, slots).
    pub long: Vec<(usize, usize, usize, Vec<u32>)>,
}

/// The length of a padded metadata buffer.
pub(crate) fn padded_len(p: Padded) -> usize {
    3 * p.rows + 4 * p.rows + p.rows * p.max_blocks + 1
}

/// The metadata of a decode step (one row per sequence, each sampled) padded to `p`; `None`
/// when the step does not fit (a chunk of several tokens, more sequences or blocks).
pub(crate) fn host_padded(positions: &[u32], meta: &AttnMeta, p: Padded) -> Option<Vec<u32>> {
    let h = host(positions, meta, 1, None, Some(p)).ok()?;
    (h.buf.len() == padded_len(p)).then_some(h.buf)
}

/// Builds the buffer. With `pad`, the step must be decode rows only (q_len 1) with at most
/// `pad.rows` sequences of at most `pad.max_blocks` blocks.
pub(crate) fn host(
    positions: &[u32],
    meta: &AttnMeta,
    hkv: usize,
    force_part_len: Option<usize>,
    pad: Option<Padded>,
) -> Result<HostStep> {
    let t = positions.len();
    if meta.slot_mapping.len() != t {
        bail!("step metadata: {} slots for {t} tokens", meta.slot_mapping.len());
    }
    let rows = pad.map_or(t, |p| p.rows);
    if let Some(p) = pad {
        let fits =
            t <= p.rows && meta.seqs.len() == t && meta.seqs.iter().all(|s| s.q_len == 1 && s.bt_len <= p.max_blocks);
        if !fits {
            bail!("step does not fit the graph's shape {p:?}");
        }
    }
    let mut buf = Vec::with_capacity(3 * rows + 4 * rows + meta.block_tables.len() + 1);
    buf.extend_from_slice(positions);
    buf.resize(rows, 0);
    buf.extend_from_slice(&meta.slot_mapping);
    buf.resize(2 * rows, SKIP_ROW);
    let mut row_seq = vec![SKIP_ROW; rows];
    let (mut long, mut max_ctx, mut paged_rows) = (Vec::new(), 0, 0);
    let long_chunk = LONG_CHUNK_NOW.load(Ordering::Relaxed);
    for (i, s) in meta.seqs.iter().enumerate() {
        if s.q_len > long_chunk && pad.is_none() {
            let bs = meta.block_size;
            let bt = &meta.block_tables[s.bt_start..s.bt_start + s.bt_len];
            let slots: Vec<u32> = (0..s.ctx_len).map(|p| bt[p / bs] * bs as u32 + (p % bs) as u32).collect();
            long.push((s.q_start, s.q_len, s.ctx_len, slots));
        } else {
            row_seq[s.q_start..s.q_start + s.q_len].fill(i as u32);
            max_ctx = max_ctx.max(s.ctx_len);
            paged_rows += s.q_len;
        }
    }
    buf.extend_from_slice(&row_seq);
    let seq_slots = pad.map_or(meta.seqs.len(), |p| p.rows);
    for (i, s) in meta.seqs.iter().enumerate() {
        let bt_start = pad.map_or(s.bt_start, |p| i * p.max_blocks);
        buf.extend([s.q_start as u32, s.q_len as u32, s.ctx_len as u32, bt_start as u32]);
    }
    buf.resize(3 * rows + 4 * seq_slots, 0);
    let bt_len = match pad {
        None => {
            buf.extend_from_slice(&meta.block_tables);
            meta.block_tables.len()
        }
        Some(p) => {
            for s in &meta.seqs {
                buf.extend_from_slice(&meta.block_tables[s.bt_start..s.bt_start + s.bt_len]);
                buf.resize(buf.len() + p.max_blocks - s.bt_len, 0);
            }
            buf.resize(3 * rows + 4 * seq_slots + p.rows * p.max_blocks, 0);
            p.rows * p.max_blocks
        }
    };
    let (parts, len) = match (pad, force_part_len) {
        (Some(p), _) => (p.parts, part_len_for(p.parts, max_ctx.max(1))),
        (None, Some(len)) => (max_ctx.div_ceil(len), len),
        (None, None) => {
            let len = part_len(paged_rows, hkv, max_ctx);
            (max_ctx.div_ceil(len), len)
        }
    };
    buf.push(len as u32);
    Ok(HostStep {
        buf,
        tokens: rows,
        seq_slots,
        bt_len,
        paged_rows: if pad.is_some() { rows } else { paged_rows },
        parts,
        long,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(seqs: &[(usize, usize, &[u32])]) -> (Vec<u32>, AttnMeta) {
        let mut m = AttnMeta::new(4);
        let mut pos = Vec::new();
        for &(q, ctx, bt) in seqs {
            m.push(q, ctx, bt);
            pos.extend((ctx - q..ctx).map(|p| p as u32));
        }
        (pos, m)
    }

    #[test]
    fn partitions_shrink_until_the_grid_is_full() {
        // One sequence of 8 KV heads at 137 positions: 128 partitions wanted, 32 positions each.
        assert_eq!(part_len(1, 8, 137), 32);
        // 32 × 8 blocks already: 4 partitions, 35 → 64 positions.
        assert_eq!(part_len(32, 8, 137), 64);
        // Long contexts stop at MAX_PART_LEN.
        assert_eq!(part_len(4, 8, 18_000), MAX_PART_LEN);
        assert_eq!(part_len_for(64, 137), 32);
        assert_eq!(part_len_for(3, 1000), 352);
        // A graph for one row of 8 KV heads and tables of 16 blocks of 16: 256 positions.
        assert_eq!(graph_parts(1, 8, 256), 8);
        // 128 rows of 8 heads want one partition, but 32K positions need 64 of 512.
        assert_eq!(graph_parts(128, 8, 32_768), 64);
    }

    #[test]
    fn eager_layout_has_each_section_in_order() {
        let (pos, m) = meta(&[(1, 5, &[3, 4]), (2, 6, &[7, 8])]);
        let h = host(&pos, &m, 2, None, None).unwrap();
        let t = 3;
        assert_eq!(&h.buf[..t], &[4, 4, 5]);
        assert_eq!(&h.buf[2 * t..3 * t], &[0, 1, 1]);
        assert_eq!(&h.buf[3 * t..3 * t + 8], &[0, 1, 5, 0, 1, 2, 6, 2]);
        assert_eq!(&h.buf[3 * t + 8..3 * t + 12], &[3, 4, 7, 8]);
        assert_eq!(h.buf.len(), 3 * t + 8 + 4 + 1);
        assert_eq!(*h.buf.last().unwrap(), 32);
        assert_eq!((h.paged_rows, h.parts), (3, 1));
    }

    #[test]
    fn padded_layout_has_fixed_offsets_and_skipped_rows() {
        let (pos, m) = meta(&[(1, 5, &[3, 4]), (1, 9, &[7, 8, 9])]);
        let p = Padded { rows: 4, max_blocks: 4, parts: 2 };
        let buf = host_padded(&pos, &m, p).unwrap();
        assert_eq!(buf.len(), padded_len(p));
        let r = 4;
        assert_eq!(&buf[..r], &[4, 8, 0, 0]);
        assert_eq!(&buf[r..2 * r], &[m.slot_mapping[0], m.slot_mapping[1], SKIP_ROW, SKIP_ROW]);
        assert_eq!(&buf[2 * r..3 * r], &[0, 1, SKIP_ROW, SKIP_ROW]);
        assert_eq!(&buf[3 * r..3 * r + 8], &[0, 1, 5, 0, 1, 1, 9, 4]);
        assert_eq!(&buf[7 * r..7 * r + 8], &[3, 4, 0, 0, 7, 8, 9, 0]);
        assert_eq!(buf[padded_len(p) - 1], 32);
        // A prefill chunk or too many blocks do not fit.
        let (pos, m) = meta(&[(2, 5, &[3, 4])]);
        assert!(host_padded(&pos, &m, p).is_none());
        let (pos, m) = meta(&[(1, 17, &[1, 2, 3, 4, 5])]);
        assert!(host_padded(&pos, &m, p).is_none());
    }
}
