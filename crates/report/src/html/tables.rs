//! The report's HTML tables: the sweep (the level columns as the page shows them), each
//! level's three layers (folded in `<details>`), and the setup as two readable columns.

use super::escape;
use crate::columns::{self, stat_cells, Output, LAYERS, STAT_HEADER};
use crate::text::{graph_text, num, occupancy_text, prefix_text};
use goodput_metrics::prom::HistogramStats;
use goodput_metrics::Summary;
use goodput_results::{LevelReport, LoadUnit, RunSummary};

fn row(cells: &[String], left: usize) -> String {
    let mut out = String::from("<tr>");
    for (i, c) in cells.iter().enumerate() {
        let class = if i < left { " class=\"l\"" } else { "" };
        out.push_str(&format!("<td{class}>{}</td>", escape(c)));
    }
    out.push_str("</tr>\n");
    out
}

fn header(cols: &[&str]) -> String {
    let mut out = String::from("<tr>");
    for c in cols {
        out.push_str(&format!("<th>{}</th>", escape(c)));
    }
    out.push_str("</tr>\n");
    out
}

/// One row per level: the service layer and the engine's occupancy side by side.
pub fn sweep(s: &RunSummary) -> String {
    let mut t = String::from("<table>");
    let cols = columns::shown(Output::Html, &s.levels);
    let names: Vec<String> = cols.iter().map(|c| c.header(Output::Html, s.load_unit)).collect();
    t.push_str(&header(&names.iter().map(String::as_str).collect::<Vec<_>>()));
    for l in &s.levels {
        t.push_str(&row(&cols.iter().map(|c| c.text(Output::Html, l)).collect::<Vec<_>>(), 0));
    }
    t.push_str(
        "</table>\n<p>Times in ms; percentiles over all measured requests of a level (linear interpolation), throughputs over its steady window.</p>\n",
    );
    t
}

fn stat_row(layer: &str, name: &str, x: &Option<Summary>, scale: f64) -> String {
    let mut cells = vec![layer.to_string(), name.to_string()];
    cells.extend(stat_cells(x, scale, 2));
    row(&cells, 2)
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
        crate::columns::slos_word(m.confidence())
    );
    t.push_str(&header(&STAT_HEADER));
    for r in LAYERS.iter().filter(|r| r.shown(l)) {
        t.push_str(&stat_row(r.layer, r.name, (r.get)(l), r.scale));
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
    t.push_str(&format!("</table>\n<p>{}</p>\n</details>\n", escape(&system(l))));
    t
}

/// The system line of a level: throughput, occupancy, how requests ended.
fn system(l: &LevelReport) -> String {
    let m = &l.summary;
    let occupancy = occupancy_text(l.occupancy.as_ref())
        + &prefix_text(l.prefix_cache.as_ref())
        + &graph_text(l.engine.graph_step_share);
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
        t.push_str(&format!("<tr><th class=\"l\">{}</th><td class=\"l\">{}</td></tr>\n", escape(k), escape(&v)));
    }
    t.push_str("</table>\n");
    t
}

/// A merged run's shards ([`crate::console::shards`]'s cells), with how their stamps were put
/// on one time line.
pub fn shards(m: &goodput_results::clock::Merged, unit: LoadUnit) -> String {
    let mut out = format!("<p>{}.</p>\n<table><tr><th>load ({unit})</th>", escape(crate::console::shards_time_line(m)));
    for h in crate::console::SHARD_HEADER {
        out.push_str(&format!("<th>{}</th>", escape(h)));
    }
    out.push_str("</tr>\n");
    for row in crate::console::shard_rows(m) {
        out.push_str("<tr>");
        for (k, cell) in row.iter().enumerate() {
            let class = if k + 1 == row.len() { " class=\"l\"" } else { "" };
            out.push_str(&format!("<td{class}>{}</td>", escape(cell)));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
    out
}
