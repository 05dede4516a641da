//! `goodput report RESULTS_DIR -o report.html`: one self-contained HTML page (inline SVG drawn
//! with plotters, no scripts, no network) with the seeds' charts, the sweep table, the written
//! conclusion and the run's setup. Every chart's data is embedded as JSON
//! (`<script type="application/json" id="chart-data">`, inert) so tests can check it.

use crate::chart::{svg, Chart, Kind, Series};
use anyhow::{bail, Context, Result};
use clap::Args;
use goodput_metrics::capacity::{self, LevelOutcome};
use serde_json::Value;
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// A `goodput run --out` directory.
    pub dir: PathBuf,
    /// Where to write the page (default: DIR/report.html).
    #[arg(long, short = 'o')]
    pub out: Option<PathBuf>,
}

fn f(v: &Value) -> Option<f64> {
    v.as_f64()
}

/// `levels[i].summary.<metric>.<stat>` as (load, value) points.
fn points(levels: &[Value], metric: &str, stat: &str, scale: f64) -> Vec<(f64, f64)> {
    levels.iter().filter_map(|l| Some((f(&l["summary"]["load"])?, f(&l["summary"][metric][stat])? * scale))).collect()
}

fn series(name: &str, points: Vec<(f64, f64)>) -> Series {
    Series { name: name.into(), points, right: false }
}

/// A level's occupancy (`level.occupancy`); results written before it existed carry the
/// engine's numbers only. `Null` when unknown.
fn occupancy(l: &Value) -> Value {
    if l.get("occupancy").is_some() {
        return l["occupancy"].clone();
    }
    let e = &l["engine"];
    serde_json::json!({
        "from_server": false,
        "running_mean": e["running_mean"], "running_max": e["running_max"],
        "waiting_mean": e["waiting_mean"], "waiting_max": e["waiting_max"],
        "kv_mean": e["kv_block_usage_mean"], "kv_max": e["kv_block_usage_max"],
        "preemptions": e["preemptions"],
    })
}

/// Everything the report draws, from a results directory.
pub struct Results {
    pub summary: Value,
    pub records: Vec<Value>,
    pub timeseries: Vec<Vec<String>>,
    pub conclusion: String,
}

pub fn read(dir: &Path) -> Result<Results> {
    let summary: Value = serde_json::from_slice(
        &std::fs::read(dir.join("summary.json"))
            .with_context(|| format!("{}: not a goodput results directory (no summary.json)", dir.display()))?,
    )
    .with_context(|| format!("{}/summary.json is not JSON", dir.display()))?;
    if !summary["levels"].is_array() {
        bail!("{}/summary.json has no levels", dir.display());
    }
    let records = std::fs::read_to_string(dir.join("records.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let timeseries = std::fs::read_to_string(dir.join("timeseries.csv"))
        .unwrap_or_default()
        .lines()
        .skip(1)
        .map(|l| l.split(',').map(String::from).collect())
        .collect();
    let conclusion = std::fs::read_to_string(dir.join("conclusion.txt")).unwrap_or_default();
    Ok(Results { summary, records, timeseries, conclusion })
}

/// The charts of a run (those its data allows).
pub fn charts(r: &Results) -> Vec<Chart> {
    let s = &r.summary;
    let levels: Vec<Value> = s["levels"].as_array().cloned().unwrap_or_default();
    let unit = s["load_unit"].as_str().unwrap_or("users").to_string();
    let scenario = s["scenario"]["name"].as_str().unwrap_or("scenario").to_string();
    let model = s["model"].as_str().unwrap_or("model").to_string();
    let workload = format!("{model}, {scenario}");
    let outcomes: Vec<LevelOutcome> = levels
        .iter()
        .filter_map(|l| {
            let sm = &l["summary"];
            Some(LevelOutcome {
                load: f(&sm["load"])?,
                slos_hold: sm["slos"].as_array().is_some_and(|v| v.iter().all(|x| x["holds"] == true)),
                output_throughput: f(&sm["output_throughput"]).unwrap_or(0.0),
                queue_time: capacity::level_queue_time(
                    f(&sm["queue_time"]["p50"]),
                    f(&l["server"]["histograms"]["request_queue_time_seconds"]["mean"]),
                )
                .map(|q| q.0),
            })
        })
        .collect();
    let usable = capacity::usable_capacity(&outcomes);
    let limit = capacity::limit_capacity(&outcomes);
    let knee = capacity::queue_knee(&outcomes, 0.010);
    let mut capacity_marks = Vec::new();
    if let Some(k) = knee {
        capacity_marks.push((k, format!("knee {k}")));
    }
    if let Some(u) = usable {
        capacity_marks.push((u, format!("usable {u}")));
    }
    if let Some(l) = limit {
        capacity_marks.push((l, format!("limit {l}")));
    }
    let x_label = format!("load ({unit})");
    let mut out = Vec::new();
    // 1. Total and per-user throughput, the knee marked.
    out.push(Chart {
        id: "throughput".into(),
        title: "Throughput vs load".into(),
        caption: format!("{workload}: total output tok/s (left) and median per-user tok/s (right) at each load; the knee is where queue time starts to grow."),
        x_label: x_label.clone(),
        y_label: "output tok/s".into(),
        y2_label: Some("per-user tok/s".into()),
        kind: Kind::Lines,
        series: vec![
            series("output tok/s", levels.iter().filter_map(|l| Some((f(&l["summary"]["load"])?, f(&l["summary"]["output_throughput"])?))).collect()),
            Series { right: true, ..series("per-user tok/s (p50)", points(&levels, "per_user_tps", "p50", 1.0)) },
        ],
        marks: knee.map(|k| vec![(k, format!("knee {k}"))]).unwrap_or_default(),
        limits: Vec::new(),
    });
    // 2. TTFT decomposed: by the server's per-request stamps over HTTP, by the engine's
    // in-process, or by the server's /metrics where that is all there is (vLLM, SGLang).
    let has = |get: &dyn Fn(&Value) -> &Value| levels.iter().any(|l| !get(l).is_null());
    let hist_mean = |l: &Value, h: &str| f(&l["server"]["histograms"][h]["mean"]);
    let by_load = |get: &dyn Fn(&Value) -> Option<f64>| -> Vec<(f64, f64)> {
        levels.iter().filter_map(|l| Some((f(&l["summary"]["load"])?, get(l)? * 1e3))).collect()
    };
    let (parts, caption) = if has(&|l| &l["summary"]["http"]["queue"]) {
        // Over HTTP, the breakdown by the server's stamps (medians of each part).
        let part = |k: &str| by_load(&|l: &Value| f(&l["summary"]["http"][k]["p50"]));
        (
            vec![
                series("queue", part("queue")),
                series("prefill", part("prefill")),
                series("handoff", part("handoff")),
                series("UTF-8 hold", part("hold")),
                series("HTTP overhead (beyond the engine)", part("beyond_engine")),
            ],
            format!("{workload}: median TTFT split by the server's engine stamps: queue, prefill, handoff into the engine thread, UTF-8 hold, and HTTP overhead (send lag, request and response path, tokenization), stacked, in ms."),
        )
    } else if has(&|l| &l["summary"]["queue_time"]) {
        let other = by_load(&|l: &Value| {
            let sm = &l["summary"];
            let engine = f(&sm["queue_time"]["p50"]).unwrap_or(0.0) + f(&sm["prefill_time"]["p50"]).unwrap_or(0.0);
            Some((f(&sm["ttft"]["p50"])? - engine).max(0.0))
        });
        (
            vec![
                series("queue", points(&levels, "queue_time", "p50", 1e3)),
                series("prefill", points(&levels, "prefill_time", "p50", 1e3)),
                series("handoff and the rest", other),
            ],
            format!("{workload}: median TTFT split into engine queue time, prefill time and the remainder (handoff into the engine thread, client stamping), stacked, in ms."),
        )
    } else {
        // Means, not medians: the histograms' means are exact (Δ_sum / Δ_count) where their
        // quantiles are only as fine as the buckets, and means add up.
        let (q, p, t) = ("request_queue_time_seconds", "request_prefill_time_seconds", "time_to_first_token_seconds");
        let server_rest = by_load(&|l: &Value| Some((hist_mean(l, t)? - hist_mean(l, q)? - hist_mean(l, p)?).max(0.0)));
        let client_rest = by_load(&|l: &Value| Some((f(&l["summary"]["ttft"]["mean"])? - hist_mean(l, t)?).max(0.0)));
        (
            vec![
                series("queue (server /metrics)", by_load(&|l: &Value| hist_mean(l, q))),
                series("prefill (server /metrics)", by_load(&|l: &Value| hist_mean(l, p))),
                series("rest of the server's TTFT (tokenization, scheduling)", server_rest),
                series("HTTP and client (client TTFT − server TTFT)", client_rest),
            ],
            format!("{workload}: mean TTFT split by the server's own /metrics: the means of its queue-time, prefill-time and TTFT histograms (Δ_sum / Δ_count between the scrapes bracketing the measured requests), and the client's mean TTFT beyond the server's, stacked, in ms. The server returned no per-request stamps."),
        )
    };
    out.push(Chart {
        id: "ttft-decomposition".into(),
        title: "TTFT decomposed vs load".into(),
        caption,
        x_label: x_label.clone(),
        y_label: "ms".into(),
        y2_label: None,
        kind: Kind::Stacked,
        series: parts,
        marks: Vec::new(),
        limits: Vec::new(),
    });
    // 3. Percentiles with SLO lines, one chart per metric.
    let slos: Vec<String> =
        s["slos"].as_array().into_iter().flatten().filter_map(|x| x.as_str().map(String::from)).collect();
    for (metric, name) in [("ttft", "TTFT"), ("tpot", "TPOT"), ("e2e", "E2E")] {
        let limits: Vec<(f64, String)> = slos
            .iter()
            .filter(|x| x.starts_with(&format!("{metric}_")))
            .filter_map(|x| {
                let (_, v) = x.split_once("<=")?;
                Some((goodput_metrics::slo::parse_secs(v.trim())? * 1e3, format!("SLO {}", x.replace(' ', ""))))
            })
            .collect();
        out.push(Chart {
            id: format!("percentiles-{metric}"),
            title: format!("{name} P50/P95/P99 vs load"),
            caption: format!("{workload}: {name} percentiles in ms over each level's measured requests; dashed red: the SLO; grey: usable and limit capacity."),
            x_label: x_label.clone(),
            y_label: "ms".into(),
            y2_label: None,
            kind: Kind::Lines,
            series: ["p50", "p95", "p99"].iter().map(|p| series(p, points(&levels, metric, p, 1e3))).collect(),
            marks: capacity_marks.iter().filter(|m| !m.1.starts_with("knee")).cloned().collect(),
            limits,
        });
    }
    // 4. Engine state over time (all levels, one after the other): the engine's own steps
    // where it ran in this process, else the gauges of the server's /metrics scrapes.
    let (mut running, mut waiting, mut kv, mut kv_tokens, mut marks) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    // Each level starts one interval after the previous one's last point.
    let (mut offset, mut last_t, mut step) = (0.0, 0.0, 0.0);
    let start_level = |label: String, marks: &mut Vec<(f64, String)>, last_t: f64, step: f64| {
        let at = if marks.is_empty() { 0.0 } else { last_t + step };
        marks.push((at, label));
        at
    };
    let from_steps = !r.timeseries.is_empty();
    if from_steps {
        let mut last_level = String::new();
        for row in &r.timeseries {
            let num = |i: usize| row.get(i).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0);
            if row[0] != last_level {
                offset = start_level(format!("{} {unit}", row[0]), &mut marks, last_t, step);
                last_level = row[0].clone();
            } else {
                step = offset + num(1) - last_t;
            }
            let t = offset + num(1);
            last_t = t;
            running.push((t, num(3)));
            waiting.push((t, num(5)));
            kv.push((t, num(7) * 100.0));
            kv_tokens.push((t, num(9) * 100.0));
            if num(10) > 0.0 {
                marks.push((t, format!("{} preempted", num(10))));
            }
        }
    } else {
        for l in &levels {
            let Some(points) = l["server"]["series"].as_array().filter(|p| !p.is_empty()) else { continue };
            offset = start_level(format!("{} {unit}", l["summary"]["load"]), &mut marks, last_t, step);
            let mut prev: Option<f64> = None;
            for p in points {
                let num = |i: usize| f(&p[i]);
                let Some(t) = num(0) else { continue };
                if let Some(prev) = prev {
                    step = t - prev;
                }
                prev = Some(t);
                last_t = offset + t;
                // A gauge the server does not expose is missing, not zero.
                for (line, v) in [(&mut running, num(1)), (&mut waiting, num(2)), (&mut kv, num(3).map(|x| x * 100.0))]
                {
                    if let Some(v) = v.filter(|v| v.is_finite()) {
                        line.push((last_t, v));
                    }
                }
            }
        }
    }
    if !running.is_empty() || !kv.is_empty() {
        let mut series_list = vec![
            series("running", running),
            series("waiting", waiting),
            Series { right: true, ..series("KV blocks %", kv) },
        ];
        if from_steps {
            series_list.push(Series { right: true, ..series("KV tokens %", kv_tokens) });
        }
        out.push(Chart {
            id: "engine-timeline".into(),
            title: "Engine state over time".into(),
            caption: if from_steps {
                format!("{workload}: running and waiting requests (left), KV block usage and KV token usage in % (right; tokens held / block capacity), per interval, level after level (grey marks: level starts and preemptions).")
            } else {
                format!("{workload}: running and waiting requests (left) and KV-cache usage in % (right), as the server's /metrics gauges read at each scrape, level after level (grey marks: level starts).")
            },
            x_label: "seconds since the first level".into(),
            y_label: "requests".into(),
            y2_label: Some("KV usage %".into()),
            kind: Kind::Lines,
            series: series_list,
            marks,
            limits: Vec::new(),
        });
    }
    let last = levels.last().cloned().unwrap_or(Value::Null);
    // 5. Multi-turn: TTFT and prompt tokens by turn.
    if let Some(turns) = last["turns"].as_array().filter(|t| !t.is_empty()) {
        let by = |k: &str, sub: Option<&str>, scale: f64| -> Vec<(f64, f64)> {
            turns
                .iter()
                .filter_map(|t| {
                    Some((
                        f(&t["turn"])?,
                        match sub {
                            Some(s) => f(&t[k][s])?,
                            None => f(&t[k])?,
                        } * scale,
                    ))
                })
                .collect()
        };
        // Agent runs number their model calls the same way: by call within a task.
        let (title, index) = if last["agent"].is_object() {
            ("Agent: by model call", "model call")
        } else {
            ("Multi-turn: by turn", "turn")
        };
        out.push(Chart {
            id: if index == "turn" { "multi-turn".into() } else { "agent-calls".into() },
            title: title.into(),
            caption: format!("{workload} at {} {unit}: prompt tokens served by the prefix cache and newly prefilled (stacked, left) and TTFT P50 in ms (right), by {index} index.", last["summary"]["load"]),
            x_label: index.into(),
            y_label: "prompt tokens".into(),
            y2_label: Some("TTFT p50 (ms)".into()),
            kind: Kind::Stacked,
            series: vec![
                series("cached tokens", by("cached_tokens", None, 1.0)),
                series("new prefill tokens", by("new_prefill_tokens", None, 1.0)),
                Series { right: true, ..series("TTFT p50 (ms)", by("ttft", Some("p50"), 1e3)) },
            ],
            marks: Vec::new(),
            limits: Vec::new(),
        });
    }
    // 6 and 7. Agent and RAG timelines: the median duration of each step, end to end.
    for (key, title, what) in [
        ("agent", "Agent task timeline", "a median task's steps (LLM calls, tool calls, retrievals)"),
        ("rag", "RAG query timeline", "a median query's stages"),
    ] {
        let Some(steps) = last[key]["steps"].as_array() else { continue };
        let mut at = 0.0;
        let mut bars = Vec::new();
        for st in steps {
            let d = f(&st["duration"]["p50"]).unwrap_or(0.0) * 1e3;
            bars.push(Series {
                name: format!("{} {}", st["index"], st["kind"].as_str().unwrap_or("")),
                points: vec![(at, d)],
                right: false,
            });
            at += d;
        }
        if key == "rag" {
            // The model call split into the engine's queue, prefill and decode.
            if let Some(llm) = bars.pop() {
                let start = llm.points[0].0;
                let mut t = start;
                for (name, m) in [("queue", "queue_time"), ("prefill", "prefill_time"), ("decode", "decode_time")] {
                    let d = f(&last["summary"][m]["p50"]).unwrap_or(0.0) * 1e3;
                    bars.push(Series { name: name.into(), points: vec![(t, d)], right: false });
                    t += d;
                }
            }
        }
        let calls = f(&last[key]["amplification"]).unwrap_or(0.0);
        out.push(Chart {
            id: format!("{key}-timeline"),
            title: title.into(),
            caption: format!("{workload} at {} {unit}: {what}, each bar its median duration in ms, laid end to end; {calls:.1} model calls per task, task E2E P95 {:.0} ms.", last["summary"]["load"], f(&last[key]["task_e2e"]["p95"]).unwrap_or(f64::NAN) * 1e3),
            x_label: "ms since the task started".into(),
            y_label: String::new(),
            y2_label: None,
            kind: Kind::Timeline,
            series: bars,
            marks: Vec::new(),
            limits: Vec::new(),
        });
    }
    // 8. CDF of TTFT per level.
    let mut cdfs = Vec::new();
    for l in &levels {
        let Some(load) = f(&l["summary"]["load"]) else { continue };
        let mut ttft: Vec<f64> = r
            .records
            .iter()
            .filter(|x| f(&x["level"]) == Some(load) && x["phase"] == "measured" && x["outcome"]["kind"] == "ok")
            .filter_map(|x| Some((f(&x["chunks"][0]["at"])? - f(&x["intended"])?) * 1e-6))
            .collect();
        if ttft.is_empty() {
            continue;
        }
        ttft.sort_by(f64::total_cmp);
        let n = ttft.len() as f64;
        cdfs.push(series(
            &format!("{load} {unit}"),
            ttft.iter().enumerate().map(|(i, &v)| (v, (i + 1) as f64 / n)).collect(),
        ));
    }
    if !cdfs.is_empty() {
        out.push(Chart {
            id: "ttft-cdf".into(),
            title: "TTFT distribution per level".into(),
            caption: format!(
                "{workload}: cumulative share of measured requests with TTFT at most x ms, one line per level."
            ),
            x_label: "TTFT (ms)".into(),
            y_label: "share of requests".into(),
            y2_label: None,
            kind: Kind::Lines,
            series: cdfs,
            marks: Vec::new(),
            limits: Vec::new(),
        });
    }
    out
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// The whole page.
pub fn html(r: &Results) -> Result<String> {
    let s = &r.summary;
    let charts = charts(r);
    let mut page = String::from("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>goodput report</title><style>body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}figure{margin:1.5em 0}figcaption{color:#555;font-size:0.9em}table{border-collapse:collapse;font-size:0.85em}td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}th{background:#f3f3f3}pre{white-space:pre-wrap;background:#f8f8f8;padding:1em}</style></head><body>\n");
    page.push_str(&format!("<h1>goodput report: {}</h1>\n", esc(s["model"].as_str().unwrap_or(""))));
    page.push_str("<h2 id=\"conclusion\">Conclusion</h2>\n<pre>");
    page.push_str(&esc(r.conclusion.trim().trim_start_matches("Conclusion").trim()));
    page.push_str("</pre>\n<h2 id=\"setup\">Setup</h2>\n<table>");
    let setup = [
        ("model", s["model"].to_string()),
        ("weights", s["weights"].to_string()),
        ("device", s["device"].to_string()),
        ("machine", s["machine"].to_string()),
        ("target", s["target"].to_string()),
        ("engine settings", s["engine"].to_string()),
        ("scenario", s["scenario"].to_string()),
        ("SLOs", s["slos"].to_string()),
        ("load unit", s["load_unit"].to_string()),
        ("seed", s["seed"].to_string()),
        ("CPU pinning", s["cpus"].to_string()),
        ("retry policy", s["retry"].to_string()),
        ("goodput version", s["goodput_version"].to_string()),
    ];
    for (k, v) in setup {
        page.push_str(&format!("<tr><th>{k}</th><td style=\"text-align:left\">{}</td></tr>", esc(v.trim_matches('"'))));
    }
    page.push_str("</table>\n<h2 id=\"levels\">Levels</h2>\n<table><tr>");
    let cols = [
        "load",
        "requests",
        "req/s",
        "out tok/s",
        "goodput",
        "TTFT p50",
        "TTFT p95",
        "TPOT p50",
        "TPOT p95",
        "E2E p95",
        "queue p95",
        "prefill p95",
        "KV max",
        "SLOs",
    ];
    for c in cols {
        page.push_str(&format!("<th>{c}</th>"));
    }
    page.push_str("</tr>\n");
    for l in s["levels"].as_array().into_iter().flatten() {
        let sm = &l["summary"];
        let ms = |m: &str, p: &str| f(&sm[m][p]).map_or("-".into(), |x| format!("{:.1}", x * 1e3));
        let num = |v: &Value, d: usize| f(v).map_or("-".into(), |x| format!("{x:.d$}"));
        let holds = sm["slos"].as_array().is_some_and(|v| v.iter().all(|x| x["holds"] == true));
        let cells = [
            sm["load"].to_string(),
            sm["requests"].to_string(),
            num(&sm["request_throughput"], 2),
            num(&sm["output_throughput"], 0),
            num(&sm["goodput"], 2),
            ms("ttft", "p50"),
            ms("ttft", "p95"),
            ms("tpot", "p50"),
            ms("tpot", "p95"),
            ms("e2e", "p95"),
            ms("queue_time", "p95"),
            ms("prefill_time", "p95"),
            f(&occupancy(l)["kv_max"]).map_or("-".into(), |x| format!("{:.0} %", x * 100.0)),
            if holds { "hold".into() } else { "broken".into() },
        ];
        page.push_str("<tr>");
        for c in cells {
            page.push_str(&format!("<td>{}</td>", esc(&c)));
        }
        page.push_str("</tr>\n");
    }
    page.push_str(
        "</table>\n<p>Times in ms; percentiles over all measured requests of a level (linear interpolation).</p>\n",
    );
    // Each level's three layers: what users saw, what the engine did, what the system delivered.
    for l in s["levels"].as_array().into_iter().flatten() {
        let sm = &l["summary"];
        page.push_str(&format!(
            "<h3>Level {} {}</h3>\n<table><tr><th>layer</th><th>metric</th><th>n</th><th>mean</th><th>p50</th><th>p90</th><th>p95</th><th>p99</th><th>max</th></tr>\n",
            esc(&sm["load"].to_string()),
            esc(s["load_unit"].as_str().unwrap_or(""))
        ));
        let mut rows: Vec<(&str, String, Value, f64)> = [
            ("user", "TTFT (ms)", &sm["ttft"], 1e3),
            ("user", "TPOT (ms)", &sm["tpot"], 1e3),
            ("user", "ITL (ms)", &sm["itl"], 1e3),
            ("user", "E2E (ms)", &sm["e2e"], 1e3),
            ("user", "per-user tok/s", &sm["per_user_tps"], 1.0),
            ("engine", "queue (ms)", &sm["queue_time"], 1e3),
            ("engine", "prefill (ms)", &sm["prefill_time"], 1e3),
            ("engine", "decode (ms)", &sm["decode_time"], 1e3),
            ("engine", "inference (ms)", &sm["inference_time"], 1e3),
            ("engine", "step (ms)", &l["engine"]["step_time"], 1e3),
        ]
        .into_iter()
        .map(|(layer, name, v, scale)| (layer, name.to_string(), v.clone(), scale))
        .collect();
        // Over HTTP: TTFT's parts by the server's stamps, and the server's own /metrics.
        for (k, name) in [
            ("send_lag", "send lag"),
            ("tokenize", "tokenization"),
            ("handoff", "handoff"),
            ("hold", "UTF-8 hold"),
            ("beyond_engine", "TTFT beyond the engine"),
            ("unexplained", "unexplained"),
        ] {
            if sm["http"][k].is_object() {
                rows.push(("HTTP", format!("{name} (ms)"), sm["http"][k].clone(), 1e3));
            }
        }
        for (h, name) in [
            ("time_to_first_token_seconds", "TTFT"),
            ("request_queue_time_seconds", "queue"),
            ("request_prefill_time_seconds", "prefill"),
            ("request_decode_time_seconds", "decode"),
            ("e2e_request_latency_seconds", "E2E"),
        ] {
            let x = &l["server"]["histograms"][h];
            if x.is_object() {
                // Histogram quantiles (bucket-interpolated), the exact mean, no P95 or max.
                let v = serde_json::json!({"n": x["count"], "mean": x["mean"], "p50": x["p50"], "p90": x["p90"], "p99": x["p99"]});
                rows.push(("server /metrics", format!("{name} (ms)"), v, 1e3));
            }
        }
        for (layer, name, v, scale) in rows {
            let cell = |k: &str| f(&v[k]).map_or("-".into(), |x| format!("{:.2}", x * scale));
            page.push_str(&format!(
                "<tr><td style=\"text-align:left\">{layer}</td><td style=\"text-align:left\">{name}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                f(&v["n"]).map_or("0".into(), |n| format!("{n:.0}")),
                cell("mean"),
                cell("p50"),
                cell("p90"),
                cell("p95"),
                cell("p99"),
                cell("max")
            ));
        }
        let o = occupancy(l);
        let num = |v: &Value, d: usize| f(v).map_or("-".into(), |x| format!("{x:.d$}"));
        let occupancy_text = if o.is_null() {
            "occupancy unknown (no engine in this process, no /metrics)".to_string()
        } else {
            format!(
                "running mean {} (max {}), waiting mean {} (max {}), KV blocks max {}{}",
                num(&o["running_mean"], 1),
                num(&o["running_max"], 0),
                num(&o["waiting_mean"], 1),
                num(&o["waiting_max"], 0),
                f(&o["kv_max"]).map_or("-".into(), |x| format!("{:.0} %", x * 100.0)),
                if o["from_server"] == true { " (from the server's /metrics)" } else { "" }
            )
        };
        page.push_str(&format!(
            "</table>\n<p>system: {} req/s, {} in + {} out tok/s, goodput {} req/s; {}; {} ok, {} errors, {} timeouts, {} retries; {} warm-up and {} cool-down requests left out.</p>\n",
            f(&sm["request_throughput"]).map_or("-".into(), |x| format!("{x:.2}")),
            f(&sm["input_throughput"]).map_or("-".into(), |x| format!("{x:.0}")),
            f(&sm["output_throughput"]).map_or("-".into(), |x| format!("{x:.0}")),
            f(&sm["goodput"]).map_or("-".into(), |x| format!("{x:.2}")),
            esc(&occupancy_text),
            sm["completed"],
            sm["errors"],
            sm["timeouts"],
            sm["retries"],
            l["warmup_requests"],
            l["cooldown_requests"],
        ));
    }
    page.push_str("<h2 id=\"charts\">Charts</h2>\n");
    for c in &charts {
        page.push_str(&format!(
            "<figure id=\"{}\">\n{}\n<figcaption>{}</figcaption>\n</figure>\n",
            c.id,
            svg(c)?,
            esc(&c.caption)
        ));
    }
    let data = serde_json::to_string(&charts)?.replace("</", "<\\/");
    page.push_str(&format!("<script type=\"application/json\" id=\"chart-data\">{data}</script>\n</body></html>\n"));
    Ok(page)
}

pub fn run(a: ReportArgs) -> Result<()> {
    let r = read(&a.dir)?;
    let out = a.out.clone().unwrap_or_else(|| a.dir.join("report.html"));
    write(&r, &out)?;
    eprintln!("report: {}", out.display());
    Ok(())
}

pub fn write(r: &Results, out: &Path) -> Result<()> {
    let page = html(r)?;
    std::fs::write(out, page).with_context(|| format!("writing {}", out.display()))
}
