//! Skinny-matmul kernel against candle's gemm for decode-sized row counts.
use candle_core::{Device, Tensor};
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
    for (k, nn) in
        [(256usize, 32000usize), (256, 1024), (1024, 256), (576, 49152), (576, 1536), (1536, 576), (576, 192)]
    {
        let w = Tensor::randn(0f32, 1.0, (nn, k), &d).unwrap();
        for m in [1usize, 2, 4, 8, 12, 16] {
            let x = Tensor::randn(0f32, 1.0, (m, k), &d).unwrap();
            bench(&format!("k{k} n{nn} m{m} x@w.t"), || x.matmul(&w.t().unwrap()).unwrap());
            if let Ok(Some(_)) = goodput_engine::skinny::matmul_t(&x, &w) {
                bench(&format!("k{k} n{nn} m{m} skinny"), || {
                    goodput_engine::skinny::matmul_t(&x, &w).unwrap().unwrap()
                });
            }
        }
    }
}
