//! One serde struct per row of each per-row file a run writes: `records.jsonl` (every request's
//! raw record), `requests.csv` (its derived times, for spreadsheets), `steps.jsonl` (the
//! engine's steps) and `timeseries.csv` (the engine's state per interval). Each row carries
//! its level's load, so a file is read back by field name, never by position.

use goodput_core::{ClientRecord, Outcome, Phase, StepRecord};
use goodput_metrics::engine::{self as em, SeriesPoint};
use goodput_metrics::request as rm;
use serde::{Deserialize, Serialize};

/// A line of `records.jsonl`: one request's raw record, its level and phase.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(from = "RecordRepr")]
pub struct RecordRow {
    pub level: f64,
    pub phase: Phase,
    #[serde(flatten)]
    pub record: ClientRecord,
}

/// A line as written: with its phase, or (the earliest results) with `warmup: true` for a
/// warm-up request and no phase.
#[derive(Deserialize)]
struct RecordRepr {
    level: f64,
    phase: Option<Phase>,
    #[serde(default)]
    warmup: bool,
    #[serde(flatten)]
    record: ClientRecord,
}

impl From<RecordRepr> for RecordRow {
    fn from(r: RecordRepr) -> Self {
        let phase = r.phase.unwrap_or(if r.warmup { Phase::Warmup } else { Phase::Measured });
        RecordRow { level: r.level, phase, record: r.record }
    }
}

/// A row of `requests.csv`: one request's contract times in seconds (empty where undefined).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RequestRow {
    pub level: f64,
    pub id: u64,
    pub phase: Phase,
    /// `ok`, `timeout`, `error: …` or `refused: …`.
    pub outcome: String,
    pub input_tokens: usize,
    pub output_tokens: usize,
    pub ttft_s: Option<f64>,
    pub tpot_s: Option<f64>,
    pub e2e_s: Option<f64>,
    pub send_lag_s: f64,
    pub queue_time_s: Option<f64>,
    pub prefill_time_s: Option<f64>,
    pub decode_time_s: Option<f64>,
    pub cached_tokens: Option<usize>,
    pub preemptions: Option<u32>,
    /// Last, as it came last: readers by position of older files keep their columns.
    #[serde(default)]
    pub engine_wait_s: Option<f64>,
    /// The kind of failure (`timeout`, `http-503`, `stream-broken`, …; see
    /// [`goodput_core::FailureKind`]); empty for a completed request. After the older columns.
    #[serde(default)]
    pub failure: Option<String>,
}

/// `requests.csv`'s header: [`RequestRow`]'s fields in order (written when the file is
/// created, so a run that ends before its first request still leaves a readable file).
pub const REQUEST_COLUMNS: [&str; 17] = [
    "level",
    "id",
    "phase",
    "outcome",
    "input_tokens",
    "output_tokens",
    "ttft_s",
    "tpot_s",
    "e2e_s",
    "send_lag_s",
    "queue_time_s",
    "prefill_time_s",
    "decode_time_s",
    "cached_tokens",
    "preemptions",
    "engine_wait_s",
    "failure",
];

/// `timeseries.csv`'s header: [`SeriesRow`]'s fields in order.
pub const SERIES_COLUMNS: [&str; 13] = [
    "level",
    "t_s",
    "steps",
    "running_mean",
    "running_max",
    "waiting_mean",
    "waiting_max",
    "kv_block_usage_mean",
    "kv_block_usage_max",
    "kv_token_usage_mean",
    "preemptions",
    "prefill_tokens",
    "decode_tokens",
];

impl RequestRow {
    pub fn of(level: f64, phase: Phase, r: &ClientRecord) -> Self {
        let e = r.engine.as_ref();
        RequestRow {
            level,
            id: r.id,
            phase,
            outcome: match &r.outcome {
                Outcome::Ok => "ok".to_string(),
                Outcome::Timeout => "timeout".to_string(),
                Outcome::Error(f) => format!("error: {f}"),
                Outcome::Refused(f) => format!("refused: {f}"),
            },
            input_tokens: r.input_tokens,
            output_tokens: r.output_tokens,
            ttft_s: rm::ttft(r),
            tpot_s: rm::tpot(r),
            e2e_s: rm::e2e(r),
            send_lag_s: rm::send_lag(r),
            queue_time_s: e.and_then(em::queue_time),
            engine_wait_s: e.and_then(em::engine_wait),
            prefill_time_s: e.and_then(em::prefill_time),
            decode_time_s: e.and_then(em::decode_time),
            cached_tokens: e.map(|x| x.cached_tokens),
            preemptions: e.map(|x| x.preemptions),
            failure: r.outcome.failure_kind().map(|k| k.to_string()),
        }
    }
}

/// A line of `steps.jsonl`: one engine step and its level.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepRow {
    pub level: f64,
    #[serde(flatten)]
    pub step: StepRecord,
}

/// A row of `timeseries.csv`: the engine's state over one interval of a level
/// ([`SeriesPoint`]; CSV rows are flat, so its fields are repeated here).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SeriesRow {
    pub level: f64,
    /// Start of the interval, seconds after the level's start.
    pub t_s: f64,
    pub steps: usize,
    pub running_mean: f64,
    pub running_max: usize,
    pub waiting_mean: f64,
    pub waiting_max: usize,
    pub kv_block_usage_mean: f64,
    pub kv_block_usage_max: f64,
    pub kv_token_usage_mean: f64,
    pub preemptions: usize,
    pub prefill_tokens: usize,
    pub decode_tokens: usize,
}

impl SeriesRow {
    pub fn of(level: f64, p: &SeriesPoint) -> Self {
        SeriesRow {
            level,
            t_s: p.t_s,
            steps: p.steps,
            running_mean: p.running_mean,
            running_max: p.running_max,
            waiting_mean: p.waiting_mean,
            waiting_max: p.waiting_max,
            kv_block_usage_mean: p.kv_block_usage_mean,
            kv_block_usage_max: p.kv_block_usage_max,
            kv_token_usage_mean: p.kv_token_usage_mean,
            preemptions: p.preemptions,
            prefill_tokens: p.prefill_tokens,
            decode_tokens: p.decode_tokens,
        }
    }
}
