//! `goodput report RESULTS_DIR -o report.html`: the page of a run (`goodput_report::html`),
//! read through `goodput_results`' typed reader.

use anyhow::Result;
use clap::Args;
use goodput_results::Results;
use std::path::PathBuf;

pub use goodput_report::html::write;

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// A `goodput run --out` directory.
    pub dir: PathBuf,
    /// Where to write the page (default: DIR/report.html).
    #[arg(long, short = 'o')]
    pub out: Option<PathBuf>,
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
