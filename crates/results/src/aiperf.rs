//! NVIDIA AIPerf's names for the same quantities of a level, written into `summary.json`
//! under `aiperf`, so tools built on AIPerf's `profile_export_aiperf.json` read ours: each
//! metric an object of `unit`, `avg`, `min`, `max`, `std` and `pNN` (AIPerf's record-metric
//! fields). Only where AIPerf's definition is the contract's:
//!
//! | AIPerf | goodput | note |
//! |---|---|---|
//! | `time_to_first_token` | `ttft` | first token of any kind, reasoning included |
//! | `time_to_first_output_token` | `ttfo` | first answer token; only when a request reasoned |
//! | `inter_token_latency` | `tpot` | AIPerf's ITL is (latency − TTFT) / (OSL − 1), goodput's TPOT |
//! | `request_latency` | `e2e` | |
//! | `reasoning_token_count` | `reasoning_tokens` | per request that reasoned |
//!
//! AIPerf's `output_token_count` leaves reasoning tokens out where goodput's output tokens
//! count them, so it is not written. Nothing of goodput reads these back.

use goodput_metrics::level::LevelSummary;
use goodput_metrics::Summary;
use serde::{Deserialize, Serialize};

/// One AIPerf record metric: its unit and statistics (standard deviation of the population,
/// as AIPerf's `np.std`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AiperfMetric {
    pub unit: String,
    pub avg: f64,
    pub min: f64,
    pub max: f64,
    pub std: f64,
    pub p50: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
}

impl AiperfMetric {
    /// `s` times `scale` in `unit` (`None` without samples or with a non-finite figure).
    fn of(s: &Option<Summary>, scale: f64, unit: &str) -> Option<Self> {
        let s = s.as_ref()?;
        let population = s.stddev * ((s.n.max(1) - 1) as f64 / s.n.max(1) as f64).sqrt();
        let m = AiperfMetric {
            unit: unit.into(),
            avg: s.mean * scale,
            min: s.min * scale,
            max: s.max * scale,
            std: population * scale,
            p50: s.p50 * scale,
            p90: s.p90 * scale,
            p95: s.p95 * scale,
            p99: s.p99 * scale,
        };
        let all = [m.avg, m.min, m.max, m.std, m.p50, m.p90, m.p95, m.p99];
        all.iter().all(|v| v.is_finite()).then_some(m)
    }
}

/// AIPerf's metrics of a level (see the module's table); absent ones are left out.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AiperfKeys {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_to_first_token: Option<AiperfMetric>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_to_first_output_token: Option<AiperfMetric>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inter_token_latency: Option<AiperfMetric>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_latency: Option<AiperfMetric>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_token_count: Option<AiperfMetric>,
}

/// AIPerf's keys of a level, from its summary (times in ms, counts in tokens).
pub fn aiperf_keys(s: &LevelSummary) -> AiperfKeys {
    AiperfKeys {
        time_to_first_token: AiperfMetric::of(&s.ttft, 1e3, "ms"),
        time_to_first_output_token: AiperfMetric::of(&s.ttfo, 1e3, "ms"),
        inter_token_latency: AiperfMetric::of(&s.tpot, 1e3, "ms"),
        request_latency: AiperfMetric::of(&s.e2e, 1e3, "ms"),
        reasoning_token_count: AiperfMetric::of(&s.reasoning_tokens, 1.0, "tokens"),
    }
}
