//! The report: one self-contained HTML page (inline SVG drawn with plotters, no scripts, no
//! network) that leads with the answer — the written conclusion, the capacity chart, the TTFT
//! decomposition and the percentiles against their SLOs — then the other charts, the per-level
//! tables (folded) and the setup. Every chart's data is embedded as JSON
//! (`<script type="application/json" id="chart-data">`, inert) so tests can check it.
//!
//! Here: the page ([`page`], [`write`]) and the one HTML escaping every page of goodput uses
//! ([`escape`], also `goodput plan --html`'s); its headline ([`headline`]); the tables ([`tables`]); the charts as data
//! ([`charts`], with [`context`], [`timelines`], [`predicted`]) and their drawing ([`svg`]).
//! The drawing knows nothing of runs: [`svg`] imports nothing from its siblings, and the
//! chart builders share what they share through [`context`], never through each other.

pub mod charts;
pub mod context;
pub mod headline;
pub mod overlay;
pub mod predicted;
pub mod svg;
pub mod tables;
pub mod timelines;

use crate::ReportError;
use goodput_results::Results;
use std::path::Path;

pub use charts::charts;

/// `s` safe as HTML text and as a quoted attribute value: `&`, `<`, `>` and `"` escaped.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

pub(crate) const STYLE: &str = "body{font-family:sans-serif;max-width:1400px;margin:2em auto;padding:0 1em;color:#222}figure{margin:1.5em 0}figure svg{width:100%;height:auto}div.headline{background:#eef5ec;border-left:6px solid #2e7d32;padding:0.8em 1.2em;margin:1em 0;line-height:1.6}div.headline .big{font-size:1.6em;font-weight:bold}figcaption{color:#555;font-size:0.9em}table{border-collapse:collapse;font-size:0.85em}td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}th{background:#f3f3f3}td.l,th.l{text-align:left}details{margin:0.6em 0}summary{cursor:pointer;font-weight:bold}p.incomplete{background:#fff3cd;border-left:4px solid #d39e00;padding:0.8em}p.conclusion{font-size:1.05em;line-height:1.5;background:#f6f8fa;padding:1em;border-left:4px solid #1f77b4}";

/// The whole page.
pub fn page(r: &Results) -> Result<String, ReportError> {
    let s = &r.summary;
    let charts = charts(r);
    let mut page = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>goodput report: {}</title><style>{STYLE}</style></head><body>\n",
        escape(&s.model)
    );
    page.push_str(&format!("<h1>goodput report: {}, {}</h1>\n", escape(&s.model), escape(&s.workload.name)));
    page.push_str(&headline::html(s));
    if let Some(note) = r.incomplete() {
        page.push_str(&format!(
            "<p class=\"incomplete\" id=\"incomplete\"><strong>Incomplete run.</strong> {}</p>\n",
            escape(&note)
        ));
    }
    page.push_str("<h2 id=\"conclusion\">Conclusion</h2>\n<p class=\"conclusion\">");
    page.push_str(&escape(&crate::conclusion::shown(r)));
    page.push_str("</p>\n<h2 id=\"charts\">Charts</h2>\n");
    for c in &charts {
        page.push_str(&format!(
            "<figure id=\"{}\">\n{}\n<figcaption>{}</figcaption>\n</figure>\n",
            c.id,
            svg::svg(c)?,
            escape(&c.caption)
        ));
    }
    page.push_str("<h2 id=\"levels\">Levels</h2>\n");
    page.push_str(&tables::sweep(s));
    for l in &s.levels {
        page.push_str(&tables::level(l, s.load_unit));
    }
    if let Some(m) = &s.merged {
        page.push_str("<h2 id=\"shards\">Shards</h2>\n");
        page.push_str(&tables::shards(m, s.load_unit));
    }
    page.push_str("<h2 id=\"setup\">Setup</h2>\n");
    page.push_str(&tables::setup(s));
    let data = serde_json::to_string(&charts)?.replace("</", "<\\/");
    page.push_str(&format!("<script type=\"application/json\" id=\"chart-data\">{data}</script>\n</body></html>\n"));
    Ok(page)
}

/// Writes the page of `r` to `out` whole (never half a page, never through a link).
pub fn write(r: &Results, out: &Path) -> Result<(), ReportError> {
    write_page(&page(r)?, out)
}

/// Writes the page of many runs ([`overlay`]) to `out` whole.
pub fn write_overlay(runs: &[overlay::Labeled], gpus: f64, out: &Path) -> Result<(), ReportError> {
    write_page(&overlay::page(runs, gpus)?, out)
}

fn write_page(page: &str, out: &Path) -> Result<(), ReportError> {
    let (dir, name) = match (out.parent(), out.file_name()) {
        (Some(d), Some(n)) => (if d.as_os_str().is_empty() { Path::new(".") } else { d }, n.to_string_lossy()),
        _ => return Err(ReportError::NotAFile { path: out.to_path_buf() }),
    };
    goodput_results::files::write_whole(dir, &name, page.as_bytes())
        .map_err(|source| ReportError::Write { path: out.to_path_buf(), source })
}
