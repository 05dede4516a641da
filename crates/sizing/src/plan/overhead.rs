//! `plan --request-overhead`: how much later than the simulated engines' tokens each
//! simulated request's client sees them — the load generator, the HTTP hops through a router
//! and a server, tokenization, the first text's hold, the stream's way back — added to its
//! first token and its end (BLIS's per-request overhead).
//!
//! Either one figure for every request (`12ms`), or a measured run's own: a run of goodput
//! against goodput serve replicas (through a router or not) records each request's engine
//! stamps beside the client's, and `goodput_metrics::http::outside_engine` gives each one's
//! lag behind its engine's first and last token, with the first text's hold counted in
//! tokens. Each simulated request then takes one measured request's lag, drawn by its id with
//! a counter-based generator (the same trace draws the same lags): its client sees the first
//! content when its simulated engine makes the token the hold ends at, that lag later. A mean
//! alone leaves out the tail, and a hold in seconds does not carry to another load: with
//! tiny's byte tokens the first whole character comes a few tokens after the first token, and
//! those few decode steps take as long as the load makes them.

use super::error::refuse;
use super::{PlanError, Result};
use goodput_core::Phase;
use goodput_results::Results;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// The most time outside the engines a request may take: beyond it, it is not an overhead.
const MAX: Duration = Duration::from_secs(60);

/// One request's time outside its engine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Lag {
    /// Nanoseconds from the token the first text is released at to the client's first content.
    pub first_ns: u64,
    /// Tokens after the first the release waits for (the first text's hold).
    pub hold_tokens: u32,
    /// Nanoseconds from the engine's last token to the client's end.
    pub end_ns: u64,
}

/// The time outside the engines of each simulated request.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Overhead {
    /// One lag for a fixed figure (no hold), each measured request's otherwise.
    lags: Arc<Vec<Lag>>,
    /// Where the lags were measured (`None`: a fixed figure).
    source: Option<String>,
}

/// The generator's seed: any fixed value; the draws depend on the request ids alone.
const SEED: u64 = 0x0e4e_4ead;

impl Overhead {
    /// `--request-overhead`: a duration (`0s`, `12.6ms`), or a run directory.
    pub fn parse(s: &str) -> Result<Self, PlanError> {
        let path = Path::new(s);
        if path.is_dir() {
            return Self::measured(path);
        }
        let refused = |expected: String| PlanError::Value(goodput_core::ValueError::new(s, expected));
        let d = goodput_metrics::slo::parse_duration_or_zero(s)
            .map_err(|e| refused(format!("{e}; or a run directory of goodput against goodput serve")))?;
        if d > MAX {
            return Err(refused(format!("{d:?}: more than a minute outside the engines is not an overhead")));
        }
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        Ok(Overhead { lags: Arc::new(vec![Lag { first_ns: ns, hold_tokens: 0, end_ns: ns }]), source: None })
    }

    /// Each measured request's time outside the engine in the run at `dir` (warm-up and
    /// cool-down requests left out).
    pub fn measured(dir: &Path) -> Result<Self> {
        let results =
            Results::read(dir).map_err(|source| PlanError::Run { path: dir.display().to_string(), source })?;
        let ns = |s: f64| (s.max(0.0) * 1e9).round() as u64;
        let lags: Vec<Lag> = results
            .records
            .iter()
            .filter(|r| r.phase == Phase::Measured)
            .filter_map(|r| goodput_metrics::http::outside_engine(&r.record))
            .filter(|o| o.to_first_s.is_finite() && o.to_end_s.is_finite())
            .map(|o| Lag { first_ns: ns(o.to_first_s), hold_tokens: o.hold_tokens, end_ns: ns(o.to_end_s) })
            .collect();
        if lags.is_empty() {
            refuse!(
                "--request-overhead {}: no measured request there carries goodput serve's engine stamps \
                 (measure it with goodput run against goodput serve replicas, directly or through a router)",
                dir.display()
            );
        }
        if let Some(l) = lags.iter().find(|l| l.first_ns.max(l.end_ns) > MAX.as_nanos() as u64) {
            refuse!(
                "--request-overhead {}: a request spent {:.1} s outside the engine: not an overhead",
                dir.display(),
                l.first_ns.max(l.end_ns) as f64 / 1e9
            );
        }
        Ok(Overhead { lags: Arc::new(lags), source: Some(dir.display().to_string()) })
    }

    pub fn is_zero(&self) -> bool {
        self.lags.iter().all(|l| *l == Lag::default())
    }

    /// The lag of request `id`.
    pub fn of(&self, id: u64) -> Lag {
        match self.lags.len() {
            0 => Lag::default(),
            1 => self.lags[0],
            n => {
                let z = crate::sampled::splitmix(SEED ^ id.wrapping_mul(0x9E37_79B9_7F4A_7C15));
                self.lags[(z % n as u64) as usize]
            }
        }
    }

    /// What the plan's table says of it: `12.6 ms`, or the measured run's P50 and P95 to the
    /// first content and of the hold in tokens.
    pub fn describe(&self) -> String {
        let ms = |ns: u64| ns as f64 / 1e6;
        match &self.source {
            None => format!("{:.1} ms", ms(self.lags.first().map_or(0, |p| p.first_ns))),
            Some(dir) => {
                let firsts: Vec<f64> = self.lags.iter().map(|p| ms(p.first_ns)).collect();
                let holds: Vec<f64> = self.lags.iter().map(|p| f64::from(p.hold_tokens)).collect();
                let pct = |v: &[f64], p| goodput_metrics::stats::percentile(v, p).unwrap_or(0.0);
                format!(
                    "each request one of {}'s {} (the hops to the first content P50 {:.1} ms, P95 {:.1} ms; \
                     the first text held for P50 {:.0}, P95 {:.0} tokens)",
                    dir,
                    firsts.len(),
                    pct(&firsts, 50.0),
                    pct(&firsts, 95.0),
                    pct(&holds, 50.0),
                    pct(&holds, 95.0)
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
        let fixed = Lag { first_ns: 12_500_000, hold_tokens: 0, end_ns: 12_500_000 };
        assert_eq!((o.of(0), o.of(7)), (fixed, fixed));
        assert!(Overhead::parse("0s").unwrap().is_zero() && Overhead::default().is_zero());
        assert_eq!(Overhead::default().of(3), Lag::default());
        let e = Overhead::parse("2m").unwrap_err();
        assert!(matches!(&e, PlanError::Value(v) if v.value == "2m"), "{e:?}");
        assert!(e.to_string().contains("not an overhead"), "{e}");
        let e = Overhead::parse("/no/such/run").unwrap_err();
        assert!(e.to_string().contains("run directory"), "{e}");
    }

    #[test]
    fn measured_pairs_are_drawn_by_id_evenly_and_repeatably() {
        let lags: Vec<Lag> =
            (0..4).map(|i| Lag { first_ns: i * 10, hold_tokens: i as u32, end_ns: i * 10 + 1 }).collect();
        let o = Overhead { lags: Arc::new(lags.clone()), source: Some("run".into()) };
        let mut seen = [0usize; 4];
        for id in 0..4000 {
            let p = o.of(id);
            assert_eq!(p, o.of(id), "the same id, the same lag");
            seen[(p.first_ns / 10) as usize] += 1;
            assert_eq!((p.end_ns, p.hold_tokens as u64), (p.first_ns + 1, p.first_ns / 10), "drawn together");
        }
        assert!(seen.iter().all(|&n| (800..1200).contains(&n)), "{seen:?}");
        assert!(o.describe().contains("one of run's 4"), "{}", o.describe());
    }
}
