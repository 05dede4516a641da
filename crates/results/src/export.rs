//! `--export-json`, `--export-csv` and `--export-markdown` of `goodput run`, in hyperfine's
//! manner: the summary as JSON, and the sweep as one row per level in CSV or a Markdown
//! table — one serde row ([`LevelRow`]) behind both.

use crate::summary::{LevelReport, RunSummary};
use crate::ResultsError;
use goodput_metrics::Summary;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// One level of the sweep, as exported (times in milliseconds).
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

fn ms(s: &Option<Summary>, f: fn(&Summary) -> f64) -> Option<f64> {
    s.as_ref().map(|x| f(x) * 1e3)
}

impl LevelRow {
    pub fn of(l: &LevelReport) -> Self {
        let s = &l.summary;
        LevelRow {
            load: s.load,
            requests: s.requests,
            completed: s.completed,
            request_throughput: s.request_throughput,
            output_throughput: s.output_throughput,
            goodput: s.goodput,
            ttft_p50_ms: ms(&s.ttft, |x| x.p50),
            ttft_p95_ms: ms(&s.ttft, |x| x.p95),
            tpot_p50_ms: ms(&s.tpot, |x| x.p50),
            tpot_p95_ms: ms(&s.tpot, |x| x.p95),
            e2e_p95_ms: ms(&s.e2e, |x| x.p95),
            per_user_tps_p50: s.per_user_tps.as_ref().map(|x| x.p50),
            engine_wait_p95_ms: ms(&s.engine_wait, |x| x.p95),
            queue_time_p95_ms: ms(&s.queue_time, |x| x.p95),
            prefill_time_p95_ms: ms(&s.prefill_time, |x| x.p95),
            kv_max: l.occupancy.as_ref().map(|o| o.kv_max).filter(|x| x.is_finite()),
            error_rate: s.error_rate,
            slos_hold: s.slos_hold(),
        }
    }
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), ResultsError> {
    std::fs::write(path, bytes).map_err(|source| ResultsError::Io { path: path.to_path_buf(), source })
}

/// The whole summary as JSON (what `summary.json` holds).
pub fn json(path: &Path, s: &RunSummary) -> Result<(), ResultsError> {
    let bytes = serde_json::to_vec_pretty(s).map_err(|source| ResultsError::Json {
        path: path.to_path_buf(),
        line: None,
        source,
    })?;
    write(path, &bytes)
}

/// The sweep as CSV, one [`LevelRow`] per level.
pub fn csv(path: &Path, s: &RunSummary) -> Result<(), ResultsError> {
    let err = |source| ResultsError::Csv { path: path.to_path_buf(), source };
    let mut w = csv::Writer::from_writer(Vec::new());
    for l in &s.levels {
        w.serialize(LevelRow::of(l)).map_err(err)?;
    }
    let bytes = w.into_inner().map_err(|e| err(e.into_error().into()))?;
    write(path, &bytes)
}

/// The sweep as a Markdown table.
pub fn markdown(path: &Path, s: &RunSummary) -> Result<(), ResultsError> {
    write(path, markdown_table(s).as_bytes())
}

/// The Markdown table of the sweep (times in ms).
pub fn markdown_table(s: &RunSummary) -> String {
    let num = |x: Option<f64>, d: usize| x.filter(|v| v.is_finite()).map_or("-".into(), |v| format!("{v:.d$}"));
    let mut out = format!(
        "| load ({}) | requests | req/s | out tok/s | goodput | TTFT p50 | TTFT p95 | TPOT p50 | TPOT p95 | E2E p95 | engine wait p95 | queue p95 | KV max | SLOs |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n",
        s.load_unit
    );
    for r in s.levels.iter().map(LevelRow::of) {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.load,
            r.requests,
            num(Some(r.request_throughput), 2),
            num(Some(r.output_throughput), 0),
            num(Some(r.goodput), 2),
            num(r.ttft_p50_ms, 1),
            num(r.ttft_p95_ms, 1),
            num(r.tpot_p50_ms, 2),
            num(r.tpot_p95_ms, 2),
            num(r.e2e_p95_ms, 0),
            num(r.engine_wait_p95_ms, 1),
            num(r.queue_time_p95_ms, 1),
            r.kv_max.map_or("-".into(), |k| format!("{:.0} %", k * 100.0)),
            if r.slos_hold { "hold" } else { "broken" },
        ));
    }
    out
}
