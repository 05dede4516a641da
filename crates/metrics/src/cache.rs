//! Prefix-cache hits over a level's measured requests: how many prompt tokens the target
//! served from its cache instead of computing them. A repeated run against a server that kept
//! its cache (the same prompts, the same seed) is measured mostly from the cache; this says
//! so, and [`PrefixHits::contaminated`] says when a workload meant to have unique prompts has
//! too many hits to be read as a cold measurement.
//!
//! A hit rate is a share: a request that says more of its prompt was cached than the prompt
//! held is refused (left out and counted in [`PrefixHits::refused`]), and counts that still
//! make no share in [0, 1] give no rate at all; nothing is clamped into range.

use crate::server::PrefixCache;
use goodput_core::ClientRecord;
use serde::{Deserialize, Serialize};

/// Where a level's hit counts come from, most exact first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HitSource {
    /// The engine's `cached_tokens` of each request (goodput's engine in-process, or its
    /// server's `goodput` object).
    Engine,
    /// `usage.prompt_tokens_details.cached_tokens` of each response (vLLM with
    /// `--enable-prompt-tokens-details`, SGLang, OpenAI).
    Usage,
    /// The server's prefix-cache counters in /metrics over the level's histogram window
    /// (warm-up requests finishing inside it included).
    Metrics,
}

/// Prompt tokens served from the prefix cache, and of how many.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PrefixHits {
    pub source: HitSource,
    /// Prompt tokens served from the cache.
    pub cached_tokens: f64,
    /// Prompt tokens in all (the counted requests' inputs; the cache's lookups for
    /// [`HitSource::Metrics`]).
    pub prompt_tokens: f64,
    /// Requests with at least one cached token (`None` from /metrics counters).
    pub requests_with_hits: Option<usize>,
    /// Requests counted (`None` from /metrics counters).
    pub requests: Option<usize>,
    /// Requests left out because they said more prompt tokens were cached than they had.
    #[serde(default)]
    pub refused: usize,
    /// The prefix every request shares (a chat template's opening, a system prompt), in
    /// tokens: the median cached count over the counted requests, when it is under a quarter
    /// of their median prompt ([`shared_prefix`]); 0 from /metrics counters. Contamination is
    /// judged beyond it.
    #[serde(default)]
    pub shared_prefix_tokens: f64,
}

/// The prefix every request of a level shares, from `(cached, prompt)` counts: a template or
/// system prompt shows as the same few cached tokens on most requests, so the median cached
/// count when it is under a quarter of the median prompt; 0 otherwise (a warm cache serving
/// whole prompts is not a shared prefix).
pub fn shared_prefix(counts: &[(usize, usize)]) -> f64 {
    let cached: Vec<f64> = counts.iter().map(|c| c.0 as f64).collect();
    let prompts: Vec<f64> = counts.iter().map(|c| c.1 as f64).collect();
    match (crate::percentile(&cached, 50.0), crate::percentile(&prompts, 50.0)) {
        (Some(c), Some(p)) if c < 0.25 * p => c,
        _ => 0.0,
    }
}

/// A workload of unique prompts may still share a chat template's opening or a system
/// prompt across requests; hits beyond this share of prompt tokens are not that.
pub const CONTAMINATION_SHARE: f64 = 0.10;

impl PrefixHits {
    /// `prefix_hit_rate` = Σ cached ÷ Σ prompt tokens, in [0, 1]; `None` without prompt
    /// tokens, or when the counts make no share (more cached than prompt tokens, negative or
    /// not finite: the server's counters are wrong, and the rate is refused, not clamped).
    pub fn hit_rate(&self) -> Option<f64> {
        let (c, p) = (self.cached_tokens, self.prompt_tokens);
        (p.is_finite() && p > 0.0 && c >= 0.0 && c <= p).then(|| c / p)
    }

    /// Over the measured requests that say how many of their prompt tokens were cached: the
    /// engine's counts where every such request has them, else the server's `usage` details.
    /// A request with more cached than prompt tokens is refused. `None` when no request says.
    pub fn of_records(records: &[&ClientRecord]) -> Option<Self> {
        let engine: Vec<(usize, usize)> =
            records.iter().filter_map(|r| r.engine.as_ref().map(|e| (e.cached_tokens, e.prompt_tokens))).collect();
        let usage: Vec<(usize, usize)> = records
            .iter()
            .filter_map(|r| {
                let h = r.http.as_ref()?;
                Some((h.usage_cached_tokens?, h.usage_prompt_tokens.unwrap_or(r.input_tokens)))
            })
            .collect();
        let (source, counts) = match (engine.is_empty(), usage.is_empty()) {
            (false, _) => (HitSource::Engine, engine),
            (true, false) => (HitSource::Usage, usage),
            (true, true) => return None,
        };
        let all = counts.len();
        let counts: Vec<(usize, usize)> = counts.into_iter().filter(|(cached, prompt)| cached <= prompt).collect();
        Some(PrefixHits {
            source,
            cached_tokens: counts.iter().map(|c| c.0 as f64).sum(),
            prompt_tokens: counts.iter().map(|c| c.1 as f64).sum(),
            requests_with_hits: Some(counts.iter().filter(|c| c.0 > 0).count()),
            requests: Some(counts.len()),
            refused: all - counts.len(),
            shared_prefix_tokens: shared_prefix(&counts),
        })
    }

    /// From the server's counters.
    pub fn of_server(p: &PrefixCache) -> Self {
        PrefixHits {
            source: HitSource::Metrics,
            cached_tokens: p.hit_tokens,
            prompt_tokens: p.queried_tokens,
            requests_with_hits: None,
            requests: None,
            refused: 0,
            shared_prefix_tokens: 0.0,
        }
    }

    /// A level's hits: from its records, else from the server's counters.
    pub fn of_level(records: &[&ClientRecord], server: Option<&PrefixCache>) -> Option<Self> {
        Self::of_records(records).or_else(|| server.map(Self::of_server))
    }

    /// The hit rate beyond the shared prefix: (Σ cached − n·shared) ÷ (Σ prompt − n·shared),
    /// what a workload of unique prompts should keep near zero. `None` as [`Self::hit_rate`].
    pub fn beyond_shared_prefix(&self) -> Option<f64> {
        self.hit_rate()?;
        let shared = self.shared_prefix_tokens * self.requests.unwrap_or(0) as f64;
        let (c, p) = ((self.cached_tokens - shared).max(0.0), self.prompt_tokens - shared);
        Some(if p > 0.0 { c / p } else { 0.0 })
    }

    /// More than [`CONTAMINATION_SHARE`] of the prompt tokens beyond the shared prefix came
    /// from the cache: the chat template's opening every request shares is not contamination.
    pub fn contaminated(&self) -> bool {
        self.beyond_shared_prefix().is_some_and(|h| h > CONTAMINATION_SHARE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use goodput_core::{EngineRecord, FinishReason, HttpStamps, RecordBuilder, Stamp};

    fn rec(input: usize, engine: Option<(usize, usize)>, usage: Option<(usize, usize)>) -> ClientRecord {
        let mut r = RecordBuilder::new(1).input(input).build();
        r.engine = engine.map(|(cached, prompt)| EngineRecord {
            id: 1,
            arrival: Stamp(0),
            queued: Stamp(0),
            first_scheduled: None,
            first_token: None,
            token_times: Vec::new(),
            finished: Stamp(0),
            prompt_tokens: prompt,
            cached_tokens: cached,
            generated_tokens: 0,
            preemptions: 0,
            finish_reason: FinishReason::Length,
        });
        r.http = usage.map(|(cached, prompt)| HttpStamps {
            usage_cached_tokens: Some(cached),
            usage_prompt_tokens: Some(prompt),
            ..Default::default()
        });
        r
    }

    #[test]
    fn hand_computed_hit_rates() {
        // The repeated 128-token run of the issue: 112 cached of 128, on each of 3 requests.
        let rs = [rec(128, None, Some((112, 128))), rec(128, None, Some((112, 128))), rec(128, None, Some((112, 128)))];
        let h = PrefixHits::of_records(&rs.iter().collect::<Vec<_>>()).unwrap();
        assert_eq!((h.source, h.cached_tokens, h.prompt_tokens), (HitSource::Usage, 336.0, 384.0));
        assert_eq!(h.hit_rate(), Some(0.875));
        assert_eq!((h.requests_with_hits, h.requests), (Some(3), Some(3)));
        assert!(h.contaminated());
        // The engine's counts win over usage; 16 of 200 tokens (a template's opening): 8 %.
        let rs = [rec(100, Some((16, 100)), Some((99, 100))), rec(100, Some((0, 100)), None)];
        let h = PrefixHits::of_records(&rs.iter().collect::<Vec<_>>()).unwrap();
        assert_eq!((h.source, h.hit_rate(), h.requests_with_hits), (HitSource::Engine, Some(0.08), Some(1)));
        assert!(!h.contaminated());
        // Nothing said per request: the server's counters.
        let none = [rec(10, None, None)];
        let p = PrefixCache { queried_tokens: 1000.0, hit_tokens: 500.0 };
        let h = PrefixHits::of_level(&none.iter().collect::<Vec<_>>(), Some(&p)).unwrap();
        assert_eq!((h.source, h.hit_rate(), h.requests), (HitSource::Metrics, Some(0.5), None));
        assert_eq!(PrefixHits::of_level(&none.iter().collect::<Vec<_>>(), None), None);
    }

    /// The false alarm: unique chat prompts of 125 tokens whose template opening (16
    /// tokens, a block) is cached on every request but the first — 12 % "from the cache",
    /// all of it the shared prefix. A warm cache serving whole prompts is still caught.
    #[test]
    fn a_shared_template_prefix_is_not_contamination() {
        let mut rs: Vec<ClientRecord> = (0..40).map(|_| rec(125, None, Some((16, 125)))).collect();
        rs[0] = rec(125, None, Some((0, 125)));
        let h = PrefixHits::of_records(&rs.iter().collect::<Vec<_>>()).unwrap();
        assert!(h.hit_rate().unwrap() > CONTAMINATION_SHARE, "{h:?}");
        assert_eq!(h.shared_prefix_tokens, 16.0);
        assert!(!h.contaminated(), "{h:?}");
        // Ten of them served whole from a warm cache: 10 × (112 − 16) beyond the prefix, less
        // the 16 the first request did not have, of 40 × (125 − 16) prompt tokens.
        for r in rs.iter_mut().skip(1).take(10) {
            *r = rec(125, None, Some((112, 125)));
        }
        let h = PrefixHits::of_records(&rs.iter().collect::<Vec<_>>()).unwrap();
        assert!(h.contaminated(), "{h:?}");
        assert!((h.beyond_shared_prefix().unwrap() - 944.0 / 4360.0).abs() < 1e-9, "{h:?}");
    }

    #[test]
    fn counts_that_make_no_share_are_refused_not_clamped() {
        // 10⁹ cached of a 164-token prompt (a "609756098 %" hit rate): that request is left out;
        // the other two, 32 and 0 cached of 128 each, give 32 / 256 = 12.5 %.
        let rs = [
            rec(164, None, Some((1_000_000_000, 164))),
            rec(128, None, Some((32, 128))),
            rec(128, None, Some((0, 128))),
        ];
        let h = PrefixHits::of_records(&rs.iter().collect::<Vec<_>>()).unwrap();
        assert_eq!((h.cached_tokens, h.prompt_tokens, h.refused, h.requests), (32.0, 256.0, 1, Some(2)));
        assert_eq!(h.hit_rate(), Some(0.125));
        // Only such requests: nothing counted, no rate.
        let h = PrefixHits::of_records(&[&rs[0]]).unwrap();
        assert_eq!((h.refused, h.hit_rate()), (1, None));
        // The engine's counts likewise.
        let h = PrefixHits::of_records(&[&rec(10, Some((11, 10)), None)]).unwrap();
        assert_eq!((h.source, h.refused, h.hit_rate()), (HitSource::Engine, 1, None));
        // Server counters with more hits than lookups, or not finite: no rate.
        for (hit, queried) in [(2000.0, 1000.0), (f64::NAN, 1000.0), (-1.0, 1000.0), (1.0, f64::INFINITY)] {
            let p = PrefixCache { queried_tokens: queried, hit_tokens: hit };
            assert_eq!(PrefixHits::of_server(&p).hit_rate(), None, "{hit} of {queried}");
            assert!(!PrefixHits::of_server(&p).contaminated());
        }
        // The edges of the range hold.
        let full = PrefixHits::of_server(&PrefixCache { queried_tokens: 8.0, hit_tokens: 8.0 });
        assert_eq!(full.hit_rate(), Some(1.0));
    }
}
