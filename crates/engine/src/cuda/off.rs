//! The `cuda` module of a build without the `cuda` feature, in place of `mod.rs` (lib.rs
//! declares one or the other, as candle-core does with its dummy CUDA backend): the names the
//! rest of the crate and the cli use in every build, none of which reaches a GPU. No device is
//! CUDA here, so no model runs goodput's kernels, no graph is captured, nothing is measured or
//! checked on a device. The host-side files are the real module's, compiled here too so their
//! tests run in every build; what only the launches and uploads use of them is unused here.

#[cfg(test)]
mod flash_ref;
#[allow(dead_code)]
pub mod gemv_table;
#[allow(dead_code)]
pub mod layout;
#[allow(dead_code)]
mod params;
pub mod report;
#[cfg(test)]
mod values;

use crate::error::{EngineError, Result};
use crate::kv_cache::KvCache;
use crate::model::{Llama, StepBatch};
use candle_core::{Device, Tensor};

pub use gemv_table::{GemvKernel, Timing, TuneRow};
pub use layout::{part_len, set_flash_prefill, set_long_chunk, LONG_CHUNK, MAX_PART_LEN};
pub use params::{pdl_state, set_fused_swiglu, set_pdl};
pub use report::{GraphProbe, KernelCheck, OpTime, StepTiming};

/// No device has a CUDA name in this build.
pub fn device_name(_: &Device) -> Option<String> {
    None
}

/// No kernel checks: there are no kernels.
pub fn check_kernels(_: &Device) -> candle_core::Result<Vec<KernelCheck>> {
    Ok(Vec::new())
}

/// No graph probe: no model runs on CUDA.
pub fn probe_decode(_: &Llama, _: usize, _: usize, _: usize) -> candle_core::Result<Option<GraphProbe>> {
    Ok(None)
}

/// No kernel timing: no model runs goodput's kernels.
pub fn time_decode(_: &Llama, _: usize, _: usize, _: usize) -> candle_core::Result<Option<StepTiming>> {
    Ok(None)
}

/// No kernel timing: no model runs goodput's kernels.
pub fn time_prefill(_: &Llama, _: usize, _: usize) -> candle_core::Result<Option<StepTiming>> {
    Ok(None)
}

/// Never called: only a model on goodput's kernels samples on the device.
pub fn sample(_: &Tensor, _: &[[f32; 4]]) -> candle_core::Result<Vec<u32>> {
    candle_core::bail!("on-device sampling needs the `cuda` feature")
}

/// Steps served from CUDA graphs: none in this build ([`StepGraphs::for_model`] is
/// always `None`, so no value of this type exists).
pub enum StepGraphs {}

impl StepGraphs {
    pub fn for_model(_: &Llama, _: bool, _: bool, _: usize, _: usize) -> Option<Self> {
        None
    }

    pub fn fits(&self, _: &StepBatch) -> bool {
        match *self {}
    }

    pub fn run(&mut self, _: &Llama, _: &StepBatch, _: &KvCache, _: &[[f32; 4]]) -> Option<Vec<u32>> {
        match *self {}
    }

    pub fn summary(&self) -> String {
        match *self {}
    }
}

impl Llama {
    /// No model runs goodput's CUDA kernels in this build.
    pub fn uses_cuda_kernels(&self) -> bool {
        false
    }

    /// Nothing to tune.
    pub(crate) fn tune_cuda(&self) {}

    /// Never called ([`Llama::uses_cuda_kernels`] is false).
    pub(crate) fn forward_cuda(&self, _: &StepBatch, _: &KvCache) -> Result<Tensor> {
        Err(EngineError::Unsupported("goodput's CUDA step needs the `cuda` feature".into()))
    }
}
