//! A step's attention metadata on the device (the layout of `layout.rs`), built once per step
//! and read by every layer's kernels; or, for a step replayed from a CUDA graph, the graph's
//! static buffer of that layout.

use crate::cuda::device::ptr;
use crate::cuda::layout::{host, Offsets, Padded, Split};
use crate::kv_cache::AttnMeta;
use candle_core::{Device, Result, Tensor};

/// One long chunk attention computes with cuBLAS.
pub(crate) struct LongSeq {
    pub q_start: usize,
    pub q_len: usize,
    pub ctx_len: usize,
    /// Pool slot of each of its `ctx_len` positions, on the device.
    pub slots: Tensor,
}

/// The step's metadata on the device, and where each section starts.
pub struct StepDevice {
    pub(crate) meta: Tensor,
    pub(crate) tokens: usize,
    /// Entries of the seq_info section (sequences, or the padded row count).
    seq_slots: usize,
    bt_len: usize,
    pub(crate) block_size: usize,
    pub(crate) long: Vec<LongSeq>,
    /// Rows the paged kernel computes (0: no launch).
    pub(crate) paged_rows: usize,
    /// Partitions of the paged kernel's grid.
    pub(crate) parts: usize,
    /// Blocks of the prefill kernel's grid (0: no launch).
    pub(crate) flash_items: usize,
}

impl StepDevice {
    /// Uploads the step's metadata, its long chunks and context split as `split` says.
    pub(crate) fn upload(positions: &[u32], meta: &AttnMeta, split: Split, device: &Device) -> Result<Self> {
        let h = host(positions, meta, split, None)?;
        let mut long = Vec::with_capacity(h.long.len());
        for (q_start, q_len, ctx_len, slots) in h.long {
            long.push(LongSeq { q_start, q_len, ctx_len, slots: Tensor::from_vec(slots, ctx_len, device)? });
        }
        let n = h.buf.len();
        Ok(Self {
            meta: Tensor::from_vec(h.buf, n, device)?,
            tokens: h.tokens,
            seq_slots: h.seq_slots,
            bt_len: h.bt_len,
            block_size: meta.block_size,
            long,
            paged_rows: h.paged_rows,
            parts: h.parts,
            flash_items: h.flash_items,
        })
    }

    /// A graph's metadata: `meta` is its static buffer (filled by `layout::host_padded` before
    /// each replay).
    pub(crate) fn padded(meta: Tensor, p: Padded, block_size: usize) -> Self {
        Self {
            meta,
            tokens: p.tokens,
            seq_slots: p.seqs,
            bt_len: p.seqs * p.max_blocks,
            block_size,
            long: Vec::new(),
            paged_rows: p.tokens,
            parts: p.parts,
            flash_items: p.items,
        }
    }

    fn at(&self, section: fn(Offsets) -> usize) -> Result<u64> {
        let o = Offsets::new(self.tokens, self.seq_slots, self.bt_len);
        Ok(ptr(&self.meta)? + 4 * section(o) as u64)
    }
    pub(crate) fn positions(&self) -> Result<u64> {
        self.at(|o| o.positions)
    }
    pub(crate) fn slots(&self) -> Result<u64> {
        self.at(|o| o.slots)
    }
    pub(crate) fn row_seq(&self) -> Result<u64> {
        self.at(|o| o.row_seq)
    }
    pub(crate) fn seq_info(&self) -> Result<u64> {
        self.at(|o| o.seq_info)
    }
    pub(crate) fn block_tables(&self) -> Result<u64> {
        self.at(|o| o.block_tables)
    }
    pub(crate) fn part_len(&self) -> Result<u64> {
        self.at(|o| o.part_len)
    }
    /// The prefill kernel's blocks, `(sequence, first row)` each.
    pub(crate) fn flash_items_ptr(&self) -> Result<u64> {
        self.at(|o| o.flash_items)
    }
}
