//! `goodput hardware`: the GPU catalog the roofline and `plan` use.

use anyhow::Result;
use clap::Args;
use goodput_report::console as table;
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
    let mut t = table::new(&[
        "gpu",
        "memory GB",
        "bandwidth GB/s",
        "bf16 TFLOP/s",
        "fp8 TFLOP/s",
        "fp4 TFLOP/s",
        "link",
        "link GB/s",
        "GPUs/node",
        "between nodes GB/s",
        "description",
    ]);
    for g in cat.gpus.values() {
        t.add_row(vec![
            g.name.clone(),
            table::f(g.memory_gb, 0),
            table::f(g.memory_bandwidth_gbps, 0),
            table::f(g.bf16_tflops, 0),
            g.fp8_tflops.map_or("-".into(), |x| table::f(x, 0)),
            g.fp4_tflops.map_or("-".into(), |x| table::f(x, 0)),
            g.interconnect.clone(),
            table::f(g.interconnect_gbps, 0),
            g.gpus_per_node.to_string(),
            match (&g.internode, g.internode_gbps) {
                (Some(n), Some(b)) => format!("{} ({n})", table::f(b, 0)),
                _ => "-".into(),
            },
            g.description.clone(),
        ]);
    }
    writeln!(
        std::io::stdout().lock(),
        "GPU catalog ({}; dense FLOP/s, link bandwidth per GPU one way; sources in hardware.toml)\n{t}",
        cat.origin
    )?;
    Ok(())
}
