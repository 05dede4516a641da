//! How full the engine was over a level: its own step records where it ran in this process
//! (means weighted by step time, as vLLM's scheduler stats are), else a server's /metrics
//! gauges (plain means over the scrapes), else unknown — never zeros that were not measured.

use crate::engine as em;
use crate::server::{GaugePoint, ServerSide};
use crate::stats::Summary;
use goodput_core::StepRecord;
use serde::{Deserialize, Serialize};

/// The engine's side of one level, from its step records.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EngineLevel {
    pub steps: usize,
    #[schemars(range(min = 0.0, max = 1.0))]
    pub kv_block_usage_max: f64,
    pub kv_token_usage_max: f64,
    pub running_max: usize,
    pub waiting_max: usize,
    /// Means over the level's steps, weighted by step duration (busy time).
    pub running_mean: f64,
    pub waiting_mean: f64,
    #[schemars(range(min = 0.0, max = 1.0))]
    pub kv_block_usage_mean: f64,
    /// The share of the pool held by sliding-window layers (mean weighted by step time, and
    /// max); absent for models without them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_sliding_block_usage_mean: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_sliding_block_usage_max: Option<f64>,
    pub preemptions: usize,
    pub prefix_hit_tokens: usize,
    pub step_time: Option<Summary>,
    /// [`em::graph_step_share`] of the level's steps; absent where no step says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graph_step_share: Option<f64>,
}

impl EngineLevel {
    /// The summary of `steps`: maxima, sums, and means weighted by each step's duration.
    pub fn of(steps: &[StepRecord]) -> EngineLevel {
        let busy: f64 = steps.iter().map(em::step_time).sum();
        let mean = |f: &dyn Fn(&StepRecord) -> f64| {
            if busy > 0.0 {
                steps.iter().map(|s| em::step_time(s) * f(s)).sum::<f64>() / busy
            } else {
                0.0
            }
        };
        EngineLevel {
            running_mean: mean(&|s| s.running as f64),
            waiting_mean: mean(&|s| s.waiting as f64),
            kv_block_usage_mean: mean(&em::kv_block_usage),
            kv_sliding_block_usage_mean: steps
                .iter()
                .any(|s| s.kv_by_kind.is_some())
                .then(|| mean(&|s| em::kv_sliding_block_usage(s).unwrap_or(0.0))),
            kv_sliding_block_usage_max: steps.iter().filter_map(em::kv_sliding_block_usage).reduce(f64::max),
            steps: steps.len(),
            kv_block_usage_max: steps.iter().map(em::kv_block_usage).fold(0.0, f64::max),
            kv_token_usage_max: steps.iter().map(em::kv_token_usage).fold(0.0, f64::max),
            running_max: steps.iter().map(|s| s.running).max().unwrap_or(0),
            waiting_max: steps.iter().map(|s| s.waiting).max().unwrap_or(0),
            preemptions: steps.iter().map(|s| s.preemptions).sum(),
            prefix_hit_tokens: steps.iter().map(|s| s.prefix_hit_tokens).sum(),
            step_time: Summary::of(&steps.iter().map(em::step_time).collect::<Vec<_>>()),
            graph_step_share: em::graph_step_share(steps),
        }
    }
}

/// A level's occupancy: running and waiting requests and KV-cache block usage (a fraction).
/// NaN (written as `null`) where the source does not say.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Occupancy {
    /// The engine's steps in this process (means weighted by step time), or the server's
    /// /metrics gauges at each scrape (plain means over the scrapes), over the level's
    /// measured window (a warm-up burst left out).
    pub from_server: bool,
    #[serde(with = "crate::nan::Nullable")]
    pub running_mean: f64,
    #[serde(with = "crate::nan::Nullable")]
    pub running_max: f64,
    #[serde(with = "crate::nan::Nullable")]
    pub waiting_mean: f64,
    #[serde(with = "crate::nan::Nullable")]
    pub waiting_max: f64,
    #[serde(with = "crate::nan::Nullable")]
    pub kv_mean: f64,
    #[serde(with = "crate::nan::Nullable")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub kv_max: f64,
    /// Counted from the engine's steps only.
    pub preemptions: Option<usize>,
}

impl Occupancy {
    /// What a level's occupancy was: from the engine's steps where it ran in this process,
    /// else from the server's /metrics scrapes inside the measured window (all of them when
    /// none is inside); `None` when neither is known (a remote server without /metrics).
    pub fn of(e: &EngineLevel, server: Option<&ServerSide>) -> Option<Occupancy> {
        if e.steps > 0 {
            return Some(Occupancy {
                from_server: false,
                running_mean: e.running_mean,
                running_max: e.running_max as f64,
                waiting_mean: e.waiting_mean,
                waiting_max: e.waiting_max as f64,
                kv_mean: e.kv_block_usage_mean,
                kv_max: e.kv_block_usage_max,
                preemptions: Some(e.preemptions),
            });
        }
        let server = server?;
        let inside: Vec<&GaugePoint> = match server.measured_window_s {
            Some((a, b)) => server.series.iter().filter(|x| x.t_s >= a && x.t_s <= b).collect(),
            None => Vec::new(),
        };
        let series: Vec<&GaugePoint> = if inside.is_empty() { server.series.iter().collect() } else { inside };
        let stat = |g: fn(&GaugePoint) -> Option<f64>| {
            let v: Vec<f64> = series.iter().filter_map(|p| g(p)).filter(|x| x.is_finite()).collect();
            if v.is_empty() {
                (f64::NAN, f64::NAN)
            } else {
                (v.iter().sum::<f64>() / v.len() as f64, v.iter().copied().fold(f64::MIN, f64::max))
            }
        };
        let ((running_mean, running_max), (waiting_mean, waiting_max), (kv_mean, kv_max)) =
            (stat(|p| p.running), stat(|p| p.waiting), stat(|p| p.kv_usage));
        if running_max.is_nan() && waiting_max.is_nan() && kv_max.is_nan() {
            return None;
        }
        Some(Occupancy {
            from_server: true,
            running_mean,
            running_max,
            waiting_mean,
            waiting_max,
            kv_mean,
            kv_max,
            preemptions: None,
        })
    }

    /// Occupancy of results written before it was stored: the engine's numbers.
    pub fn of_engine(e: &EngineLevel) -> Option<Occupancy> {
        Occupancy::of(e, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t_s: f64, running: f64, waiting: f64, kv: Option<f64>) -> GaugePoint {
        GaugePoint { t_s, running: Some(running), waiting: Some(waiting), kv_usage: kv, kv_usage_max: None }
    }

    #[test]
    fn occupancy_from_the_server_s_gauges_inside_the_measured_window() {
        let no_engine = EngineLevel::of(&[]);
        let mut side = ServerSide {
            // A warm-up burst at 0.2 s, steady from 1 s, idle after.
            series: vec![
                at(0.0, 0.0, 0.0, Some(0.0)),
                at(0.2, 4.0, 40.0, Some(0.5)),
                at(1.0, 2.0, 1.0, Some(0.1)),
                at(2.0, 4.0, 3.0, Some(0.3)),
                at(3.0, 0.0, 0.0, None),
            ],
            measured_window_s: Some((0.5, 2.5)),
            ..Default::default()
        };
        let o = Occupancy::of(&no_engine, Some(&side)).unwrap();
        assert!(o.from_server && o.preemptions.is_none());
        // The scrapes at 1 s and 2 s: running (2 + 4) / 2 = 3, max 4; waiting 2, max 3; KV 0.2, max 0.3.
        assert_eq!((o.running_mean, o.running_max, o.waiting_mean, o.waiting_max), (3.0, 4.0, 2.0, 3.0));
        assert!((o.kv_mean - 0.2).abs() < 1e-12 && o.kv_max == 0.3);
        // No scrape inside the window: all of them (the burst's 40 waiting included).
        side.measured_window_s = Some((5.0, 6.0));
        assert_eq!(Occupancy::of(&no_engine, Some(&side)).unwrap().waiting_max, 40.0);
        // A server whose /metrics gives none of the gauges, or no server: unknown, not zero.
        side.series = vec![GaugePoint { t_s: 0.0, ..Default::default() }];
        assert!(Occupancy::of(&no_engine, Some(&side)).is_none());
        assert!(Occupancy::of(&no_engine, None).is_none());
    }

    #[test]
    fn engine_level_means_are_weighted_by_step_time() {
        use goodput_core::Stamp;
        let step = |start: u64, end: u64, running: usize| StepRecord {
            start: Stamp(start),
            end: Stamp(end),
            running,
            usable_blocks: 10,
            blocks_used: running,
            ..Default::default()
        };
        // 3 ms with 1 running, 1 ms with 5 running: mean (3·1 + 1·5) / 4 = 2.
        let e = EngineLevel::of(&[step(0, 3_000_000, 1), step(3_000_000, 4_000_000, 5)]);
        assert!((e.running_mean - 2.0).abs() < 1e-12);
        assert_eq!((e.running_max, e.steps), (5, 2));
        assert!((e.kv_block_usage_max - 0.5).abs() < 1e-12);
        assert_eq!((e.kv_sliding_block_usage_mean, e.kv_sliding_block_usage_max), (None, None));
        // Sliding layers hold 1 block for 3 ms and 3 blocks for 1 ms (of 10): mean 0.15, max 0.3.
        let hybrid = |s: StepRecord, sliding| StepRecord {
            kv_by_kind: Some(goodput_core::KvBlocksByKind { full: s.blocks_used - sliding, sliding }),
            ..s
        };
        let h = EngineLevel::of(&[hybrid(step(0, 3_000_000, 1), 1), hybrid(step(3_000_000, 4_000_000, 5), 3)]);
        assert!((h.kv_sliding_block_usage_mean.unwrap() - 0.15).abs() < 1e-12);
        assert_eq!(h.kv_sliding_block_usage_max, Some(0.3));
        let o = Occupancy::of(&e, None).unwrap();
        assert!(!o.from_server && o.preemptions == Some(0));
    }
}
