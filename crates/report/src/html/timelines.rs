//! The report's charts over time and over a task: the engine's state level after level, a
//! session's turns, an agent's or a RAG query's steps, and each level's TTFT distribution.

use super::context::{right, series, Ctx};
use super::svg::{Chart, Kind, Series};
use goodput_core::Phase;
use goodput_results::{LevelReport, Results};

/// Where the next level starts on a timeline of levels laid one after the other: one
/// interval after the previous level's last point.
#[derive(Default)]
struct Lanes {
    offset: f64,
    last_t: f64,
    step: f64,
    marks: Vec<(f64, String)>,
}

impl Lanes {
    fn start(&mut self, label: String) {
        self.offset = if self.marks.is_empty() { 0.0 } else { self.last_t + self.step };
        self.marks.push((self.offset, label));
    }

    /// The timeline's x of a level's `t` seconds; `step` learns the interval.
    fn at(&mut self, t: f64, prev: Option<f64>) -> f64 {
        if let Some(p) = prev {
            self.step = t - p;
        }
        self.last_t = self.offset + t;
        self.last_t
    }
}

/// Running, waiting and KV usage over time, all levels one after the other: the engine's own
/// steps where it ran in this process, else the gauges of the server's /metrics scrapes.
pub fn engine_timeline(cx: &Ctx, r: &Results) -> Option<Chart> {
    let (mut running, mut waiting, mut kv, mut kv_tokens) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut lanes = Lanes::default();
    let from_steps = !r.series.is_empty();
    if from_steps {
        let mut level: Option<f64> = None;
        let mut prev = None;
        for row in &r.series {
            if level != Some(row.level) {
                lanes.start(format!("{} {}", row.level, cx.unit));
                (level, prev) = (Some(row.level), None);
            }
            let t = lanes.at(row.t_s, prev);
            prev = Some(row.t_s);
            running.push((t, row.running_mean));
            waiting.push((t, row.waiting_mean));
            kv.push((t, row.kv_block_usage_mean * 100.0));
            kv_tokens.push((t, row.kv_token_usage_mean * 100.0));
            if row.preemptions > 0 {
                lanes.marks.push((t, format!("{} preempted", row.preemptions)));
            }
        }
    } else {
        for l in cx.levels {
            let Some(points) = l.server.as_ref().map(|s| &s.series).filter(|p| !p.is_empty()) else { continue };
            lanes.start(format!("{} {}", l.summary.load, cx.unit));
            let mut prev = None;
            for p in points {
                let t = lanes.at(p.t_s, prev);
                prev = Some(p.t_s);
                // A gauge the server does not expose is missing, not zero.
                for (line, v) in
                    [(&mut running, p.running), (&mut waiting, p.waiting), (&mut kv, p.kv_usage.map(|x| x * 100.0))]
                {
                    if let Some(v) = v.filter(|v| v.is_finite()) {
                        line.push((t, v));
                    }
                }
            }
        }
    }
    if running.is_empty() && kv.is_empty() {
        return None;
    }
    let mut list = vec![series("running", running), series("waiting", waiting), right("KV blocks %", kv)];
    let caption = if from_steps {
        list.push(right("KV tokens %", kv_tokens));
        "running and waiting requests (left), KV block usage and KV token usage in % (right; tokens held / block capacity), per interval, level after level (grey marks: level starts and preemptions)."
    } else {
        "running and waiting requests (left) and KV-cache usage in % (right), as the server's /metrics gauges read at each scrape, level after level (grey marks: level starts)."
    };
    let mut c = cx.chart("engine-timeline", "Engine state over time", caption.into(), "requests", Kind::Lines, list);
    c.x_label = "seconds since the first level".into();
    c.x_log2 = false;
    c.y2_label = Some("KV usage %".into());
    c.marks = lanes.marks;
    Some(c)
}

/// Multi-turn (and agent) runs: prompt tokens cached and new, and TTFT, by turn index.
pub fn by_turn(cx: &Ctx, last: &LevelReport) -> Option<Chart> {
    if last.turns.is_empty() {
        return None;
    }
    let by = |f: &dyn Fn(&goodput_metrics::turns::TurnSummary) -> Option<f64>| -> Vec<(f64, f64)> {
        last.turns.iter().filter_map(|t| Some((t.turn as f64, f(t)?))).collect()
    };
    // Agent runs number their model calls the same way: by call within a task.
    let (id, title, index) = if last.agent.is_some() {
        ("agent-calls", "Agent: by model call", "model call")
    } else {
        ("multi-turn", "Multi-turn: by turn", "turn")
    };
    let mut c = cx.chart(
        id,
        title,
        format!("at {} {}: prompt tokens served by the prefix cache and newly prefilled (stacked, left) and TTFT P50 in ms (right), by {index} index.", last.summary.load, cx.unit),
        "prompt tokens",
        Kind::Stacked,
        vec![
            series("cached tokens", by(&|t| Some(t.cached_tokens))),
            series("new prefill tokens", by(&|t| Some(t.new_prefill_tokens))),
            right("TTFT p50 (ms)", by(&|t| Some(t.ttft.as_ref()?.p50 * 1e3))),
        ],
    );
    c.x_label = index.into();
    c.x_log2 = false;
    c.y2_label = Some("TTFT p50 (ms)".into());
    Some(c)
}

/// Agent and RAG timelines: the median duration of each step, laid end to end.
pub fn task_timelines(cx: &Ctx, last: &LevelReport) -> Vec<Chart> {
    let mut out = Vec::new();
    for (key, title, what, tasks) in [
        ("agent", "Agent task timeline", "a median task's steps (LLM calls, tool calls, retrievals)", &last.agent),
        ("rag", "RAG query timeline", "a median query's stages", &last.rag),
    ] {
        let Some(t) = tasks else { continue };
        let mut at = 0.0;
        let mut bars = Vec::new();
        for st in &t.steps {
            let d = st.duration.as_ref().map_or(0.0, |x| x.p50 * 1e3);
            bars.push(series(&format!("{} {}", st.index, st.kind), vec![(at, d)]));
            at += d;
        }
        if key == "rag" {
            // The model call split into the engine's queue, prefill and decode.
            if let Some(llm) = bars.pop() {
                let mut t = llm.points[0].0;
                let s = &last.summary;
                for (name, m) in [("queue", &s.queue_time), ("prefill", &s.prefill_time), ("decode", &s.decode_time)] {
                    let d = m.as_ref().map_or(0.0, |x| x.p50 * 1e3);
                    bars.push(series(name, vec![(t, d)]));
                    t += d;
                }
            }
        }
        let e2e_p95 = t.task_e2e.as_ref().map_or(f64::NAN, |x| x.p95 * 1e3);
        let mut c = cx.chart(
            &format!("{key}-timeline"),
            title,
            format!("at {} {}: {what}, each bar its median duration in ms, laid end to end; {:.1} model calls per task, task E2E P95 {e2e_p95:.0} ms.", last.summary.load, cx.unit, t.amplification),
            "",
            Kind::Timeline,
            bars,
        );
        c.x_label = "ms since the task started".into();
        c.x_log2 = false;
        out.push(c);
    }
    out
}

/// The cumulative distribution of TTFT, one line per level.
pub fn ttft_cdf(cx: &Ctx, r: &Results) -> Option<Chart> {
    let mut cdfs: Vec<Series> = Vec::new();
    for l in cx.levels {
        let load = l.summary.load;
        let mut ttft: Vec<f64> = r
            .records
            .iter()
            .filter(|x| x.level == load && x.phase == Phase::Measured && x.record.is_ok())
            .filter_map(|x| goodput_metrics::request::ttft(&x.record))
            .map(|s| s * 1e3)
            .collect();
        if ttft.is_empty() {
            continue;
        }
        ttft.sort_by(f64::total_cmp);
        let n = ttft.len() as f64;
        let points = ttft.iter().enumerate().map(|(i, &v)| (v, (i + 1) as f64 / n)).collect();
        cdfs.push(series(&format!("{load} {}", cx.unit), points));
    }
    if cdfs.is_empty() {
        return None;
    }
    let mut c = cx.chart(
        "ttft-cdf",
        "TTFT distribution per level",
        "cumulative share of measured requests with TTFT at most x ms, one line per level.".into(),
        "share of requests",
        Kind::Lines,
        cdfs,
    );
    c.x_label = "TTFT (ms)".into();
    c.x_log2 = false;
    Some(c)
}

/// Open-loop runs (rates, traces): the load offered over time (requests by their intended
/// send, per second) beside what was served (requests by their end, and output tokens per
/// second), level after level.
pub fn offered_and_served(cx: &Ctx, r: &Results) -> Option<Chart> {
    use goodput_metrics::peaks::per_second;
    if r.summary.load_unit != goodput_results::LoadUnit::Rate {
        return None;
    }
    let (mut offered, mut served, mut tokens) = (Vec::new(), Vec::new(), Vec::new());
    let mut lanes = Lanes::default();
    for l in cx.levels {
        let rows: Vec<&goodput_core::ClientRecord> =
            r.records.iter().filter(|x| x.level == l.summary.load).map(|x| &x.record).collect();
        let Some(t0) = rows.iter().map(|x| x.intended).min() else { continue };
        let span = rows.iter().map(|x| x.end.secs_since(t0)).fold(0.0, f64::max);
        // About sixty bins a level, a second at least.
        let bin = (span / 60.0).max(1.0);
        let at = |f: &dyn Fn(&goodput_core::ClientRecord) -> Option<(f64, f64)>| -> Vec<(f64, f64)> {
            per_second(&rows.iter().filter_map(|x| f(x)).collect::<Vec<_>>(), bin)
        };
        lanes.start(format!("{} {}", l.summary.load, cx.unit));
        let sent = at(&|x| Some((x.intended.secs_since(t0), 1.0)));
        let done = at(&|x| x.is_ok().then(|| (x.end.secs_since(t0), 1.0)));
        let out = at(&|x| x.is_ok().then(|| (x.end.secs_since(t0), x.output_tokens as f64)));
        let mut prev = None;
        let n = sent.len().max(done.len()).max(out.len());
        for i in 0..n {
            let t = lanes.at((i as f64 + 0.5) * bin, prev);
            prev = Some((i as f64 + 0.5) * bin);
            for (line, s) in [(&mut offered, &sent), (&mut served, &done), (&mut tokens, &out)] {
                line.push((t, s.get(i).map_or(0.0, |p| p.1)));
            }
        }
    }
    if offered.is_empty() {
        return None;
    }
    let list = vec![series("offered req/s", offered), series("completed req/s", served), right("output tok/s", tokens)];
    let caption = "requests offered per second by their intended send time and completed per second by their end (left), output tokens per second of completed requests by their end (right), level after level (grey marks: level starts). A served line below the offered one is load the target did not keep up with.";
    let mut c = cx.chart(
        "offered-load",
        "Offered load and throughput over time",
        caption.into(),
        "requests/s",
        Kind::Lines,
        list,
    );
    c.x_label = "seconds since the first level".into();
    c.x_log2 = false;
    c.y2_label = Some("output tok/s".into());
    c.marks = lanes.marks;
    Some(c)
}
