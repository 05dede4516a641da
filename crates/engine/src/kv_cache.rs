//! The paged KV pool: per layer, K and V tensors of `num_blocks × block_size` slots. The block
//! allocator (`goodput-scheduler`) decides which slots each sequence's tokens occupy; this is
//! where they really are.

use crate::error::{EngineError, Result};
use candle_core::{DType, Device, Tensor};
use goodput_core::ModelSpec;

pub struct KvCache {
    pub k: Vec<Tensor>,
    pub v: Vec<Tensor>,
    pub num_blocks: usize,
    pub block_size: usize,
}

impl KvCache {
    /// Bytes one block takes across all layers (K and V).
    pub fn bytes_per_block(spec: &ModelSpec, block_size: usize, dtype: DType) -> u64 {
        spec.kv_bytes_per_token(dtype.size_in_bytes()) * block_size as u64
    }

    /// Blocks that fit in `bytes`.
    pub fn blocks_for_bytes(spec: &ModelSpec, block_size: usize, dtype: DType, bytes: u64) -> usize {
        (bytes / Self::bytes_per_block(spec, block_size, dtype).max(1)) as usize
    }

    pub fn new(spec: &ModelSpec, num_blocks: usize, block_size: usize, dtype: DType, device: &Device) -> Result<Self> {
        if num_blocks < 2 || block_size == 0 {
            return Err(EngineError::Config(format!(
                "a KV pool needs at least 2 blocks (one is the reserved null block) of at least 1 token; got {num_blocks} × {block_size}"
            )));
        }
        let bytes = Self::bytes_per_block(spec, block_size, dtype) * num_blocks as u64;
        if let Some(avail) = crate::weights::mem_available() {
            if device.is_cpu() && bytes > avail {
                return Err(EngineError::Config(format!(
                    "the KV pool needs {:.2} GiB ({num_blocks} blocks × {block_size} tokens) but only {:.2} GiB of memory is available",
                    bytes as f64 / (1u64 << 30) as f64,
                    avail as f64 / (1u64 << 30) as f64
                )));
            }
        }
        let shape = (num_blocks * block_size, spec.num_kv_heads, spec.head_dim());
        let mut k = Vec::with_capacity(spec.num_layers);
        let mut v = Vec::with_capacity(spec.num_layers);
        for _ in 0..spec.num_layers {
            k.push(Tensor::zeros(shape, dtype, device)?);
            v.push(Tensor::zeros(shape, dtype, device)?);
        }
        Ok(Self { k, v, num_blocks, block_size })
    }
}
