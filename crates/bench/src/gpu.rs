//! A GPU the engine runs on, as the hardware catalog knows it: what `engine-bench` holds its
//! rows against (`goodput_engine::bench::Catalog`), so the engine needs no catalog of its own.

use goodput_engine::bench::Roofline;

/// A GPU's datasheet bandwidth and dense peak from the built-in hardware catalog, matched by
/// the name its driver reports.
pub fn roofline(name: &str, dtype: candle_core::DType) -> Option<Roofline> {
    let cat = goodput_sizing::hardware::HardwareCatalog::builtin();
    let gpu = cat.for_device_name(name)?;
    let dtype = match dtype {
        candle_core::DType::BF16 => Some(goodput_sizing::hardware::DType::Bf16),
        candle_core::DType::F16 => Some(goodput_sizing::hardware::DType::Fp16),
        _ => None,
    };
    Some(Roofline {
        device_name: name.to_string(),
        catalog_entry: Some(gpu.name.clone()),
        bandwidth_gbytes_per_s: gpu.memory_bandwidth_gbps,
        peak_tflops: dtype.and_then(|d| gpu.flops_per_s(d)).map(|f| f / 1e12),
        source: format!("hardware catalog `{}` ({})", gpu.name, gpu.description),
        cpu_bf16_peak: None,
    })
}
