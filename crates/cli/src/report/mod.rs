//! `goodput report RESULTS_DIR -o report.html`: one self-contained HTML page (inline SVG drawn
//! with plotters, no scripts, no network) that leads with the answer — the written
//! conclusion, the capacity chart, the TTFT decomposition and the percentiles against their
//! SLOs — then the other charts, the per-level tables (folded) and the setup. Every chart's
//! data is embedded as JSON (`<script type="application/json" id="chart-data">`, inert) so
//! tests can check it. Everything is read through `goodput_results`' typed reader.

mod charts;
mod predicted;
mod tables;
mod timelines;

use crate::chart::svg;
use anyhow::{Context, Result};
use clap::Args;
use goodput_results::Results;
use std::path::{Path, PathBuf};

pub use charts::charts;

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// A `goodput run --out` directory.
    pub dir: PathBuf,
    /// Where to write the page (default: DIR/report.html).
    #[arg(long, short = 'o')]
    pub out: Option<PathBuf>,
}

pub(crate) fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

const STYLE: &str = "body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}figure{margin:1.5em 0}figcaption{color:#555;font-size:0.9em}table{border-collapse:collapse;font-size:0.85em}td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}th{background:#f3f3f3}td.l,th.l{text-align:left}details{margin:0.6em 0}summary{cursor:pointer;font-weight:bold}p.incomplete{background:#fff3cd;border-left:4px solid #d39e00;padding:0.8em}p.conclusion{font-size:1.05em;line-height:1.5;background:#f6f8fa;padding:1em;border-left:4px solid #1f77b4}";

/// The whole page.
pub fn html(r: &Results) -> Result<String> {
    let s = &r.summary;
    let charts = charts(r);
    let mut page = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>goodput report: {}</title><style>{STYLE}</style></head><body>\n",
        esc(&s.model)
    );
    page.push_str(&format!("<h1>goodput report: {}, {}</h1>\n", esc(&s.model), esc(&s.workload.name)));
    if let Some(note) = r.incomplete() {
        page.push_str(&format!(
            "<p class=\"incomplete\" id=\"incomplete\"><strong>Incomplete run.</strong> {}</p>\n",
            esc(&note)
        ));
    }
    page.push_str("<h2 id=\"conclusion\">Conclusion</h2>\n<p class=\"conclusion\">");
    page.push_str(&esc(&r.conclusion));
    page.push_str("</p>\n<h2 id=\"charts\">Charts</h2>\n");
    for c in &charts {
        page.push_str(&format!(
            "<figure id=\"{}\">\n{}\n<figcaption>{}</figcaption>\n</figure>\n",
            c.id,
            svg(c)?,
            esc(&c.caption)
        ));
    }
    page.push_str("<h2 id=\"levels\">Levels</h2>\n");
    page.push_str(&tables::sweep(s));
    for l in &s.levels {
        page.push_str(&tables::level(l, s.load_unit));
    }
    page.push_str("<h2 id=\"setup\">Setup</h2>\n");
    page.push_str(&tables::setup(s));
    let data = serde_json::to_string(&charts)?.replace("</", "<\\/");
    page.push_str(&format!("<script type=\"application/json\" id=\"chart-data\">{data}</script>\n</body></html>\n"));
    Ok(page)
}

pub fn run(a: ReportArgs) -> Result<()> {
    let r = Results::read(&a.dir)?;
    if let Some(note) = r.incomplete() {
        eprintln!("warning: incomplete run: {note}");
    }
    let out = a.out.clone().unwrap_or_else(|| a.dir.join(goodput_results::files::REPORT));
    write(&r, &out)?;
    eprintln!("report: {}", out.display());
    Ok(())
}

pub fn write(r: &Results, out: &Path) -> Result<()> {
    let page = html(r)?;
    let (dir, name) = match (out.parent(), out.file_name()) {
        (Some(d), Some(n)) => (if d.as_os_str().is_empty() { Path::new(".") } else { d }, n.to_string_lossy()),
        _ => anyhow::bail!("{}: not a file name to write the report to", out.display()),
    };
    goodput_results::files::write_whole(dir, &name, page.as_bytes())
        .with_context(|| format!("writing {}", out.display()))
}
