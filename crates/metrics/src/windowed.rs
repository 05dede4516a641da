//! A level summarised over its steady window ([`crate::steady`]), as the contract asks:
//!
//! - **Percentiles** over every measured request: warm-up and cool-down are left out by phase,
//!   and a closed loop's warm-up already holds every user's first request and any sent before
//!   the last of those ended (its ramp). Trimming by the in-flight count as well would drop
//!   samples wherever users pause between requests (think time, a RAG query's retrieval, an
//!   agent's tools), where the count dips below the plateau without any ramp or drain.
//! - **Throughputs** (requests, input and output tokens, goodput) over the window itself, from
//!   every request the target served in it, warm-up and cool-down ones included: they loaded
//!   the target too. A closed loop's drain, where fewer and fewer users remain, would lower
//!   them; an open loop's window ends with its last send.
//!
//! A level without a steady window (no measured request, or none of any length) keeps the
//! measured requests' own window ([`crate::level::summarize`]).

use crate::level::{intervals, request_is_good, summarize as over_requests, summary_of, LevelSummary};
use crate::slo::Slo;
use crate::steady::{bounds, Steady};
use goodput_core::{ClientRecord, Stamp};

/// How a level's requests were sent, for its steady window.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Sending {
    /// Users keep a fixed number of requests in flight.
    Closed,
    /// Requests arrive at their own times; `until`: when a level stopped early stopped
    /// sending (the requests then in flight were abandoned, so it sent past its last record).
    Open { until: Option<Stamp> },
}

/// Summarises a level at `load`: `all` its records, `measured` the measured ones. Returns the
/// summary and the steady window it was counted over.
pub fn summarize(
    load: f64,
    all: &[&ClientRecord],
    measured: &[&ClientRecord],
    slos: &[Slo],
    sending: Sending,
) -> (LevelSummary, Option<Steady>) {
    let (closed, until) = match sending {
        Sending::Closed => (true, None),
        Sending::Open { until } => (false, until),
    };
    let Some(b) = bounds(all, measured, closed, until) else {
        return (over_requests(load, measured, slos), None);
    };
    let mut s = summary_of(load, measured, slos);
    served(&mut s, all, measured, (b.from, b.to), slos);
    (s, Some(b.steady))
}

/// The summary's throughputs and their intervals over `window`, from every record in `all`
/// that completed (or, for the output, whose tokens arrived) within it.
fn served(
    s: &mut LevelSummary,
    all: &[&ClientRecord],
    sampled: &[&ClientRecord],
    window: (Stamp, Stamp),
    slos: &[Slo],
) {
    let (from, to) = window;
    let span = to.secs_since(from);
    let within = |t: Stamp| t >= from && t <= to;
    let ended = || all.iter().filter(move |r| r.is_ok() && within(r.end));
    s.window_s = span;
    s.request_throughput = ended().count() as f64 / span;
    s.input_throughput = ended().map(|r| r.input_tokens).sum::<usize>() as f64 / span;
    let tokens: f64 = all
        .iter()
        .filter(|r| r.is_ok())
        .flat_map(|r| crate::request::token_arrivals(r))
        .filter(|(t, _)| within(*t))
        .map(|(_, n)| n)
        .sum();
    s.output_throughput = tokens / span;
    s.goodput = all.iter().filter(|r| within(r.end) && request_is_good(r, slos)).count() as f64 / span;
    s.intervals = Some(intervals(all, sampled, from, to));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::steady::tests::req;

    fn ms(x: u64) -> Stamp {
        Stamp(x * 1_000_000)
    }

    /// Two users, each running back-to-back requests of 100 ms: user A from 0 to 1000 ms,
    /// user B joins at 300 ms (the ramp) and leaves at 800 ms (the drain): the plateau of 2
    /// in flight runs from 300 to 800 ms, and the throughputs are counted over it.
    #[test]
    fn a_closed_loop_s_throughputs_are_its_plateau_s() {
        let mut recs: Vec<ClientRecord> = (0..10).map(|i| req(i, 100 * i, 100 * i + 100, 5)).collect();
        recs.extend((0..5).map(|i| req(100 + i, 300 + 100 * i, 400 + 100 * i, 5)));
        let all: Vec<&ClientRecord> = recs.iter().collect();
        let (s, steady) = summarize(2.0, &all, &all, &[], Sending::Closed);
        let steady = steady.unwrap();
        assert!((steady.start_s - 0.3).abs() < 1e-9 && (steady.end_s - 0.8).abs() < 1e-9, "{steady:?}");
        assert!((s.window_s - 0.5).abs() < 1e-9, "{}", s.window_s);
        // 11 completions end in [300, 800] ms, both ends inclusive (A's at 300–800, B's at
        // 400–800): 11 / 0.5 s; 5 prompt tokens each: 110 / s.
        assert!((s.request_throughput - 22.0).abs() < 1e-9, "{}", s.request_throughput);
        assert!((s.input_throughput - 110.0).abs() < 1e-9, "{}", s.input_throughput);
        // The 5 requests of each user that ran inside it: 50 tokens in 0.5 s.
        assert!((s.output_throughput - 100.0).abs() < 1e-9, "{}", s.output_throughput);
        // Without SLOs every completed request is good.
        assert!((s.goodput - 22.0).abs() < 1e-9, "{}", s.goodput);
        // Percentiles over every measured request.
        assert_eq!(s.requests, 15);
        // Over the measured requests' own window (0–1000 ms) it would read 15 / s.
        let whole = over_requests(2.0, &all, &[]);
        assert!((whole.request_throughput - 15.0).abs() < 1e-9, "{}", whole.request_throughput);
    }

    /// The interval of the steady throughput is counted over the same window: it holds the
    /// point estimate.
    #[test]
    fn the_steady_throughput_s_interval_holds_it() {
        let recs: Vec<ClientRecord> = (0..400).map(|i| req(i, 50 * i, 50 * i + 200, 4)).collect();
        let all: Vec<&ClientRecord> = recs.iter().collect();
        let (s, _) = summarize(4.0, &all, &all, &[], Sending::Closed);
        let i = s.intervals.unwrap().request_throughput.unwrap();
        assert!(
            i.lo.unwrap() <= s.request_throughput && s.request_throughput <= i.hi.unwrap(),
            "{i:?} {}",
            s.request_throughput
        );
    }

    /// An open loop stopped early at 2 s whose last recorded send was at 0.9 s: its window
    /// runs to the stop, where it was still sending.
    #[test]
    fn an_open_loop_stopped_early_is_counted_until_it_stopped_sending() {
        let recs: Vec<ClientRecord> = (0..10).map(|i| req(i, 100 * i, 100 * i + 150, 3)).collect();
        let all: Vec<&ClientRecord> = recs.iter().collect();
        let (s, steady) = summarize(10.0, &all, &all, &[], Sending::Open { until: Some(ms(2000)) });
        assert!((steady.unwrap().end_s - 2.0).abs() < 1e-9 && (s.window_s - 2.0).abs() < 1e-9);
        // All 10 ended by 1050 ms: 5 req/s over the 2 s.
        assert!((s.request_throughput - 5.0).abs() < 1e-9, "{}", s.request_throughput);
        let (s, _) = summarize(10.0, &all, &all, &[], Sending::Open { until: None });
        assert!((s.window_s - 0.9).abs() < 1e-9, "{}", s.window_s);
    }

    #[test]
    fn a_level_without_a_measured_request_keeps_the_plain_summary() {
        let recs: Vec<ClientRecord> = (0..3).map(|i| req(i, 100 * i, 100 * i + 100, 5)).collect();
        let all: Vec<&ClientRecord> = recs.iter().collect();
        let (s, steady) = summarize(1.0, &all, &[], &[], Sending::Closed);
        assert!(steady.is_none() && s.requests == 0);
    }
}
