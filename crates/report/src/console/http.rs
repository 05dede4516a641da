//! HTTP targets on the console: TTFT decomposed by the server's per-request stamps, and the
//! server's own view from its /metrics.

use super::new;
use crate::text::{f, ms, num};
use goodput_metrics::http::Breakdown;
use goodput_metrics::prom::HistogramStats;
use goodput_metrics::server::{GaugePoint, ServerSide};
use goodput_metrics::Summary;
use goodput_results::{LevelReport, LoadUnit};

/// HTTP targets: each level's TTFT split by the server's engine stamps (medians, in ms), and
/// what HTTP adds beyond the engine's queue + prefill (P50 and P99).
pub fn http(levels: &[LevelReport], unit: LoadUnit) -> Option<String> {
    let rows: Vec<(&LevelReport, &Breakdown)> =
        levels.iter().filter_map(|l| l.summary.http.as_ref().map(|b| (l, b))).filter(|(_, b)| b.n > 0).collect();
    if rows.is_empty() {
        return None;
    }
    let load = format!("load ({unit})");
    let mut t = new(&[
        &load,
        "n",
        "TTFT",
        "send lag",
        "request",
        "tokenize",
        "handoff",
        "queue",
        "prefill",
        "hold",
        "response",
        "unexplained",
        "beyond engine p50",
        "beyond engine p99",
        "decode",
        "stream tail",
        "usage ≠ tokenizer",
    ]);
    let p50 = |s: &Option<Summary>| num(ms(s, |x| x.p50), 3);
    for (l, b) in rows {
        t.add_row(vec![
            l.summary.load.to_string(),
            b.n.to_string(),
            p50(&b.ttft),
            p50(&b.send_lag),
            p50(&b.request_path),
            p50(&b.tokenize),
            p50(&b.handoff),
            p50(&b.queue),
            p50(&b.prefill),
            p50(&b.hold),
            p50(&b.response_path),
            p50(&b.unexplained),
            p50(&b.beyond_engine),
            num(ms(&b.beyond_engine, |x| x.p99), 3),
            p50(&b.decode),
            p50(&b.stream_tail),
            // Nothing to check without a tokenizer of the model: no figure, not "0/0".
            if b.usage_checked == 0 { "-".into() } else { format!("{}/{}", b.usage_mismatches, b.usage_checked) },
        ]);
    }
    Some(format!(
        "TTFT over HTTP, decomposed by the engine's stamps (medians in ms; beyond engine = TTFT − (handoff + queue + prefill + hold); hold = first tokens not yet a whole character)\n{t}"
    ))
}

/// HTTP targets: what the server's own /metrics histograms say about each level (percentiles
/// from bucket deltas, in ms), and its gauges over the level.
pub fn server(levels: &[LevelReport], unit: LoadUnit) -> Option<String> {
    let rows: Vec<(&LevelReport, &ServerSide)> =
        levels.iter().filter_map(|l| l.server.as_ref().map(|s| (l, s))).collect();
    if rows.is_empty() {
        return None;
    }
    let load = format!("load ({unit})");
    let mut t = new(&[
        &load,
        "scrapes",
        "window",
        "requests",
        "TTFT p50",
        "TTFT p99",
        "queue mean",
        "queue p50",
        "queue p99",
        "prefill mean",
        "prefill p50",
        "prefill p99",
        "decode p50",
        "running max",
        "waiting max",
        "KV max",
    ]);
    for (l, s) in rows {
        if let Some(e) = &s.error {
            t.add_row(vec![l.summary.load.to_string(), format!("failed: {e}")]);
            continue;
        }
        // A quantile inside the first bucket is only an upper bound: `< 300.0`.
        let h = |x: &Option<HistogramStats>, f: fn(&HistogramStats) -> f64| {
            x.as_ref().map_or("-".into(), |x| x.quantile_text(f(x), 1e3, 1))
        };
        let hm = |x: &Option<HistogramStats>| num(x.as_ref().and_then(|x| x.mean).map(|m| m * 1e3), 1);
        let max = |g: fn(&GaugePoint) -> Option<f64>| {
            s.series.iter().filter_map(g).filter(|x| x.is_finite()).fold(f64::NAN, f64::max)
        };
        let hs = &s.histograms;
        t.add_row(vec![
            l.summary.load.to_string(),
            s.scrapes.to_string(),
            format!("{:.1}–{:.1} s", s.histogram_window_s.0, s.histogram_window_s.1),
            hs.e2e.as_ref().map_or("-".into(), |x| format!("{:.0}", x.count)),
            h(&hs.ttft, |x| x.p50),
            h(&hs.ttft, |x| x.p99),
            hm(&hs.queue),
            h(&hs.queue, |x| x.p50),
            h(&hs.queue, |x| x.p99),
            hm(&hs.prefill),
            h(&hs.prefill, |x| x.p50),
            h(&hs.prefill, |x| x.p99),
            h(&hs.decode, |x| x.p50),
            f(max(|p| p.running), 0),
            f(max(|p| p.waiting), 0),
            format!("{} %", f(max(|p| p.kv_usage) * 100.0, 0)),
        ]);
    }
    Some(format!(
        "Server side, from its /metrics (histogram deltas between the scrapes bracketing each level's measured requests: exact means, bucket-interpolated percentiles, `< B` where one lies in the first bucket (0, B]; times in ms)\n{t}"
    ))
}

/// Speculative decoding where the server does it: each level's tokens drafted and accepted,
/// the acceptance rate and tokens a sequence gains per step (the server's counters over the
/// histogram window, or SGLang's own average), beside the level's TPOT P95.
pub fn spec_decode(levels: &[LevelReport], unit: LoadUnit) -> Option<String> {
    let rows: Vec<_> = levels.iter().filter_map(|l| Some((l, l.server.as_ref()?.spec_decode?))).collect();
    if rows.is_empty() {
        return None;
    }
    let load = format!("load ({unit})");
    let mut t = new(&[&load, "drafted", "accepted", "acceptance", "tokens/step", "TPOT p95 (ms)"]);
    for (l, d) in rows {
        t.add_row(vec![
            l.summary.load.to_string(),
            num(d.draft_tokens, 0),
            num(d.accepted_tokens, 0),
            d.acceptance_rate().map_or("-".into(), |r| format!("{:.1} %", r * 100.0)),
            num(d.tokens_per_step(), 2),
            num(ms(&l.summary.tpot, |x| x.p95), 1),
        ]);
    }
    Some(format!(
        "Speculative decoding, from the server's /metrics over each level's histogram window (acceptance = accepted ÷ drafted tokens; tokens/step = 1 + accepted ÷ drafts)\n{t}"
    ))
}
