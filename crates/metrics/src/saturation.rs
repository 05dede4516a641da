//! Over-saturation seen while an open-loop level runs, so it can be stopped early (guidellm's
//! over-saturation stop): requests arrive faster than the target serves them, its queue grows
//! without bound, and every further second of the level only measures a longer queue.
//!
//! [`Watch`] is fed each request as it ends and judged as the level goes on. A level is
//! over-saturated when both hold, after at least [`MIN_S`] seconds and [`MIN_ENDED`] ended
//! requests:
//!
//! - **Completions fall behind arrivals:** over the second half of the time so far, requests
//!   ended at under [`BEHIND`] of the offered rate.
//! - **Waits grow with the send time:** of the ended requests ordered by their intended send,
//!   the last third's mean E2E is over [`GROWTH`] times the first third's (and at least
//!   [`MIN_GROWTH_S`] longer). A stable level shows the opposite: its late sends that have
//!   ended are the quick ones.
//!
//! Either alone is not enough: a level of long requests completes little in its first seconds,
//! and a burst lengthens a few waits.

use serde::{Deserialize, Serialize};

/// The least time a level runs before it may be judged, seconds.
pub const MIN_S: f64 = 4.0;
/// The fewest ended requests a judgement needs.
pub const MIN_ENDED: usize = 24;
/// Completions over the second half below this share of the offered rate fall behind.
pub const BEHIND: f64 = 0.85;
/// The late third's mean E2E over this many times the first third's is growth.
pub const GROWTH: f64 = 2.0;
/// ... and at least this much longer, seconds (a 2 ms wait doubling to 4 ms is not a queue).
pub const MIN_GROWTH_S: f64 = 0.25;

/// Why a level was stopped early.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SaturationStop {
    /// Seconds into the level when it was stopped.
    pub at_s: f64,
    /// The offered rate, requests per second, and the completions per second over the second
    /// half of the level so far.
    pub offered_rate: f64,
    pub completion_rate: f64,
    /// Requests ended by then, and about how many were sent (offered rate × time).
    pub ended: usize,
    pub sent_about: f64,
    /// Mean E2E (seconds) of the first and last thirds of the ended requests by send time.
    pub early_e2e_s: f64,
    pub late_e2e_s: f64,
}

/// The ended requests of a running open-loop level.
#[derive(Clone, Debug)]
pub struct Watch {
    offered: f64,
    /// (intended send, end), seconds into the level.
    ended: Vec<(f64, f64)>,
}

impl Watch {
    /// A level offered `rate` requests per second.
    pub fn new(rate: f64) -> Self {
        Watch { offered: rate, ended: Vec::new() }
    }

    /// A request sent (as intended) at `intended` ended at `end`, seconds into the level.
    pub fn ended(&mut self, intended: f64, end: f64) {
        self.ended.push((intended, end));
    }

    /// The stop, when the level is over-saturated `now` seconds into it.
    pub fn judge(&self, now: f64) -> Option<SaturationStop> {
        let n = self.ended.len();
        if now < MIN_S || n < MIN_ENDED || self.offered <= 0.0 {
            return None;
        }
        let late_ends = self.ended.iter().filter(|(_, e)| *e >= now / 2.0).count();
        let completion_rate = late_ends as f64 / (now / 2.0);
        if completion_rate >= BEHIND * self.offered {
            return None;
        }
        let mut by_send = self.ended.clone();
        by_send.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mean_e2e = |xs: &[(f64, f64)]| xs.iter().map(|(i, e)| e - i).sum::<f64>() / xs.len().max(1) as f64;
        let (early, late) = (mean_e2e(&by_send[..n / 3]), mean_e2e(&by_send[n - n / 3..]));
        (late > GROWTH * early && late - early >= MIN_GROWTH_S).then_some(SaturationStop {
            at_s: now,
            offered_rate: self.offered,
            completion_rate,
            ended: n,
            sent_about: self.offered * now,
            early_e2e_s: early,
            late_e2e_s: late,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 10 req/s offered, served one at a time at 5 req/s: request k, sent at k/10 s, ends at
    /// (k+1)/5 s, so its E2E grows by 0.1 s per request. At 10 s, 49 requests ended (ends
    /// 0.2–9.8 s); 25 of them in the second half: 5 req/s, under 0.85 × 10. The first third
    /// (k = 0..16) averages 0.2 + 0.1 × 7.5 = 0.95 s, the last (k = 33..49) 0.2 + 0.1 × 40.5
    /// = 4.25 s: over twice. Stopped.
    #[test]
    fn a_queue_that_grows_is_stopped() {
        let mut w = Watch::new(10.0);
        let now = 10.0;
        for k in 0..100 {
            let (sent, end) = (k as f64 / 10.0, (k + 1) as f64 / 5.0);
            if end < now {
                w.ended(sent, end);
            }
        }
        let s = w.judge(now).expect("over-saturated");
        assert_eq!(s.ended, 49);
        assert!((s.completion_rate - 5.0).abs() < 1e-9, "{s:?}");
        assert!((s.early_e2e_s - 0.95).abs() < 1e-9 && (s.late_e2e_s - 4.25).abs() < 1e-9, "{s:?}");
        assert_eq!(s.sent_about, 100.0);
        assert!(w.judge(3.0).is_none(), "too early to judge");
    }

    /// The same arrivals served in parallel, 0.3 s each: completions keep up and waits stay
    /// flat; not stopped. Long requests (5 s each) at 8 s: 31 ended, all in the second half
    /// (7.75 req/s, behind), but every wait is 5 s: not stopped either.
    #[test]
    fn a_stable_level_and_a_level_of_long_requests_run_on() {
        let mut w = Watch::new(10.0);
        (0..100).map(|k| k as f64 / 10.0).filter(|s| s + 0.3 <= 10.0).for_each(|s| w.ended(s, s + 0.3));
        assert!(w.judge(10.0).is_none());
        let mut long = Watch::new(10.0);
        (0..100).map(|k| k as f64 / 10.0).filter(|s| s + 5.0 <= 8.0).for_each(|s| long.ended(s, s + 5.0));
        assert_eq!(long.ended.len(), 31);
        assert!(long.judge(8.0).is_none(), "behind, but every wait is 5 s");
    }
}
