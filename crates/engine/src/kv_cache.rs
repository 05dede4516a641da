//! The paged KV pool: per layer, K and V tensors of `num_blocks × block_size` slots. The block
//! allocator (`goodput-scheduler`) decides which slots each sequence's tokens occupy; this is
//! where they really are, and [`AttnMeta`] is one step's map into them (each sequence's query
//! rows, context and block table, each new token's slot), read by every attention backend.
//!
//! Layers are cut into KV-cache groups of one kind (full attention, or one sliding window) and
//! equal size (`ModelSpec::kv_groups`: one group of every layer for a uniform model; gpt-oss's
//! 12 sliding and 12 full layers are two). Each sequence has a block table per group, and the
//! `j`-th layer of every group shares pool `j`: a tensor `(num_blocks * block_size,
//! num_kv_heads, head_dim)` where the K (or V) of position `p` lives in slot
//! `block_table[p / block_size] * block_size + p % block_size` of the layer's group's table, so
//! a block holds the same bytes whichever group it serves (vLLM's hybrid KV-cache layout). An MLA layer's pool is
//! `(slots, 1, kv_lora_rank + qk_rope_head_dim)` — the latent and the RoPE key, read as both K
//! and V — and its V pool is empty.

use crate::error::{EngineError, Result};
use candle_core::{DType, Device, Tensor};
use goodput_core::ModelSpec;

pub struct KvCache {
    /// One K (and V) pool per layer of a KV-cache group: the `j`-th layer of every group
    /// uses pool `j`, through its own group's block table (`ModelSpec::kv_groups`).
    pub k: Vec<Tensor>,
    pub v: Vec<Tensor>,
    pub num_blocks: usize,
    pub block_size: usize,
    /// Each layer's (group, pool).
    layer_at: Vec<(usize, usize)>,
    groups: usize,
}

impl KvCache {
    /// Bytes one block takes: the K and V (or latent) of one group's layers.
    pub fn bytes_per_block(spec: &ModelSpec, block_size: usize, dtype: DType) -> u64 {
        spec.kv_block_bytes(block_size, dtype.size_in_bytes())
    }

    /// Blocks that fit in `bytes`.
    pub fn blocks_for_bytes(spec: &ModelSpec, block_size: usize, dtype: DType, bytes: u64) -> usize {
        (bytes / Self::bytes_per_block(spec, block_size, dtype).max(1)) as usize
    }

    pub fn new(spec: &ModelSpec, num_blocks: usize, block_size: usize, dtype: DType, device: &Device) -> Result<Self> {
        if num_blocks < 2 || block_size == 0 {
            let problem = format!("a KV pool needs at least 2 blocks (one is the reserved null block) of at least 1 token; got {num_blocks} × {block_size}");
            return Err(EngineError::Setting { setting: "--kv-blocks", problem });
        }
        let bytes = Self::bytes_per_block(spec, block_size, dtype) * num_blocks as u64;
        if let Some(avail) = crate::weights::mem_available() {
            if device.is_cpu() && bytes > avail {
                return Err(EngineError::Memory {
                    what: "the KV pool".into(),
                    detail: format!(" ({num_blocks} blocks × {block_size} tokens)"),
                    needs_gib: bytes as f64 / (1u64 << 30) as f64,
                    available_gib: avail as f64 / (1u64 << 30) as f64,
                });
            }
        }
        let groups = spec.kv_groups();
        let mut layer_at = vec![(0, 0); spec.num_layers];
        for (g, group) in groups.iter().enumerate() {
            for (j, &l) in group.layers.iter().enumerate() {
                layer_at[l] = (g, j);
            }
        }
        let slots = num_blocks * block_size;
        let per_group = groups.first().map_or(0, |g| g.layers.len());
        let mut k = Vec::with_capacity(per_group);
        let mut v = Vec::with_capacity(per_group);
        for _ in 0..per_group {
            match &spec.mla {
                // One latent row per token (latent ‖ RoPE key), read as K and V: no V pool.
                Some(m) => {
                    k.push(Tensor::zeros((slots, 1, m.cache_width()), dtype, device)?);
                    v.push(Tensor::zeros((0, 1, m.cache_width()), dtype, device)?);
                }
                None => {
                    let shape = (slots, spec.num_kv_heads, spec.head_dim());
                    k.push(Tensor::zeros(shape, dtype, device)?);
                    v.push(Tensor::zeros(shape, dtype, device)?);
                }
            }
        }
        Ok(Self { k, v, num_blocks, block_size, layer_at, groups: groups.len() })
    }

    /// A pool just large enough for one sequence of `tokens` positions, and its block table
    /// in each group (for steps run outside the scheduler: checks, probes, tests).
    pub fn for_one_sequence(
        spec: &ModelSpec,
        tokens: usize,
        block_size: usize,
        dtype: DType,
        device: &Device,
    ) -> Result<(Self, Vec<Vec<u32>>)> {
        let groups = spec.kv_groups().len();
        let per = tokens.div_ceil(block_size.max(1)).max(1);
        let kv = Self::new(spec, groups * per + 1, block_size, dtype, device)?;
        let tables = (0..groups).map(|g| (g * per + 1..=(g + 1) * per).map(|b| b as u32).collect()).collect();
        Ok((kv, tables))
    }

    /// Layer `l`'s K and V pools and its KV-cache group.
    pub fn layer(&self, l: usize) -> (&Tensor, &Tensor, usize) {
        let (g, j) = self.layer_at[l];
        (&self.k[j], &self.v[j], g)
    }

    /// KV-cache groups (block tables per sequence).
    pub fn num_groups(&self) -> usize {
        self.groups
    }
}

/// Where each sequence's queries and K/V are.
#[derive(Clone, Debug, Default)]
pub struct AttnMeta {
    pub block_size: usize,
    pub seqs: Vec<AttnSeq>,
    /// Every sequence's block table, one after the other.
    pub block_tables: Vec<u32>,
    /// Pool slot of each new token (where its K/V are written).
    pub slot_mapping: Vec<u32>,
}

#[derive(Clone, Copy, Debug, Default)]
pub struct AttnSeq {
    /// First row of this sequence in the packed query tensor.
    pub q_start: usize,
    /// New tokens (query rows) of this sequence.
    pub q_len: usize,
    /// Positions with K/V after this step (the new tokens included).
    pub ctx_len: usize,
    /// Its block table is `block_tables[bt_start..bt_start + bt_len]`.
    pub bt_start: usize,
    pub bt_len: usize,
}

impl AttnMeta {
    pub fn new(block_size: usize) -> Self {
        Self { block_size, ..Default::default() }
    }

    /// Adds a sequence whose new tokens are the next `q_len` query rows.
    pub fn push(&mut self, q_len: usize, ctx_len: usize, block_table: &[u32]) {
        let bs = self.block_size;
        for p in ctx_len - q_len..ctx_len {
            self.slot_mapping.push(block_table[p / bs] * bs as u32 + (p % bs) as u32);
        }
        self.push_seq(q_len, ctx_len, block_table);
    }

    /// Adds a sequence without slot mapping (attention only, its K/V already written).
    pub fn push_seq(&mut self, q_len: usize, ctx_len: usize, block_table: &[u32]) {
        let q_start = self.seqs.last().map_or(0, |s| s.q_start + s.q_len);
        let bt_start = self.block_tables.len();
        self.block_tables.extend_from_slice(block_table);
        self.seqs.push(AttnSeq { q_start, q_len, ctx_len, bt_start, bt_len: block_table.len() });
    }

    pub fn num_tokens(&self) -> usize {
        self.seqs.last().map_or(0, |s| s.q_start + s.q_len)
    }

    /// Pool slot of position `pos` of sequence `s`.
    pub(crate) fn slot(&self, s: &AttnSeq, pos: usize) -> usize {
        let bs = self.block_size;
        self.block_tables[s.bt_start + pos / bs] as usize * bs + pos % bs
    }
}
