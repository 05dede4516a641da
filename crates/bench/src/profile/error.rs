//! Why a profile could not be measured, fitted, priced or written.

use goodput_engine::source::SourceError;
use goodput_engine::EngineError;
use std::path::PathBuf;

/// What stopped `goodput profile`.
#[derive(Debug, thiserror::Error)]
pub enum ProfilingError {
    #[error("--bootstrap: {0} resamples is more than needed (at most 10000)")]
    Bootstrap(usize),
    /// The model (its shape, weights, device, dtype) could not be loaded.
    #[error(transparent)]
    Model(Box<SourceError>),
    /// The engine could not start, or the grid's requests failed in it.
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("profiling request refused by the engine")]
    Refused(#[source] EngineError),
    /// A profile (the baseline, `--price-with`) could not be read.
    #[error(transparent)]
    Profile(#[from] goodput_sizing::profile::ProfileError),
    /// A run's summary or a file of step records could not be read.
    #[error(transparent)]
    Results(#[from] goodput_results::ResultsError),
    #[error("{} is a simulated run: a profile is fitted on measured steps", dir.display())]
    Simulated { dir: PathBuf },
    #[error("{} is a run of `{found}`, not of --model `{model}`", dir.display())]
    RunOfOther { dir: PathBuf, found: String, model: String },
    #[error("{} benchmarks `{found}`, not --model `{model}`", path.display())]
    BenchOfOther { path: PathBuf, found: String, model: String },
    /// Steps a fit would be decided by (`why`: what is implausible about them).
    #[error("{}: {why}; a fit on it would be decided by it", path.display())]
    Implausible { path: PathBuf, why: String },
    #[error("{}: its steps predate the attention work in step records (prefill_attention); fit a newer run", dir.display())]
    NoAttention { dir: PathBuf },
    #[error("the run has no engine steps (was its target another process's server?)")]
    NoSteps,
    #[error("--from-steps {}: no such file", path.display())]
    NoFile { path: PathBuf },
    #[error("{}: no step records (was the replica started with --steps and sent requests?)", path.display())]
    NoStepRecords { path: PathBuf },
    #[error("fitting {what}")]
    Fit { what: String, source: goodput_sizing::fit::FitError },
    #[error("reading {}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{} is not an `engine-bench --json` file", path.display())]
    NotBench { path: PathBuf, source: serde_json::Error },
    #[error(
        "{}: the bench has no GPU roofline (a catalog GPU and its peak); profile a CPU by measuring it here",
        path.display()
    )]
    NoGpuRoofline { path: PathBuf },
    #[error("--from-bench: the files must bench one dtype on one GPU")]
    MixedBench,
    #[error("--from-bench: dtype `{0}` has no known size")]
    UnknownDtype(String),
    #[error("pricing the model's roofline")]
    Work(#[source] goodput_sizing::layout::ShardError),
    #[error("writing {}", path.display())]
    Write { path: PathBuf, source: std::io::Error },
    #[error("a step record as JSON")]
    Json(#[from] serde_json::Error),
}

/// A [`ProfilingError::Write`] of `path`.
pub(crate) fn write(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> ProfilingError + '_ {
    move |source| ProfilingError::Write { path: path.to_path_buf(), source }
}

impl From<SourceError> for ProfilingError {
    fn from(e: SourceError) -> Self {
        Self::Model(Box::new(e))
    }
}
