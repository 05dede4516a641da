//! goodput's instrumented inference engine: a Llama-family model on candle, run as a packed
//! ("varlen") step over a paged KV cache, driven by the continuous-batching scheduler of
//! `goodput-scheduler`. The only crate that knows candle.

pub mod affinity;
pub mod bf16;
pub mod bf16_dot;
pub mod core;
#[cfg(feature = "cuda")]
pub mod cuda;
#[cfg(feature = "cuda")]
pub mod cuda_blas;
pub mod cuda_check;
pub mod cuda_graph;
#[cfg(feature = "cuda")]
pub mod cuda_graph_serve;
pub mod cuda_launch;
pub mod cuda_profile;
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub mod cuda_step;
pub mod cuda_tune;
pub mod encoder;
pub mod engine;
pub mod error;
pub mod guard;
pub mod kv_cache;
pub mod loader;
pub mod model;
#[cfg(feature = "cuda")]
mod model_cuda;
pub mod model_files;
pub mod numerics;
pub mod paged_attention;
pub mod reference;
pub mod sampler;
pub mod simd;
pub mod skinny;
pub mod tokenizer;
pub mod weights;

pub use crate::core::{EngineConfig, EngineCore, StepOutput};
pub use engine::{Engine, EngineHandle, EngineStats, RequestEvent, RequestStream};
pub use error::{EngineError, Result};
pub use model::{AttentionImpl, Llama, StepBatch};
