//! `goodput hardware`: the GPU catalog the roofline and `plan` use, as a table.

use crate::console as table;
use goodput_sizing::hardware::HardwareCatalog;

/// The catalog as a table, with where it came from and how its figures are counted.
pub fn text(cat: &HardwareCatalog) -> String {
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
    format!("GPU catalog ({}; dense FLOP/s, link bandwidth per GPU one way; sources in hardware.toml)\n{t}", cat.origin)
}
