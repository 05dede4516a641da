//! Plain data types shared by every goodput crate: the run clock, request specifications,
//! engine records and the model catalog, and the two traits the crates meet at: [`Target`]
//! (what load generators drive) and [`TextCodec`] (text ↔ token ids). No candle, no tokio, no
//! HTTP.

pub mod arch;
pub mod builder;
pub mod catalog;
pub mod client;
pub mod clock;
pub mod codec;
pub mod hf_config;
pub mod http;
pub mod input;
mod refused;
pub mod request;
pub mod shard;
pub mod sizes;
pub mod target;
pub mod worker;

pub use arch::{LayerKind, MlaSpec, MoeSpec, RopeScaling};
pub use builder::RecordBuilder;
pub use catalog::{Architecture, Catalog, CatalogError, ModelSpec, WeightsError, WeightsSource};
pub use client::{
    Chunk, ClientRecord, Failure, FailureKind, Outcome, Phase, Reasoning, StepKind, TaskRecord, TaskStep,
};
pub use clock::{Clock, Stamp};
pub use codec::{CodecError, TextCodec};
pub use http::{Anomaly, AnomalyKind, HttpStamps, ServerScrape, ServerTimings};
pub use refused::{FieldError, HfConfigError, ValueError};
pub use request::{
    EngineRecord, ExpertStepLoad, FinishReason, KvBlocksByKind, ParamsError, RequestId, SamplingParams, StepRecord,
    TokenId,
};
pub use sizes::{KvGroup, KvPerToken, Params};
pub use target::{Target, WorkRequest};
