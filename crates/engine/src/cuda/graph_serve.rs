//! Steps served from CUDA graphs. Decode steps: one graph per batch-size bucket and
//! block-table width, as vLLM captures its decode graphs: a step of `n` decode rows runs in the
//! smallest bucket that holds it (its padding rows write no KV and are skipped by attention),
//! with room for its longest block table rounded up to a power of two. Mixed steps (prefill
//! chunks with or without decode rows): one graph per (token bucket, sequence bucket, table
//! width), the whole step in it — every kernel reads the step's padded metadata, the long
//! chunks' attention runs in the tensor-core prefill kernel over a grid sized for the bucket
//! (padding items exit at once), and the rows to sample come from a static index buffer. A
//! mixed step pays for its padding tokens in the dense layers (at most the gap to the next
//! bucket), as vLLM's padded capture sizes do; it needs the prefill kernel for any chunk above
//! the paged kernel's reach (f16/bf16), else it runs eagerly.
//!
//! Each graph owns static buffers (token ids, the padded step metadata of `layout.rs`, the
//! rows to sample, the sampling parameters, the sampled ids); before a replay the step's inputs
//! are copied into them and after it the ids come back, nothing else crosses. The graph's
//! intermediates are its own memory (candle's stream-ordered allocations become memory
//! nodes). The paged kernel's partition count is fixed per graph; the partition length is read
//! from the metadata, so each step's context is still split evenly. A bucket is captured the
//! first time a step needs it: the step runs once eagerly on the static buffers (which fills
//! candle's host-to-device cache for its layout parameters), is captured, then replayed.
//!
//! If a capture or a replay fails, graph serving stops for the engine (with the reason kept in
//! [`GraphStats::disabled`]) and steps run eagerly: a graph is a speed-up, never a
//! requirement. A failed mixed graph stops mixed graphs only ([`GraphStats::mixed_stopped`]).

use crate::cuda::device::ptr;
use crate::cuda::layout::{graph_shape, host_padded, padded_len, Shape, Split};
use crate::cuda::meta::StepDevice;
use crate::cuda::params::pdl_state;
use crate::kv_cache::KvCache;
use crate::model::{Llama, StepBatch};
use candle_core::cuda_backend::cudarc::driver::{result, sys, CudaGraph};
use candle_core::{bail, DType, Device, Result, Tensor};
use serde::Serialize;

/// Mixed-step graphs kept at most (each holds its own activations' memory); a step that
/// would need another runs eagerly.
const MAX_MIXED_GRAPHS: usize = 48;

/// What graph serving did, for reports.
#[derive(Clone, Debug, Default, Serialize)]
pub struct GraphStats {
    /// Graphs captured so far: (tokens, sequences, block-table entries per sequence).
    pub captured: Vec<(usize, usize, usize)>,
    /// Decode steps replayed from a graph.
    pub replays: u64,
    /// Mixed steps replayed from a graph.
    pub mixed_replays: u64,
    /// Mixed steps run eagerly because every graph slot was taken.
    pub mixed_full: u64,
    /// Why graph serving stopped, if it did.
    pub disabled: Option<String>,
    /// Why mixed steps stopped being served from graphs (decode graphs go on), if they did.
    pub mixed_stopped: Option<String>,
}

struct Captured {
    shape: Shape,
    graph: CudaGraph,
    buffers: Buffers,
}

/// A graph's static inputs and output.
struct Buffers {
    ids: Tensor,
    meta: Tensor,
    /// Mixed steps: the rows to sample (`pad.seqs` of them); decode steps sample every row.
    rows: Option<Tensor>,
    params: Tensor,
    out: Tensor,
}

/// One step's inputs, padded to its graph's shape.
struct Inputs {
    ids: Vec<u32>,
    meta: Vec<u32>,
    rows: Option<Vec<u32>>,
    params: Vec<f32>,
}

/// The captured graphs of one engine.
pub struct StepGraphs {
    max_blocks: usize,
    block_size: usize,
    split: Split,
    mixed: bool,
    graphs: Vec<Captured>,
    pub stats: GraphStats,
}

impl StepGraphs {
    /// Graph serving for `model` when `on` and the model runs goodput's kernels (graphs capture
    /// those), mixed steps too when `mixed`; else `None`.
    pub fn for_model(model: &Llama, on: bool, mixed: bool, max_model_len: usize, block_size: usize) -> Option<Self> {
        (on && model.uses_cuda_kernels()).then(|| Self {
            max_blocks: max_model_len.div_ceil(block_size.max(1)),
            block_size,
            split: model.split(),
            mixed,
            graphs: Vec::new(),
            stats: GraphStats::default(),
        })
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
            "CUDA graphs: {} decode and {} mixed steps replayed{}; captured (tokens, sequences, table width): {:?}{}; PDL {pdl}",
            s.replays,
            s.mixed_replays,
            if s.mixed_full > 0 { format!(" ({} mixed steps eager: graph slots full)", s.mixed_full) } else { String::new() },
            s.captured,
            s.disabled.as_ref().map_or(String::new(), |e| format!("; stopped: {e}"))
                + &s.mixed_stopped.as_ref().map_or(String::new(), |e| format!("; mixed steps stopped: {e}"))
        )
    }

    /// Whether `batch` can run from a graph: decode rows only, each sampled, within a bucket;
    /// or, with mixed graphs on, any step within the largest buckets whose long chunks the
    /// prefill kernel takes.
    pub fn fits(&self, batch: &StepBatch) -> bool {
        self.shape(batch).is_some()
    }

    /// The graph shape `batch` runs in, if any.
    fn shape(&self, batch: &StepBatch) -> Option<Shape> {
        if self.stats.disabled.is_some() {
            return None;
        }
        let limits = (self.max_blocks, self.block_size, self.mixed);
        graph_shape(batch.meta(), batch.sample_rows.len(), self.split, limits)
    }

    /// Runs `batch` (which [`Self::fits`]) from its bucket's graph and returns the ids sampled
    /// for its sample rows; `None` when graph serving is off or just failed (the caller runs the
    /// step eagerly: a failed replay is recomputed whole, writing the same KV).
    /// A failed mixed graph stops mixed graphs only (a capture can run out of memory for its
    /// activations where a decode graph's are small).
    pub fn run(&mut self, model: &Llama, batch: &StepBatch, kv: &KvCache, params: &[[f32; 4]]) -> Option<Vec<u32>> {
        let shape = self.shape(batch)?;
        match self.try_run(model, batch, kv, params, shape) {
            Ok(ids) => ids,
            Err(e) if shape.mixed => {
                self.stats.mixed_stopped = Some(e.to_string());
                self.mixed = false;
                self.graphs.retain(|g| !g.shape.mixed);
                None
            }
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
        shape: Shape,
    ) -> Result<Option<Vec<u32>>> {
        let sampled = batch.sample_rows.len();
        if params.len() != sampled {
            return Ok(None);
        }
        let Some(inputs) = inputs(batch, params, self.split, shape) else { return Ok(None) };
        let i = match self.graphs.iter().position(|g| g.shape == shape) {
            Some(i) => {
                self.graphs[i].buffers.fill(&inputs)?;
                i
            }
            None if shape.mixed && self.graphs.iter().filter(|g| g.shape.mixed).count() >= MAX_MIXED_GRAPHS => {
                self.stats.mixed_full += 1;
                return Ok(None);
            }
            None => {
                let g = capture(model, kv, shape, self.block_size, &inputs)?;
                self.stats.captured.push((shape.pad.tokens, shape.pad.seqs, shape.pad.max_blocks));
                self.graphs.push(g);
                self.graphs.len() - 1
            }
        };
        let g = &self.graphs[i];
        g.graph.launch().map_err(|e| candle_core::Error::Msg(format!("graph replay at {shape:?}: {e}")))?;
        let out = g.buffers.out.to_vec1::<u32>()?;
        match shape.mixed {
            false => self.stats.replays += 1,
            true => self.stats.mixed_replays += 1,
        }
        Ok(Some(out[..sampled].to_vec()))
    }
}

/// `batch`'s inputs padded to `shape`; `None` when its metadata does not fit.
fn inputs(batch: &StepBatch, params: &[[f32; 4]], split: Split, shape: Shape) -> Option<Inputs> {
    let pad = shape.pad;
    let meta = host_padded(&batch.positions, batch.meta(), split, pad)?;
    let mut ids = batch.tokens.clone();
    ids.resize(pad.tokens, 0);
    // Padding rows: temperature 0 (argmax of whatever they computed, then dropped).
    let mut p: Vec<f32> = params.iter().flatten().copied().collect();
    p.resize(pad.seqs * 4, 0.0);
    // Padding sample rows read row 0 (any row would do).
    let rows = shape.mixed.then(|| {
        let mut r = batch.sample_rows.clone();
        r.resize(pad.seqs, 0);
        r
    });
    Some(Inputs { ids, meta, rows, params: p })
}

impl Buffers {
    fn new(Shape { pad, mixed }: Shape, d: &Device) -> Result<Self> {
        Ok(Self {
            ids: Tensor::zeros(pad.tokens, DType::U32, d)?,
            meta: Tensor::zeros(padded_len(pad), DType::U32, d)?,
            rows: if mixed { Some(Tensor::zeros(pad.seqs, DType::U32, d)?) } else { None },
            params: Tensor::zeros(pad.seqs * 4, DType::F32, d)?,
            out: Tensor::zeros(pad.seqs, DType::U32, d)?,
        })
    }

    fn fill(&self, x: &Inputs) -> Result<()> {
        write(&self.ids, &x.ids)?;
        write(&self.meta, &x.meta)?;
        if let (Some(dst), Some(src)) = (&self.rows, &x.rows) {
            write(dst, src)?;
        }
        write(&self.params, &x.params)
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

/// Captures the step of `shape` with `inputs` in its static buffers: one eager run to fill
/// candle's upload cache, then the capture.
fn capture(model: &Llama, kv: &KvCache, shape: Shape, block_size: usize, inputs: &Inputs) -> Result<Captured> {
    let Device::Cuda(dev) = &model.device else { bail!("CUDA graphs need a CUDA device") };
    let buffers = Buffers::new(shape, &model.device)?;
    buffers.fill(inputs)?;
    let b = &buffers;
    let step = StepDevice::padded(b.meta.clone(), shape.pad, block_size);
    let run = || {
        model
            .step_cuda_static(&step, &b.ids, b.rows.as_ref(), kv, &b.params, &b.out)
            .map_err(|e| candle_core::Error::Msg(e.to_string()))
    };
    let stream = dev.cuda_stream();
    let _cache = dev.enable_cuda_graph_htod_cache();
    run()?;
    stream.synchronize().map_err(|e| candle_core::Error::Msg(format!("synchronize: {e}")))?;
    let at = format!("{} tokens of {} sequences", shape.pad.tokens, shape.pad.seqs);
    stream
        .begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED)
        .map_err(|e| candle_core::Error::Msg(format!("begin capture at {at}: {e}")))?;
    let body = run();
    // An error stored by a failed op would make end_capture return before ending the capture:
    // take it first.
    let pending = stream.context().check_err();
    let graph = stream.end_capture(sys::CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH);
    let failed = match (body, pending, graph) {
        (Err(e), _, _) => format!("capture at {at}: {e}"),
        (_, Err(e), _) => format!("capture at {at}: {e}"),
        (_, _, Err(e)) => format!("instantiate at {at}: {e}"),
        (_, _, Ok(None)) => format!("capture at {at} gave no graph"),
        (Ok(()), Ok(()), Ok(Some(graph))) => return Ok(Captured { shape, graph, buffers }),
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
