//! A step's attention metadata on the device (the layout of `layout.rs`), built once per step
//! and read by every layer's kernels; or, for a step replayed from a CUDA graph, the graph's
//! static buffer of that layout.

use crate::cuda::device::ptr;
use crate::cuda::layout::{host, Padded};
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
}

impl StepDevice {
    /// Uploads the step's metadata for `hkv` KV heads, split as [`part_len`](crate::cuda::layout::part_len) says (or in
    /// partitions of `force_part_len`, for checks).
    pub fn upload(
        positions: &[u32],
        meta: &AttnMeta,
        hkv: usize,
        force_part_len: Option<usize>,
        device: &Device,
    ) -> Result<Self> {
        let h = host(positions, meta, hkv, force_part_len, None)?;
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
        })
    }

    /// A graph's metadata: `meta` is its static buffer (filled by `layout::host_padded` before
    /// each replay).
    pub(crate) fn padded(meta: Tensor, p: Padded, block_size: usize) -> Self {
        Self {
            meta,
            tokens: p.rows,
            seq_slots: p.rows,
            bt_len: p.rows * p.max_blocks,
            block_size,
            long: Vec::new(),
            paged_rows: p.rows,
            parts: p.parts,
        }
    }

    fn at(&self, offset: usize) -> Result<u64> {
        Ok(ptr(&self.meta)? + 4 * offset as u64)
    }
    pub(crate) fn positions(&self) -> Result<u64> {
        self.at(0)
    }
    pub(crate) fn slots(&self) -> Result<u64> {
        self.at(self.tokens)
    }
    pub(crate) fn row_seq(&self) -> Result<u64> {
        self.at(2 * self.tokens)
    }
    pub(crate) fn seq_info(&self) -> Result<u64> {
        self.at(3 * self.tokens)
    }
    pub(crate) fn block_tables(&self) -> Result<u64> {
        self.at(3 * self.tokens + 4 * self.seq_slots)
    }
    pub(crate) fn part_len(&self) -> Result<u64> {
        self.at(3 * self.tokens + 4 * self.seq_slots + self.bt_len)
    }
}
