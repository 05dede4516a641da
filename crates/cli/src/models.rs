//! `goodput models`: the catalog with parameter counts, weight and KV bytes
//! (`goodput_report::models`).

use anyhow::Result;
use clap::Args;
use goodput_core::Catalog;
use std::io::Write;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct ModelsArgs {
    /// Read the catalog from this TOML file instead of the built-in one.
    #[arg(long)]
    pub catalog: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: ModelsArgs) -> Result<()> {
    let cat = match &a.catalog {
        Some(p) => Catalog::from_path(p)?,
        None => Catalog::builtin(),
    };
    let text = if a.json { goodput_report::models::json(&cat)? } else { goodput_report::models::text(&cat) };
    writeln!(std::io::stdout().lock(), "{text}")?;
    Ok(())
}
