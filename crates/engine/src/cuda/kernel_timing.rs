//! Where one step's GPU time goes on goodput's CUDA path: an event is recorded on the stream
//! after each op of the step (`Llama::forward_cuda_marked`, `forward.rs`), and the time between
//! consecutive events is summed per op over the layers. The device times the gaps itself, so
//! host launch latency shows only where the GPU waited for it (the timed total is close to an
//! eager step). Together with the weight bytes each matmul reads, this says how far each op is
//! from the memory roofline, without nsys. (Not the sizing crate's step-time profile: that
//! is measured from outside, per step; this is per kernel, inside one.)

use crate::cuda::graph_probe::decode_step;
use crate::cuda::report::{OpTime, StepTiming};
use crate::error::EngineError;
use crate::kv_cache::KvCache;
use crate::model::{Llama, StepBatch};
use candle_core::cuda_backend::cudarc::driver::sys::CUevent_flags;
use candle_core::{Device, Result};

/// Times the ops of `steps` decode steps of `batch` sequences at `context` tokens (after one
/// untimed step). `None` off goodput's kernels.
pub fn time_decode(model: &Llama, batch: usize, context: usize, steps: usize) -> Result<Option<StepTiming>> {
    if !model.uses_cuda_kernels() || batch == 0 || context == 0 || steps == 0 {
        return Ok(None);
    }
    let (kv, step) = decode_step(model, batch, context)?;
    let ops = time_ops(model, &kv, &step, steps)?;
    let total_us = ops.iter().map(|o| o.us).sum();
    Ok(Some(StepTiming { prefill: false, batch, context, steps, ops, total_us }))
}

/// Times the ops of `steps` prefills of one `prompt`-token sequence (after one untimed prefill).
pub fn time_prefill(model: &Llama, prompt: usize, steps: usize) -> Result<Option<StepTiming>> {
    if !model.uses_cuda_kernels() || prompt == 0 || steps == 0 {
        return Ok(None);
    }
    let bs = 16;
    let blocks = prompt.div_ceil(bs);
    let kv = KvCache::new(&model.spec, blocks + 1, bs, model.dtype, &model.device)
        .map_err(|e| candle_core::Error::Msg(e.to_string()))?;
    let mut step = StepBatch::new(bs);
    let tokens: Vec<u32> = (0..prompt as u32).map(|i| 3 + i % 1000).collect();
    let table: Vec<u32> = (1..=blocks as u32).collect();
    step.push(&tokens, 0, std::slice::from_ref(&table), true);
    let ops = time_ops(model, &kv, &step, steps)?;
    let total_us = ops.iter().map(|o| o.us).sum();
    Ok(Some(StepTiming { prefill: true, batch: 1, context: prompt, steps, ops, total_us }))
}

fn time_ops(model: &Llama, kv: &KvCache, step: &StepBatch, steps: usize) -> Result<Vec<OpTime>> {
    let Device::Cuda(dev) = &model.device else { candle_core::bail!("kernel timing needs a CUDA device") };
    let err = |e: EngineError| candle_core::Error::Msg(e.to_string());
    let stream = dev.cuda_stream();
    let event = || {
        stream
            .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(|e| EngineError::Internal(format!("record event: {e}")))
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
