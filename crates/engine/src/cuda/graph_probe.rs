//! Whether one decode step of goodput's CUDA path can be captured as a CUDA graph on candle's
//! stream, and what replaying it saves against launching its kernels one by one.
//!
//! The step allocates its intermediates from the stream-ordered pool (candle's allocations go
//! through cudarc's `cuMemAllocAsync`), which capture turns into memory nodes; host uploads of
//! the step's inputs are served from candle's htod cache during capture (same contents).
//! The probe captures one step with fixed inputs, instantiates it with auto-free on launch and
//! replays it; it measures, it does not serve (a serving graph would need static input buffers
//! per batch-size bucket, as vLLM keeps).

use crate::cuda::report::GraphProbe;
use crate::kv_cache::KvCache;
use crate::model::{Llama, StepBatch};
use candle_core::cuda_backend::cudarc::driver::{sys, CudaGraph};
use candle_core::{Device, Result};
use std::time::Instant;

/// A decode step of `batch` sequences at `context` tokens (fresh KV pool, fixed inputs):
/// eager against captured, on goodput's kernels or on the candle-op path, whichever the model
/// runs. `None` off CUDA.
pub fn probe_decode(model: &Llama, batch: usize, context: usize, iters: usize) -> Result<Option<GraphProbe>> {
    if !model.device.is_cuda() || batch == 0 || context == 0 || iters == 0 {
        return Ok(None);
    }
    let (kv, step) = decode_step(model, batch, context)?;
    probe(model, &step, &kv, iters).map(Some)
}

/// A fresh KV pool and a decode step of `batch` sequences, each at `context` tokens with its
/// own blocks (block 0 unused).
pub(crate) fn decode_step(model: &Llama, batch: usize, context: usize) -> Result<(KvCache, StepBatch)> {
    let bs = 16;
    let per_seq = (context + 1).div_ceil(bs);
    let kv = KvCache::new(&model.spec, batch * per_seq + 1, bs, model.dtype, &model.device)
        .map_err(|e| candle_core::Error::Msg(e.to_string()))?;
    let mut step = StepBatch::new(bs);
    for i in 0..batch {
        let table: Vec<u32> = (0..per_seq).map(|j| (1 + i * per_seq + j) as u32).collect();
        step.push(&[7 + i as u32], context, std::slice::from_ref(&table), true);
    }
    Ok((kv, step))
}

/// Times `iters` eager steps of `batch`, then tries to capture and replay it.
fn probe(model: &Llama, batch: &StepBatch, kv: &KvCache, iters: usize) -> Result<GraphProbe> {
    let Device::Cuda(dev) = &model.device else { candle_core::bail!("the graph probe needs a CUDA device") };
    let stream = dev.cuda_stream();
    let sync = || stream.synchronize().map_err(|e| candle_core::Error::Msg(format!("synchronize: {e}")));
    let fwd = |m: &Llama| m.forward(batch, kv).map_err(|e| candle_core::Error::Msg(e.to_string()));
    fwd(model)?;
    sync()?;
    let t = Instant::now();
    for _ in 0..iters {
        fwd(model)?;
    }
    sync()?;
    let eager_ms = t.elapsed().as_secs_f64() * 1e3 / iters as f64;
    let mut out = GraphProbe {
        eager_ms,
        captured: false,
        error: None,
        replay_ms: None,
        kernel_nodes: None,
        nodes: None,
        iterations: iters,
    };
    let _cache = dev.enable_cuda_graph_htod_cache();
    fwd(model)?; // fills the htod cache with this step's inputs
    sync()?;
    if let Err(e) = stream.begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED) {
        out.error = Some(format!("begin capture: {e}"));
        return Ok(out);
    }
    let captured = fwd(model);
    let graph = stream.end_capture(sys::CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH);
    let graph = match (captured, graph) {
        (Err(e), _) => {
            out.error = Some(format!("the step failed under capture: {e}"));
            return Ok(out);
        }
        (Ok(_), Err(e)) => {
            out.error = Some(format!("end capture / instantiate: {e}"));
            return Ok(out);
        }
        (Ok(_), Ok(None)) => {
            out.error = Some("capture produced no graph".into());
            return Ok(out);
        }
        // The logits tensor made under capture lives in the graph's memory (freed by the
        // graph itself on relaunch): it must not be freed again through candle.
        (Ok(logits), Ok(Some(g))) => {
            std::mem::forget(logits);
            g
        }
    };
    out.captured = true;
    (out.nodes, out.kernel_nodes) = match count_nodes(&graph) {
        Some((all, kernels)) => (Some(all), Some(kernels)),
        None => (None, None),
    };
    let replay = || -> std::result::Result<f64, String> {
        graph.launch().map_err(|e| format!("launch: {e}"))?;
        stream.synchronize().map_err(|e| format!("synchronize: {e}"))?;
        let t = Instant::now();
        for _ in 0..iters {
            graph.launch().map_err(|e| format!("launch: {e}"))?;
        }
        stream.synchronize().map_err(|e| format!("synchronize: {e}"))?;
        Ok(t.elapsed().as_secs_f64() * 1e3 / iters as f64)
    };
    match replay() {
        Ok(ms) => out.replay_ms = Some(ms),
        Err(e) => out.error = Some(e),
    }
    Ok(out)
}

/// (all nodes, kernel nodes) of a captured graph.
fn count_nodes(g: &CudaGraph) -> Option<(usize, usize)> {
    let mut n = 0usize;
    // SAFETY: the graph is alive; a null array asks for the count only.
    let ok = unsafe { sys::cuGraphGetNodes(g.cu_graph(), std::ptr::null_mut(), &mut n) };
    if ok != sys::CUresult::CUDA_SUCCESS {
        return None;
    }
    let mut nodes = vec![std::ptr::null_mut(); n];
    // SAFETY: `nodes` holds `n` entries.
    let ok = unsafe { sys::cuGraphGetNodes(g.cu_graph(), nodes.as_mut_ptr(), &mut n) };
    if ok != sys::CUresult::CUDA_SUCCESS {
        return None;
    }
    let kernels = nodes
        .iter()
        .filter(|&&node| {
            let mut t = sys::CUgraphNodeType::CU_GRAPH_NODE_TYPE_EMPTY;
            // SAFETY: a node of the live graph.
            let ok = unsafe { sys::cuGraphNodeGetType(node, &mut t) };
            ok == sys::CUresult::CUDA_SUCCESS && t == sys::CUgraphNodeType::CU_GRAPH_NODE_TYPE_KERNEL
        })
        .count();
    Some((n, kernels))
}
