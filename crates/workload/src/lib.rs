//! Workloads: scenarios (lengths and prompts), arrival processes, and the drivers that run
//! any [`goodput_core::Target`] through one load level at a time. [`Workload`] is what a
//! front end holds: it names, describes and runs itself.

pub mod agent;
pub mod dataset;
mod drive;
pub mod file;
pub mod harness;
pub mod lengths;
pub mod level;
pub mod multiturn;
pub mod pool;
mod prompts;
pub use goodput_core::shard;
pub mod rag;
pub mod runner;
pub mod scenario;
#[cfg(test)]
mod testing;
pub mod trace;
mod users;
pub mod workload;

pub use agent::{run_tasks, Agent, AgentNode, AgentStep};
pub use dataset::{Dataset, DatasetFormat, DatasetOptions};
pub use file::{load_scenario, parse_scenario, ScenarioFile, ScenarioTomlError};
pub use goodput_core::Phase;

/// Why a workload cannot run: a scenario file that cannot be read, a scenario that does not
/// fit the model, an unknown built-in, a RAG corpus that cannot be embedded.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    #[error("scenario file {}: {reason}", path.display())]
    File { path: std::path::PathBuf, reason: String },
    /// A dataset or trace file that cannot be read.
    #[error("{what} {}: {reason}", path.display())]
    Data { what: &'static str, path: std::path::PathBuf, reason: String },
    #[error("unknown scenario `{name}`; built in: {known} (or a scenario file, NAME.toml)")]
    Unknown { name: String, known: String },
    /// A scenario, dataset or trace the model cannot run: the part and why.
    #[error(transparent)]
    Invalid(#[from] Invalid),
    /// The sentence encoder failed on the RAG corpus (its error kept as the cause).
    #[error("embedding the RAG corpus: {0}")]
    Embed(goodput_core::CodecError),
    /// The model's tokenizer failed on a dataset's text.
    #[error("tokenizing: {0}")]
    Tokenize(goodput_core::CodecError),
}
/// A part of a workload that cannot run: `what` names it (`scenario NAME input`, `rag`,
/// `agent step 2 (tool)`, `trace NAME`), `problem` says why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{what}: {problem}")]
pub struct Invalid {
    pub what: String,
    pub problem: String,
}

impl Invalid {
    pub fn new(what: impl Into<String>, problem: impl Into<String>) -> Self {
        Self { what: what.into(), problem: problem.into() }
    }
}

pub use level::{Arrival, LevelPlan, LevelRun, Ramp, RecordSink, RetryPolicy, Stop, Trim, UnitPlan, Window};
pub use multiturn::{run_sessions, MultiTurn};
pub use prompts::Prompts;
pub use rag::{run_rag, Embedder, HashEmbedder, Rag, RagIndex, RagSetup, EMBED_ID_BIT};
pub use runner::{run_level, Gaps};
pub use scenario::{LengthDist, Scenario};
pub use trace::{Trace, TraceFormat, TraceOptions};
pub use workload::{LevelOutput, Workload};
