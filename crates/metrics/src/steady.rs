//! A level's steady window, found in its own time series: the requests in flight over time,
//! from every record of the level (warm-up and cool-down included, since the target served
//! them too).
//!
//! - **A closed loop** ramps up as its users start and drains after the last request is sent;
//!   its plateau is the 90th percentile of the in-flight count over the measured window, and
//!   the steady window runs from the first moment the count reaches 90 % of the plateau to the
//!   last, within the measured window.
//! - **An open loop** (a rate, a trace) is steady while requests arrive: from the first
//!   measured request's send to the last one's; after it the level only drains. It is
//!   **over-saturated** when the requests in flight keep growing over that window — the last
//!   third's mean more than twice the first third's and more than 2 above it — as a queue does
//!   when requests arrive faster than they are served (guidellm's over-saturation): its
//!   latencies then grow with the level's length, not with its load.
//!
//! The level's throughputs are counted over this window (by `metrics::windowed`): what the
//! target delivered while the load was what the level says, not while it ramped or drained.

use goodput_core::{ClientRecord, Stamp};
use serde::{Deserialize, Serialize};

/// A level's steady window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Steady {
    /// Seconds from the first measured request's intended send (the level's window start).
    pub start_s: f64,
    pub end_s: f64,
    /// The level's measured window, seconds, for the share the steady window covers.
    pub window_s: f64,
    /// Requests in flight, on average over the steady window.
    pub in_flight_mean: f64,
    /// Open loop: the in-flight means of the window's first and last thirds, when the level
    /// was over-saturated (the queue grew without bound).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oversaturated: Option<(f64, f64)>,
}

/// The steady window on the level's clock, with its description.
#[derive(Clone, Debug, PartialEq)]
pub struct Bounds {
    pub from: Stamp,
    pub to: Stamp,
    pub steady: Steady,
}

/// The in-flight count as steps `(time, count from then)`, time-ordered, from every record's
/// intended send to its end.
fn in_flight(all: &[&ClientRecord]) -> Vec<(Stamp, i64)> {
    let mut ev: Vec<(Stamp, i64)> = all.iter().flat_map(|r| [(r.intended, 1), (r.end.max(r.intended), -1)]).collect();
    ev.sort_by_key(|&(t, d)| (t, d));
    let mut n = 0;
    ev.into_iter()
        .map(|(t, d)| {
            n += d;
            (t, n)
        })
        .collect()
}

/// The step function over `[a, b]` as `(count, seconds held)` spans, in time order.
fn spans(steps: &[(Stamp, i64)], a: Stamp, b: Stamp) -> Vec<(i64, f64)> {
    let mut out = Vec::new();
    let mut level = steps.iter().take_while(|(t, _)| *t <= a).last().map_or(0, |x| x.1);
    let mut at = a;
    for &(t, n) in steps.iter().filter(|(t, _)| *t > a && *t < b) {
        out.push((level, t.secs_since(at)));
        (level, at) = (n, t);
    }
    out.push((level, b.secs_since(at)));
    out
}

/// The time-weighted mean of the step function over `[a, b]`.
fn mean_over(steps: &[(Stamp, i64)], a: Stamp, b: Stamp) -> f64 {
    if b <= a {
        return 0.0;
    }
    spans(steps, a, b).iter().map(|&(n, d)| n as f64 * d).sum::<f64>() / b.secs_since(a)
}

/// A quantile of the count's time-weighted distribution over `[a, b]`.
fn count_quantile(steps: &[(Stamp, i64)], a: Stamp, b: Stamp, q: f64) -> i64 {
    let mut spans = spans(steps, a, b);
    spans.sort_by_key(|s| s.0);
    let total: f64 = spans.iter().map(|s| s.1).sum();
    let mut acc = 0.0;
    for (n, d) in &spans {
        acc += d;
        if acc >= q * total {
            return *n;
        }
    }
    spans.last().map_or(0, |s| s.0)
}

/// The steady window of a level: `all` its records, `measured` the measured ones, `closed`
/// whether users keep a fixed number of requests in flight (else requests arrive at their
/// own times). `None` without a measured request.
pub fn window(all: &[&ClientRecord], measured: &[&ClientRecord], closed: bool) -> Option<Steady> {
    bounds(all, measured, closed, None).map(|b| b.steady)
}

/// [`window`] with its ends as stamps. `sent_until`: an open loop stopped early sent until
/// then (its requests in flight were abandoned, so its last measured send is earlier).
pub fn bounds(
    all: &[&ClientRecord],
    measured: &[&ClientRecord],
    closed: bool,
    sent_until: Option<Stamp>,
) -> Option<Bounds> {
    let m0 = measured.iter().map(|r| r.intended).min()?;
    let m1 = measured.iter().map(|r| r.end).max()?;
    let steps = in_flight(all);
    let (a, b, oversaturated) = if closed {
        let plateau = count_quantile(&steps, m0, m1, 0.9);
        let floor = (0.9 * plateau as f64).ceil() as i64;
        let at_plateau = |t: &Stamp, n: &i64| *t >= m0 && *t <= m1 && *n >= floor;
        let first = steps.iter().find(|(t, n)| at_plateau(t, n)).map_or(m0, |x| x.0);
        // The end: the first drop below the floor after the last moment at it.
        let last = steps.iter().rposition(|(t, n)| at_plateau(t, n));
        let end = last.and_then(|i| steps[i + 1..].iter().find(|(_, n)| *n < floor)).map_or(m1, |x| x.0.min(m1));
        (first, end, None)
    } else {
        let end = measured.iter().map(|r| r.intended).max()?.max(sent_until.unwrap_or_default());
        let third = end.secs_since(m0) / 3.0;
        let at = |k: f64| Stamp(m0.0 + (k * third * 1e9) as u64);
        let (early, late) = (mean_over(&steps, m0, at(1.0)), mean_over(&steps, at(2.0), end));
        (m0, end, (late > 2.0 * early && late > early + 2.0).then_some((early, late)))
    };
    if b.secs_since(a) <= 0.0 {
        return None;
    }
    let steady = Steady {
        start_s: a.secs_since(m0),
        end_s: b.secs_since(m0),
        window_s: m1.secs_since(m0),
        in_flight_mean: mean_over(&steps, a, b),
        oversaturated,
    };
    Some(Bounds { from: a, to: b, steady })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use goodput_core::RecordBuilder;

    fn ms(x: u64) -> Stamp {
        Stamp(x * 1_000_000)
    }

    /// A request sent at `from` ms, ending at `to` ms, with `n` tokens evenly after 10 ms
    /// (shared with the windowed summary's tests).
    pub(crate) fn req(id: u64, from: u64, to: u64, n: u64) -> ClientRecord {
        let step = (to - from - 10) / n.max(1);
        RecordBuilder::new(id)
            .intended(ms(from))
            .end(ms(to))
            .input(5)
            .output(n as usize)
            .tokens_at((1..=n).map(|k| ms(from + 10 + k * step - step)))
            .build()
    }

    /// Two users, each running back-to-back requests of 100 ms: user A from 0 to 1000 ms, user
    /// B joins at 300 ms (the ramp) and leaves at 800 ms (the drain): the plateau of 2 in
    /// flight runs from 300 to 800 ms.
    #[test]
    fn a_closed_loop_s_window_is_its_plateau() {
        let mut recs: Vec<ClientRecord> = (0..10).map(|i| req(i, 100 * i, 100 * i + 100, 5)).collect();
        recs.extend((0..5).map(|i| req(100 + i, 300 + 100 * i, 400 + 100 * i, 5)));
        let all: Vec<&ClientRecord> = recs.iter().collect();
        let s = window(&all, &all, true).unwrap();
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert!(close(s.start_s, 0.3) && close(s.end_s, 0.8) && close(s.window_s, 1.0), "{s:?}");
        assert!((s.in_flight_mean - 2.0).abs() < 1e-9, "{s:?}");
        assert!(s.oversaturated.is_none());
    }

    /// Requests every 100 ms for 3 s, each taking longer than the last (a queue): in flight
    /// grows from about 1 to about 9.
    #[test]
    fn an_open_loop_whose_queue_grows_is_over_saturated_and_a_steady_one_is_not() {
        let growing: Vec<ClientRecord> = (0..30).map(|i| req(i, 100 * i, 100 * i + 50 + 30 * i, 3)).collect();
        let all: Vec<&ClientRecord> = growing.iter().collect();
        let s = window(&all, &all, false).unwrap();
        let (early, late) = s.oversaturated.expect("a growing queue");
        assert!(late > 2.0 * early, "{early} {late}");
        assert!((s.end_s - 2.9).abs() < 1e-9, "the window ends at the last send: {s:?}");
        let steady: Vec<ClientRecord> = (0..30).map(|i| req(i, 100 * i, 100 * i + 150, 3)).collect();
        let all: Vec<&ClientRecord> = steady.iter().collect();
        let s = window(&all, &all, false).unwrap();
        assert!(s.oversaturated.is_none(), "{s:?}");
        assert!((s.in_flight_mean - 1.5).abs() < 0.1, "{s:?}");
    }
}
