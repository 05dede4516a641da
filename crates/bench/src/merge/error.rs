//! Why shards could not be merged, by what failed. A leaf of `merge`: it imports nothing of it.

use goodput_results::ResultsError;

/// Why shards could not be merged.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error("no shard directories given")]
    NoShards,
    /// A directory that is not one finished level of one shard against a server (no summary,
    /// not a shard, already merged, several levels, an in-process engine, tasks, no clock).
    #[error("{0}")]
    NotMergeable(String),
    #[error("{dir}: its summary cannot be read")]
    Summary { dir: String, source: ResultsError },
    /// The shards are not the whole splits of one run's levels (different runs, clocks
    /// measured differently, a split given twice or incomplete).
    #[error("{0}")]
    NotOneRun(String),
    /// A shard's records contradict its summary, its level, its slice, the schedule or its
    /// clock, or a request is recorded twice.
    #[error("{0}")]
    Records(String),
    /// `--out` is one of the shards or holds one.
    #[error("{0}")]
    Out(String),
    #[error(transparent)]
    Results(#[from] ResultsError),
    #[error(transparent)]
    Report(#[from] goodput_report::ReportError),
}

/// `Err(MergeError::$kind)` of a formatted message, returned.
macro_rules! refuse {
    ($kind:ident, $($t:tt)*) => {
        return Err($crate::merge::MergeError::$kind(format!($($t)*)))
    };
}
pub(crate) use refuse;
