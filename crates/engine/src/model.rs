//! The decoder — Llama 2/3, Mistral, Qwen2/3, SmolLM2, TinyLlama, and the blocks of 2026
//! (Qwen3-MoE, Mixtral, DeepSeek-V3/Kimi K2, gpt-oss; one layer of any of them is
//! `block.rs`'s) — written for a packed step: the new tokens of every scheduled sequence —
//! prefill chunks and single decode tokens together — go through each linear layer as one
//! `(tokens, hidden)` matrix; RoPE uses each token's own position; attention runs per sequence
//! over its K/V in the paged pool; the LM head runs only on the rows that sample.
//!
//! This is the step on candle ops and goodput's CPU kernels (`crate::cpu`). Where goodput's
//! CUDA kernels apply ([`Llama::uses_cuda_kernels`]), [`Llama::forward`] hands the step to
//! `forward_cuda`, and [`Llama::load`] tunes the small-batch matmuls (`tune_cuda`): methods
//! the `cuda` module adds to [`Llama`] (its stub, in builds without the feature, says no
//! kernels apply). This file names no CUDA item.

pub use crate::attention::AttentionImpl;
use crate::block::{Layer, LayerKv, PartTimes, StepCtx};
use crate::error::{EngineError, Result};
use crate::kv_cache::{AttnMeta, KvCache};
pub use crate::linear::Linear;
use crate::moe::ExpertLoad;
use crate::weights::{Init, TensorSource};
use candle_core::quantized::QMatMul;
use candle_core::{DType, Device, Tensor, D};
use goodput_core::ModelSpec;

/// The inputs of one packed step.
#[derive(Clone, Debug)]
pub struct StepBatch {
    /// New tokens of every sequence, one after the other.
    pub tokens: Vec<u32>,
    /// Position of each new token.
    pub positions: Vec<u32>,
    /// Where each sequence's queries and K/V are, per KV-cache group (group 0 first).
    pub metas: Vec<AttnMeta>,
    /// Rows whose logits are wanted (the last new token of each sampling sequence).
    pub sample_rows: Vec<u32>,
}

impl StepBatch {
    pub fn new(block_size: usize) -> Self {
        Self {
            tokens: Vec::new(),
            positions: Vec::new(),
            metas: vec![AttnMeta::new(block_size)],
            sample_rows: Vec::new(),
        }
    }

    /// Adds a sequence computing `tokens` at positions `start..`, over its block table in each
    /// KV-cache group (every sequence of a step gives as many).
    pub fn push<T: AsRef<[u32]>>(&mut self, tokens: &[u32], start: usize, block_tables: &[T], samples: bool) {
        self.tokens.extend_from_slice(tokens);
        self.positions.extend((start..start + tokens.len()).map(|p| p as u32));
        let bs = self.metas[0].block_size;
        self.metas.resize_with(block_tables.len().max(1), || AttnMeta::new(bs));
        for (meta, table) in self.metas.iter_mut().zip(block_tables) {
            meta.push(tokens.len(), start + tokens.len(), table.as_ref());
        }
        if samples {
            self.sample_rows.push(self.tokens.len() as u32 - 1);
        }
    }

    /// The map into the pool of the first KV-cache group (the only one of a uniform model).
    pub fn meta(&self) -> &AttnMeta {
        &self.metas[0]
    }
}

/// The model: weights and the RoPE tables.
pub struct Llama {
    pub spec: ModelSpec,
    pub(crate) embed: Tensor,
    pub(crate) layers: Vec<Layer>,
    pub(crate) norm: Tensor,
    pub(crate) lm_head: Linear,
    pub(crate) cos: Tensor,
    pub(crate) sin: Tensor,
    pub(crate) interleaved: bool,
    pub device: Device,
    /// The weights' (and KV pool's) dtype.
    pub dtype: DType,
    /// The dtype of activations, norms and RoPE: f32 for bf16 weights on CPU (see
    /// [`activation_dtype`]), else `dtype`.
    pub act_dtype: DType,
    pub attention: AttentionImpl,
    /// The expert load of the last step's sparse layers ([`Llama::take_expert_load`]).
    pub(crate) expert_load: std::sync::Mutex<Vec<ExpertLoad>>,
    /// Time each step's layer parts (attention, dense MLP, MoE) on the CPU
    /// ([`Llama::take_part_times`]); off by default.
    pub time_parts: bool,
    pub(crate) part_times: std::sync::Mutex<Option<PartTimes>>,
}

/// The dtype activations run in for weights of `dtype` on `device`: on CPU, bf16 weights are
/// multiplied by goodput's kernels against f32 activations (`bf16.rs`: bf16 products are
/// exact in f32), so norms, RoPE, softmax and residuals stay in f32; elsewhere the weights'
/// dtype.
pub fn activation_dtype(device: &Device, dtype: DType) -> DType {
    if device.is_cpu() && dtype == DType::BF16 {
        DType::F32
    } else {
        dtype
    }
}

/// RoPE inverse frequencies (Llama 3 or YaRN scaling where the spec asks).
pub fn rope_inv_freq(spec: &ModelSpec) -> Vec<f64> {
    crate::rope::inv_freq(spec)
}

impl Llama {
    /// Loads every tensor from `src`, checking shapes against `spec`; RoPE tables cover
    /// positions `0..max_len`.
    pub fn load(
        spec: &ModelSpec,
        src: &mut dyn TensorSource,
        max_len: usize,
        device: &Device,
        dtype: DType,
    ) -> Result<Self> {
        let h = spec.hidden_size;
        let act = activation_dtype(device, dtype);
        let embed = src.tensor("model.embed_tokens.weight", &[spec.vocab_size, h], Init::Std(1.0))?;
        // q|k|v and gate|up fused on CUDA and for bf16 weights on CPU (see `block::Gqa::qkv`).
        let fuse = device.is_cuda() || act != dtype;
        let layers = (0..spec.num_layers).map(|i| Layer::load(spec, src, i, act, fuse)).collect::<Result<Vec<_>>>()?;
        let norm = src.tensor("model.norm.weight", &[h], Init::Ones)?.to_dtype(act)?;
        let mut lm_head = if spec.tie_word_embeddings && !src.contains("lm_head.weight") {
            match src.tied_lm_head(spec.vocab_size, h) {
                Some(w) => Linear { w: w?, b: None, packed: None, fp8: None },
                None => Linear { w: QMatMul::Tensor(embed.clone()), b: None, packed: None, fp8: None },
            }
        } else {
            Linear::load(src, "lm_head", spec.vocab_size, h, false, act)?
        };
        if device.is_cpu() {
            lm_head.pack()?;
        }
        let (cos, sin) = crate::rope::tables(spec, max_len, device, act)?;
        let model = Self {
            spec: spec.clone(),
            embed,
            layers,
            norm,
            lm_head,
            cos,
            sin,
            // DeepSeek rotates interleaved pairs (vLLM: `is_neox_style=False`) whatever the source.
            interleaved: src.rope_interleaved() || spec.mla.is_some(),
            device: device.clone(),
            dtype,
            act_dtype: act,
            attention: AttentionImpl::Paged,
            expert_load: std::sync::Mutex::new(Vec::new()),
            time_parts: false,
            part_times: std::sync::Mutex::new(None),
        };
        if model.uses_cuda_kernels() && matches!(dtype, DType::BF16 | DType::F16) {
            model.tune_cuda();
        }
        Ok(model)
    }

    /// Rounds the dense layers' projections through e4m3 with per-row scales (`--dtype fp8`,
    /// [`crate::fp8`]): how many it rounded; an error when the model has none.
    pub fn quantize_fp8(&mut self) -> Result<usize> {
        let mut n = 0;
        for l in &mut self.layers {
            n += l.quantize_fp8()?;
        }
        if n == 0 {
            return Err(EngineError::Unsupported(format!("--dtype fp8: model `{}` has no dense projection to store in e4m3 (MLA, experts and GGUF-quantized weights keep their format)", self.spec.name)));
        }
        Ok(n)
    }

    /// The expert load of the last step's sparse layers (empty for dense models).
    pub fn take_expert_load(&self) -> Vec<ExpertLoad> {
        std::mem::take(&mut *self.expert_load.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// The time of the last step's layer parts, when [`Llama::time_parts`] is on and the step
    /// ran on the CPU.
    pub fn take_part_times(&self) -> Option<PartTimes> {
        self.part_times.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// Bytes of weights one forward step reads: every layer's linear and norm weights, the
    /// final norm and the LM head (the embedding is only gathered row by row). For a MoE model,
    /// every routed expert: a step that touches `n` experts per layer reads
    /// [`Llama::weight_bytes_touching`].
    pub fn weight_bytes_per_step(&self) -> u64 {
        let t = |t: &Tensor| (t.elem_count() * t.dtype().size_in_bytes()) as u64;
        self.layers.iter().map(Layer::bytes).sum::<u64>() + t(&self.norm) + self.lm_head.bytes()
    }

    /// Bytes of one routed expert of one layer, and of all of them (0, 0 for dense models).
    pub fn routed_expert_bytes(&self) -> (u64, u64) {
        let per: Vec<(u64, u64)> = self.layers.iter().filter_map(Layer::routed_bytes).collect();
        (per.first().map_or(0, |p| p.0), per.iter().map(|p| p.1).sum())
    }

    /// Bytes of weights a step reads when it touches `touched` (layer, expert) pairs: the
    /// dense part and that many experts' weights.
    pub fn weight_bytes_touching(&self, touched: f64) -> f64 {
        let (one, all) = self.routed_expert_bytes();
        (self.weight_bytes_per_step() - all) as f64 + touched * one as f64
    }

    /// Multiply-accumulates of the linear layers per token, without the LM head (a MoE
    /// layer's: its router, shared expert and the `experts_per_token` routed ones).
    pub fn layer_macs_per_token(&self) -> u64 {
        self.layers.iter().map(Layer::macs_per_token).sum()
    }

    /// Multiply-accumulates of the LM head per sampled row.
    pub fn lm_head_macs(&self) -> u64 {
        self.lm_head.macs()
    }

    pub(crate) fn rms_norm(&self, x: &Tensor, w: &Tensor) -> Result<Tensor> {
        crate::block::rms_norm(x, w, self.spec.rms_norm_eps as f32)
    }

    /// Applies RoPE to `x` of shape `(tokens, heads, rope_dim)` with per-token `cos`/`sin`
    /// rows `(tokens, rope_dim / 2)`.
    pub(crate) fn rope(&self, x: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
        crate::rope::apply(x, cos, sin, self.interleaved)
    }

    /// Runs one packed step: writes the new tokens' K/V into the pool and returns the logits
    /// `(sample_rows, vocab)` in f32.
    pub fn forward(&self, batch: &StepBatch, kv: &KvCache) -> Result<Tensor> {
        let t = batch.tokens.len();
        if t == 0 {
            return Err(EngineError::Internal("empty step".into()));
        }
        let spec = &self.spec;
        if let Some(&p) = batch.positions.iter().max() {
            if p as usize >= self.cos.dim(0)? {
                return Err(EngineError::Internal(format!(
                    "position {p} is beyond the RoPE table ({})",
                    self.cos.dim(0)?
                )));
            }
        }
        if self.uses_cuda_kernels() {
            return self.forward_cuda(batch, kv);
        }
        let ids = Tensor::from_slice(&batch.tokens, t, &self.device)?;
        let pos = Tensor::from_slice(&batch.positions, t, &self.device)?;
        let cos = self.cos.index_select(&pos, 0)?;
        let sin = self.sin.index_select(&pos, 0)?;
        let mut x = self.embed.index_select(&ids, 0)?.to_dtype(self.act_dtype)?;
        let mut times = self.time_parts.then(PartTimes::default);
        let projections = times.map(|_| std::cell::Cell::new(0.0));
        let ctx = StepCtx {
            spec,
            cos: &cos,
            sin: &sin,
            attention: self.attention,
            interleaved: self.interleaved,
            projections,
        };
        let mut loads = Vec::new();
        for (l, layer) in self.layers.iter().enumerate() {
            let (k, v, group) = kv.layer(l);
            let meta = batch.metas.get(group).ok_or_else(|| {
                EngineError::Internal(format!(
                    "the step has block tables for {} KV groups, layer {l} is in group {group}",
                    batch.metas.len()
                ))
            })?;
            let (y, load) = layer.forward(&x, &ctx, &LayerKv { k, v, meta }, times.as_mut())?;
            x = y;
            loads.extend(load);
        }
        *self.expert_load.lock().unwrap_or_else(|e| e.into_inner()) = loads;
        if let (Some(t), Some(p)) = (times.as_mut(), &ctx.projections) {
            // The layers timed their attention halves whole: the products come out of them.
            t.projections_s = p.get();
            t.attention_s -= t.projections_s;
        }
        let head = std::time::Instant::now();
        let logits = self.head(&x, batch);
        if let Some(t) = times.as_mut() {
            t.lm_head_s = head.elapsed().as_secs_f64();
        }
        *self.part_times.lock().unwrap_or_else(|e| e.into_inner()) = times;
        logits
    }

    /// The logits of the rows the step samples: final norm and LM head.
    fn head(&self, x: &Tensor, batch: &StepBatch) -> Result<Tensor> {
        if batch.sample_rows.is_empty() {
            // A step of prefill chunks only: nothing to sample (and no zero-sized kernels).
            return Ok(Tensor::zeros((0, self.spec.vocab_size), DType::F32, &Device::Cpu)?);
        }
        let rows = Tensor::from_slice(&batch.sample_rows, batch.sample_rows.len(), &self.device)?;
        let x = x.index_select(&rows, 0)?;
        let x = self.rms_norm(&x, &self.norm)?;
        Ok(self.lm_head.forward(&x)?.to_dtype(DType::F32)?)
    }

    /// Positions the RoPE tables cover (the longest sequence this model instance runs).
    pub fn max_positions(&self) -> usize {
        self.cos.dim(0).unwrap_or(0)
    }

    /// Every row of logits as a `Vec` (for samplers and tests).
    pub fn logits_rows(logits: &Tensor) -> Result<Vec<Vec<f32>>> {
        Ok(logits.to_dtype(DType::F32)?.to_vec2::<f32>()?)
    }

    /// Greedy token of each row.
    pub fn argmax_rows(logits: &Tensor) -> Result<Vec<u32>> {
        Ok(logits.argmax(D::Minus1)?.to_vec1::<u32>()?)
    }
}
