//! goodput's results, typed end to end: what `goodput run` writes and what `report`,
//! `compare` and `plan --check` read, through one writer and one reader per file
//! ([`files`]), one serde struct per row ([`rows`]) and the [`RunSummary`] with its levels
//! ([`level`]), their vLLM- and AIPerf-compatible keys ([`vllm`], [`aiperf`]), the simulated twin ([`prediction`]) and
//! the capacity verdict stored once. Readers never walk untyped JSON or re-parse our own files
//! by position (hyperfine keeps its `export/` apart from benchmarking the same way).
//!
//! Data only, on the floor above `core` and `metrics`: no sentence, table, chart or export
//! format is written here — presentation is `goodput-report`'s, the floor above, and nothing
//! here may import from it (or from any crate but `core` and `metrics`).

pub mod accuracy;
pub mod aiperf;
pub mod calibration;
pub mod clock;
pub mod files;
pub mod harness;
pub mod level;
pub mod matrix;
pub mod outcome;
pub mod prediction;
pub mod repeats;
pub mod rows;
pub mod schema;
pub mod server;
pub mod summary;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod vllm;

pub use aiperf::{aiperf_keys, AiperfKeys, AiperfMetric};
pub use files::{incomplete_note, read_summary, RecordLog, Results, RunWriter};
pub use harness::{CpuUse, Harness, OpenLoop};
pub use level::LevelReport;
pub use rows::{RecordRow, RequestRow, SeriesRow, StepRow};
pub use summary::{
    EngineSettings, LoadUnit, Machine, Pinning, RetrySetting, RunSummary, SearchRecord, SearchStop, StartAt,
    WorkloadInfo, FORMAT,
};
pub use vllm::{vllm_keys, Inf, RequestRate, VllmKeys, VllmLoad};

use std::path::PathBuf;

/// Why a results directory could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum ResultsError {
    #[error("{}: not a goodput results directory (no summary.json)", dir.display())]
    NotResults { dir: PathBuf },
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{}{}: {source}", path.display(), line.map_or(String::new(), |l| format!(", line {l}")))]
    Json { path: PathBuf, line: Option<usize>, source: serde_json::Error },
    #[error("{}: {source}", path.display())]
    Csv { path: PathBuf, source: csv::Error },
    #[error("{}: written by a newer goodput (format {format}; this one reads up to {newest})", path.display())]
    TooNew { path: PathBuf, format: u32, newest: u32 },
    /// `--out` names a directory that already holds files: a run never mixes its files with
    /// another's.
    #[error(
        "{}: not empty (it holds {}); choose another --out, or pass --overwrite to replace the run in it",
        dir.display(),
        found.join(", ")
    )]
    NotEmpty { dir: PathBuf, found: Vec<String> },
    /// With `--overwrite`, files that no run writes are never deleted.
    #[error(
        "{}: holds files a goodput run does not write ({}); --overwrite only replaces a run's own files, \
         so choose another --out",
        dir.display(),
        found.join(", ")
    )]
    Foreign { dir: PathBuf, found: Vec<String> },
}

#[cfg(test)]
mod tests;
