//! The report's HTML tables: the sweep, each level's three layers (folded in `<details>`),
//! and the setup as two readable columns.

use super::esc;
use goodput_metrics::prom::HistogramStats;
use goodput_metrics::Summary;
use goodput_results::{LevelReport, LoadUnit, RunSummary};

fn num(x: Option<f64>, d: usize) -> String {
    x.filter(|v| v.is_finite()).map_or("-".into(), |v| format!("{v:.d$}"))
}

fn ms(s: &Option<Summary>, f: fn(&Summary) -> f64) -> String {
    num(s.as_ref().map(|x| f(x) * 1e3), 1)
}

fn row(cells: &[String], left: usize) -> String {
    let mut out = String::from("<tr>");
    for (i, c) in cells.iter().enumerate() {
        let class = if i < left { " class=\"l\"" } else { "" };
        out.push_str(&format!("<td{class}>{}</td>", esc(c)));
    }
    out.push_str("</tr>\n");
    out
}

fn header(cols: &[&str]) -> String {
    let mut out = String::from("<tr>");
    for c in cols {
        out.push_str(&format!("<th>{}</th>", esc(c)));
    }
    out.push_str("</tr>\n");
    out
}

/// One row per level: the service layer and the engine's occupancy side by side.
pub fn sweep(s: &RunSummary) -> String {
    let mut t = String::from("<table>");
    t.push_str(&header(&[
        &format!("load ({})", s.load_unit),
        "requests",
        "req/s",
        "out tok/s",
        "goodput",
        "TTFT p50",
        "TTFT p95",
        "TPOT p50",
        "TPOT p95",
        "E2E p95",
        "engine wait p95",
        "queue p95",
        "prefill p95",
        "KV max",
        "SLOs",
    ]));
    for l in &s.levels {
        let m = &l.summary;
        t.push_str(&row(
            &[
                m.load.to_string(),
                m.requests.to_string(),
                num(Some(m.request_throughput), 2),
                num(Some(m.output_throughput), 0),
                num(Some(m.goodput), 2),
                ms(&m.ttft, |x| x.p50),
                ms(&m.ttft, |x| x.p95),
                ms(&m.tpot, |x| x.p50),
                ms(&m.tpot, |x| x.p95),
                ms(&m.e2e, |x| x.p95),
                ms(&m.engine_wait, |x| x.p95),
                ms(&m.queue_time, |x| x.p95),
                ms(&m.prefill_time, |x| x.p95),
                l.occupancy.as_ref().map_or("-".into(), |o| format!("{} %", num(Some(o.kv_max * 100.0), 0))),
                if m.slos_hold() { "hold".into() } else { "broken".into() },
            ],
            0,
        ));
    }
    t.push_str(
        "</table>\n<p>Times in ms; percentiles over all measured requests of a level (linear interpolation).</p>\n",
    );
    t
}

fn stat_row(layer: &str, name: &str, x: &Option<Summary>, scale: f64) -> String {
    let cell = |f: fn(&Summary) -> f64| num(x.as_ref().map(|s| f(s) * scale), 2);
    row(
        &[
            layer.into(),
            name.into(),
            x.as_ref().map_or("0".into(), |s| s.n.to_string()),
            cell(|s| s.mean),
            cell(|s| s.p50),
            cell(|s| s.p90),
            cell(|s| s.p95),
            cell(|s| s.p99),
            cell(|s| s.max),
        ],
        2,
    )
}

/// Histogram quantiles (bucket-interpolated), the exact mean; no P95 or max.
fn histogram_row(name: &str, h: &HistogramStats) -> String {
    let c = |x: f64| num(Some(x * 1e3), 2);
    row(
        &[
            "server /metrics".into(),
            format!("{name} (ms)"),
            format!("{:.0}", h.count),
            num(h.mean.map(|m| m * 1e3), 2),
            c(h.p50),
            c(h.p90),
            "-".into(),
            c(h.p99),
            "-".into(),
        ],
        2,
    )
}

/// A level's three layers — what users saw, what the engine did, what the system delivered —
/// folded under the level's headline.
pub fn level(l: &LevelReport, unit: LoadUnit) -> String {
    let m = &l.summary;
    let mut t = format!(
        "<details><summary>Level {} {unit}: {} requests, {} out tok/s, SLOs {}</summary>\n<table>",
        m.load,
        m.requests,
        num(Some(m.output_throughput), 0),
        if m.slos_hold() { "hold" } else { "broken" }
    );
    t.push_str(&header(&["layer", "metric", "n", "mean", "p50", "p90", "p95", "p99", "max"]));
    for (layer, name, x, scale) in [
        ("user", "TTFT (ms)", &m.ttft, 1e3),
        ("user", "TPOT (ms)", &m.tpot, 1e3),
        ("user", "ITL (ms)", &m.itl, 1e3),
        ("user", "E2E (ms)", &m.e2e, 1e3),
        ("user", "per-user tok/s", &m.per_user_tps, 1.0),
        ("engine", "engine wait (ms)", &m.engine_wait, 1e3),
        ("engine", "queue (ms)", &m.queue_time, 1e3),
        ("engine", "prefill (ms)", &m.prefill_time, 1e3),
        ("engine", "decode (ms)", &m.decode_time, 1e3),
        ("engine", "inference (ms)", &m.inference_time, 1e3),
        ("engine", "step (ms)", &l.engine.step_time, 1e3),
    ] {
        t.push_str(&stat_row(layer, name, x, scale));
    }
    // Over HTTP: TTFT's parts by the server's stamps, and the server's own /metrics.
    if let Some(h) = &m.http {
        for (name, x) in [
            ("send lag", &h.send_lag),
            ("tokenization", &h.tokenize),
            ("handoff", &h.handoff),
            ("UTF-8 hold", &h.hold),
            ("TTFT beyond the engine", &h.beyond_engine),
            ("unexplained", &h.unexplained),
        ] {
            if x.is_some() {
                t.push_str(&stat_row("HTTP", &format!("{name} (ms)"), x, 1e3));
            }
        }
    }
    if let Some(h) = l.server.as_ref().map(|s| &s.histograms) {
        for (name, x) in
            [("TTFT", &h.ttft), ("queue", &h.queue), ("prefill", &h.prefill), ("decode", &h.decode), ("E2E", &h.e2e)]
        {
            if let Some(x) = x {
                t.push_str(&histogram_row(name, x));
            }
        }
    }
    t.push_str(&format!("</table>\n<p>{}</p>\n</details>\n", esc(&system(l))));
    t
}

/// The system line of a level: throughput, occupancy, how requests ended.
fn system(l: &LevelReport) -> String {
    let m = &l.summary;
    let occupancy =
        goodput_results::occupancy_text(l.occupancy.as_ref()) + &goodput_results::prefix_text(l.prefix_cache.as_ref());
    format!(
        "system: {} req/s, {} in + {} out tok/s, goodput {} req/s; {occupancy}; {} ok, {} errors, {} timeouts, {} retries; {} warm-up and {} cool-down requests left out.",
        num(Some(m.request_throughput), 2),
        num(Some(m.input_throughput), 0),
        num(Some(m.output_throughput), 0),
        num(Some(m.goodput), 2),
        m.completed,
        m.errors,
        m.timeouts,
        m.retries,
        l.warmup_requests,
        l.cooldown_requests,
    )
}

/// The run's setup as two columns a person reads.
pub fn setup(s: &RunSummary) -> String {
    let e = &s.engine;
    let mc = &s.machine;
    let kv = match (e.kv_blocks, e.kv_memory_bytes) {
        (Some(b), _) => format!("{b} blocks"),
        (None, Some(bytes)) => format!("{:.2} GiB", bytes as f64 / (1u64 << 30) as f64),
        (None, None) => "-".into(),
    };
    let pin = |c: &Option<String>| c.clone().unwrap_or_else(|| "not pinned".into());
    let retry = if s.retry.max == 0 {
        "off".to_string()
    } else {
        format!("up to {} retries, back-off {:.0} ms doubling", s.retry.max, s.retry.backoff_s * 1e3)
    };
    let scenario =
        if s.workload.description.is_empty() { s.workload.name.clone() } else { s.workload.description.clone() };
    let rows = [
        ("model", s.model.clone()),
        ("weights", s.weights.clone()),
        ("device", s.device.clone()),
        (
            "machine",
            format!("{}, {} logical CPUs, {} GiB, kernel {}", mc.cpu, mc.logical_cpus, mc.memory_gib, mc.kernel),
        ),
        ("target", s.target.clone()),
        (
            "engine settings",
            format!(
                "block size {}, KV pool {kv}, max batched tokens {}, max sequences {}, max model length {}, prefix caching {}",
                e.block_size,
                e.max_num_batched_tokens,
                e.max_num_seqs,
                e.max_model_len,
                if e.prefix_caching { "on" } else { "off" }
            ),
        ),
        ("scenario", scenario),
        ("SLOs", s.slos.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(", ")),
        ("load unit", s.load_unit.to_string()),
        ("seed", if s.seed_drawn { format!("{} (drawn for this run; --seed {} repeats it)", s.seed, s.seed) } else { s.seed.to_string() }),
        ("CPU pinning", format!("engine: {}; harness: {}", pin(&s.cpus.engine), pin(&s.cpus.harness))),
        ("retry policy", retry),
        ("goodput version", format!("{} (results format {})", s.goodput_version, s.format)),
    ];
    let mut t = String::from("<table>");
    for (k, v) in rows {
        t.push_str(&format!("<tr><th class=\"l\">{}</th><td class=\"l\">{}</td></tr>\n", esc(k), esc(&v)));
    }
    t.push_str("</table>\n");
    t
}
