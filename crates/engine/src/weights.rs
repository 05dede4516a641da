//! Where a model's tensors come from: dummy (seeded random), safetensors (a directory or the
//! local Hugging Face cache) or GGUF. Every tensor is checked against the shape the catalog
//! entry implies; a missing tensor or a wrong shape is an error naming the tensor.

use crate::error::{EngineError, Mismatch, Result, TensorProblem};
use candle_core::quantized::{gguf_file, QMatMul, QTensor};
use candle_core::{DType, Device, Tensor};
use goodput_core::ModelSpec;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// How a tensor is initialised by the dummy source.
#[derive(Clone, Copy, Debug)]
pub enum Init {
    /// All ones (norm weights).
    Ones,
    /// Uniform with this standard deviation.
    Std(f64),
}

/// A source of named tensors in Hugging Face naming (`model.layers.0.self_attn.q_proj.weight`).
pub trait TensorSource {
    /// A tensor of exactly `shape`, in the model dtype.
    fn tensor(&mut self, name: &str, shape: &[usize], init: Init) -> Result<Tensor>;
    /// The weight of a linear layer `(out, in)`; may stay quantized.
    fn linear(&mut self, name: &str, out: usize, inp: usize) -> Result<QMatMul> {
        let std = (1.0 / inp as f64).sqrt();
        Ok(QMatMul::Tensor(self.tensor(name, &[out, inp], Init::Std(std))?))
    }
    fn contains(&self, name: &str) -> bool;
    /// Whether the tensors are seeded random ones (every name is there, in the layout the
    /// published checkpoint of the family has).
    fn is_dummy(&self) -> bool {
        false
    }
    /// A tensor of exactly `shape` and `dtype`, as stored (packed quantized blocks, scales),
    /// not converted to the model dtype.
    fn raw(&mut self, name: &str, _shape: &[usize], _dtype: DType) -> Result<Tensor> {
        Err(EngineError::tensor(name, TensorProblem::NotPacked))
    }
    /// The LM head of a model with tied embeddings, when the source keeps a form of the
    /// embedding better suited to a matmul than the dense one (GGUF: the quantized table, as
    /// llama.cpp and candle's `quantized_llama` use it).
    fn tied_lm_head(&mut self, _vocab: usize, _hidden: usize) -> Option<Result<QMatMul>> {
        None
    }
    /// RoPE pairs (2i, 2i+1) instead of (i, i + d/2) (GGUF Llama weights are permuted so).
    fn rope_interleaved(&self) -> bool {
        false
    }
}

/// A tensor its reader could not read (`e`: candle's error, or the panic it was caught in).
fn unreadable(name: &str, e: impl std::fmt::Display) -> EngineError {
    EngineError::tensor(name, TensorProblem::Unreadable(e.to_string()))
}

fn check_shape(name: &str, want: &[usize], got: &[usize]) -> Result<()> {
    if want != got {
        return Err(EngineError::tensor(name, TensorProblem::Shape { got: got.to_vec(), want: want.to_vec() }));
    }
    Ok(())
}

/// Values per generator of [`DummySource`].
pub const DUMMY_CHUNK: usize = 1 << 20;

/// Seeded random weights of the real shapes, like vLLM's `--load-format dummy`: the compute
/// cost of the real model, meaningless text. Each tensor's values depend only on the seed and
/// its name (drawn in chunks of [`DUMMY_CHUNK`] values, in parallel, each chunk from its own
/// generator: an 8B model's 8·10⁹ values take seconds, not minutes, on any device — and the
/// same values on all). Linear weights are uniform with std `1/sqrt(fan_in)` and norms are
/// ones, so activations stay finite over long generations. Each value is rounded to bf16, as a
/// bf16 checkpoint holds it: every dtype then holds the same weights (bf16 values are exact in
/// f32 and, but for the tiniest, in f16), so comparisons across dtypes (`engine-check`) measure
/// the arithmetic, not the rounding of the weights. Converted to the dtype on the host, then
/// moved: a GPU receives bf16, not f32.
pub struct DummySource {
    pub seed: u64,
    pub dtype: DType,
    pub device: Device,
}

impl TensorSource for DummySource {
    fn tensor(&mut self, name: &str, shape: &[usize], init: Init) -> Result<Tensor> {
        let n: usize = shape.iter().product();
        let data: Vec<f32> = match init {
            Init::Ones => vec![1.0; n],
            Init::Std(std) => {
                use rayon::prelude::*;
                let mut h = std::hash::DefaultHasher::new();
                std::hash::Hash::hash(name, &mut h);
                let seed = self.seed ^ std::hash::Hasher::finish(&h);
                let a = ((3.0f64).sqrt() * std) as f32;
                let mut data = vec![0f32; n];
                data.par_chunks_mut(DUMMY_CHUNK).enumerate().for_each(|(i, chunk)| {
                    let mut rng =
                        rand::rngs::SmallRng::seed_from_u64(seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
                    chunk.iter_mut().for_each(|x| *x = half::bf16::from_f32(rng.random_range(-a..a)).to_f32());
                });
                data
            }
        };
        let host = Tensor::from_vec(data, shape, &Device::Cpu)?.to_dtype(self.dtype)?;
        Ok(if self.device.is_cpu() { host } else { host.to_device(&self.device)? })
    }
    fn contains(&self, _name: &str) -> bool {
        true
    }
    fn is_dummy(&self) -> bool {
        true
    }
    /// Packed MXFP4 weights: random nibbles, and scales of 2^-7 ± 1 (`*_scales`), which give
    /// values of std ~ 0.02 (an FP4 code's RMS is ~2.9): about `1/sqrt(fan_in)` of gpt-oss's 2880.
    fn raw(&mut self, name: &str, shape: &[usize], dtype: DType) -> Result<Tensor> {
        if dtype != DType::U8 {
            return Err(EngineError::tensor(name, TensorProblem::DType { got: dtype, want: DType::U8 }));
        }
        let n: usize = shape.iter().product();
        let mut h = std::hash::DefaultHasher::new();
        std::hash::Hash::hash(name, &mut h);
        let mut rng = rand::rngs::SmallRng::seed_from_u64(self.seed ^ std::hash::Hasher::finish(&h));
        let scales = name.ends_with("_scales");
        let data: Vec<u8> = (0..n).map(|_| if scales { rng.random_range(119..=121) } else { rng.random() }).collect();
        Ok(Tensor::from_vec(data, shape, &Device::Cpu)?)
    }
}

/// Tensors from safetensors files (memory-mapped).
pub struct SafetensorsSource {
    st: candle_core::safetensors::MmapedSafetensors,
    names: std::collections::HashSet<String>,
    pub dtype: DType,
    pub device: Device,
    origin: String,
}

impl SafetensorsSource {
    pub fn open(files: &[PathBuf], dtype: DType, device: Device) -> Result<Self> {
        if files.is_empty() {
            return Err(EngineError::NoSafetensors { dir: None });
        }
        // SAFETY: the files are memory-mapped read-only; goodput does not modify them while running.
        let st = unsafe { candle_core::safetensors::MmapedSafetensors::multi(files) }
            .map_err(|e| EngineError::file("weights file", &files[0], e))?;
        let names = st.tensors().into_iter().map(|(n, _)| n).collect();
        let origin = files[0].parent().map(|p| p.display().to_string()).unwrap_or_default();
        Ok(Self { st, names, dtype, device, origin })
    }

    /// The `*.safetensors` files of a directory, sorted.
    pub fn files_in(dir: &Path) -> Result<Vec<PathBuf>> {
        let rd = std::fs::read_dir(dir).map_err(|e| EngineError::file("weights directory", dir, e))?;
        let mut files: Vec<PathBuf> = rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "safetensors"))
            .collect();
        files.sort();
        if files.is_empty() {
            return Err(EngineError::NoSafetensors { dir: Some(dir.to_path_buf()) });
        }
        Ok(files)
    }
}

impl TensorSource for SafetensorsSource {
    fn tensor(&mut self, name: &str, shape: &[usize], _init: Init) -> Result<Tensor> {
        if !self.names.contains(name) {
            return Err(EngineError::tensor(name, TensorProblem::Missing(self.origin.clone())));
        }
        let t = self.st.load(name, &self.device).map_err(|e| unreadable(name, e))?;
        check_shape(name, shape, t.dims())?;
        Ok(t.to_dtype(self.dtype)?)
    }
    fn raw(&mut self, name: &str, shape: &[usize], dtype: DType) -> Result<Tensor> {
        if !self.names.contains(name) {
            return Err(EngineError::tensor(name, TensorProblem::Missing(self.origin.clone())));
        }
        let t = self.st.load(name, &Device::Cpu).map_err(|e| unreadable(name, e))?;
        check_shape(name, shape, t.dims())?;
        if t.dtype() != dtype {
            return Err(EngineError::tensor(name, TensorProblem::DType { got: t.dtype(), want: dtype }));
        }
        Ok(t)
    }
    fn contains(&self, name: &str) -> bool {
        self.names.contains(name)
    }
}

/// Tensors from a GGUF file, mapped from llama.cpp names. Linear weights stay quantized
/// (candle's quantized matmul, which also quantizes activations to 8 bits) unless
/// `dequantize` is set, in which case they are expanded to the model dtype.
pub struct GgufSource {
    content: gguf_file::Content,
    file: std::fs::File,
    pub dequantize: bool,
    pub dtype: DType,
    pub device: Device,
    origin: String,
    interleaved: bool,
}

impl GgufSource {
    pub fn open(path: &Path, dequantize: bool, dtype: DType, device: Device) -> Result<Self> {
        let mut file = std::fs::File::open(path).map_err(|e| EngineError::file("GGUF file", path, e))?;
        let unreadable = |e: &dyn std::fmt::Display| EngineError::file("GGUF file", path, format!("not readable: {e}"));
        // candle's reader panics on some malformed headers (an alignment of 0).
        let content = crate::guard::quietly(|| gguf_file::Content::read(&mut file))
            .map_err(|p| unreadable(&p))?
            .map_err(|e| unreadable(&e))?;
        for (name, info) in &content.tensor_infos {
            check_gguf_tensor(info, content.tensor_data_offset, u64::MAX).map_err(|p| EngineError::tensor(name, p))?;
        }
        let arch =
            content.metadata.get("general.architecture").and_then(|v| v.to_string().ok()).cloned().unwrap_or_default();
        // llama.cpp permutes Q/K of Llama-style models for interleaved RoPE; Qwen2 keeps NEOX order.
        let interleaved = !matches!(arch.as_str(), "qwen2" | "qwen" | "qwen3");
        Ok(Self { content, file, dequantize, dtype, device, origin: path.display().to_string(), interleaved })
    }

    pub fn metadata(&self) -> &HashMap<String, gguf_file::Value> {
        &self.content.metadata
    }

    /// `general.architecture` and the shape keys under it, as a map for comparison.
    pub fn arch(&self) -> String {
        self.content.metadata.get("general.architecture").and_then(|v| v.to_string().ok()).cloned().unwrap_or_default()
    }

    pub fn md_u32(&self, key: &str) -> Option<u32> {
        self.content.metadata.get(&format!("{}.{key}", self.arch())).and_then(|v| v.to_u32().ok())
    }

    /// Whether the file holds a tensor of this (GGUF) name.
    pub fn has_tensor(&self, name: &str) -> bool {
        self.content.tensor_infos.contains_key(name)
    }

    pub fn md_f32(&self, key: &str) -> Option<f32> {
        self.content.metadata.get(&format!("{}.{key}", self.arch())).and_then(|v| v.to_f32().ok())
    }

    fn gguf_name(name: &str) -> String {
        let n = name.strip_prefix("model.").unwrap_or(name);
        if n == "embed_tokens.weight" {
            return "token_embd.weight".into();
        }
        if n == "norm.weight" {
            return "output_norm.weight".into();
        }
        if n == "lm_head.weight" {
            return "output.weight".into();
        }
        if let Some(rest) = n.strip_prefix("layers.") {
            if let Some((i, rest)) = rest.split_once('.') {
                let map = [
                    ("self_attn.q_proj.", "attn_q."),
                    ("self_attn.k_proj.", "attn_k."),
                    ("self_attn.v_proj.", "attn_v."),
                    ("self_attn.o_proj.", "attn_output."),
                    ("mlp.gate_proj.", "ffn_gate."),
                    ("mlp.up_proj.", "ffn_up."),
                    ("mlp.down_proj.", "ffn_down."),
                    ("input_layernorm.", "attn_norm."),
                    ("post_attention_layernorm.", "ffn_norm."),
                ];
                for (hf, gg) in map {
                    if let Some(suffix) = rest.strip_prefix(hf) {
                        return format!("blk.{i}.{gg}{suffix}");
                    }
                }
            }
        }
        name.to_string()
    }

    fn qtensor(&mut self, name: &str) -> Result<QTensor> {
        let g = Self::gguf_name(name);
        if !self.content.tensor_infos.contains_key(&g) {
            return Err(EngineError::tensor(g, TensorProblem::Missing(self.origin.clone())));
        }
        let (content, file, device) = (&self.content, &mut self.file, &self.device);
        let len = file.metadata().map(|m| m.len()).unwrap_or(0);
        check_gguf_tensor(&content.tensor_infos[&g], content.tensor_data_offset, len)
            .map_err(|p| EngineError::tensor(&g, p))?;
        crate::guard::quietly(|| content.tensor(file, &g, device))
            .map_err(|panic| unreadable(&g, panic))?
            .map_err(|e| unreadable(&g, e))
    }
}

impl TensorSource for GgufSource {
    fn tensor(&mut self, name: &str, shape: &[usize], _init: Init) -> Result<Tensor> {
        let q = self.qtensor(name)?;
        check_shape(&Self::gguf_name(name), shape, q.shape().dims())?;
        Ok(q.dequantize(&self.device)?.to_dtype(self.dtype)?)
    }
    fn linear(&mut self, name: &str, out: usize, inp: usize) -> Result<QMatMul> {
        let q = self.qtensor(name)?;
        check_shape(&Self::gguf_name(name), &[out, inp], q.shape().dims())?;
        if self.dequantize {
            return Ok(QMatMul::Tensor(q.dequantize(&self.device)?.to_dtype(self.dtype)?));
        }
        // candle keeps f16/bf16/f32 GGUF tensors dense, in f32: bring them to the model dtype.
        Ok(match QMatMul::from_qtensor(q)? {
            QMatMul::Tensor(t) => QMatMul::Tensor(t.to_dtype(self.dtype)?),
            QMatMul::TensorF16(t) => QMatMul::Tensor(t.to_dtype(self.dtype)?),
            q => q,
        })
    }
    fn contains(&self, name: &str) -> bool {
        self.content.tensor_infos.contains_key(&Self::gguf_name(name))
    }
    fn rope_interleaved(&self) -> bool {
        self.interleaved
    }
}

/// A GGUF tensor's header checked before candle reads it: at least one element, and its bytes
/// (by checked arithmetic) inside a file of `len` bytes (at open, `u64::MAX`: a cut file is
/// found when its tensors are read). candle's reader overflows on huge
/// dimensions and aborts the process on a tensor of no elements.
fn check_gguf_tensor(info: &gguf_file::TensorInfo, data_offset: u64, len: u64) -> Result<(), TensorProblem> {
    let dims = info.shape.dims();
    let elems = dims.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d));
    let (block, size) = (info.ggml_dtype.block_size(), info.ggml_dtype.type_size());
    let bytes = elems.filter(|&n| n > 0).and_then(|n| (n / block).checked_mul(size));
    let end = bytes.and_then(|b| data_offset.checked_add(info.offset)?.checked_add(b as u64));
    match (elems, end) {
        (Some(0), _) => Err(TensorProblem::NoElements(dims.to_vec())),
        (None, _) => Err(TensorProblem::Overflow(dims.to_vec())),
        (_, Some(end)) if end <= len => Ok(()),
        _ => Err(TensorProblem::BeyondFile { dims: dims.to_vec(), len }),
    }
}

/// Shape fields of a Hugging Face `config.json`, compared with the catalog entry so that real
/// weights never run under a wrong shape (e.g. a `rope_theta` kept only inside
/// Config numbers are equal when they are equal as f32: transformers writes a GGUF's
/// `rms_norm_eps` as 9.999999747378752e-06, the f32 nearest 1e-5, which is the catalog's 1e-5.
pub fn same_at_f32(a: f64, b: f64) -> bool {
    a == b || (a as f32) == (b as f32) || (a - b).abs() <= b.abs() * f64::from(f32::EPSILON) / 2.0
}

/// `rope_parameters`, as newer SmolLM2 configs do, silently falling back to 10000).
pub fn check_hf_config(spec: &ModelSpec, path: &Path) -> Result<()> {
    let text = goodput_core::input::read_text(path).map_err(|e| EngineError::file("model config", path, e))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| EngineError::file("model config", path, format!("not JSON: {e}")))?;
    let num = |k: &str| v.get(k).and_then(|x| x.as_f64());
    // A field that is there must be a number: a string or a list is not "absent".
    let shape_keys = ["hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads"];
    let other_keys = ["intermediate_size", "vocab_size", "rope_theta", "rms_norm_eps"];
    let nested = v.get("rope_parameters").and_then(|r| r.get("rope_theta")).map(|x| ("rope_parameters.rope_theta", x));
    let present = shape_keys.iter().chain(&other_keys).filter_map(|&k| Some((k, v.get(k)?))).chain(nested);
    if let Some((k, x)) = present.filter(|(_, x)| !x.is_null()).find(|(_, x)| !x.is_number()) {
        let problem = format!("`{k}` is {x}, not a number");
        return Err(EngineError::ModelConfig { path: path.to_path_buf(), problem });
    }
    let rope_theta = num("rope_theta")
        .or_else(|| v.get("rope_parameters").and_then(|r| r.get("rope_theta")).and_then(|x| x.as_f64()));
    let checks: [(&str, Option<f64>, f64); 8] = [
        ("hidden_size", num("hidden_size"), spec.hidden_size as f64),
        ("num_hidden_layers", num("num_hidden_layers"), spec.num_layers as f64),
        ("num_attention_heads", num("num_attention_heads"), spec.num_heads as f64),
        ("num_key_value_heads", num("num_key_value_heads").or(num("num_attention_heads")), spec.num_kv_heads as f64),
        ("intermediate_size", num("intermediate_size"), spec.intermediate_size as f64),
        ("vocab_size", num("vocab_size"), spec.vocab_size as f64),
        ("rope_theta", rope_theta, spec.rope_theta),
        ("rms_norm_eps", num("rms_norm_eps"), spec.rms_norm_eps),
    ];
    for (field, got, want) in checks {
        match got {
            Some(g) if same_at_f32(g, want) => {}
            Some(g) => {
                return Err(Mismatch {
                    path: path.to_path_buf(),
                    field: field.into(),
                    found: g.to_string(),
                    model: spec.name.clone(),
                    expected: want.to_string(),
                }
                .into())
            }
            None if field == "rope_theta" => {
                let problem = "no `rope_theta` (nor `rope_parameters.rope_theta`); refusing to guess".into();
                return Err(EngineError::ModelConfig { path: path.to_path_buf(), problem });
            }
            None => {}
        }
    }
    Ok(())
}

/// Memory available to the process (Linux `MemAvailable`), if known.
pub fn mem_available() -> Option<u64> {
    let s = goodput_core::input::read_text("/proc/meminfo").ok()?;
    let line = s.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

#[cfg(test)]
mod config_tests {
    use super::same_at_f32;

    #[test]
    fn numbers_equal_in_f32_are_equal() {
        assert!(same_at_f32(9.999999747378752e-06, 1e-5));
        assert!(same_at_f32(1e-5, 9.999999747378752e-06));
        assert!(same_at_f32(500000.0, 500000.0));
        assert!(!same_at_f32(1e-6, 1e-5));
        assert!(!same_at_f32(10000.0, 100000.0));
        assert!(!same_at_f32(4096.0, 4097.0));
    }
}
