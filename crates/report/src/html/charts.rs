//! The report's charts, as data, from a typed results directory: what each shows and from
//! which stored numbers, the answer first. Drawing is [`super::svg`]'s.

use super::context::{by_load, right, series, stat, Ctx};
use super::svg::{Chart, Kind};
use super::timelines::{by_turn, engine_timeline, offered_and_served, task_timelines, ttft_cdf};
use goodput_metrics::server::ServerHistograms;
use goodput_metrics::Summary;
use goodput_results::{LevelReport, Results};

/// The charts of a run (those its data allows), the answer first: capacity, TTFT
/// decomposition, percentiles with SLO lines; then the engine, multi-turn, agent and RAG
/// timelines and the TTFT distributions. A run of one level (a trace replay, a soak) has no
/// "vs load" to draw: its time charts lead, offered against served first.
pub fn charts(r: &Results) -> Vec<Chart> {
    let s = &r.summary;
    let cx = Ctx::of(s);
    if s.levels.len() == 1 {
        let mut out: Vec<Chart> = offered_and_served(&cx, r).into_iter().collect();
        out.extend(engine_timeline(&cx, r));
        out.push(ttft_decomposition(&cx));
        out.extend(after_the_levels(&cx, r));
        return out;
    }
    let v = s.verdict();
    let mut marks = Vec::new();
    for (x, name) in [(v.knee, "knee"), (v.usable, "usable"), (v.limit, "limit")] {
        if let Some(x) = x {
            marks.push((x, format!("{name} {x}")));
        }
    }
    let mut out = vec![capacity(&cx, marks.clone()), ttft_decomposition(&cx)];
    out.extend(ttft_vs_ttfo(&cx));
    let capacity_marks: Vec<(f64, String)> = marks.into_iter().filter(|m| !m.1.starts_with("knee")).collect();
    for (metric, name, get) in [
        ("ttft", "TTFT", (|l: &LevelReport| &l.summary.ttft) as fn(&LevelReport) -> &Option<Summary>),
        ("tpot", "TPOT", |l| &l.summary.tpot),
        ("e2e", "E2E", |l| &l.summary.e2e),
    ] {
        let mut c = cx.chart(
            &format!("percentiles-{metric}"),
            &format!("{name} P50/P95/P99 vs load"),
            format!("{name} percentiles in ms over each level's measured requests; dashed red: the SLO; grey: usable and limit capacity."),
            "ms",
            Kind::Lines,
            [("p50", (|x: &Summary| x.p50) as fn(&Summary) -> f64), ("p95", |x| x.p95), ("p99", |x| x.p99)]
                .into_iter()
                .map(|(p, f)| series(p, by_load(cx.levels, 1e3, |l| stat(get(l), f))))
                .collect(),
        );
        c.marks = capacity_marks.clone();
        c.limits = s
            .slos
            .iter()
            .filter(|x| x.metric.name() == metric && x.metric.is_time())
            .map(|x| (x.bound * 1e3, format!("SLO {}", x.to_string().replace(' ', ""))))
            .collect();
        out.push(c);
    }
    out.extend(engine_timeline(&cx, r));
    out.extend(offered_and_served(&cx, r));
    out.extend(after_the_levels(&cx, r));
    out
}

/// The charts every run ends with: predicted against measured, the last level's turns and
/// tasks, the TTFT distributions.
fn after_the_levels(cx: &Ctx, r: &Results) -> Vec<Chart> {
    let mut out = Vec::new();
    if let Some(p) = &r.summary.prediction {
        out.extend(super::predicted::charts(cx, p));
    }
    if let Some(last) = r.summary.levels.last() {
        out.extend(by_turn(cx, last));
        out.extend(task_timelines(cx, last));
    }
    out.extend(ttft_cdf(cx, r));
    out
}

/// Reasoning models: when the first token of any kind came (TTFT) against when the answer
/// began (TTFO), P50 and P95 per level, and the median thinking between them; none for a run
/// whose requests did not reason.
fn ttft_vs_ttfo(cx: &Ctx) -> Option<Chart> {
    if !cx.levels.iter().any(|l| l.summary.reasoning_tokens.is_some()) {
        return None;
    }
    let p = |get: fn(&LevelReport) -> &Option<Summary>, f: fn(&Summary) -> f64| {
        by_load(cx.levels, 1e3, move |l| stat(get(l), f))
    };
    Some(cx.chart(
        "ttft-vs-ttfo",
        "TTFT vs TTFO: thinking before the answer",
        "per level: TTFT (the first token of any kind, reasoning included) against TTFO (the first answer token), P50 and P95 in ms, and the median reasoning time (first reasoning token to first answer token). The gap is what a reasoning model's users wait beyond TTFT before they read anything.".into(),
        "ms",
        Kind::Lines,
        vec![
            series("TTFT p50", p(|l| &l.summary.ttft, |x| x.p50)),
            series("TTFO p50", p(|l| &l.summary.ttfo, |x| x.p50)),
            series("TTFT p95", p(|l| &l.summary.ttft, |x| x.p95)),
            series("TTFO p95", p(|l| &l.summary.ttfo, |x| x.p95)),
            series("reasoning time p50", p(|l| &l.summary.reasoning_time, |x| x.p50)),
        ],
    ))
}

/// Total and per-user throughput vs load, with the knee, usable and limit capacity marked.
fn capacity(cx: &Ctx, marks: Vec<(f64, String)>) -> Chart {
    let mut c = cx.chart(
        "throughput",
        "Capacity: throughput vs load",
        "total output tok/s (left) and median per-user tok/s (right) at each load; grey: the knee (where waiting starts to grow), usable capacity (the highest load meeting every SLO) and limit capacity (peak throughput).".into(),
        "output tok/s",
        Kind::Lines,
        vec![
            series("output tok/s", by_load(cx.levels, 1.0, |l| Some(l.summary.output_throughput))),
            right("per-user tok/s (p50)", by_load(cx.levels, 1.0, |l| stat(&l.summary.per_user_tps, |x| x.p50))),
        ],
    );
    c.y2_label = Some("per-user tok/s".into());
    c.marks = marks;
    c
}

/// TTFT split into its parts: by the server's per-request stamps over HTTP, by the engine's
/// in-process, or by the server's /metrics where that is all there is (vLLM, SGLang).
fn ttft_decomposition(cx: &Ctx) -> Chart {
    let levels = cx.levels;
    let (parts, caption) = if levels.iter().any(|l| l.summary.http.as_ref().is_some_and(|h| h.queue.is_some())) {
        let part = |f: fn(&goodput_metrics::http::Breakdown) -> &Option<Summary>| {
            by_load(levels, 1e3, move |l| stat(f(l.summary.http.as_ref()?), |x| x.p50))
        };
        (
            vec![
                series("queue", part(|h| &h.queue)),
                series("prefill", part(|h| &h.prefill)),
                series("handoff", part(|h| &h.handoff)),
                series("UTF-8 hold", part(|h| &h.hold)),
                series("HTTP overhead (beyond the engine)", part(|h| &h.beyond_engine)),
            ],
            "median TTFT split by the server's engine stamps: queue, prefill, handoff into the engine thread, UTF-8 hold, and HTTP overhead (send lag, request and response path, tokenization), stacked, in ms.",
        )
    } else if levels.iter().any(|l| l.summary.queue_time.is_some()) {
        let p50 = |s: &Option<Summary>| stat(s, |x| x.p50);
        let other = by_load(levels, 1e3, |l| {
            let s = &l.summary;
            let engine = p50(&s.queue_time).unwrap_or(0.0) + p50(&s.prefill_time).unwrap_or(0.0);
            Some((p50(&s.ttft)? - engine).max(0.0))
        });
        (
            vec![
                series("queue", by_load(levels, 1e3, |l| p50(&l.summary.queue_time))),
                series("prefill", by_load(levels, 1e3, |l| p50(&l.summary.prefill_time))),
                series("handoff and the rest", other),
            ],
            "median TTFT split into engine queue time, prefill time and the remainder (handoff into the engine thread, client stamping), stacked, in ms.",
        )
    } else {
        // Means, not medians: the histograms' means are exact (Δ_sum / Δ_count) where their
        // quantiles are only as fine as the buckets, and means add up.
        let h = |l: &LevelReport| l.server.as_ref().map(|s| s.histograms.clone());
        let mean = |get: fn(&ServerHistograms) -> &Option<goodput_metrics::prom::HistogramStats>| {
            move |l: &LevelReport| h(l).and_then(|x| ServerHistograms::mean(get(&x)))
        };
        let (q, p, t) = (mean(|x| &x.queue), mean(|x| &x.prefill), mean(|x| &x.ttft));
        (
            vec![
                series("queue (server /metrics)", by_load(levels, 1e3, q)),
                series("prefill (server /metrics)", by_load(levels, 1e3, p)),
                series(
                    "rest of the server's TTFT (tokenization, scheduling)",
                    by_load(levels, 1e3, |l| Some((t(l)? - q(l)? - p(l)?).max(0.0))),
                ),
                series(
                    "HTTP and client (client TTFT − server TTFT)",
                    by_load(levels, 1e3, |l| Some((stat(&l.summary.ttft, |x| x.mean)? - t(l)?).max(0.0))),
                ),
            ],
            "mean TTFT split by the server's own /metrics: the means of its queue-time, prefill-time and TTFT histograms (Δ_sum / Δ_count between the scrapes bracketing the measured requests), and the client's mean TTFT beyond the server's, stacked, in ms. The server returned no per-request stamps.",
        )
    };
    cx.chart("ttft-decomposition", "TTFT decomposed vs load", caption.into(), "ms", Kind::Stacked, parts)
}
