//! `--export-json`, `--export-csv` and `--export-markdown` of `goodput run`, in hyperfine's
//! manner: the summary as JSON, and the sweep as one row per level in CSV or a Markdown
//! table — both written from the level columns ([`crate::columns`]), and read back through
//! one serde row ([`LevelRow`]).

use crate::columns::{self, Align, Output, Value};
use crate::ReportError;
use goodput_results::{LevelReport, ResultsError, RunSummary};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// One level of the CSV export as a reader reads it back (times in milliseconds): its fields
/// are the CSV columns' keys, in their order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LevelRow {
    pub load: f64,
    pub requests: usize,
    pub completed: usize,
    pub request_throughput: f64,
    pub output_throughput: f64,
    pub goodput: f64,
    pub ttft_p50_ms: Option<f64>,
    pub ttft_p95_ms: Option<f64>,
    /// Reasoning models' columns, written only when a level reasoned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttfo_p95_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_time_p50_ms: Option<f64>,
    /// Reasoning tokens ÷ output tokens, a fraction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_share: Option<f64>,
    pub tpot_p50_ms: Option<f64>,
    pub tpot_p95_ms: Option<f64>,
    pub e2e_p95_ms: Option<f64>,
    pub per_user_tps_p50: Option<f64>,
    pub engine_wait_p95_ms: Option<f64>,
    pub queue_time_p95_ms: Option<f64>,
    pub prefill_time_p95_ms: Option<f64>,
    /// KV-cache block usage at its highest, a fraction (none when unknown).
    pub kv_max: Option<f64>,
    pub error_rate: f64,
    pub slos_hold: bool,
}

impl LevelRow {
    /// The row of `l` as the CSV export writes it and a reader reads it back.
    pub fn of(l: &LevelReport) -> Self {
        let bytes = csv_bytes(std::slice::from_ref(l)).expect("a CSV row in memory");
        let mut rows = csv::Reader::from_reader(bytes.as_slice()).into_deserialize();
        rows.next().expect("one row").expect("the CSV columns are LevelRow's fields")
    }
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), ReportError> {
    std::fs::write(path, bytes).map_err(|source| ResultsError::Io { path: path.to_path_buf(), source }.into())
}

/// The whole summary as JSON (what `summary.json` holds).
pub fn json(path: &Path, s: &RunSummary) -> Result<(), ReportError> {
    let bytes = serde_json::to_vec_pretty(s).map_err(|source| ResultsError::Json {
        path: path.to_path_buf(),
        line: None,
        source,
    })?;
    write(path, &bytes)
}

/// The CSV of `levels`: a header of the columns' keys, then one row per level (nothing at
/// all without a level).
fn csv_bytes(levels: &[LevelReport]) -> Result<Vec<u8>, csv::Error> {
    let mut w = csv::WriterBuilder::new().has_headers(false).from_writer(Vec::new());
    let cols = columns::shown(Output::Csv, levels);
    if !levels.is_empty() {
        w.write_record(cols.iter().map(|c| c.key))?;
    }
    for l in levels {
        w.serialize(cols.iter().map(|c| (c.get)(l)).collect::<Vec<Value>>())?;
    }
    w.into_inner().map_err(|e| e.into_error().into())
}

/// The sweep as CSV, one [`LevelRow`] per level.
pub fn csv(path: &Path, s: &RunSummary) -> Result<(), ReportError> {
    let bytes = csv_bytes(&s.levels).map_err(|source| ResultsError::Csv { path: path.to_path_buf(), source })?;
    write(path, &bytes)
}

/// The sweep as a Markdown table.
pub fn markdown(path: &Path, s: &RunSummary) -> Result<(), ReportError> {
    write(path, markdown_table(s).as_bytes())
}

/// The Markdown table of the sweep (times in ms).
pub fn markdown_table(s: &RunSummary) -> String {
    let line = |cells: Vec<String>| format!("| {} |\n", cells.join(" | "));
    let cols = columns::shown(Output::Markdown, &s.levels);
    let mut out = line(cols.iter().map(|c| c.header(Output::Markdown, s.load_unit)).collect());
    let rule: Vec<&str> = cols.iter().map(|c| if c.align == Align::Left { "---" } else { "---:" }).collect();
    out.push_str(&format!("|{}|\n", rule.join("|")));
    for l in &s.levels {
        out.push_str(&line(cols.iter().map(|c| c.text(Output::Markdown, l)).collect()));
    }
    out
}
