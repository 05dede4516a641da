//! This machine's roofline, measured: read bandwidth (best of 5 parallel sums over 512 MiB)
//! and FLOP/s at the profile's dtype: for bf16 the core's peak on the instruction the
//! engine's bf16 matmuls run on (AMX `tdpbf16ps`, else AVX-512 `vdpbf16ps`; the engine's own
//! microbenchmark) times the cores, otherwise f32 matmuls (best of 5 products of two 1024²
//! matrices through candle, the kernels the engine uses). A measured ceiling, not a datasheet
//! peak: a term's efficiency against it says how close the engine comes to what this machine
//! demonstrably does. (Against the f32 figure, a bf16 profile on an AMX host read 570 % of
//! its roofline.)

/// How the f32 figures were obtained, for the profile.
pub const HOW: &str =
    "measured here: read bandwidth best of 5 parallel sums over 512 MiB; FLOP/s best of 5 f32 1024×1024×1024 matmuls (candle)";

/// How the bf16 figures were obtained.
const HOW_BF16: &str = "measured here: read bandwidth best of 5 parallel sums over 512 MiB; FLOP/s the bf16 peak of one core (best of 5 runs of the engine's matmul instruction, AMX where the engine uses it) × the engine's cores";

/// (bandwidth in bytes/s, FLOP/s, how), measured on `cpus` when given (as the engine is
/// pinned), the FLOP/s at `dtype`.
pub fn measure(
    cpus: Option<Vec<usize>>,
    dtype: &str,
    progress: &dyn crate::progress::Progress,
) -> (f64, f64, &'static str) {
    let bf16 = (dtype == "bf16").then(|| goodput_engine::cpu::peak::Bf16Peak::measure().engine_per_core()).flatten();
    let cores = cpus.as_ref().map_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()), Vec::len);
    let (bw, f32_flops) = measure_pinned(cpus, bf16.is_none(), progress);
    match bf16 {
        Some(per_core) => (bw, per_core * cores as f64, HOW_BF16),
        None => (bw, f32_flops, HOW),
    }
}

/// (bandwidth, f32 FLOP/s — NaN unless `matmul`), measured on `cpus` when given.
fn measure_pinned(cpus: Option<Vec<usize>>, matmul: bool, progress: &dyn crate::progress::Progress) -> (f64, f64) {
    let body =
        || (goodput_engine::bench::measure_read_bandwidth() * 1e9, if matmul { matmul_flops() } else { f64::NAN });
    let Some(cpus) = cpus else { return body() };
    let pin = cpus.clone();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(cpus.len())
        .start_handler(move |_| {
            goodput_engine::affinity::pin_current_or_warn(&pin, "the roofline measurement");
        })
        .build();
    match pool {
        Ok(p) => p.install(body),
        Err(e) => {
            progress.line(
                &format!("warning: the roofline is measured unpinned (no thread pool on CPUs {cpus:?}: {e})"),
                true,
            );
            body()
        }
    }
}

fn matmul_flops() -> f64 {
    use candle_core::{Device, Tensor};
    let n = 1024;
    let (Ok(a), Ok(b)) = (
        Tensor::ones((n, n), candle_core::DType::F32, &Device::Cpu),
        Tensor::ones((n, n), candle_core::DType::F32, &Device::Cpu),
    ) else {
        return f64::NAN;
    };
    let mut best = 0.0f64;
    for _ in 0..5 {
        let t = std::time::Instant::now();
        let Ok(c) = a.matmul(&b) else { return f64::NAN };
        let dt = t.elapsed().as_secs_f64();
        std::hint::black_box(c);
        best = best.max(2.0 * (n * n * n) as f64 / dt);
    }
    best
}
