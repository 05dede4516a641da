//! Why a run stopped with an error: its setup (the model, the engine, the target, the
//! workload, a simulation's profile), its clock reference, or a file it writes. A level whose
//! requests failed is not an error: the failures are measured and reported.

use crate::clockref::ClockRefError;
use goodput_client::ClientError;
use goodput_engine::source::SourceError;
use goodput_engine::EngineError;
use std::net::SocketAddr;
use std::path::PathBuf;

/// What ended a run early.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A setting refused when the run is set up (a program's spec, unchecked by a command line).
    #[error(transparent)]
    Spec(#[from] super::spec::SpecError),
    /// The model (its weights, tokenizer, device) could not be loaded.
    #[error(transparent)]
    Model(Box<SourceError>),
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("the byte-level tokenizer")]
    Tokenizer(#[source] goodput_engine::tokenizer::TokenizerError),
    /// The HTTP client could not be built, or a request of the setup failed.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The scenario's workload (a dataset, RAG's index) could not be built.
    #[error(transparent)]
    Workload(#[from] goodput_workload::WorkloadError),
    /// goodput's own server on loopback could not start.
    #[error(transparent)]
    Server(#[from] goodput_server::ServerError),
    #[error(transparent)]
    LocalServer(#[from] crate::target::LocalServerError),
    /// The load generator's worker threads could not start.
    #[error(transparent)]
    Workers(#[from] goodput_workload::pool::PoolError),
    /// A thread, a runtime or a socket: what was being done.
    #[error("{what}")]
    Io { what: &'static str, source: std::io::Error },
    #[error("no engine and no server to send requests to")]
    NoTarget,
    #[error("asking the server for its models")]
    Models(#[source] ClientError),
    #[error("the server at {url} does not serve `{name}` (it lists {models:?}); pass --served-model-name")]
    NotServed { url: String, name: String, models: Vec<String> },
    /// `--simulate`'s profile could not be read.
    #[error(transparent)]
    Profile(#[from] goodput_sizing::profile::ProfileError),
    #[error("{} is a profile of `{profile}`, not of --model `{model}`", path.display())]
    ProfileModel { path: PathBuf, profile: String, model: String },
    #[error("a simulation needs a vocabulary of at least 259 tokens (bytes and specials)")]
    SmallVocab,
    /// The simulated engine's scheduler refused the run's engine settings.
    #[error("{reason}: raise --kv-blocks or --kv-memory, or check the engine flags")]
    SimSettings { reason: goodput_scheduler::ConfigError },
    #[error("the simulated engine")]
    Simulator(#[source] goodput_sizing::SizingError),
    /// Timing the RAG harness's stages for a simulation failed (the encoder's error).
    #[error("timing the RAG stages for the simulation: {0}")]
    HarnessTiming(String),
    #[error("--clock-ref {url}")]
    ClockRef { url: String, source: ClockRefError },
    #[error("--metrics-port: cannot listen on {addr}")]
    MetricsPort { addr: SocketAddr, source: std::io::Error },
    /// The writer thread of `requests.jsonl` failed.
    #[error("writing the request records")]
    Records(#[source] goodput_results::ResultsError),
    #[error("the request-record writer stopped")]
    RecordWriterStopped,
    /// The run's directory, an export or a soak's records could not be written.
    #[error(transparent)]
    Results(#[from] goodput_results::ResultsError),
    /// The run's page (`--report`) could not be written.
    #[error(transparent)]
    Report(#[from] goodput_report::ReportError),
    /// `--rate-of-limit` with a multiple that is not a positive number.
    #[error("--rate-of-limit takes positive multiples of the limit (0.25,0.5,1,1.5), got {0:?}")]
    BadMultiples(Vec<f64>),
    /// `--rate-of-limit` without a twin to find the limit with.
    #[error("--rate-of-limit gives rates as multiples of the rate at which the simulated twin saturates: give its profile with --predict PROFILE (or --simulate PROFILE)")]
    LimitNeedsProfile,
    /// The twin completed nothing on its way to the limit.
    #[error("--rate-of-limit: the simulated twin completed {completed} requests of this workload with {users} users sending back to back, so it has no limit rate to multiply")]
    NoLimit { users: usize, completed: usize },
    /// A multiple of the limit outside the rates a level may offer.
    #[error("--rate-of-limit: {multiple} × the limit of {limit:.3} req/s is {rate:.3} req/s, beyond the {max} req/s a level may offer")]
    LimitRateOver { multiple: f64, limit: f64, rate: f64, max: f64 },
}

/// A [`RunError::Io`] of what was being done.
pub(crate) fn io(what: &'static str) -> impl FnOnce(std::io::Error) -> RunError {
    move |source| RunError::Io { what, source }
}

impl From<SourceError> for RunError {
    fn from(e: SourceError) -> Self {
        Self::Model(Box::new(e))
    }
}
