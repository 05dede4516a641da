//! Skinny-matmul kernel against candle's gemm for decode-sized row counts, and the two paths
//! of the bf16-weight matmul.
use candle_core::{Device, Tensor};
use goodput_engine::cpu::bf16::{self, Path};
use goodput_engine::cpu::skinny;
use std::time::Instant;
fn bench(name: &str, f: impl Fn() -> Tensor) {
    for _ in 0..3 {
        f();
    }
    let n = 20;
    let t = Instant::now();
    for _ in 0..n {
        std::hint::black_box(f());
    }
    println!("{name}: {:.3} ms", t.elapsed().as_secs_f64() * 1e3 / n as f64);
}
fn main() {
    let d = Device::Cpu;
    for (k, nn) in [(256usize, 32000usize), (576, 49152), (576, 3072), (1536, 576), (576, 960)] {
        let w = Tensor::randn(0f32, 1.0, (nn, k), &d).unwrap();
        for m in [1usize, 4, 8, 12, 16, 512] {
            let x = Tensor::randn(0f32, 1.0, (m, k), &d).unwrap();
            bench(&format!("k{k} n{nn} m{m} x@w.t"), || x.matmul(&w.t().unwrap()).unwrap());
            let wb = w.to_dtype(candle_core::DType::BF16).unwrap();
            for path in [Path::FewRows, Path::Panels, Path::Dot] {
                bench(&format!("k{k} n{nn} m{m} bf16 {path:?}"), || {
                    bf16::matmul_t_via(&x, &wb, path).unwrap().unwrap()
                });
            }
            if let Ok(Some(_)) = skinny::matmul_t(&x, &w) {
                bench(&format!("k{k} n{nn} m{m} skinny"), || skinny::matmul_t(&x, &w).unwrap().unwrap());
            }
        }
    }
}
