//! `goodput hardware`: the GPU catalog the roofline and `plan` use (`goodput_report::hardware`).

use anyhow::Result;
use clap::Args;
use goodput_sizing::hardware::HardwareCatalog;
use std::io::Write;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct HardwareArgs {
    /// Add or replace GPUs from this TOML file (as hardware.toml).
    #[arg(long)]
    pub hardware: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: HardwareArgs) -> Result<()> {
    let mut cat = HardwareCatalog::builtin();
    if let Some(p) = &a.hardware {
        cat.extend(HardwareCatalog::from_path(p)?);
    }
    if a.json {
        let gpus: Vec<_> = cat.gpus.values().collect();
        writeln!(std::io::stdout().lock(), "{}", serde_json::to_string_pretty(&gpus)?)?;
        return Ok(());
    }
    writeln!(std::io::stdout().lock(), "{}", goodput_report::hardware::text(&cat))?;
    Ok(())
}
