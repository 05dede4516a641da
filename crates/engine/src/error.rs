//! Errors of the engine crate: each kind of failure a variant of its own, with what a caller
//! needs to act on it (the tensor, the file, the setting, the CPUs), so a program matches on
//! what failed rather than on a message.

use candle_core::DType;
use goodput_scheduler::AdmissionError;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Candle(#[from] candle_core::Error),
    /// A tensor of the weights: missing, of another shape or dtype, or unreadable.
    #[error("tensor `{name}`: {problem}")]
    Tensor { name: String, problem: TensorProblem },
    /// A file of the model (weights, config, tokenizer) that cannot be read or parsed; `what`
    /// names the file's role, `reason` is its reader's message.
    #[error("{what} {}: {reason}", path.display())]
    File { what: &'static str, path: PathBuf, reason: String },
    /// No `.safetensors` file in `dir` (`None`: none given).
    #[error("no .safetensors files{}", dir.as_ref().map_or(String::new(), |d| format!(" in {}", d.display())))]
    NoSafetensors { dir: Option<PathBuf> },
    #[error("`{repo}` is not in the local Hugging Face cache ({}); goodput never downloads weights", cache.display())]
    NotCached { repo: String, cache: PathBuf },
    #[error("model `{0}` names no hf_repo in the catalog; pass a directory instead")]
    NoRepo(String),
    /// `--model` names nothing goodput can load: not in the catalog (`not_in_catalog` says
    /// why), no model directory, no .gguf file, no repository in the local cache.
    #[error(
        "{not_in_catalog}; nor is `{name}` a directory with config.json, a .gguf file, or a repository in the \
         local Hugging Face cache ({})",
        cache.display()
    )]
    NoModel { name: String, not_in_catalog: String, cache: PathBuf },
    /// The checkpoint disagrees with the catalog's shape of the model.
    #[error(transparent)]
    Mismatch(Box<Mismatch>),
    /// The checkpoint's config (config.json, GGUF metadata) lacks or garbles what the engine
    /// needs.
    #[error("{}: {problem}", path.display())]
    ModelConfig { path: PathBuf, problem: String },
    #[error("{}: architecture `{arch}` is not one goodput's engine runs (llama, qwen2)", path.display())]
    Architecture { path: PathBuf, arch: String },
    #[error("tokenizer: {0}")]
    Tokenizer(#[from] crate::tokenizer::TokenizerError),
    /// A tokenizer (or the sentence encoder's) that cannot be read or used: the `tokenizers`
    /// crate's message.
    #[error("tokenizer {}: {reason}", path.display())]
    TokenizerFile { path: PathBuf, reason: String },
    #[error(
        "--tokenizer `{0}` is no tokenizer.json, no directory holding one, and no repository with one in the local \
         Hugging Face cache"
    )]
    NoTokenizer(String),
    #[error("the tokenizer has {tokens} tokens, more than model `{model}`'s vocabulary of {vocab}")]
    TokenizerTooLarge { tokens: usize, model: String, vocab: usize },
    /// `--device` or `--dtype` names what the engine does not run.
    #[error("{what} `{value}`: expected {expected}")]
    Unknown { what: &'static str, value: String, expected: &'static str },
    #[error("device `{0}`: this goodput was built without CUDA (rebuild with `--features cuda`)")]
    NoCuda(String),
    /// An engine setting out of its range; `setting` names it as its flag does.
    #[error("{problem}")]
    Setting { setting: &'static str, problem: String },
    /// `what` (the weights, the KV pool) needs more memory than the machine has available.
    #[error("{what} needs {needs_gib:.2} GiB{detail} but only {available_gib:.2} GiB of memory is available")]
    Memory { what: String, detail: String, needs_gib: f64, available_gib: f64 },
    /// The scheduler's KV block pool refused its configuration.
    #[error(transparent)]
    Pool(#[from] goodput_scheduler::PoolError),
    #[error(transparent)]
    Pin(#[from] PinError),
    /// A thread (the engine's, its compute pool) could not start.
    #[error("cannot start {what}: {reason}")]
    Thread { what: &'static str, reason: String },
    /// Not a `#[source]`: the message already carries it, and a chain printer would repeat it.
    #[error("request refused: {0}")]
    Admission(AdmissionError),
    #[error("the engine has stopped")]
    Stopped,
    /// An admission limit: `waiting` requests wait for the engine (limit `limit`).
    #[error("{waiting} requests are waiting (limit {limit})")]
    Overloaded { waiting: usize, limit: usize },
    /// A request the engine could not finish: the engine thread's message for it.
    #[error("{0}")]
    Request(String),
    /// What this build or this model cannot do (the CUDA step without `--features cuda`, an
    /// f32 check of a bf16 model, fp8 of a model with no dense projection).
    #[error("{0}")]
    Unsupported(String),
    /// A broken invariant of the engine's own (a step it built wrongly): a bug to report.
    #[error("internal: {0}")]
    Internal(String),
}

/// A checkpoint whose `field` is `found` where the catalog's entry `model` says `expected`.
#[derive(Debug, thiserror::Error)]
#[error("{}: `{field}` is {found} but catalog entry `{model}` says {expected}", path.display())]
pub struct Mismatch {
    pub path: PathBuf,
    pub field: String,
    pub found: String,
    pub model: String,
    pub expected: String,
}

/// What is wrong with a tensor of the weights.
#[derive(Debug, thiserror::Error)]
pub enum TensorProblem {
    #[error("missing from {0}")]
    Missing(String),
    #[error("has shape {got:?}, the model needs {want:?}")]
    Shape { got: Vec<usize>, want: Vec<usize> },
    #[error("is {got:?}, expected {want:?}")]
    DType { got: DType, want: DType },
    #[error("this source holds no packed tensors")]
    NotPacked,
    /// Its reader's message (candle's, or a panic it was caught in).
    #[error("cannot be read: {0}")]
    Unreadable(String),
    #[error("{0} values per row are not whole MXFP4 blocks of 32")]
    NotMxfp4(usize),
    #[error("packed MXFP4 experts: {0}")]
    Mxfp4(crate::cpu::mxfp4::Mxfp4Shape),
    #[error("quantized experts cannot be fused")]
    Quantized,
    #[error("has no elements (dims {0:?})")]
    NoElements(Vec<usize>),
    #[error("dims {0:?} overflow")]
    Overflow(Vec<usize>),
    #[error("(dims {dims:?}) lies beyond the end of the file ({len} bytes)")]
    BeyondFile { dims: Vec<usize>, len: u64 },
}

/// Why a thread could not be pinned to its CPUs.
#[derive(Debug, thiserror::Error)]
pub enum PinError {
    #[error("a CPU set must name at least one CPU")]
    Empty,
    #[error("CPU {0} is beyond what the system can address")]
    Beyond(usize),
    /// The kernel refused (`os`: its error; not a `#[source]`, the message carries it).
    #[error("cannot pin to CPUs {cpus:?}: {os}")]
    Refused { cpus: Vec<usize>, os: std::io::Error },
    #[error("cannot pin to CPUs {0:?}: pinning threads needs Linux (sched_setaffinity)")]
    NotLinux(Vec<usize>),
}

pub type Result<T, E = EngineError> = std::result::Result<T, E>;

impl From<AdmissionError> for EngineError {
    fn from(e: AdmissionError) -> Self {
        Self::Admission(e)
    }
}

impl From<Mismatch> for EngineError {
    fn from(m: Mismatch) -> Self {
        Self::Mismatch(Box::new(m))
    }
}

impl EngineError {
    /// A [`EngineError::Tensor`] of `name`.
    pub fn tensor(name: impl Into<String>, problem: TensorProblem) -> Self {
        Self::Tensor { name: name.into(), problem }
    }

    /// A [`EngineError::File`]: the file of `what` role at `path` could not be used.
    pub fn file(what: &'static str, path: impl Into<PathBuf>, reason: impl std::fmt::Display) -> Self {
        Self::File { what, path: path.into(), reason: reason.to_string() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::weights::{SafetensorsSource, TensorSource};

    /// What failed is the variant, with what a caller acts on; the message names it too.
    #[test]
    fn failures_are_matched_by_kind() {
        let tpu = crate::loader::device("tpu").unwrap_err();
        assert!(matches!(&tpu, EngineError::Unknown { what: "device", value, .. } if value == "tpu"), "{tpu:?}");
        assert_eq!(tpu.to_string(), "device `tpu`: expected cpu, cuda or cuda:N");
        let dtype = crate::loader::parse_precision("int3").unwrap_err();
        assert!(matches!(&dtype, EngineError::Unknown { what: "dtype", .. }), "{dtype:?}");
        let dir = std::env::temp_dir().join(format!("goodput-engine-errors-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let none = SafetensorsSource::files_in(&dir).unwrap_err();
        assert!(matches!(&none, EngineError::NoSafetensors { dir: Some(d) } if *d == dir), "{none:?}");
        let gone = SafetensorsSource::files_in(&dir.join("gone")).unwrap_err();
        assert!(matches!(&gone, EngineError::File { what: "weights directory", .. }), "{gone:?}");
        // A safetensors file without the tensor asked for, and with one of another shape.
        let t = candle_core::Tensor::zeros((2, 3), DType::F32, &candle_core::Device::Cpu).unwrap();
        let file = dir.join("model.safetensors");
        candle_core::safetensors::save(&std::collections::HashMap::from([("w".to_string(), t)]), &file).unwrap();
        let mut src = SafetensorsSource::open(&[file], DType::F32, candle_core::Device::Cpu).unwrap();
        let missing = src.tensor("v", &[2, 3], crate::weights::Init::Ones).unwrap_err();
        assert!(matches!(&missing, EngineError::Tensor { name, problem: TensorProblem::Missing(_) } if name == "v"));
        let shape = src.tensor("w", &[3, 2], crate::weights::Init::Ones).unwrap_err();
        let want = [3, 2];
        assert!(
            matches!(&shape, EngineError::Tensor { problem: TensorProblem::Shape { got, want: w }, .. } if got == &[2, 3] && w == &want),
            "{shape:?}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
