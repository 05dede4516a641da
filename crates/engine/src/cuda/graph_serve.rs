//! Decode steps served from CUDA graphs, one per batch-size bucket and block-table width, as
//! vLLM captures its decode graphs: a step of `n` decode rows runs in the smallest bucket that
//! holds it (its padding rows write no KV and are skipped by attention), with room for its
//! longest block table rounded up to a power of two.
//!
//! Each graph owns static buffers (token ids, the padded step metadata of `layout.rs`,
//! the sampling parameters, the sampled ids); before a replay the step's inputs are copied
//! into them and after it the ids come back, nothing else crosses. The graph's intermediates
//! are its own memory (candle's stream-ordered allocations become memory nodes). The paged
//! kernel's partition count is fixed per graph; the partition length is read from the
//! metadata, so each step's context is still split evenly. A bucket is captured the first
//! time a step needs it: the step runs once eagerly on the static buffers (which fills
//! candle's host-to-device cache for its layout parameters), is captured, then replayed.
//!
//! If a capture or a replay fails, graph serving stops for the engine (with the reason kept in
//! [`GraphStats::disabled`]) and steps run eagerly: a graph is a speed-up, never a
//! requirement.

use crate::cuda::device::ptr;
use crate::cuda::layout::{graph_parts, host_padded, padded_len, Padded};
use crate::cuda::meta::StepDevice;
use crate::cuda::params::pdl_state;
use crate::kv_cache::KvCache;
use crate::model::{Llama, StepBatch};
use candle_core::cuda_backend::cudarc::driver::{result, sys, CudaGraph};
use candle_core::{bail, DType, Device, Result, Tensor};
use serde::Serialize;

/// Batch sizes graphs are captured for.
pub const BUCKETS: [usize; 14] = [1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 160, 192, 256];

/// What graph serving did, for reports.
#[derive(Clone, Debug, Default, Serialize)]
pub struct GraphStats {
    /// Graphs captured so far: (rows, block-table entries per sequence).
    pub captured: Vec<(usize, usize)>,
    /// Decode steps replayed from a graph.
    pub replays: u64,
    /// Why graph serving stopped, if it did.
    pub disabled: Option<String>,
}

struct Captured {
    pad: Padded,
    graph: CudaGraph,
    ids: Tensor,
    meta: Tensor,
    params: Tensor,
    out: Tensor,
}

/// The captured graphs of one engine.
pub struct DecodeGraphs {
    max_blocks: usize,
    block_size: usize,
    graphs: Vec<Captured>,
    pub stats: GraphStats,
}

impl DecodeGraphs {
    /// Graph serving for `model` when `on` and the model runs goodput's kernels (graphs capture
    /// those), else `None`.
    pub fn for_model(model: &Llama, on: bool, max_model_len: usize, block_size: usize) -> Option<Self> {
        (on && model.uses_cuda_kernels()).then(|| Self::new(max_model_len, block_size))
    }

    /// What graph serving did (buckets captured, replays, why it stopped), and whether kernels
    /// launch with PDL, in one line.
    pub fn summary(&self) -> String {
        let s = &self.stats;
        let pdl = match pdl_state() {
            (true, _) => "on".to_string(),
            (false, None) => "off".to_string(),
            (false, Some(why)) => format!("off ({why})"),
        };
        format!(
            "CUDA graphs: {} decode steps replayed; captured (rows, table width): {:?}{}; PDL {pdl}",
            s.replays,
            s.captured,
            s.disabled.as_ref().map_or(String::new(), |e| format!("; stopped: {e}"))
        )
    }

    /// Graphs for sequences of up to `max_model_len` tokens in blocks of `block_size`.
    pub fn new(max_model_len: usize, block_size: usize) -> Self {
        Self {
            max_blocks: max_model_len.div_ceil(block_size.max(1)),
            block_size,
            graphs: Vec::new(),
            stats: GraphStats::default(),
        }
    }

    /// Whether `batch` can run from a graph: decode rows only, each sampled, within a bucket.
    pub fn fits(&self, batch: &StepBatch) -> bool {
        let n = batch.tokens.len();
        self.stats.disabled.is_none()
            && n > 0
            && n <= BUCKETS[BUCKETS.len() - 1]
            && batch.sample_rows.len() == n
            && batch.meta().seqs.iter().all(|s| s.q_len == 1 && s.bt_len <= self.max_blocks)
    }

    /// Runs `batch` (which [`Self::fits`]) from its bucket's graph and returns the sampled ids;
    /// `None` when graph serving is off or just failed (the caller runs the step eagerly: a
    /// failed replay is recomputed whole, writing the same KV).
    pub fn run(&mut self, model: &Llama, batch: &StepBatch, kv: &KvCache, params: &[[f32; 4]]) -> Option<Vec<u32>> {
        match self.try_run(model, batch, kv, params) {
            Ok(ids) => ids,
            Err(e) => {
                self.stats.disabled = Some(e.to_string());
                self.graphs.clear();
                None
            }
        }
    }

    fn try_run(
        &mut self,
        model: &Llama,
        batch: &StepBatch,
        kv: &KvCache,
        params: &[[f32; 4]],
    ) -> Result<Option<Vec<u32>>> {
        let n = batch.tokens.len();
        if !self.fits(batch) || params.len() != n {
            return Ok(None);
        }
        let Some(&rows) = BUCKETS.iter().find(|&&b| b >= n) else { return Ok(None) };
        // Table entries per sequence: the step's longest, to a power of two (≥ 16), so the
        // metadata uploaded per step stays near what the step needs.
        let need = batch.meta().seqs.iter().map(|s| s.bt_len).max().unwrap_or(1);
        let max_blocks = need.next_power_of_two().max(16).min(self.max_blocks);
        let parts = graph_parts(rows, model.spec.num_kv_heads, max_blocks * self.block_size);
        let pad = Padded { rows, max_blocks, parts };
        let Some(meta) = host_padded(&batch.positions, batch.meta(), pad) else { return Ok(None) };
        let mut ids = batch.tokens.clone();
        ids.resize(rows, 0);
        // Padding rows: temperature 0 (argmax of whatever they computed, then dropped).
        let mut p: Vec<f32> = params.iter().flatten().copied().collect();
        p.resize(rows * 4, 0.0);
        let i = match self.graphs.iter().position(|g| (g.pad.rows, g.pad.max_blocks) == (rows, max_blocks)) {
            Some(i) => {
                let g = &self.graphs[i];
                write(&g.ids, &ids)?;
                write(&g.meta, &meta)?;
                write(&g.params, &p)?;
                i
            }
            None => {
                let g = capture(model, kv, pad, self.block_size, (&ids, &meta, &p))?;
                self.stats.captured.push((rows, max_blocks));
                self.graphs.push(g);
                self.graphs.len() - 1
            }
        };
        let g = &self.graphs[i];
        g.graph.launch().map_err(|e| candle_core::Error::Msg(format!("graph replay at batch {rows}: {e}")))?;
        let out = g.out.to_vec1::<u32>()?;
        self.stats.replays += 1;
        Ok(Some(out[..n].to_vec()))
    }
}

/// Copies `src` into the start of the static device buffer `dst` (stream-ordered).
fn write<T: candle_core::WithDType>(dst: &Tensor, src: &[T]) -> Result<()> {
    if src.len() > dst.elem_count() || dst.dtype() != T::DTYPE {
        bail!("graph input of {} values does not fit its buffer {:?} {:?}", src.len(), dst.shape(), dst.dtype());
    }
    let Device::Cuda(dev) = dst.device() else { bail!("graph buffers live on the GPU") };
    let p = ptr(dst)?;
    // SAFETY: `dst` is a live device buffer of at least `src.len()` elements of T; the copy is
    // ordered on candle's stream before the kernels that read it.
    unsafe { result::memcpy_htod_async(p, src, dev.cuda_stream().cu_stream()) }
        .map_err(|e| candle_core::Error::Msg(format!("graph input upload: {e}")))
}

/// Captures the decode step of `pad.rows` rows with `inputs` (ids, metadata, parameters)
/// already in its static buffers: one eager run to fill candle's upload cache, then the
/// capture.
fn capture(
    model: &Llama,
    kv: &KvCache,
    pad: Padded,
    block_size: usize,
    inputs: (&[u32], &[u32], &[f32]),
) -> Result<Captured> {
    let Device::Cuda(dev) = &model.device else { bail!("CUDA graphs need a CUDA device") };
    let d = &model.device;
    let ids = Tensor::zeros(pad.rows, DType::U32, d)?;
    let meta = Tensor::zeros(padded_len(pad), DType::U32, d)?;
    let params = Tensor::zeros(pad.rows * 4, DType::F32, d)?;
    let out = Tensor::zeros(pad.rows, DType::U32, d)?;
    write(&ids, inputs.0)?;
    write(&meta, inputs.1)?;
    write(&params, inputs.2)?;
    let step = StepDevice::padded(meta.clone(), pad, block_size);
    let run =
        || model.decode_cuda_static(&step, &ids, kv, &params, &out).map_err(|e| candle_core::Error::Msg(e.to_string()));
    let stream = dev.cuda_stream();
    let _cache = dev.enable_cuda_graph_htod_cache();
    run()?;
    stream.synchronize().map_err(|e| candle_core::Error::Msg(format!("synchronize: {e}")))?;
    stream
        .begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED)
        .map_err(|e| candle_core::Error::Msg(format!("begin capture at batch {}: {e}", pad.rows)))?;
    let body = run();
    // An error stored by a failed op would make end_capture return before ending the capture:
    // take it first.
    let pending = stream.context().check_err();
    let graph = stream.end_capture(sys::CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH);
    let failed = match (body, pending, graph) {
        (Err(e), _, _) => format!("capture at batch {}: {e}", pad.rows),
        (_, Err(e), _) => format!("capture at batch {}: {e}", pad.rows),
        (_, _, Err(e)) => format!("instantiate at batch {}: {e}", pad.rows),
        (_, _, Ok(None)) => format!("capture at batch {} gave no graph", pad.rows),
        (Ok(()), Ok(()), Ok(Some(graph))) => return Ok(Captured { pad, graph, ids, meta, params, out }),
    };
    end_capture_hard(&stream);
    bail!("{failed}")
}

/// Leaves capture mode for good after a failure, so that eager steps can run on the stream.
fn end_capture_hard(stream: &candle_core::cuda_backend::cudarc::driver::CudaStream) {
    let _ = stream.context().check_err();
    let mut status = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    // SAFETY: a live stream; the graph returned (if any) is destroyed at once.
    unsafe {
        let _ = sys::cuStreamIsCapturing(stream.cu_stream(), &mut status);
        if status != sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE {
            let mut g: sys::CUgraph = std::ptr::null_mut();
            let _ = sys::cuStreamEndCapture(stream.cu_stream(), &mut g);
            if !g.is_null() {
                let _ = sys::cuGraphDestroy(g);
            }
        }
    }
    let _ = stream.context().check_err();
}
