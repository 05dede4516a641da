//! How every output writes a number, a time and a level's occupancy: one helper each, for the
//! console, the page, the Markdown export and the conclusion alike.

use goodput_metrics::cache::{HitSource, PrefixHits};
use goodput_metrics::occupancy::Occupancy;
use goodput_metrics::Summary;

/// `x` with `d` decimals; `-` when unknown or not finite.
pub fn num(x: Option<f64>, d: usize) -> String {
    x.filter(|v| v.is_finite()).map_or("-".into(), |v| format!("{v:.d$}"))
}

/// A number with `d` decimals (`-` when not finite): the console's cells.
pub fn f(x: f64, d: usize) -> String {
    num(Some(x), d)
}

/// A statistic of a distribution of seconds, in milliseconds (none when there is no
/// distribution).
pub fn ms(s: &Option<Summary>, f: fn(&Summary) -> f64) -> Option<f64> {
    s.as_ref().map(|x| f(x) * 1e3)
}

/// The width the console's text is wrapped to on a terminal: a 120-column terminal's.
pub const WIDTH: usize = 120;

/// The width a console stream's text is wrapped to: `COLUMNS` where set (40 or more), else
/// [`WIDTH`] on a terminal; `None` (lines as written, for a pipe or a file) otherwise.
pub fn console_width(terminal: bool) -> Option<usize> {
    let columns = std::env::var("COLUMNS").ok().and_then(|c| c.trim().parse::<usize>().ok()).filter(|&c| c >= 40);
    columns.or(terminal.then_some(WIDTH))
}

/// [`wrap`] to `width`, or `block` as it is without one.
pub fn wrap_to(block: &str, width: Option<usize>) -> String {
    width.map_or_else(|| block.to_string(), |w| wrap(block, w))
}

/// `block` with each line longer than `width` wrapped at word boundaries, its continuation
/// lines indented two spaces past its own indent; a table's lines (box drawing) are left as
/// they are, since a table is as wide as its columns.
pub fn wrap(block: &str, width: usize) -> String {
    let lines = block.lines().map(|line| {
        let table = line.trim_start().starts_with(['┌', '│', '╞', '├', '└', '╭', '╰', '┆']);
        if table || textwrap::core::display_width(line) <= width {
            return line.to_string();
        }
        let indent = &line[..line.len() - line.trim_start().len()];
        let more = format!("{indent}  ");
        textwrap::fill(line.trim_start(), textwrap::Options::new(width).initial_indent(indent).subsequent_indent(&more))
    });
    lines.collect::<Vec<_>>().join("\n")
}

/// Bytes in the largest binary unit that keeps the number ≥ 1 (`2.5 GiB`).
pub use goodput_core::sizes::format_bytes as bytes;

/// A level's prefix-cache hits in words, after a `; ` (nothing when unknown).
pub fn prefix_text(h: Option<&PrefixHits>) -> String {
    let Some(h) = h else { return String::new() };
    let Some(rate) = h.hit_rate() else { return String::new() };
    let source = match h.source {
        HitSource::Engine => "engine",
        HitSource::Usage => "usage",
        HitSource::Metrics => "/metrics",
    };
    let requests = match (h.requests_with_hits, h.requests) {
        (Some(hit), Some(n)) => format!(", {hit} of {n} requests hit"),
        _ => String::new(),
    };
    format!("; prefix cache {:.1} % of prompt tokens ({source}{requests})", rate * 100.0)
}

/// The share of a level's steps replayed from CUDA graphs, after a `; ` (nothing where no
/// step says: the CPU, graphs off).
pub fn graph_text(share: Option<f64>) -> String {
    share.map_or(String::new(), |g| format!("; CUDA graphs {:.0} % of steps", g * 100.0))
}

/// A level's occupancy in words, for the console and the report: running and waiting
/// (means and maxima), KV blocks, preemptions, and where the numbers came from.
pub fn occupancy_text(o: Option<&Occupancy>) -> String {
    let Some(o) = o else { return "occupancy unknown (no engine in this process, no /metrics)".into() };
    let n = f;
    format!(
        "running mean {} (max {}), waiting mean {} (max {}), KV blocks mean {} % (max {} %), {}{}",
        n(o.running_mean, 1),
        n(o.running_max, 0),
        n(o.waiting_mean, 1),
        n(o.waiting_max, 0),
        n(o.kv_mean * 100.0, 0),
        n(o.kv_max * 100.0, 0),
        o.preemptions.map_or("preemptions unknown".into(), |p| format!("{p} preemptions")),
        if o.from_server { " (from the server's /metrics)" } else { "" },
    )
}

/// A comparison key's value as the console and Markdown show it (`goodput compare`, the
/// repeats table): throughputs and per-user rates with two decimals, error and timeout
/// rates in percent, every other key (a latency, seconds) in milliseconds.
pub fn key_value(key: &str, x: f64) -> String {
    if !x.is_finite() {
        format!("{x}")
    } else if key.contains("throughput") || key == "goodput" || key.starts_with("per_user_tps") {
        format!("{x:.2}")
    } else if key.starts_with("error_rate") || key.starts_with("timeout_rate") {
        format!("{:.2} %", x * 100.0)
    } else {
        format!("{:.2} ms", x * 1e3)
    }
}
