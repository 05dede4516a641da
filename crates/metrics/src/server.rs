//! What a server's own `/metrics` says about one load level: its histograms over the measured
//! requests (the difference of the two scrapes that bracket them) and its gauges at every
//! scrape. The way Prometheus users read a window (`increase()` of buckets, then
//! `histogram_quantile`), applied to scrapes goodput takes around and during each level.

use crate::names;
use crate::prom::{delta, stats, HistogramStats};
use goodput_core::{ServerScrape, Stamp};
use serde::{Deserialize, Serialize};

/// The server's histograms over a level's measured requests, by their Prometheus names.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerHistograms {
    #[serde(rename = "time_to_first_token_seconds", default, skip_serializing_if = "Option::is_none")]
    pub ttft: Option<HistogramStats>,
    #[serde(rename = "e2e_request_latency_seconds", default, skip_serializing_if = "Option::is_none")]
    pub e2e: Option<HistogramStats>,
    #[serde(rename = "request_queue_time_seconds", default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<HistogramStats>,
    #[serde(rename = "request_prefill_time_seconds", default, skip_serializing_if = "Option::is_none")]
    pub prefill: Option<HistogramStats>,
    #[serde(rename = "request_decode_time_seconds", default, skip_serializing_if = "Option::is_none")]
    pub decode: Option<HistogramStats>,
    #[serde(rename = "request_inference_time_seconds", default, skip_serializing_if = "Option::is_none")]
    pub inference: Option<HistogramStats>,
}

impl ServerHistograms {
    /// Each histogram with its Prometheus name, in a fixed order.
    fn slots(&mut self) -> [(&'static str, &mut Option<HistogramStats>); 6] {
        [
            (names::TTFT_SECONDS, &mut self.ttft),
            (names::E2E_SECONDS, &mut self.e2e),
            (names::QUEUE_SECONDS, &mut self.queue),
            (names::PREFILL_SECONDS, &mut self.prefill),
            (names::DECODE_SECONDS, &mut self.decode),
            (names::INFERENCE_SECONDS, &mut self.inference),
        ]
    }

    /// The mean of a histogram over the window, where the server exposes its `_sum`.
    pub fn mean(h: &Option<HistogramStats>) -> Option<f64> {
        h.as_ref()?.mean
    }
}

/// The server's gauges at one scrape; `None` where its /metrics has no such gauge.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(from = "GaugeRepr")]
pub struct GaugePoint {
    /// Seconds since the level's first scrape.
    pub t_s: f64,
    pub running: Option<f64>,
    pub waiting: Option<f64>,
    /// KV-cache block usage, a fraction.
    pub kv_usage: Option<f64>,
}

/// A gauge point as written: named, or the `[t, running, waiting, kv]` array of results
/// written before the points were named.
#[derive(Deserialize)]
#[serde(untagged)]
enum GaugeRepr {
    Named { t_s: f64, running: Option<f64>, waiting: Option<f64>, kv_usage: Option<f64> },
    Tuple(f64, Option<f64>, Option<f64>, Option<f64>),
}

impl From<GaugeRepr> for GaugePoint {
    fn from(r: GaugeRepr) -> Self {
        match r {
            GaugeRepr::Named { t_s, running, waiting, kv_usage } => GaugePoint { t_s, running, waiting, kv_usage },
            GaugeRepr::Tuple(t_s, running, waiting, kv_usage) => GaugePoint { t_s, running, waiting, kv_usage },
        }
    }
}

/// What a server's /metrics said about one level.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerSide {
    pub scrapes: usize,
    /// The two scrapes the histograms are the difference of, in seconds since the level's
    /// first scrape: those bracketing the measured requests ([`bracket`]).
    pub histogram_window_s: (f64, f64),
    /// The level's measured requests as the server's histograms counted them.
    pub histograms: ServerHistograms,
    /// The level's measured window (first measured intended send to last measured end), in
    /// seconds since the first scrape: occupancy is taken over the scrapes inside it.
    pub measured_window_s: Option<(f64, f64)>,
    /// Gauges at each scrape, the level's first to its last.
    pub series: Vec<GaugePoint>,
    /// Why scraping failed, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl ServerSide {
    /// A level whose scrapes failed.
    pub fn failed(error: String) -> Self {
        ServerSide { error: Some(error), ..Default::default() }
    }

    /// The level's server side from its scrapes (the first before the level, the last after
    /// it; at least one). Histograms count requests as they finish, so they are the
    /// difference of the scrapes [`bracket`] picks from `measured` (when the last warm-up
    /// request ended, when the last measured one did). `window` is the measured window.
    pub fn of(
        scrapes: &[ServerScrape],
        measured: Option<(Option<Stamp>, Stamp)>,
        window: Option<(Stamp, Stamp)>,
    ) -> ServerSide {
        let Some(first) = scrapes.first() else { return ServerSide::failed("no scrape".into()) };
        let since = |s: Stamp| s.secs_since(first.at);
        let (from, to) = bracket(&scrapes.iter().map(|s| s.at).collect::<Vec<_>>(), measured);
        let (before, after) = (&scrapes[from], &scrapes[to]);
        let mut histograms = ServerHistograms::default();
        for (name, slot) in histograms.slots() {
            if let (Some(b), Some(a)) = (before.histograms.get(name), after.histograms.get(name)) {
                let dsum = after.sums.get(name).zip(before.sums.get(name)).map(|(a, b)| a - b);
                *slot = stats(&delta(b, a), dsum);
            }
        }
        let series = scrapes
            .iter()
            .map(|s| GaugePoint {
                t_s: since(s.at),
                running: s.gauges.get(names::RUNNING).copied(),
                waiting: s.gauges.get(names::WAITING).copied(),
                kv_usage: s.gauges.get(names::KV_USAGE).or_else(|| s.gauges.get(names::KV_USAGE_V0)).copied(),
            })
            .collect();
        ServerSide {
            scrapes: scrapes.len(),
            histogram_window_s: (since(before.at), since(after.at)),
            histograms,
            measured_window_s: window.map(|(a, b)| (since(a), since(b))),
            series,
            error: None,
        }
    }

    /// The server's mean queue time over the measured requests (`Δ_sum / Δ_count`).
    pub fn queue_mean(&self) -> Option<f64> {
        ServerHistograms::mean(&self.histograms.queue)
    }
}

/// The scrapes (indices into their stamps `at`, ascending) whose histogram difference counts
/// the measured requests: the first at or after the last warm-up end (the first scrape
/// without warm-up) and the first at or after the last measured end; without two such, the
/// first and the last. A measured request that ended before the last warm-up one is lost.
pub fn bracket(at: &[Stamp], measured: Option<(Option<Stamp>, Stamp)>) -> (usize, usize) {
    measured
        .and_then(|(warm, end)| {
            let from = match warm {
                Some(w) => at.iter().position(|&s| s >= w)?,
                None => 0,
            };
            let to = at.iter().position(|&s| s >= end)?;
            (to > from).then_some((from, to))
        })
        .unwrap_or((0, at.len().saturating_sub(1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_histogram_window_brackets_the_measured_requests() {
        let at: Vec<Stamp> = [0, 5, 10, 15, 20].map(Stamp).to_vec();
        // Warm-up ended at 7, the last measured request at 16: scrapes 10 and 20.
        assert_eq!(bracket(&at, Some((Some(Stamp(7)), Stamp(16)))), (2, 4));
        // A scrape exactly at the moment counts.
        assert_eq!(bracket(&at, Some((Some(Stamp(5)), Stamp(15)))), (1, 3));
        // No warm-up: from the level's first scrape.
        assert_eq!(bracket(&at, Some((None, Stamp(12)))), (0, 3));
        // No scrape between the two moments, or nothing measured: the whole level.
        assert_eq!(bracket(&at, Some((Some(Stamp(11)), Stamp(14)))), (0, 4));
        assert_eq!(bracket(&at, None), (0, 4));
    }

    fn scrape(at: u64, queue: &[(f64, f64)], sum: f64, running: f64) -> ServerScrape {
        let mut s = ServerScrape { at: Stamp(at), ..Default::default() };
        s.histograms.insert(names::QUEUE_SECONDS.into(), queue.to_vec());
        s.sums.insert(names::QUEUE_SECONDS.into(), sum);
        s.gauges.insert(names::RUNNING.into(), running);
        s
    }

    #[test]
    fn histograms_are_the_difference_of_the_bracketing_scrapes() {
        let inf = f64::INFINITY;
        // Before: 2 requests (sum 0.2 s); warm-up done by 1 s: 4 (sum 0.4); after: 10 (sum 1.6).
        let s = [
            scrape(0, &[(0.1, 1.0), (inf, 2.0)], 0.2, 0.0),
            scrape(1_000_000_000, &[(0.1, 3.0), (inf, 4.0)], 0.4, 3.0),
            scrape(2_000_000_000, &[(0.1, 5.0), (inf, 10.0)], 1.6, 1.0),
        ];
        let side = ServerSide::of(&s, Some((Some(Stamp(900_000_000)), Stamp(1_500_000_000))), None);
        let q = side.histograms.queue.as_ref().unwrap();
        // Scrapes 1 and 2: 6 requests, Δsum 1.2 s, mean 0.2 s.
        assert_eq!(q.count, 6.0);
        assert!((q.mean.unwrap() - 0.2).abs() < 1e-12);
        assert_eq!(side.histogram_window_s, (1.0, 2.0));
        assert!(side.histograms.ttft.is_none(), "no TTFT histogram exposed");
        assert_eq!(side.series.len(), 3);
        assert_eq!(side.series[1], GaugePoint { t_s: 1.0, running: Some(3.0), waiting: None, kv_usage: None });
    }

    #[test]
    fn gauge_points_read_the_older_array_form() {
        let p: GaugePoint = serde_json::from_str("[0.5, 2.0, null, 0.25]").unwrap();
        assert_eq!(p, GaugePoint { t_s: 0.5, running: Some(2.0), waiting: None, kv_usage: Some(0.25) });
        let named = serde_json::to_string(&p).unwrap();
        assert_eq!(serde_json::from_str::<GaugePoint>(&named).unwrap(), p);
    }
}
