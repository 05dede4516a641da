//! The packed bf16 prefill product at SmolLM2-135M's shapes, AMX tiles against `vdpbf16ps`:
//! GFLOP/s of each (median of 15, alternating), and the measured per-core peaks.
use goodput_engine::cpu::{amx, bf16_dot, peak::Bf16Peak};
use std::time::Instant;

fn main() {
    let peak = Bf16Peak::measure();
    println!("peak per core: {peak:?}; threads {}", rayon::current_num_threads());
    for (m, k, n) in
        [(1024usize, 576usize, 3072usize), (1024, 1536, 576), (1024, 576, 960), (128, 576, 3072), (16, 576, 3072)]
    {
        let x: Vec<f32> = (0..m * k).map(|i| ((i * 7919) % 1000) as f32 / 1000.0 - 0.5).collect();
        let w: Vec<u16> =
            (0..n * k).map(|i| half::bf16::from_f32(((i * 104729) % 997) as f32 / 997.0 - 0.5).to_bits()).collect();
        let p = bf16_dot::Packed::new(&w, n, k);
        let flops = 2.0 * (m * k * n) as f64;
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for _ in 0..15 {
            for (tiles, v) in [(true, &mut a), (false, &mut b)] {
                if tiles && !amx::takes(m, k) {
                    continue;
                }
                let t = Instant::now();
                std::hint::black_box(bf16_dot::matmul_packed_on(&x, &p, m, tiles));
                v.push(flops / t.elapsed().as_secs_f64() / 1e9);
            }
        }
        let med = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            if v.is_empty() {
                (0.0, 0.0, 0.0)
            } else {
                (v[v.len() / 2], v[0], v[v.len() - 1])
            }
        };
        println!("m{m} k{k} n{n}: tiles {:.0?} GFLOP/s, vdpbf16ps {:.0?} (median, min, max)", med(&mut a), med(&mut b));
    }
}
