//! What a server's own `/metrics` says about one load level: its histograms over the measured
//! requests (the difference of the two scrapes that bracket them) and its gauges at every
//! scrape. The way Prometheus users read a window (`increase()` of buckets, then
//! `histogram_quantile`), applied to scrapes goodput takes around and during each level.

use crate::names;
use crate::prom::{delta, stats, HistogramStats};
use goodput_core::{ServerScrape, Stamp};
use serde::{Deserialize, Serialize};

/// The server's histograms over a level's measured requests, by their Prometheus names.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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
    #[serde(rename = "inter_token_latency_seconds", default, skip_serializing_if = "Option::is_none")]
    pub itl: Option<HistogramStats>,
    #[serde(rename = "request_time_per_output_token_seconds", default, skip_serializing_if = "Option::is_none")]
    pub tpot: Option<HistogramStats>,
}

impl ServerHistograms {
    /// Each histogram with its names on every server ([`names`]), in a fixed order.
    fn slots(&mut self) -> [(&'static [names::Alias], &mut Option<HistogramStats>); 8] {
        [
            (names::TTFT_ALIASES, &mut self.ttft),
            (names::E2E_ALIASES, &mut self.e2e),
            (names::QUEUE_ALIASES, &mut self.queue),
            (names::PREFILL_ALIASES, &mut self.prefill),
            (names::DECODE_ALIASES, &mut self.decode),
            (names::INFERENCE_ALIASES, &mut self.inference),
            (names::ITL_ALIASES, &mut self.itl),
            (names::TPOT_ALIASES, &mut self.tpot),
        ]
    }

    /// The mean of a histogram over the window, where the server exposes its `_sum`.
    pub fn mean(h: &Option<HistogramStats>) -> Option<f64> {
        h.as_ref()?.mean
    }
}

/// The server's gauges at one scrape; `None` where its /metrics has no such gauge.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(from = "GaugeRepr")]
pub struct GaugePoint {
    /// Seconds since the level's first scrape.
    pub t_s: f64,
    pub running: Option<f64>,
    pub waiting: Option<f64>,
    /// KV-cache block usage, a fraction (the mean over engines when there are several).
    pub kv_usage: Option<f64>,
    /// The fullest engine's KV usage, when the server has several engines (label sets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_usage_max: Option<f64>,
}

/// A gauge point as written: named, or the `[t, running, waiting, kv]` array of results
/// written before the points were named.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
enum GaugeRepr {
    Named {
        t_s: f64,
        running: Option<f64>,
        waiting: Option<f64>,
        kv_usage: Option<f64>,
        #[serde(default)]
        kv_usage_max: Option<f64>,
    },
    Tuple(f64, Option<f64>, Option<f64>, Option<f64>),
}

impl From<GaugeRepr> for GaugePoint {
    fn from(r: GaugeRepr) -> Self {
        match r {
            GaugeRepr::Named { t_s, running, waiting, kv_usage, kv_usage_max } => {
                GaugePoint { t_s, running, waiting, kv_usage, kv_usage_max }
            }
            GaugeRepr::Tuple(t_s, running, waiting, kv_usage) => {
                GaugePoint { t_s, running, waiting, kv_usage, kv_usage_max: None }
            }
        }
    }
}

/// What a server's /metrics said about one level.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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
    /// The prefix cache over the histogram window, from the server's counters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_cache: Option<PrefixCache>,
    /// Speculative decoding over the histogram window, where the server does it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_decode: Option<SpecDecode>,
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
        for (aliases, slot) in histograms.slots() {
            let both = |n: &names::Alias| before.histograms.get(n.name).zip(after.histograms.get(n.name));
            if let Some((alias, (b, a))) = aliases.iter().find_map(|n| Some((n, both(n)?))) {
                let dsum = after.sums.get(alias.name).zip(before.sums.get(alias.name)).map(|(a, b)| a - b);
                *slot = stats(&delta(b, a), dsum);
            }
        }
        ServerSide {
            scrapes: scrapes.len(),
            histogram_window_s: (since(before.at), since(after.at)),
            histograms,
            measured_window_s: window.map(|(a, b)| (since(a), since(b))),
            series: scrapes.iter().map(|s| GaugePoint::of(s, since(s.at))).collect(),
            prefix_cache: PrefixCache::between(before, after),
            spec_decode: SpecDecode::between(before, after),
            error: None,
        }
    }

    /// The server's mean queue time over the measured requests (`Δ_sum / Δ_count`).
    pub fn queue_mean(&self) -> Option<f64> {
        ServerHistograms::mean(&self.histograms.queue)
    }
}

impl GaugePoint {
    /// The gauges of one scrape, under whichever server's names it has ([`names`]): counts
    /// summed over engines, the KV fraction as their mean (and max).
    pub fn of(s: &ServerScrape, t_s: f64) -> Self {
        let first = |aliases: &[names::Alias]| aliases.iter().find_map(|n| s.gauges.get(n.name).copied());
        let kv = names::KV_USAGE_ALIASES.iter().find_map(|n| s.mean_max(n.name)).or_else(|| {
            // TGI: the batch's tokens over the capacity found at warm-up.
            let used = s.gauges.get(names::TGI_KV_USED)?;
            let total = s.gauges.get(names::TGI_KV_TOTAL).filter(|t| **t > 0.0)?;
            Some((used / total, used / total))
        });
        let engines = names::KV_USAGE_ALIASES.iter().find_map(|n| s.label_sets.get(n.name)).map_or(1, |x| x.0);
        GaugePoint {
            t_s,
            running: first(names::RUNNING_ALIASES),
            waiting: first(names::WAITING_ALIASES),
            kv_usage: kv.map(|k| k.0),
            kv_usage_max: kv.filter(|_| engines > 1).map(|k| k.1),
        }
    }
}

/// The server's prefix cache over a window: prompt tokens looked up and found (the
/// difference of its counters between two scrapes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PrefixCache {
    pub queried_tokens: f64,
    pub hit_tokens: f64,
}

impl PrefixCache {
    /// The counters' increase from `before` to `after`, under the first names the server has;
    /// `None` when it has none, or when a counter went down (a restart).
    pub fn between(before: &ServerScrape, after: &ServerScrape) -> Option<Self> {
        names::PREFIX_CACHE_ALIASES.iter().find_map(|(q, h)| {
            let d = |n: &str| Some(after.gauges.get(n)? - before.gauges.get(n)?).filter(|d| *d >= 0.0);
            Some(PrefixCache { queried_tokens: d(q.name)?, hit_tokens: d(h.name)? })
        })
    }

    /// Found ÷ looked up; `None` when nothing was looked up.
    pub fn hit_rate(&self) -> Option<f64> {
        (self.queried_tokens > 0.0).then(|| self.hit_tokens / self.queried_tokens)
    }
}

/// Speculative decoding over a window, from the server's counters: verification steps that
/// carried a draft, tokens drafted and tokens of them accepted (vLLM's
/// `spec_decode_num_drafts`, `…_num_draft_tokens`, `…_num_accepted_tokens`), their increase
/// between two scrapes; or SGLang's running average of tokens per step (a gauge).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SpecDecode {
    pub drafts: Option<f64>,
    pub draft_tokens: Option<f64>,
    pub accepted_tokens: Option<f64>,
    /// SGLang's `spec_accept_length` at the window's end (its own average, not the window's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_tokens_per_step: Option<f64>,
}

impl SpecDecode {
    /// The counters' increase from `before` to `after` (none where the server has none, or a
    /// counter went down: a restart), or SGLang's gauge at `after`.
    pub fn between(before: &ServerScrape, after: &ServerScrape) -> Option<Self> {
        let d = |n: &str| Some(after.gauges.get(n)? - before.gauges.get(n)?).filter(|d| *d >= 0.0);
        let counted = names::SPEC_DECODE_ALIASES.iter().find_map(|(s, t, acc)| {
            Some(SpecDecode {
                drafts: Some(d(s.name)?),
                draft_tokens: Some(d(t.name)?),
                accepted_tokens: Some(d(acc.name)?),
                server_tokens_per_step: None,
            })
        });
        let gauge = after.gauges.get(names::SGLANG_ACCEPT_LENGTH.name).copied();
        counted.or_else(|| Some(SpecDecode { server_tokens_per_step: Some(gauge?), ..SpecDecode::default() }))
    }

    /// The acceptance rate: drafted tokens accepted ÷ tokens drafted (vLLM's "draft acceptance
    /// rate"); `None` without drafts.
    pub fn acceptance_rate(&self) -> Option<f64> {
        let (drafted, accepted) = (self.draft_tokens?, self.accepted_tokens?);
        (drafted > 0.0).then(|| accepted / drafted)
    }

    /// Tokens a sequence gains per verification step: the one the target model samples itself
    /// plus the drafted ones accepted, 1 + accepted ÷ drafts (vLLM's "mean acceptance length");
    /// SGLang's own average where it gives only that.
    pub fn tokens_per_step(&self) -> Option<f64> {
        match (self.drafts, self.accepted_tokens) {
            (Some(n), Some(acc)) if n > 0.0 => Some(1.0 + acc / n),
            _ => self.server_tokens_per_step,
        }
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
        assert_eq!(
            side.series[1],
            GaugePoint { t_s: 1.0, running: Some(3.0), waiting: None, kv_usage: None, ..Default::default() }
        );
    }

    #[test]
    fn gauge_points_read_the_older_array_form() {
        let p: GaugePoint = serde_json::from_str("[0.5, 2.0, null, 0.25]").unwrap();
        assert_eq!(
            p,
            GaugePoint { t_s: 0.5, running: Some(2.0), waiting: None, kv_usage: Some(0.25), ..Default::default() }
        );
        let named = serde_json::to_string(&p).unwrap();
        assert_eq!(serde_json::from_str::<GaugePoint>(&named).unwrap(), p);
    }

    #[test]
    fn speculative_decoding_is_counted_over_the_window_by_hand() {
        let counters = |at: u64, drafts: f64, drafted: f64, accepted: f64| {
            let mut s = ServerScrape { at: Stamp(at), ..Default::default() };
            let (n, t, a) = &names::SPEC_DECODE_ALIASES[0];
            s.gauges.extend([
                (n.name.to_string(), drafts),
                (t.name.to_string(), drafted),
                (a.name.to_string(), accepted),
            ]);
            s
        };
        // 100 verification steps with a draft of 3 tokens each, 225 of the 300 accepted:
        // 225 / 300 = 75 % accepted; 1 + 225 / 100 = 3.25 tokens a step.
        let d = SpecDecode::between(&counters(0, 10.0, 30.0, 20.0), &counters(5, 110.0, 330.0, 245.0)).unwrap();
        assert_eq!((d.drafts, d.draft_tokens, d.accepted_tokens), (Some(100.0), Some(300.0), Some(225.0)));
        assert_eq!(d.acceptance_rate(), Some(0.75));
        assert_eq!(d.tokens_per_step(), Some(3.25));
        // A restart (a counter down), and a server without the counters: nothing to say.
        assert_eq!(SpecDecode::between(&counters(0, 10.0, 30.0, 20.0), &counters(5, 5.0, 330.0, 245.0)), None);
        let plain = ServerScrape::default();
        assert_eq!(SpecDecode::between(&plain, &plain), None);
        // SGLang: its own running average, taken as it is.
        let mut sg = ServerScrape::default();
        sg.gauges.insert(names::SGLANG_ACCEPT_LENGTH.name.into(), 2.4);
        let d = SpecDecode::between(&plain, &sg).unwrap();
        assert_eq!((d.tokens_per_step(), d.acceptance_rate()), (Some(2.4), None));
    }
}
