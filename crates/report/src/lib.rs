//! goodput's presentation: everything a person or another tool reads of a run, written from
//! the typed results (`goodput-results`) and nothing else — the console tables ([`console`]),
//! the self-contained HTML page with its SVG charts ([`html`]), the exports in hyperfine's
//! manner ([`export`]: JSON, CSV, Markdown) and the written conclusion ([`conclusion`]).
//!
//! The level columns are defined once ([`columns`]: header, unit, how a level's value is got,
//! which outputs show it) and rendered to the console, the page, CSV and Markdown, as
//! hyperfine's exporters render one result table to every format. How a number, a time or a
//! level's occupancy is written is defined once too ([`text`]), and so is HTML escaping
//! ([`html::escape`]) for every page goodput writes.
//!
//! Its floor: above `core`, `metrics` and `results` (the only goodput crates it imports),
//! below `cli`, which alone calls it. Nothing here measures, reads a clock or drives a target;
//! nothing here is stored: a run's files are written by `results` and read back through its
//! typed reader, and no crate below the cli may import from this one — a number that a
//! stored file or a verdict needs belongs in `metrics` or `results`, not here.

pub mod calibrate;
pub mod columns;
pub mod conclusion;
pub mod console;
pub mod cross_check;
pub mod engine_bench;
pub mod engine_check;
pub mod export;
pub mod hardware;
pub mod html;
pub mod models;
pub mod plan;
pub mod prediction;
pub mod profile;
pub mod text;

pub use conclusion::Conclusion;
pub use text::{occupancy_text, prefix_text};

use goodput_results::ResultsError;
use std::path::PathBuf;

/// Why a page or an export could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A results file (an export, the page) could not be written.
    #[error(transparent)]
    Results(#[from] ResultsError),
    /// plotters could not draw a chart.
    #[error("{0}")]
    Draw(String),
    /// The chart data could not be embedded as JSON.
    #[error("the charts' data: {0}")]
    Json(#[from] serde_json::Error),
    /// `-o` names no file (`/`, `..`).
    #[error("{}: not a file name to write the report to", path.display())]
    NotAFile { path: PathBuf },
    /// The page could not be written where `-o` says.
    #[error("writing {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: ResultsError,
    },
}

#[cfg(test)]
mod tests;
