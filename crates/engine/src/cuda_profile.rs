//! Where one decode step's GPU time goes on goodput's CUDA path: an event is recorded on the
//! stream after each op of the step (`Llama::forward_cuda_marked`), and the time between
//! consecutive events is summed per op over the layers. The device times the gaps itself, so
//! host launch latency shows only where the GPU waited for it (the profile's total is close
//! to an eager step). Together with the weight bytes each matmul reads, this says how far
//! each op is from the memory roofline, without nsys.

use crate::model::Llama;
use candle_core::Result;
use serde::Serialize;

/// One op's share of a decode step.
#[derive(Clone, Debug, Serialize)]
pub struct OpTime {
    pub op: &'static str,
    /// Launches of the op per step (one per layer for most).
    pub calls: usize,
    /// GPU time per step, µs (mean over the profiled steps).
    pub us: f64,
    /// Weight bytes the op reads per step (matmuls), for its achieved GB/s.
    pub weight_bytes: Option<u64>,
}

/// The ops of a step, and their sum: a decode step of `batch` sequences at `context` tokens, or
/// (`prefill`) one sequence's prompt of `context` tokens.
#[derive(Clone, Debug, Serialize)]
pub struct StepProfile {
    pub prefill: bool,
    pub batch: usize,
    pub context: usize,
    pub steps: usize,
    pub ops: Vec<OpTime>,
    /// Sum of the ops' times, µs.
    pub total_us: f64,
}

/// Profiles `steps` decode steps of `batch` sequences at `context` tokens (after one unprofiled
/// step). `None` off CUDA or off goodput's kernels.
#[cfg(feature = "cuda")]
pub fn profile_decode(model: &Llama, batch: usize, context: usize, steps: usize) -> Result<Option<StepProfile>> {
    if !model.uses_cuda_kernels() || batch == 0 || context == 0 || steps == 0 {
        return Ok(None);
    }
    let (kv, step) = crate::cuda_graph::decode_step(model, batch, context)?;
    let ops = profile(model, &kv, &step, steps)?;
    let total_us = ops.iter().map(|o| o.us).sum();
    Ok(Some(StepProfile { prefill: false, batch, context, steps, ops, total_us }))
}

/// Profiles `steps` prefills of one `prompt`-token sequence (after one unprofiled prefill).
#[cfg(feature = "cuda")]
pub fn profile_prefill(model: &Llama, prompt: usize, steps: usize) -> Result<Option<StepProfile>> {
    if !model.uses_cuda_kernels() || prompt == 0 || steps == 0 {
        return Ok(None);
    }
    let bs = 16;
    let blocks = prompt.div_ceil(bs);
    let kv = crate::kv_cache::KvCache::new(&model.spec, blocks + 1, bs, model.dtype, &model.device)
        .map_err(|e| candle_core::Error::Msg(e.to_string()))?;
    let mut step = crate::model::StepBatch::new(bs);
    let tokens: Vec<u32> = (0..prompt as u32).map(|i| 3 + i % 1000).collect();
    let table: Vec<u32> = (1..=blocks as u32).collect();
    step.push(&tokens, 0, &table, true);
    let ops = profile(model, &kv, &step, steps)?;
    let total_us = ops.iter().map(|o| o.us).sum();
    Ok(Some(StepProfile { prefill: true, batch: 1, context: prompt, steps, ops, total_us }))
}

#[cfg(feature = "cuda")]
fn profile(
    model: &Llama,
    kv: &crate::kv_cache::KvCache,
    step: &crate::model::StepBatch,
    steps: usize,
) -> Result<Vec<OpTime>> {
    use candle_core::cuda_backend::cudarc::driver::sys::CUevent_flags;
    use candle_core::Device;
    let Device::Cuda(dev) = &model.device else { candle_core::bail!("profiling needs a CUDA device") };
    let err = |e: crate::error::EngineError| candle_core::Error::Msg(e.to_string());
    let stream = dev.cuda_stream();
    let event = || {
        stream
            .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(|e| crate::error::EngineError::Other(format!("record event: {e}")))
    };
    model.forward(step, kv).map_err(err)?;
    let mut ops: Vec<OpTime> = Vec::new();
    for _ in 0..steps {
        model.device.synchronize()?;
        let mut marks = vec![("", event().map_err(err)?)];
        model
            .forward_cuda_marked(step, kv, &mut |op| {
                marks.push((op, event()?));
                Ok(())
            })
            .map_err(err)?;
        for w in marks.windows(2) {
            let us =
                w[0].1.elapsed_ms(&w[1].1).map_err(|e| candle_core::Error::Msg(format!("elapsed: {e}")))? as f64 * 1e3;
            match ops.iter_mut().find(|o| o.op == w[1].0) {
                Some(o) => {
                    o.us += us;
                    o.calls += 1;
                }
                None => ops.push(OpTime { op: w[1].0, calls: 1, us, weight_bytes: None }),
            }
        }
    }
    for o in &mut ops {
        o.us /= steps as f64;
        o.calls /= steps;
        o.weight_bytes = model.op_weight_bytes(o.op);
    }
    Ok(ops)
}

#[cfg(not(feature = "cuda"))]
pub fn profile_decode(_: &Llama, _: usize, _: usize, _: usize) -> Result<Option<StepProfile>> {
    Ok(None)
}

#[cfg(not(feature = "cuda"))]
pub fn profile_prefill(_: &Llama, _: usize, _: usize) -> Result<Option<StepProfile>> {
    Ok(None)
}
