//! A step's attention metadata as goodput's CUDA kernels read it, built on the host: one u32
//! buffer `[positions | slots | row_seq | seq_info | block_tables | part_len | flash items]`,
//! how the paged kernel's grid splits each context into partitions (flash-decoding), and which
//! blocks the tensor-core prefill kernel (`kernels/flash.cuh`) runs for the long chunks.
//!
//! Eagerly, each section is as long as the step needs. For a step replayed from a CUDA graph
//! (`graph_serve.rs`) the layout is padded to the graph's fixed shape ([`Padded`]): its token,
//! sequence and flash-item counts, `max_blocks` table entries per sequence, a fixed partition
//! count; padding rows write no KV (slot `SKIP_ROW`) and are skipped by attention, padding
//! items exit at once. Plain host code, the same in every build (its tests run without CUDA);
//! `meta.rs` uploads it.

use crate::kv_cache::AttnMeta;
use candle_core::{bail, Result};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Prefill chunks longer than this are long: in f16/bf16 they go to the tensor-core prefill
/// kernel (or, with it off and in f32, through cuBLAS: matmul, causal softmax, matmul); shorter
/// ones and decode rows through the paged kernel. [`set_long_chunk`] changes it (engine-bench
/// measures both sides).
pub const LONG_CHUNK: usize = 32;
static LONG_CHUNK_NOW: AtomicUsize = AtomicUsize::new(LONG_CHUNK);
static FLASH_NOW: AtomicBool = AtomicBool::new(true);

/// Sets the chunk length above which prefill chunks take the long path, for the process.
pub fn set_long_chunk(rows: usize) {
    LONG_CHUNK_NOW.store(rows.max(1), Ordering::Relaxed);
}

/// Turns the tensor-core prefill kernel on or off for the process (off: long chunks go through
/// cuBLAS; engine-bench `--prefill-attention` measures both).
pub fn set_flash_prefill(on: bool) {
    FLASH_NOW.store(on, Ordering::Relaxed);
}

/// Query rows one block of the prefill kernel computes (`FLASH_ROWS` in `kernels/flash.cuh`).
pub const FLASH_ROWS: usize = 64;

/// The query heads per KV head the prefill kernel stacks as rows, when it takes the long chunks
/// of a step: it is on and the operands are f16/bf16 (`half`; its mma has no f32 form).
pub fn flash_group(hq: usize, hkv: usize, half: bool) -> Option<usize> {
    (FLASH_NOW.load(Ordering::Relaxed) && half && hkv > 0).then(|| hq / hkv)
}

/// The prefill kernel's blocks for a chunk of `q_len` tokens of sequence `seq` with `group`
/// query heads per KV head: `(seq, first row)` per 64 rows of its `q_len × group` rows, the
/// last rows (which see the most context and run longest) first.
pub fn flash_items(seq: u32, q_len: usize, group: usize) -> impl Iterator<Item = [u32; 2]> {
    let rows = q_len * group;
    (0..rows.div_ceil(FLASH_ROWS)).rev().map(move |b| [seq, (b * FLASH_ROWS) as u32])
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
/// Most (token rows × partitions) of a step: the paged kernel's partial results take
/// `rows × heads × partitions × head_dim` f32 (256 MiB for Llama-3.1-8B), every row of the step
/// counted, those of long chunks too; beyond it partitions grow longer instead.
const MAX_ROW_PARTS: usize = 1 << 14;

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

/// The fixed shape of a captured graph's metadata.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Padded {
    /// Token rows of the graph's step.
    pub tokens: usize,
    /// Sequence slots (at most `tokens`).
    pub seqs: usize,
    /// Block-table entries per sequence.
    pub max_blocks: usize,
    /// Partitions of the paged kernel's grid.
    pub parts: usize,
    /// Blocks of the prefill kernel's grid (0: the graph has no long chunk).
    pub items: usize,
}

impl Padded {
    /// A decode graph: `rows` rows, one per sequence, no prefill chunk.
    pub fn decode(rows: usize, max_blocks: usize, parts: usize) -> Self {
        Self { tokens: rows, seqs: rows, max_blocks, parts, items: 0 }
    }
}

/// Batch sizes decode graphs are captured for (and sequence buckets of mixed ones).
pub const BUCKETS: [usize; 14] = [1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 160, 192, 256];
/// Token counts mixed-step graphs are captured for.
pub const TOKEN_BUCKETS: [usize; 12] = [32, 64, 128, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096];

/// A graph's shape: its padded metadata, and whether it is a mixed step's (which samples the
/// rows of its index buffer) or a decode step's (which samples every row).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Shape {
    pub pad: Padded,
    pub mixed: bool,
}

/// The graph a step of `meta` with `sampled` rows to sample runs in, for tables of at most
/// `max_blocks` blocks of `block_size`, mixed steps only when `mixed`: a decode step (one row
/// per sequence, each sampled) in the smallest batch bucket; any other step in the smallest
/// token and sequence buckets, with a prefill grid for the most blocks its tokens can make
/// (each sequence's chunk may end in a partial block) and the paged kernel unsplit. Table entries per sequence: the step's
/// longest, to a power of two (≥ 16), so the metadata uploaded per step stays near what it
/// needs. `None`: no graph (too large, or mixed steps off).
pub(crate) fn graph_shape(
    meta: &AttnMeta,
    sampled: usize,
    split: Split,
    limits: (usize, usize, bool),
) -> Option<Shape> {
    let (max_table, block_size, mixed) = limits;
    let (n, seqs) = (meta.num_tokens(), meta.seqs.len());
    if n == 0 || meta.seqs.iter().any(|s| s.bt_len > max_table) {
        return None;
    }
    let need = meta.seqs.iter().map(|s| s.bt_len).max().unwrap_or(1);
    let max_blocks = need.next_power_of_two().max(16).min(max_table);
    let capacity = max_blocks * block_size;
    if seqs == n && sampled == n {
        let rows = *BUCKETS.iter().find(|&&b| b >= n)?;
        let pad = Padded::decode(rows, max_blocks, graph_parts(rows, split.hkv, capacity));
        return Some(Shape { pad, mixed: false });
    }
    if !mixed {
        return None;
    }
    let tokens = *TOKEN_BUCKETS.iter().find(|&&b| b >= n)?;
    let seqs = *BUCKETS.iter().find(|&&b| b >= seqs)?;
    let items = split.flash_group.map_or(0, |g| (tokens * g).div_ceil(FLASH_ROWS) + seqs);
    // One partition: the paged kernel's partial results are sized by every token row, and a
    // mixed step's decode rows are a small part of its work.
    let pad = Padded { tokens, seqs, max_blocks, parts: 1, items };
    Some(Shape { pad, mixed: true })
}

/// The host side of `meta::StepDevice`: the buffer and its shape, before upload.
pub(crate) struct HostStep {
    pub buf: Vec<u32>,
    pub tokens: usize,
    pub seq_slots: usize,
    pub bt_len: usize,
    pub paged_rows: usize,
    pub parts: usize,
    /// Blocks of the prefill kernel (its grid's x); 0: no launch.
    pub flash_items: usize,
    /// Long chunks for the cuBLAS path: (q_start, q_len, ctx_len, slots).
    pub long: Vec<(usize, usize, usize, Vec<u32>)>,
}

/// How a step's long chunks are computed and how its context is split.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Split {
    /// KV heads (the paged kernel's blocks per row).
    pub hkv: usize,
    /// Partitions of this length, for checks (default: [`part_len`]).
    pub force_part_len: Option<usize>,
    /// Query heads per KV head when the prefill kernel takes the long chunks ([`flash_group`]);
    /// `None`: the cuBLAS path.
    pub flash_group: Option<usize>,
}

/// Where each section of a metadata buffer starts (in u32s), for `tokens` rows, `seq_slots`
/// sequence entries and `bt_len` block-table entries: what `meta.rs` hands each kernel and
/// `flash_ref.rs` reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Offsets {
    pub positions: usize,
    pub slots: usize,
    pub row_seq: usize,
    pub seq_info: usize,
    pub block_tables: usize,
    pub part_len: usize,
    pub flash_items: usize,
}

impl Offsets {
    pub(crate) fn new(tokens: usize, seq_slots: usize, bt_len: usize) -> Self {
        let seq_info = 3 * tokens;
        let block_tables = seq_info + 4 * seq_slots;
        let part_len = block_tables + bt_len;
        Self {
            positions: 0,
            slots: tokens,
            row_seq: 2 * tokens,
            seq_info,
            block_tables,
            part_len,
            flash_items: part_len + 1,
        }
    }
}

#[cfg(test)]
impl HostStep {
    pub(crate) fn offsets(&self) -> Offsets {
        Offsets::new(self.tokens, self.seq_slots, self.bt_len)
    }
}

/// The length of a padded metadata buffer.
pub(crate) fn padded_len(p: Padded) -> usize {
    3 * p.tokens + 4 * p.seqs + p.seqs * p.max_blocks + 1 + 2 * p.items
}

/// The metadata of a step padded to `p`; `None` when the step does not fit (more tokens,
/// sequences, blocks or prefill blocks, or a long chunk with no prefill kernel to take it).
pub(crate) fn host_padded(positions: &[u32], meta: &AttnMeta, split: Split, p: Padded) -> Option<Vec<u32>> {
    let h = host(positions, meta, split, Some(p)).ok()?;
    (h.buf.len() == padded_len(p)).then_some(h.buf)
}

/// Whether a step fits the padded shape `p`.
fn fits(meta: &AttnMeta, split: Split, p: Padded) -> bool {
    let long_chunk = LONG_CHUNK_NOW.load(Ordering::Relaxed);
    let items: usize = match split.flash_group {
        Some(g) => meta.seqs.iter().filter(|s| s.q_len > long_chunk).map(|s| (s.q_len * g).div_ceil(FLASH_ROWS)).sum(),
        None if meta.seqs.iter().any(|s| s.q_len > long_chunk) => return false,
        None => 0,
    };
    meta.num_tokens() <= p.tokens
        && meta.seqs.len() <= p.seqs
        && items <= p.items
        && meta.seqs.iter().all(|s| s.bt_len <= p.max_blocks)
}

/// Builds the buffer, padded to `pad` when given (the step must [`fits`] it).
pub(crate) fn host(positions: &[u32], meta: &AttnMeta, split: Split, pad: Option<Padded>) -> Result<HostStep> {
    let t = positions.len();
    if meta.slot_mapping.len() != t {
        bail!("step metadata: {} slots for {t} tokens", meta.slot_mapping.len());
    }
    if let Some(p) = pad.filter(|&p| !fits(meta, split, p)) {
        bail!("step does not fit the graph's shape {p:?}");
    }
    let rows = pad.map_or(t, |p| p.tokens);
    let seq_slots = pad.map_or(meta.seqs.len(), |p| p.seqs);
    let mut buf = Vec::with_capacity(3 * rows + 4 * seq_slots + meta.block_tables.len() + 1);
    buf.extend_from_slice(positions);
    buf.resize(rows, 0);
    buf.extend_from_slice(&meta.slot_mapping);
    buf.resize(2 * rows, SKIP_ROW);
    let mut row_seq = vec![SKIP_ROW; rows];
    let (mut long, mut items, mut max_ctx, mut paged_rows) = (Vec::new(), Vec::new(), 0, 0);
    let long_chunk = LONG_CHUNK_NOW.load(Ordering::Relaxed);
    for (i, s) in meta.seqs.iter().enumerate() {
        match split.flash_group {
            _ if s.q_len <= long_chunk => {
                row_seq[s.q_start..s.q_start + s.q_len].fill(i as u32);
                max_ctx = max_ctx.max(s.ctx_len);
                paged_rows += s.q_len;
            }
            Some(g) => items.extend(flash_items(i as u32, s.q_len, g)),
            None => {
                let bs = meta.block_size;
                let bt = &meta.block_tables[s.bt_start..s.bt_start + s.bt_len];
                let slots: Vec<u32> = (0..s.ctx_len).map(|p| bt[p / bs] * bs as u32 + (p % bs) as u32).collect();
                long.push((s.q_start, s.q_len, s.ctx_len, slots));
            }
        }
    }
    buf.extend_from_slice(&row_seq);
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
            buf.resize(3 * rows + 4 * seq_slots + p.seqs * p.max_blocks, 0);
            p.seqs * p.max_blocks
        }
    };
    let (parts, len) = match (pad, split.force_part_len) {
        (Some(p), _) => (p.parts, part_len_for(p.parts, max_ctx.max(1))),
        (None, Some(len)) => (max_ctx.div_ceil(len), len),
        (None, None) => {
            let most = (MAX_ROW_PARTS / t.max(1)).max(1);
            let len =
                part_len(paged_rows, split.hkv, max_ctx).max(max_ctx.div_ceil(most).next_multiple_of(MIN_PART_LEN));
            (max_ctx.div_ceil(len), len)
        }
    };
    buf.push(len as u32);
    let flash_items = pad.map_or(items.len(), |p| p.items);
    buf.extend(items.iter().flatten());
    buf.resize(buf.len() + 2 * (flash_items - items.len()), SKIP_ROW);
    Ok(HostStep {
        buf,
        tokens: rows,
        seq_slots,
        bt_len,
        paged_rows: if pad.is_some() { rows } else { paged_rows },
        parts,
        flash_items,
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
        let h = host(&pos, &m, Split { hkv: 2, ..Split::default() }, None).unwrap();
        let t = 3;
        assert_eq!(&h.buf[..t], &[4, 4, 5]);
        assert_eq!(&h.buf[2 * t..3 * t], &[0, 1, 1]);
        assert_eq!(&h.buf[3 * t..3 * t + 8], &[0, 1, 5, 0, 1, 2, 6, 2]);
        assert_eq!(&h.buf[3 * t + 8..3 * t + 12], &[3, 4, 7, 8]);
        assert_eq!(h.buf.len(), 3 * t + 8 + 4 + 1);
        assert_eq!(*h.buf.last().unwrap(), 32);
        assert_eq!((h.paged_rows, h.parts, h.flash_items), (3, 1, 0));
    }

    #[test]
    fn padded_layout_has_fixed_offsets_and_skipped_rows() {
        let (pos, m) = meta(&[(1, 5, &[3, 4]), (1, 9, &[7, 8, 9])]);
        let p = Padded::decode(4, 4, 2);
        let buf = host_padded(&pos, &m, Split::default(), p).unwrap();
        assert_eq!(buf.len(), padded_len(p));
        let r = 4;
        assert_eq!(&buf[..r], &[4, 8, 0, 0]);
        assert_eq!(&buf[r..2 * r], &[m.slot_mapping[0], m.slot_mapping[1], SKIP_ROW, SKIP_ROW]);
        assert_eq!(&buf[2 * r..3 * r], &[0, 1, SKIP_ROW, SKIP_ROW]);
        assert_eq!(&buf[3 * r..3 * r + 8], &[0, 1, 5, 0, 1, 1, 9, 4]);
        assert_eq!(&buf[7 * r..7 * r + 8], &[3, 4, 0, 0, 7, 8, 9, 0]);
        assert_eq!(buf[padded_len(p) - 1], 32);
        // Too many tokens, sequences or blocks do not fit.
        let (pos, m) = meta(&[(2, 5, &[3, 4]), (3, 6, &[7, 8])]);
        assert!(host_padded(&pos, &m, Split::default(), p).is_none());
        let (pos, m) = meta(&[(1, 17, &[1, 2, 3, 4, 5])]);
        assert!(host_padded(&pos, &m, Split::default(), p).is_none());
    }

    #[test]
    fn long_chunks_become_prefill_blocks_of_64_rows_last_rows_first() {
        // 40 tokens × 4 query heads per KV head = 160 rows: blocks at rows 128, 64, 0.
        assert_eq!(flash_items(3, 40, 4).collect::<Vec<_>>(), [[3, 128], [3, 64], [3, 0]]);
        assert_eq!(flash_items(0, 16, 4).count(), 1);
        let blocks: Vec<u32> = (1..=12).collect();
        let (pos, m) = meta(&[(1, 3, &[5]), (40, 48, &blocks)]);
        let split = Split { hkv: 2, force_part_len: None, flash_group: Some(4) };
        let h = host(&pos, &m, split, None).unwrap();
        let t = 41;
        // The chunk's rows are not the paged kernel's; no cuBLAS chunk.
        assert_eq!(&h.buf[2 * t..2 * t + 3], &[0, SKIP_ROW, SKIP_ROW]);
        assert_eq!((h.paged_rows, h.flash_items, h.long.len()), (1, 3, 0));
        assert_eq!(&h.buf[h.buf.len() - 7..], &[32, 1, 128, 1, 64, 1, 0]);
        let o = h.offsets();
        assert_eq!((o.part_len, o.flash_items, h.buf.len()), (3 * t + 8 + 13, 3 * t + 8 + 14, 3 * t + 8 + 20));
        assert_eq!(&h.buf[o.seq_info + 4..o.seq_info + 8], &[1, 40, 48, 1]);
        // A decode row at 32K positions beside a 2048-token chunk: 7 partitions of 4704, not
        // 512 of 64 (the partial results are sized by all 2049 rows).
        let long_ctx: Vec<u32> = (0..8192).collect();
        let (p2, m2) = meta(&[(1, 32_768, &long_ctx), (2048, 2048, &(0..512).collect::<Vec<u32>>())]);
        let h2 = host(&p2, &m2, split, None).unwrap();
        assert_eq!((h2.parts, h2.buf[h2.offsets().part_len]), (7, 4704));
        // Alone, the row gets the 512 partitions of 64 its 2 KV heads want (1024 blocks).
        let (p2, m2) = meta(&[(1, 32_768, &long_ctx)]);
        assert_eq!(host(&p2, &m2, split, None).unwrap().parts, 512);
        // Without the prefill kernel the chunk takes the cuBLAS path with its 48 slots.
        let h = host(&pos, &m, Split { flash_group: None, ..split }, None).unwrap();
        assert_eq!((h.flash_items, h.long.len(), h.long[0].3.len()), (0, 1, 48));
        assert_eq!(h.long[0].3[..2], [4, 5]);
    }

    #[test]
    fn steps_choose_the_smallest_graph_that_holds_them() {
        let split = Split { hkv: 8, force_part_len: None, flash_group: Some(4) };
        let limits = (1024, 16, true);
        // Three decode rows: the batch-4 decode graph, tables of 16 entries.
        let (_, m) = meta(&[(1, 9, &[1, 2, 3]), (1, 5, &[4, 5]), (1, 3, &[6])]);
        let s = graph_shape(&m, 3, split, limits).unwrap();
        assert!(!s.mixed);
        assert_eq!((s.pad.tokens, s.pad.seqs, s.pad.max_blocks, s.pad.items), (4, 4, 16, 0));
        // The same rows with one not sampled (a one-token chunk mid-prompt): a mixed graph.
        let s = graph_shape(&m, 2, split, limits).unwrap();
        assert!(s.mixed);
        // A 100-token chunk beside two decode rows: 102 tokens → 128, 3 sequences → 4; the
        // prefill grid 128 × 4 / 64 + 4 blocks; 25 table entries → 32.
        let blocks: Vec<u32> = (1..=25).collect();
        let (_, m) = meta(&[(1, 9, &[1, 2, 3]), (100, 100, &blocks), (1, 3, &[6])]);
        let s = graph_shape(&m, 3, split, limits).unwrap();
        assert_eq!((s.pad.tokens, s.pad.seqs, s.pad.max_blocks, s.pad.items, s.pad.parts), (128, 4, 32, 12, 1));
        assert!(host_padded(&(0..102).collect::<Vec<_>>(), &m, split, s.pad).is_some());
        // Mixed graphs off, a step beyond the largest bucket, a table beyond the limit: none.
        assert!(graph_shape(&m, 3, split, (1024, 16, false)).is_none());
        assert!(graph_shape(&m, 3, split, (24, 16, true)).is_none());
        let big: Vec<u32> = (1..=1025).collect();
        let (_, m) = meta(&[(4097, 4097, &big)]);
        assert!(graph_shape(&m, 1, split, (2048, 16, true)).is_none());
    }

    #[test]
    fn a_padded_mixed_step_pads_tokens_sequences_and_prefill_blocks() {
        let blocks: Vec<u32> = (1..=10).collect();
        let (pos, m) = meta(&[(1, 3, &[5]), (40, 40, &blocks)]);
        let split = Split { hkv: 2, force_part_len: None, flash_group: Some(2) };
        let p = Padded { tokens: 48, seqs: 4, max_blocks: 10, parts: 1, items: 3 };
        let buf = host_padded(&pos, &m, split, p).unwrap();
        assert_eq!(buf.len(), padded_len(p));
        // 80 rows: two blocks, then one padding item.
        assert_eq!(&buf[buf.len() - 6..], &[1, 64, 1, 0, SKIP_ROW, SKIP_ROW]);
        // Sequence 1's table at its padded offset (1 × 10), after sequence 0's padded one.
        assert_eq!(&buf[3 * 48 + 4..3 * 48 + 8], &[1, 40, 40, 10]);
        let bt = 3 * 48 + 16;
        assert_eq!(&buf[bt..bt + 2], &[5, 0]);
        assert_eq!(&buf[bt + 10..bt + 20], &blocks[..]);
        // Too few prefill blocks, or no prefill kernel for the long chunk: no fit.
        assert!(host_padded(&pos, &m, split, Padded { items: 1, ..p }).is_none());
        assert!(host_padded(&pos, &m, Split { flash_group: None, ..split }, p).is_none());
    }
}
