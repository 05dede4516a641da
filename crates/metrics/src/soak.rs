//! The answer held over time (seed 000's long-stability test): the usable capacity run for a
//! long stretch, cut into equal time windows by each request's intended send, each window
//! summarized like a level (P95s with their intervals, errors, retries; the engine's KV peak
//! and preemptions), and judged against the first window and the SLOs. Capacity **held**
//! when every window's SLOs hold; it **degraded** from the first window whose SLOs break or
//! whose P95 TTFT, TPOT or E2E rose beyond both intervals and by more than
//! [`DEGRADED_BY`] over the first window's. The target's memory, open file descriptors and
//! connections (where its `/metrics` or the in-process engine's process show them) are kept
//! per window, and a rise from the first window to the last is named ([`Growth`]): a leak
//! shows there before it shows in latency.

use crate::interval::Interval;
use crate::level::summarize;
use crate::occupancy::EngineLevel;
use crate::slo::{Metric, Slo};
use goodput_core::{ClientRecord, Stamp, StepRecord};
use serde::{Deserialize, Serialize};

/// A rise over the first window beyond which (and beyond both intervals) a window degraded.
pub const DEGRADED_BY: f64 = 0.2;

/// One time window of a soak.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SoakWindow {
    /// Seconds from the soak's start (its first request's intended send).
    pub start_s: f64,
    pub end_s: f64,
    /// Requests sent in the window, completed, failed, and their retries.
    pub requests: usize,
    pub completed: usize,
    pub errors: usize,
    pub retries: usize,
    /// P95 TTFT, TPOT and E2E (seconds) with their 95 % intervals.
    pub ttft_p95: Option<f64>,
    pub ttft_p95_interval: Option<Interval>,
    pub tpot_p95: Option<f64>,
    pub tpot_p95_interval: Option<Interval>,
    pub e2e_p95: Option<f64>,
    pub e2e_p95_interval: Option<Interval>,
    /// Output tokens of the window's completed requests per second of the window.
    pub output_throughput: f64,
    /// Every SLO holds in the window (by value).
    pub slos_hold: bool,
    /// ... and with 95 % confidence ([`crate::level::LevelSummary::slos_surely_hold`]): a
    /// window too short for its percentiles' intervals holds only "not significantly".
    #[serde(default)]
    pub slos_surely_hold: bool,
    /// The engine's KV peak (fraction of its blocks) and preemptions over the window, where
    /// the engine's steps are known (in-process).
    pub kv_max: Option<f64>,
    pub preemptions: Option<usize>,
    /// The target's resident memory (bytes), open file descriptors and HTTP connections at
    /// their highest in the window, where they were sampled ([`ProcessSample`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_max_bytes: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_fds_max: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connections_max: Option<f64>,
}

/// The target's process at one moment: from its `/metrics` (`process_resident_memory_bytes`,
/// `process_open_fds`, goodput serve's `goodput_http_connections`) or, in-process, from
/// `/proc/self`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ProcessSample {
    pub at: Stamp,
    pub rss_bytes: Option<f64>,
    pub open_fds: Option<f64>,
    pub connections: Option<f64>,
}

impl ProcessSample {
    /// The process figures of one `/metrics` scrape: `process_resident_memory_bytes` and
    /// `process_open_fds` (Prometheus's process collector, as vLLM and goodput serve expose
    /// them) and goodput serve's `goodput_http_connections`; `None` without any of them.
    pub fn of_scrape(s: &goodput_core::ServerScrape) -> Option<ProcessSample> {
        let p = ProcessSample {
            at: s.at,
            rss_bytes: s.gauges.get("process_resident_memory_bytes").copied(),
            open_fds: s.gauges.get("process_open_fds").copied(),
            connections: s.gauges.get("goodput_http_connections").copied(),
        };
        (p.rss_bytes.is_some() || p.open_fds.is_some() || p.connections.is_some()).then_some(p)
    }
}

/// A rise of the target's memory, descriptors or connections from the first window to the
/// last: beyond [`GROWTH_BY`] and beyond `floor` (32 MiB of memory, 16 descriptors or
/// connections), where a steady load should hold them flat.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Growth {
    /// `rss_bytes`, `open_fds` or `connections`.
    pub what: String,
    pub first: f64,
    pub last: f64,
}

/// A rise beyond which (and beyond its floor) a process figure grew over a soak.
pub const GROWTH_BY: f64 = 0.2;

/// How a soak ended: held, or where it degraded and by what.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Degraded {
    /// The first window (0-based) that degraded, and when it started (seconds).
    pub window: usize,
    pub at_s: f64,
    /// What: `slos` (the SLOs broke), or the metric key (`ttft_p95`, `tpot_p95`, `e2e_p95`).
    pub what: String,
    /// The first window's value and the degraded window's (seconds; 0 for `slos`).
    pub first: f64,
    pub then: f64,
}

/// A soak: the load it ran, its windows and the verdict.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Soak {
    pub load: f64,
    pub duration_s: f64,
    pub windows: Vec<SoakWindow>,
    /// `None`: capacity held for the whole soak.
    pub degraded: Option<Degraded>,
    /// The target's figures that rose over the soak ([`Growth`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub grew: Vec<Growth>,
}

/// The window a stamp falls in: `n` windows over `[start, start + span)`.
fn window_of(t: Stamp, start: Stamp, span: f64, n: usize) -> usize {
    ((t.secs_since(start) / span * n as f64) as usize).min(n - 1)
}

/// What a soak ran on besides its requests: the engine's steps (in-process) and the target's
/// process samples.
#[derive(Clone, Copy, Debug, Default)]
pub struct Beside<'a> {
    pub steps: &'a [StepRecord],
    pub process: &'a [ProcessSample],
}

/// A soak of `records` (measured) at `load`, cut into `n` windows, judged against `slos`.
/// `None` without records.
pub fn soak(load: f64, records: &[&ClientRecord], beside: Beside, slos: &[Slo], n: usize) -> Option<Soak> {
    let n = n.max(1);
    let start = records.iter().map(|r| r.intended).min()?;
    let end = records.iter().map(|r| r.intended).max()?.max(Stamp(start.0 + 1));
    let span = end.secs_since(start).max(1e-9);
    let mut by_window: Vec<Vec<&ClientRecord>> = vec![Vec::new(); n];
    for r in records {
        by_window[window_of(r.intended, start, span, n)].push(r);
    }
    let windows: Vec<SoakWindow> = by_window
        .iter()
        .enumerate()
        .map(|(i, rs)| {
            let s = summarize(load, rs, slos);
            let iv = s.intervals.clone().unwrap_or_default();
            let p95 = |m: Metric| s.metric(m).map(|x| x.p95);
            let (a, b) = (i as f64 * span / n as f64, (i + 1) as f64 * span / n as f64);
            let (from, to) = (Stamp(start.0 + (a * 1e9) as u64), Stamp(start.0 + (b * 1e9) as u64));
            let inside: Vec<StepRecord> =
                beside.steps.iter().filter(|x| x.start >= from && x.start < to).cloned().collect();
            let engine = (!inside.is_empty()).then(|| EngineLevel::of(&inside));
            // The last window takes the samples after it too (the drain).
            let last = i + 1 == n;
            let here: Vec<&ProcessSample> =
                beside.process.iter().filter(|p| p.at >= from && (p.at < to || last)).collect();
            let most = |f: fn(&ProcessSample) -> Option<f64>| here.iter().filter_map(|p| f(p)).reduce(f64::max);
            SoakWindow {
                start_s: a,
                end_s: b,
                requests: s.requests,
                completed: s.completed,
                errors: s.errors + s.timeouts,
                retries: s.retries,
                ttft_p95: p95(Metric::Ttft),
                ttft_p95_interval: iv.ttft_p95,
                tpot_p95: p95(Metric::Tpot),
                tpot_p95_interval: iv.tpot_p95,
                e2e_p95: p95(Metric::E2e),
                e2e_p95_interval: iv.e2e_p95,
                output_throughput: s.output_throughput,
                slos_hold: s.slos_hold(),
                slos_surely_hold: s.slos_surely_hold(),
                kv_max: engine.as_ref().map(|e| e.kv_block_usage_max),
                preemptions: engine.as_ref().map(|e| e.preemptions),
                rss_max_bytes: most(|p| p.rss_bytes),
                open_fds_max: most(|p| p.open_fds),
                connections_max: most(|p| p.connections),
            }
        })
        .collect();
    let degraded = degradation(&windows);
    let grew = growth(&windows);
    Some(Soak { load, duration_s: span, windows, degraded, grew })
}

/// The process figures that rose from the first window that has them to the last.
fn growth(windows: &[SoakWindow]) -> Vec<Growth> {
    type Get = fn(&SoakWindow) -> Option<f64>;
    let figures: [(&str, Get, f64); 3] = [
        ("rss_bytes", |w| w.rss_max_bytes, 32.0 * 1024.0 * 1024.0),
        ("open_fds", |w| w.open_fds_max, 16.0),
        ("connections", |w| w.connections_max, 16.0),
    ];
    figures
        .iter()
        .filter_map(|(what, get, floor)| {
            let first = windows.iter().find_map(get)?;
            let last = windows.iter().rev().find_map(get)?;
            (last > first * (1.0 + GROWTH_BY) && last - first > *floor).then(|| Growth {
                what: what.to_string(),
                first,
                last,
            })
        })
        .collect()
}

/// The first window that broke its SLOs or whose P95 rose beyond the first window's.
fn degradation(windows: &[SoakWindow]) -> Option<Degraded> {
    let first = windows.first()?;
    type Get = fn(&SoakWindow) -> (Option<f64>, Option<Interval>);
    let metrics: [(&str, Get); 3] = [
        ("ttft_p95", |w| (w.ttft_p95, w.ttft_p95_interval)),
        ("tpot_p95", |w| (w.tpot_p95, w.tpot_p95_interval)),
        ("e2e_p95", |w| (w.e2e_p95, w.e2e_p95_interval)),
    ];
    windows.iter().enumerate().find_map(|(i, w)| {
        if w.requests > 0 && !w.slos_hold {
            return Some(Degraded { window: i, at_s: w.start_s, what: "slos".into(), first: 0.0, then: 0.0 });
        }
        metrics.iter().find_map(|(name, get)| {
            let ((v0, i0), (v, iv)) = (get(first), get(w));
            let (v0, v) = (v0?, v?);
            let beyond = iv?.lo? > i0?.hi?;
            (i > 0 && beyond && v > v0 * (1.0 + DEGRADED_BY)).then(|| Degraded {
                window: i,
                at_s: w.start_s,
                what: name.to_string(),
                first: v0,
                then: v,
            })
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slo::parse_slos;
    use goodput_core::RecordBuilder;

    /// A request sent at `at` ms with a first token `ttft` ms later and 10 tokens 5 ms apart.
    fn req(id: u64, at: u64, ttft: u64) -> ClientRecord {
        let ms = |x: u64| Stamp(x * 1_000_000);
        RecordBuilder::new(id)
            .intended(ms(at))
            .input(10)
            .end(ms(at + ttft + 45))
            .tokens_at((0..10).map(|k| ms(at + ttft + 5 * k)))
            .build()
    }

    #[test]
    fn a_steady_soak_holds_and_a_slowing_one_degrades_where_it_began() {
        let slos = parse_slos("ttft_p95=1s").unwrap();
        // 400 requests over 40 s, TTFT 20–39 ms throughout: held, in 4 windows of 100.
        let steady: Vec<ClientRecord> = (0..400).map(|i| req(i, 100 * i, 20 + i % 20)).collect();
        let s = soak(2.0, &steady.iter().collect::<Vec<_>>(), Beside::default(), &slos, 4).unwrap();
        assert_eq!(s.windows.len(), 4);
        assert!(s.windows.iter().all(|w| w.requests == 100 && w.slos_hold), "{:?}", s.windows);
        assert_eq!(s.degraded, None);
        // From the third window on, TTFT doubles: degraded there, on TTFT P95.
        let slowing: Vec<ClientRecord> =
            (0..400).map(|i| req(i, 100 * i, if i >= 200 { 60 + i % 20 } else { 20 + i % 20 })).collect();
        let s = soak(2.0, &slowing.iter().collect::<Vec<_>>(), Beside::default(), &slos, 4).unwrap();
        let d = s.degraded.expect("degraded");
        assert_eq!((d.window, d.what.as_str()), (2, "ttft_p95"), "{d:?}");
        assert!(d.then > 2.0 * d.first * 0.9, "{d:?}");
        // The SLOs broken in the last window say so first.
        let breaking: Vec<ClientRecord> = (0..400).map(|i| req(i, 100 * i, if i >= 300 { 2000 } else { 20 })).collect();
        let d = soak(2.0, &breaking.iter().collect::<Vec<_>>(), Beside::default(), &slos, 4).unwrap().degraded.unwrap();
        assert_eq!((d.window, d.what.as_str()), (3, "slos"));
    }

    /// The target's memory sampled every second over a 40 s soak in 4 windows: flat at
    /// 500 MiB, or growing 4 MiB a second (500 → 656 MiB: +31 %, +156 MiB, beyond both 20 %
    /// and 32 MiB). Connections flat at 64: no growth. The windows keep their peaks.
    #[test]
    fn a_target_whose_memory_grows_over_the_soak_is_named() {
        let slos = parse_slos("ttft_p95=1s").unwrap();
        let recs: Vec<ClientRecord> = (0..400).map(|i| req(i, 100 * i, 20)).collect();
        let mib = 1024.0 * 1024.0;
        let sample = |t: u64, rss: f64| ProcessSample {
            at: Stamp(t * 1_000_000_000),
            rss_bytes: Some(rss * mib),
            open_fds: None,
            connections: Some(64.0),
        };
        let flat: Vec<ProcessSample> = (0..40).map(|t| sample(t, 500.0)).collect();
        let beside = Beside { steps: &[], process: &flat };
        let s = soak(2.0, &recs.iter().collect::<Vec<_>>(), beside, &slos, 4).unwrap();
        assert!(s.grew.is_empty(), "{:?}", s.grew);
        assert_eq!(s.windows[0].connections_max, Some(64.0));
        assert_eq!(s.windows[0].open_fds_max, None);
        let growing: Vec<ProcessSample> = (0..40).map(|t| sample(t, 500.0 + 4.0 * t as f64)).collect();
        let beside = Beside { steps: &[], process: &growing };
        let s = soak(2.0, &recs.iter().collect::<Vec<_>>(), beside, &slos, 4).unwrap();
        assert_eq!(s.grew.len(), 1, "{:?}", s.grew);
        let g = &s.grew[0];
        // The first window (0–9.975 s) peaks at its 9 s sample, the last takes every later one.
        assert_eq!((g.what.as_str(), g.first / mib, g.last / mib), ("rss_bytes", 536.0, 656.0));
    }
}
