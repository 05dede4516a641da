//! The CPU host's roofline: its measured read bandwidth and, in bf16, its measured compute
//! peak (`cpu::peak`) over the engine's threads.

use super::Roofline;
use candle_core::DType;

/// Best-of-5 parallel read bandwidth over a 512 MiB buffer, in GB/s.
pub fn measure_read_bandwidth() -> f64 {
    use rayon::prelude::*;
    let n = 64 << 20; // u64 words = 512 MiB
    let buf: Vec<u64> = (0..n as u64).collect();
    let mut best = 0.0f64;
    for _ in 0..5 {
        let t = std::time::Instant::now();
        let s: u64 = buf
            .par_chunks(1 << 16)
            .map(|c| c.iter().fold(0u64, |a, &x| a.wrapping_add(x)))
            .reduce(|| 0, u64::wrapping_add);
        let dt = t.elapsed().as_secs_f64();
        std::hint::black_box(s);
        best = best.max((n * 8) as f64 / dt / 1e9);
    }
    best
}

/// The roofline of a CPU run at `dtype` with `bw` GB/s read bandwidth measured.
pub(super) fn roofline(dtype: DType, bw: f64) -> Roofline {
    let peak = (dtype == DType::BF16).then(crate::cpu::peak::Bf16Peak::measure);
    let threads = rayon::current_num_threads();
    let per_core = peak.and_then(|p| p.engine_per_core());
    let on = if crate::cpu::amx::available() { "AMX tdpbf16ps" } else { "vdpbf16ps" };
    Roofline {
        device_name: "cpu".into(),
        catalog_entry: None,
        bandwidth_gbytes_per_s: bw,
        peak_tflops: per_core.map(|p| p * threads as f64 / 1e12),
        source: match per_core {
            Some(_) => format!(
                "measured read bandwidth (best of 5 over 512 MiB); bf16 peak: {on} from registers, best of 5, × {threads} threads"
            ),
            None => "measured read bandwidth (best of 5 over 512 MiB)".into(),
        },
        cpu_bf16_peak: peak,
    }
}
