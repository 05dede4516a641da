//! `plan --request-overhead`: how much later than the simulated engines' tokens each
//! simulated request's client sees them — the load generator, the HTTP hops through a router
//! and a server, tokenization, the first text's hold, the stream's way back — added to its
//! first token and its end (BLIS's per-request overhead).
//!
//! Either one figure for every request (`12ms`), or a measured run's own: a run of goodput
//! against goodput serve replicas (through a router or not) records each request's engine
//! stamps beside the client's, and `goodput_metrics::http::beyond_engine_tokens` gives each
//! one's lag behind its engine's first and last token. Each simulated request then takes one
//! measured request's pair, drawn by its id with a counter-based generator (the same trace
//! draws the same pairs). A mean alone leaves out the tail: with tiny's byte tokens, for one,
//! the first whole character comes a few tokens after the first token, and under load those
//! few decode steps take 11 ms at the median and 157 ms at P95.

use anyhow::{bail, Context, Result};
use goodput_core::Phase;
use goodput_results::Results;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// The most time outside the engines a request may take: beyond it, it is not an overhead.
const MAX: Duration = Duration::from_secs(60);

/// The time outside the engines of each simulated request.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Overhead {
    /// `(to the first token, to the end)` in nanoseconds: one pair for a fixed figure, each
    /// measured request's otherwise.
    pairs: Arc<Vec<(u64, u64)>>,
    /// Where the pairs were measured (`None`: a fixed figure).
    source: Option<String>,
}

/// The generator's seed: any fixed value; the draws depend on the request ids alone.
const SEED: u64 = 0x0e4e_4ead;

impl Overhead {
    /// `--request-overhead`: a duration (`0s`, `12.6ms`), or a run directory.
    pub fn parse(s: &str) -> Result<Self, String> {
        let path = Path::new(s);
        if path.is_dir() {
            return Self::measured(path).map_err(|e| format!("{e:#}"));
        }
        let d = crate::args::parse_duration_or_zero(s)
            .map_err(|e| format!("{e}; or a run directory of goodput against goodput serve"))?;
        if d > MAX {
            return Err(format!("{d:?}: more than a minute outside the engines is not an overhead"));
        }
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        Ok(Overhead { pairs: Arc::new(vec![(ns, ns)]), source: None })
    }

    /// Each measured request's time outside the engine in the run at `dir` (warm-up and
    /// cool-down requests left out).
    pub fn measured(dir: &Path) -> Result<Self> {
        let results = Results::read(dir).with_context(|| format!("--request-overhead {}", dir.display()))?;
        let ns = |s: f64| (s.max(0.0) * 1e9).round() as u64;
        let pairs: Vec<(u64, u64)> = results
            .records
            .iter()
            .filter(|r| r.phase == Phase::Measured)
            .filter_map(|r| goodput_metrics::http::beyond_engine_tokens(&r.record))
            .filter(|(a, b)| a.is_finite() && b.is_finite())
            .map(|(a, b)| (ns(a), ns(b)))
            .collect();
        if pairs.is_empty() {
            bail!(
                "--request-overhead {}: no measured request there carries goodput serve's engine stamps \
                 (measure it with goodput run against goodput serve replicas, directly or through a router)",
                dir.display()
            );
        }
        if let Some(&(a, b)) = pairs.iter().find(|(a, b)| *a.max(b) > MAX.as_nanos() as u64) {
            bail!(
                "--request-overhead {}: a request spent {:.1} s outside the engine: not an overhead",
                dir.display(),
                a.max(b) as f64 / 1e9
            );
        }
        Ok(Overhead { pairs: Arc::new(pairs), source: Some(dir.display().to_string()) })
    }

    pub fn is_zero(&self) -> bool {
        self.pairs.iter().all(|&(a, b)| a == 0 && b == 0)
    }

    /// The pair of request `id`: `(to the first token, to the end)` in nanoseconds.
    pub fn of(&self, id: u64) -> (u64, u64) {
        match self.pairs.len() {
            0 => (0, 0),
            1 => self.pairs[0],
            n => {
                let z = goodput_sizing::sampled::splitmix(SEED ^ id.wrapping_mul(0x9E37_79B9_7F4A_7C15));
                self.pairs[(z % n as u64) as usize]
            }
        }
    }

    /// What the plan's table says of it: `12.6 ms`, or the measured run's P50 and P95 to the
    /// first token.
    pub fn describe(&self) -> String {
        let ms = |ns: u64| ns as f64 / 1e6;
        match &self.source {
            None => format!("{:.1} ms", ms(self.pairs.first().map_or(0, |p| p.0))),
            Some(dir) => {
                let firsts: Vec<f64> = self.pairs.iter().map(|p| ms(p.0)).collect();
                let pct = |p| goodput_metrics::stats::percentile(&firsts, p).unwrap_or(0.0);
                format!(
                    "each request one of {}'s {} (to the first token P50 {:.1} ms, P95 {:.1} ms)",
                    dir,
                    firsts.len(),
                    pct(50.0),
                    pct(95.0)
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_figure_is_every_request_s_and_is_bounded() {
        let o = Overhead::parse("12.5ms").unwrap();
        assert_eq!((o.of(0), o.of(7)), ((12_500_000, 12_500_000), (12_500_000, 12_500_000)));
        assert!(Overhead::parse("0s").unwrap().is_zero() && Overhead::default().is_zero());
        assert_eq!(Overhead::default().of(3), (0, 0));
        let e = Overhead::parse("2m").unwrap_err();
        assert!(e.contains("not an overhead"), "{e}");
        let e = Overhead::parse("/no/such/run").unwrap_err();
        assert!(e.contains("run directory"), "{e}");
    }

    #[test]
    fn measured_pairs_are_drawn_by_id_evenly_and_repeatably() {
        let pairs: Vec<(u64, u64)> = (0..4).map(|i| (i * 10, i * 10 + 1)).collect();
        let o = Overhead { pairs: Arc::new(pairs.clone()), source: Some("run".into()) };
        let mut seen = [0usize; 4];
        for id in 0..4000 {
            let p = o.of(id);
            assert_eq!(p, o.of(id), "the same id, the same pair");
            seen[(p.0 / 10) as usize] += 1;
            assert_eq!(p.1, p.0 + 1, "a request's two figures are drawn together");
        }
        assert!(seen.iter().all(|&n| (800..1200).contains(&n)), "{seen:?}");
        assert!(o.describe().contains("one of run's 4"), "{}", o.describe());
    }
}
