//! goodput's instrumented inference engine: a Llama-family model on candle, run as a packed
//! ("varlen") step over a paged KV cache, driven by the continuous-batching scheduler of
//! `goodput-scheduler`. The only crate that knows candle.
//!
//! Laid out by backend. At the top, the engine proper: the engine thread (`engine`) around
//! the synchronous step (`step`), the model and its packed forward on candle ops
//! (`model`), attention over the paged pool (`attention`) and the pool itself (`kv_cache`),
//! sampling, loading (`loader`, `model_files`, `weights`, `tokenizer`) and the embedding
//! encoder. Below it, `cpu/` holds the CPU kernels and `cuda/` the CUDA backend (its kernels,
//! the CUDA step, graphs, tuning and on-device measurements); beside it, `check/` holds what
//! the engine is checked against (the dense reference forward, the rounding study).
//!
//! `cuda/` is compiled only with the `cuda` feature; without it, `cuda/off.rs` takes its place
//! with the same public names doing nothing (as candle-core's dummy CUDA backend does), so this
//! declaration is the crate's one `cfg(feature = "cuda")`. Imports run one way: `cpu/` imports
//! only the pool's step map, the engine proper imports the backends, `check/` imports the
//! model, and no backend imports the engine proper's step or thread.

pub mod affinity;
pub mod attention;
pub mod bench;
pub(crate) mod block;
pub mod check;
pub mod cpu;
#[cfg_attr(not(feature = "cuda"), path = "cuda/off.rs")]
pub mod cuda;
pub mod encoder;
pub(crate) mod engine;
pub(crate) mod error;
pub(crate) mod fp8;
pub mod generate;
pub(crate) mod guard;
pub mod kv_cache;
pub(crate) mod linear;
pub mod loader;
pub(crate) mod mla;
pub mod model;
pub mod model_files;
pub mod moe;
pub(crate) mod mxfp4;
pub(crate) mod rope;
pub mod sampler;
pub mod source;
pub(crate) mod step;
pub mod tokenizer;
pub mod weights;

// The public surface is what other crates use (the cli, the server, the benches, the tests):
// the modules above that stay `pub`, and these items of the crate-private ones.
pub use block::PartTimes;
pub use engine::{Engine, EngineHandle, EngineStats, RequestEvent, RequestStream};
pub use error::{EngineError, Mismatch, PinError, Result, TensorProblem};
pub use model::{AttentionImpl, Llama, StepBatch};
pub use step::{prefill_cap, EngineConfig, EngineCore, StepOutput, CPU_MAX_PREFILL_TOKENS};
