//! Console tables (comfy-table), one style for every command.

use comfy_table::{presets::UTF8_FULL_CONDENSED, CellAlignment, Table};

pub fn new(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(header.iter().copied());
    for i in 1..header.len() {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    t
}

/// A number with `d` decimals.
pub fn f(x: f64, d: usize) -> String {
    if x.is_finite() {
        format!("{x:.d$}")
    } else {
        "-".into()
    }
}

/// Bytes in the largest binary unit that keeps the number ≥ 1.
pub fn bytes(b: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut x = b as f64;
    let mut u = 0;
    while x >= 1024.0 && u + 1 < units.len() {
        x /= 1024.0;
        u += 1;
    }
    format!("{x:.1} {}", units[u])
}

use goodput_metrics::occupancy::Occupancy;
use goodput_metrics::server::GaugePoint;
use goodput_results::{LevelReport, LoadUnit};

fn ms(s: &Option<goodput_metrics::Summary>, f: fn(&goodput_metrics::Summary) -> f64) -> String {
    s.as_ref().map_or("-".into(), |x| format!("{:.1}", f(x) * 1e3))
}

/// One line per finished level, for progress on stderr.
pub fn level_line(l: &LevelReport, unit: LoadUnit) -> String {
    let s = &l.summary;
    format!(
        "  {} {unit}: {} requests, {:.0} out tok/s, TTFT p95 {} ms, TPOT p95 {} ms, engine wait p95 {} ms (queue {} ms), SLOs {}",
        s.load,
        s.requests,
        s.output_throughput,
        ms(&s.ttft, |x| x.p95),
        ms(&s.tpot, |x| x.p95),
        ms(&s.engine_wait, |x| x.p95),
        ms(&s.queue_time, |x| x.p95),
        if s.slos_hold() { "hold" } else { "broken" }
    )
}

/// The table of a sweep: service layer (TTFT, TPOT, E2E, throughput, goodput) and engine
/// layer (queue, prefill, KV occupancy, running/waiting, preemptions) side by side.
pub fn levels(levels: &[LevelReport], unit: LoadUnit, model: &str, scenario: &str) -> String {
    let load = format!("load ({unit})");
    let mut t = new(&[
        &load,
        "n",
        "ok",
        "req/s",
        "out tok/s",
        "goodput",
        "TTFT p50",
        "TTFT p95",
        "TPOT p50",
        "TPOT p95",
        "E2E p95",
        "user tok/s",
        "wait p95",
        "queue p95",
        "prefill p95",
        "KV max",
        "run/wait max",
        "preempt",
        "harness CPU",
        "lag p99",
        "SLOs",
    ]);
    for l in levels {
        let s = &l.summary;
        let occ = &l.occupancy;
        let o = |g: fn(&Occupancy) -> f64, d: usize| occ.as_ref().map_or("-".into(), |x| f(g(x), d));
        t.add_row(vec![
            s.load.to_string(),
            s.requests.to_string(),
            s.completed.to_string(),
            f(s.request_throughput, 2),
            f(s.output_throughput, 0),
            f(s.goodput, 2),
            ms(&s.ttft, |x| x.p50),
            ms(&s.ttft, |x| x.p95),
            ms(&s.tpot, |x| x.p50),
            ms(&s.tpot, |x| x.p95),
            ms(&s.e2e, |x| x.p95),
            s.per_user_tps.as_ref().map_or("-".into(), |x| f(x.p50, 1)),
            ms(&s.engine_wait, |x| x.p95),
            ms(&s.queue_time, |x| x.p95),
            ms(&s.prefill_time, |x| x.p95),
            occ.as_ref().map_or("-".into(), |x| format!("{} %", f(x.kv_max * 100.0, 0))),
            format!("{}/{}", o(|x| x.running_max, 0), o(|x| x.waiting_max, 0)),
            occ.as_ref().and_then(|x| x.preemptions).map_or("-".into(), |p| p.to_string()),
            l.harness.cpu_text(),
            format!("{:.2}", l.harness.send_lag_p99_s * 1e3),
            if s.slos_hold() { "hold".into() } else { "broken".into() },
        ]);
    }
    format!("{model}, {scenario} (times in ms; wait = engine wait: handoff into the engine + queue; percentiles over all measured requests, n per level)\n{t}")
}

/// One level's three layers as rows of a table: what users see (TTFT, TPOT, ITL, E2E,
/// per-user tok/s), what the engine did (queue, prefill, decode, inference, step time) and
/// what the system delivered (throughput, goodput, occupancy, failures), with n, mean,
/// P50/P90/P95/P99 and max.
pub fn layers(l: &LevelReport, unit: LoadUnit) -> String {
    let s = &l.summary;
    let e = &l.engine;
    let mut t = new(&["layer", "metric", "n", "mean", "p50", "p90", "p95", "p99", "max"]);
    let mut stat = |layer: &str, name: &str, x: &Option<goodput_metrics::Summary>, scale: f64, d: usize| {
        let cells = match x {
            Some(x) => vec![
                x.n.to_string(),
                f(x.mean * scale, d),
                f(x.p50 * scale, d),
                f(x.p90 * scale, d),
                f(x.p95 * scale, d),
                f(x.p99 * scale, d),
                f(x.max * scale, d),
            ],
            None => vec!["0".into(), "-".into(), "-".into(), "-".into(), "-".into(), "-".into(), "-".into()],
        };
        let mut row = vec![layer.to_string(), name.to_string()];
        row.extend(cells);
        t.add_row(row);
    };
    stat("user", "TTFT (ms)", &s.ttft, 1e3, 1);
    stat("user", "TPOT (ms)", &s.tpot, 1e3, 2);
    stat("user", "ITL (ms)", &s.itl, 1e3, 2);
    stat("user", "E2E (ms)", &s.e2e, 1e3, 0);
    stat("user", "per-user tok/s", &s.per_user_tps, 1.0, 1);
    stat("engine", "engine wait (ms)", &s.engine_wait, 1e3, 1);
    stat("engine", "queue (ms)", &s.queue_time, 1e3, 1);
    stat("engine", "prefill (ms)", &s.prefill_time, 1e3, 1);
    stat("engine", "decode (ms)", &s.decode_time, 1e3, 0);
    stat("engine", "inference (ms)", &s.inference_time, 1e3, 0);
    stat("engine", "step (ms)", &e.step_time, 1e3, 2);
    let occupancy =
        goodput_results::occupancy_text(l.occupancy.as_ref()) + &goodput_results::prefix_text(l.prefix_cache.as_ref());
    let system = format!(
        "system: {:.2} req/s, {:.0} in + {:.0} out tok/s, goodput {:.2} req/s; {occupancy}; {} ok ({} short), {} errors, {} timeouts, {} retries ({:.1} % of attempts); {} warm-up and {} cool-down requests left out",
        s.request_throughput,
        s.input_throughput,
        s.output_throughput,
        s.goodput,
        s.completed,
        s.short_outputs,
        s.errors,
        s.timeouts,
        s.retries,
        s.retry_share * 100.0,
        l.warmup_requests,
        l.cooldown_requests,
    );
    format!("Level {} {unit} ({} measured requests over {:.1} s)\n{t}\n{system}", s.load, s.requests, s.window_s)
}

/// Multi-turn: one row per turn index of a level.
pub fn turns(turns: &[goodput_metrics::turns::TurnSummary], load: f64, unit: LoadUnit) -> String {
    let mut t = new(&["turn", "n", "prompt tokens", "cached", "new prefill", "TTFT p50", "TTFT p95", "prefill p50"]);
    for x in turns {
        t.add_row(vec![
            x.turn.to_string(),
            x.n.to_string(),
            f(x.prompt_tokens, 0),
            f(x.cached_tokens, 0),
            f(x.new_prefill_tokens, 0),
            ms(&x.ttft, |s| s.p50),
            ms(&x.ttft, |s| s.p95),
            ms(&x.prefill_time, |s| s.p50),
        ]);
    }
    format!("By turn at {load} {unit} (times in ms; cached = prompt tokens served by the prefix cache)\n{t}")
}

/// Agent: the task-level numbers and one row per step of the plan.
pub fn agent(a: &goodput_metrics::agent::TaskSummary, load: f64, unit: LoadUnit) -> String {
    let mut t = new(&["step", "kind", "n", "mean ms", "p50 ms", "p95 ms"]);
    for s in &a.steps {
        t.add_row(vec![
            s.index.to_string(),
            s.kind.clone(),
            s.duration.as_ref().map_or("0".into(), |d| d.n.to_string()),
            ms(&s.duration, |d| d.mean),
            ms(&s.duration, |d| d.p50),
            ms(&s.duration, |d| d.p95),
        ]);
    }
    format!(
        "Agent tasks at {load} {unit}: {} tasks ({} completed), task E2E p50 {} ms, p95 {} ms; amplification {:.2} model calls/task, {:.2} tool calls/task, tool-wait share {:.0} %\n{t}",
        a.tasks,
        a.completed,
        ms(&a.task_e2e, |d| d.p50),
        ms(&a.task_e2e, |d| d.p95),
        a.amplification,
        a.tool_calls_per_task,
        a.tool_wait_share * 100.0
    )
}

/// RAG: the stage timeline of a level (the seeds' embed / retrieve / rerank / assemble /
/// queue / prefill / decode), median and P95 per stage.
pub fn rag(
    r: &goodput_metrics::agent::TaskSummary,
    s: &goodput_metrics::level::LevelSummary,
    unit: LoadUnit,
) -> String {
    let mut t = new(&["stage", "n", "p50 ms", "p95 ms", "mean ms"]);
    for st in r.steps.iter().filter(|x| x.kind != "llm") {
        // Retrieval, reranking and assembly take microseconds here: three decimals.
        let us = |f: fn(&goodput_metrics::Summary) -> f64| {
            st.duration.as_ref().map_or("-".into(), |d| format!("{:.3}", f(d) * 1e3))
        };
        t.add_row(vec![
            st.kind.clone(),
            st.duration.as_ref().map_or("0".into(), |d| d.n.to_string()),
            us(|d| d.p50),
            us(|d| d.p95),
            us(|d| d.mean),
        ]);
    }
    for (name, x) in [("queue", &s.queue_time), ("prefill", &s.prefill_time), ("decode", &s.decode_time)] {
        t.add_row(vec![
            name.to_string(),
            x.as_ref().map_or("0".into(), |d| d.n.to_string()),
            ms(x, |d| d.p50),
            ms(x, |d| d.p95),
            ms(x, |d| d.mean),
        ]);
    }
    format!(
        "RAG stage timeline at {} {unit}: query E2E p50 {} ms, p95 {} ms\n{t}",
        s.load,
        ms(&r.task_e2e, |d| d.p50),
        ms(&r.task_e2e, |d| d.p95)
    )
}

/// HTTP targets: each level's TTFT split by the server's engine stamps (medians, in ms), and
/// what HTTP adds beyond the engine's queue + prefill (P50 and P99).
pub fn http(levels: &[LevelReport], unit: LoadUnit) -> Option<String> {
    let rows: Vec<(&LevelReport, &goodput_metrics::http::Breakdown)> =
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
    let p50 = |s: &Option<goodput_metrics::Summary>| s.as_ref().map_or("-".into(), |x| format!("{:.3}", x.p50 * 1e3));
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
            b.beyond_engine.as_ref().map_or("-".into(), |x| format!("{:.3}", x.p99 * 1e3)),
            p50(&b.decode),
            p50(&b.stream_tail),
            format!("{}/{}", b.usage_mismatches, b.usage_checked),
        ]);
    }
    Some(format!(
        "TTFT over HTTP, decomposed by the engine's stamps (medians in ms; beyond engine = TTFT − (handoff + queue + prefill + hold); hold = first tokens not yet a whole character)\n{t}"
    ))
}

/// HTTP targets: what the server's own /metrics histograms say about each level (percentiles
/// from bucket deltas, in ms), and its gauges over the level.
pub fn server(levels: &[LevelReport], unit: LoadUnit) -> Option<String> {
    let rows: Vec<(&LevelReport, &goodput_metrics::server::ServerSide)> =
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
        type Hist = Option<goodput_metrics::prom::HistogramStats>;
        let h = |x: &Hist, f: fn(&goodput_metrics::prom::HistogramStats) -> f64| {
            x.as_ref().map_or("-".into(), |x| format!("{:.1}", f(x) * 1e3))
        };
        let mean = |x: &goodput_metrics::prom::HistogramStats| x.mean.unwrap_or(f64::NAN);
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
            h(&hs.queue, mean),
            h(&hs.queue, |x| x.p50),
            h(&hs.queue, |x| x.p99),
            h(&hs.prefill, mean),
            h(&hs.prefill, |x| x.p50),
            h(&hs.prefill, |x| x.p99),
            h(&hs.decode, |x| x.p50),
            f(max(|p| p.running), 0),
            f(max(|p| p.waiting), 0),
            format!("{} %", f(max(|p| p.kv_usage) * 100.0, 0)),
        ]);
    }
    Some(format!(
        "Server side, from its /metrics (histogram deltas between the scrapes bracketing each level's measured requests: exact means, bucket-interpolated percentiles; times in ms)\n{t}"
    ))
}

/// Predicted against measured, per level: each metric of
/// [`goodput_results::prediction::compare`] as `measured → predicted (error)`, then the usable
/// capacity of both and the simulation's speed.
pub fn prediction(
    s: &goodput_results::RunSummary,
    p: &goodput_results::prediction::Prediction,
    unit: LoadUnit,
) -> String {
    use goodput_results::prediction::{capacity_agreement, compare};
    let shown = [
        "output_throughput",
        "ttft_p50",
        "ttft_p95",
        "tpot_p50",
        "tpot_p95",
        "e2e_p95",
        "engine_wait_p95",
        "kv_block_usage_max",
    ];
    let mut header = vec![format!("load ({unit})")];
    header.extend(shown.iter().map(|m| m.to_string()));
    let mut t = new(&header.iter().map(String::as_str).collect::<Vec<_>>());
    for m in &s.levels {
        let Some(twin) = p.level(m.summary.load) else { continue };
        let rows = compare(m, twin);
        let mut cells = vec![m.summary.load.to_string()];
        for name in shown {
            let Some(c) = rows.iter().find(|c| c.metric == name) else { continue };
            let v = |x: Option<f64>| match (x, c.unit.as_str()) {
                (Some(x), "s") => format!("{:.1}", x * 1e3),
                (Some(x), "fraction") => format!("{:.0}%", x * 100.0),
                (Some(x), _) => format!("{x:.0}"),
                (None, _) => "-".into(),
            };
            let err = c.error().map_or(String::new(), |e| format!(" ({:+.0}%)", e * 100.0));
            cells.push(format!("{} → {}{err}", v(c.measured), v(c.predicted)));
        }
        t.add_row(cells);
    }
    let (measured, predicted, agree) = capacity_agreement(s, p);
    let cap = |x: Option<f64>| x.map_or("none".to_string(), |x| format!("{x} {unit}"));
    format!(
        "Predicted against measured (measured → predicted; times in ms), profile {}\n{t}\nusable capacity: measured {}, predicted {} ({}); simulation {:.0} steps/s, {:.0}× real time",
        p.profile,
        cap(measured),
        cap(predicted),
        if agree { "the same level or the next" } else { "disagree" },
        p.steps_per_s,
        p.speedup
    )
}
