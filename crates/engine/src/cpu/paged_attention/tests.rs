//! The paged kernel against the gather path and f32 against bf16 pools.
use super::*;
use crate::attention::{gather_attention, paged_attention, write_kv, write_rows};

#[test]
fn the_polynomial_exp_is_within_a_few_ulp_of_expf() {
    let mut worst = 0f64;
    for i in 0..=20_000 {
        let x = -30.0 * i as f32 / 20_000.0;
        let (got, want) = (exp_poly(x) as f64, (x as f64).exp());
        worst = worst.max((got - want).abs() / want);
    }
    assert!(worst < 5e-7, "relative error {worst}");
    assert_eq!(exp_poly(0.0), 1.0);
    assert!(exp_poly(f32::NEG_INFINITY) < 1e-37);
}
use candle_core::{DType, Device};

fn rand(shape: (usize, usize, usize), seed: u64) -> Tensor {
    let n = shape.0 * shape.1 * shape.2;
    let mut x = seed.wrapping_mul(0x9E3779B97F4A7C15) | 1;
    let v: Vec<f32> = (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % 2001) as f32 / 1000.0 - 1.0
        })
        .collect();
    Tensor::from_vec(v, shape, &Device::Cpu).unwrap()
}

#[test]
fn kernel_matches_gather_for_decode_and_chunks_with_gqa() {
    let (bs, nb, hkv, hq, d) = (4, 48, 2, 6, 16);
    let k_pool = Tensor::zeros((nb * bs, hkv, d), DType::F32, &Device::Cpu).unwrap();
    let v_pool = Tensor::zeros((nb * bs, hkv, d), DType::F32, &Device::Cpu).unwrap();
    let long: usize = 67;
    let long_blocks: Vec<u32> = (20..20 + long.div_ceil(bs) as u32).collect();
    // (new tokens, context, block table): a decode, a short chunk, a fresh prefill, a long
    // chunk, and another decode.
    let seqs: Vec<(usize, usize, Vec<u32>)> = vec![
        (1, 10, vec![3, 7, 1]),
        (5, 11, vec![2, 9, 11]),
        (7, 7, vec![19, 4]),
        (long - 5, long, long_blocks),
        (1, 3, vec![5]),
    ];
    let mut meta = AttnMeta::new(bs);
    let mut fill = AttnMeta::new(bs);
    for (q, c, bt) in &seqs {
        meta.push(*q, *c, bt);
        fill.push(*c, *c, bt);
    }
    let n = fill.num_tokens();
    write_kv(&k_pool, &v_pool, &rand((n, hkv, d), 1), &rand((n, hkv, d), 2), &fill).unwrap();
    let q = rand((meta.num_tokens(), hq, d), 3);
    let a = paged_attention(&q, &k_pool, &v_pool, &meta, &AttnOpts::scaled(0.25)).unwrap();
    let b = gather_attention(&q, &k_pool, &v_pool, &meta, &AttnOpts::scaled(0.25)).unwrap();
    assert_eq!(a.dims(), &[meta.num_tokens(), hq, d]);
    let diff = (a - b).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
    assert!(diff < 1e-5, "max abs diff {diff}");
}

/// bf16 pools: the kernel reads them in place and agrees with the gather path over the same
/// pools (both see the same rounded K/V), and stays close to attention over f32 pools.
#[test]
fn bf16_pools_match_gather_and_stay_close_to_f32() {
    let (bs, nb, hkv, hq, d) = (4, 24, 2, 4, 16);
    let mut meta = AttnMeta::new(bs);
    let mut fill = AttnMeta::new(bs);
    for (q, c, bt) in [(1usize, 10usize, vec![3u32, 7, 1]), (6, 13, vec![2, 9, 11, 12]), (1, 2, vec![5])] {
        meta.push(q, c, &bt);
        fill.push(c, c, &bt);
    }
    let n = fill.num_tokens();
    let (k, v) = (rand((n, hkv, d), 4), rand((n, hkv, d), 5));
    let pools = |dt: DType| {
        let kp = Tensor::zeros((nb * bs, hkv, d), dt, &Device::Cpu).unwrap();
        let vp = kp.zeros_like().unwrap();
        write_kv(&kp, &vp, &k, &v, &fill).unwrap();
        (kp, vp)
    };
    let (kb, vb) = pools(DType::BF16);
    let (kf, vf) = pools(DType::F32);
    let q = rand((meta.num_tokens(), hq, d), 6);
    let max_diff =
        |a: Tensor, b: Tensor| (a - b).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
    let paged = paged_attention(&q, &kb, &vb, &meta, &AttnOpts::scaled(0.25)).unwrap();
    assert_eq!(paged.dtype(), DType::F32);
    let gathered = gather_attention(&q, &kb, &vb, &meta, &AttnOpts::scaled(0.25)).unwrap();
    assert!(max_diff(paged.clone(), gathered) < 1e-5);
    let f32_out = paged_attention(&q, &kf, &vf, &meta, &AttnOpts::scaled(0.25)).unwrap();
    let d = max_diff(paged, f32_out);
    assert!(d > 0.0 && d < 2e-2, "bf16 rounding moves the output a little: {d}");
}

/// Prefill chunks of 16 rows or more over bf16 pools take AMX tiles (`flash_amx`): fresh
/// prefills, a chunk continuing a context (its causal mask offset), a chunk of exactly 16,
/// GQA, `dk` 64 and 128, beside decode rows that keep the paged kernel. Against the gather
/// path over the same pools: within what rounding `q` and the weights to bf16 moves.
#[test]
#[cfg_attr(not(host_amx), ignore = "this CPU has no AMX: the tiles cannot run here")]
fn prefill_chunks_on_amx_tiles_match_gather() {
    assert!(crate::cpu::amx::available(), "built on a CPU with AMX, but the tiles were not granted here");
    let (bs, nb) = (16, 40);
    let seqs: Vec<(usize, usize, Vec<u32>)> = vec![
        (1, 10, vec![3]),
        (70, 70, vec![30, 2, 9, 17, 11]),
        (20, 77, vec![4, 5, 6, 7, 8]),
        (16, 16, vec![12]),
        (1, 33, vec![20, 21, 22]),
        (45, 100, vec![31, 32, 33, 34, 35, 36, 37]),
    ];
    let mut meta = AttnMeta::new(bs);
    let mut fill = AttnMeta::new(bs);
    for (q, c, bt) in &seqs {
        meta.push(*q, *c, bt);
        fill.push(*c, *c, bt);
        assert_eq!(flash_amx::takes(*q, 64, 64, 64, true), *q >= 16);
    }
    let n = fill.num_tokens();
    for (hkv, hq, d) in [(2usize, 6usize, 64usize), (1, 2, 128)] {
        let kp = Tensor::zeros((nb * bs, hkv, d), DType::BF16, &Device::Cpu).unwrap();
        let vp = kp.zeros_like().unwrap();
        write_kv(&kp, &vp, &rand((n, hkv, d), 11), &rand((n, hkv, d), 12), &fill).unwrap();
        let q = rand((meta.num_tokens(), hq, d), 13);
        let opts = AttnOpts::scaled(1.0 / (d as f32).sqrt());
        let a = paged_attention(&q, &kp, &vp, &meta, &opts).unwrap();
        let b = gather_attention(&q, &kp, &vp, &meta, &opts).unwrap();
        let diff = (a - b).unwrap().abs().unwrap();
        let (max, mean) =
            (diff.max_all().unwrap().to_scalar::<f32>().unwrap(), diff.mean_all().unwrap().to_scalar::<f32>().unwrap());
        eprintln!("dk {d}: max abs diff {max}, mean {mean}");
        // Not 0: the chunks did run on the tiles (with q and the weights rounded to bf16).
        assert!(max > 1e-5 && max < 1.5e-2 && mean < 2e-3, "dk {d}: max abs diff {max}, mean {mean}");
        // Decode rows (the first and fifth sequences) stay on the paged kernel, exact.
        let rows = |t: &Tensor, r: usize| t.narrow(0, r, 1).unwrap();
        let (a, b) = (
            paged_attention(&q, &kp, &vp, &meta, &opts).unwrap(),
            gather_attention(&q, &kp, &vp, &meta, &opts).unwrap(),
        );
        for r in [0, 1 + 70 + 20 + 16] {
            let d = (rows(&a, r) - rows(&b, r)).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
            assert!(d < 1e-5, "decode row {r}: {d}");
        }
    }
}

/// A key far above every earlier one (its score 16, 23 in log2 units, past `LAZY_MAX`) makes
/// the tiles move their rows' running max late and rescale the output they hold; keys a few
/// units above the max leave it where it is. Against the gather path.
#[test]
#[cfg_attr(not(host_amx), ignore = "this CPU has no AMX: the tiles cannot run here")]
fn a_late_key_far_above_the_max_rescales_the_tiles_output() {
    let (bs, d, len) = (16, 64, 80);
    let mut meta = AttnMeta::new(bs);
    meta.push(len, len, &[0, 1, 2, 3, 4]);
    let (q, mut k) = (rand((len, 1, d), 21).affine(0.1, 0.5).unwrap(), rand((len, 1, d), 22).to_vec3::<f32>().unwrap());
    // q ≈ 0.5 everywhere: key 45 (all 4.0) scores about 16 after the 1/8 scale; key 70 (all
    // 0.4) about 1.6, a little above the random keys.
    k[45][0] = vec![4.0; d];
    k[70][0] = vec![0.4; d];
    let k = Tensor::new(k, &Device::Cpu).unwrap();
    let kp = Tensor::zeros((5 * bs, 1, d), DType::BF16, &Device::Cpu).unwrap();
    let vp = kp.zeros_like().unwrap();
    write_kv(&kp, &vp, &k, &rand((len, 1, d), 23), &meta).unwrap();
    let opts = AttnOpts::scaled(1.0 / (d as f32).sqrt());
    let a = paged_attention(&q, &kp, &vp, &meta, &opts).unwrap();
    let b = gather_attention(&q, &kp, &vp, &meta, &opts).unwrap();
    let diff = (a - b).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
    assert!(diff > 1e-5 && diff < 1.5e-2, "max abs diff {diff}");
}

/// Sliding windows, sinks and a latent pool read as both K and V (MLA), on decode rows and
/// chunks longer than a tile, f32 and bf16: the kernel agrees with the gather reference.
#[test]
fn windows_sinks_and_latent_pools_match_gather() {
    let (bs, nb) = (4, 64);
    let seqs: Vec<(usize, usize, Vec<u32>)> =
        vec![(1, 10, vec![3, 7, 1]), (37, 41, (20..31).collect()), (5, 5, vec![40, 41]), (1, 2, vec![5])];
    let mut meta = AttnMeta::new(bs);
    let mut fill = AttnMeta::new(bs);
    for (q, c, bt) in &seqs {
        meta.push(*q, *c, bt);
        fill.push(*c, *c, bt);
    }
    let n = fill.num_tokens();
    let max_diff =
        |a: &Tensor, b: &Tensor| (a - b).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
    for dt in [DType::F32, DType::BF16] {
        // GQA (6 heads over 2) with a window of 6 and sinks.
        let (hkv, hq, d) = (2, 6, 16);
        let kp = Tensor::zeros((nb * bs, hkv, d), dt, &Device::Cpu).unwrap();
        let vp = kp.zeros_like().unwrap();
        write_kv(&kp, &vp, &rand((n, hkv, d), 7), &rand((n, hkv, d), 8), &fill).unwrap();
        let q = rand((meta.num_tokens(), hq, d), 9);
        let sinks: Vec<f32> = (0..hq).map(|h| h as f32 * 0.7 - 1.5).collect();
        for opts in [
            AttnOpts { window: Some(6), ..AttnOpts::scaled(0.3) },
            AttnOpts { sinks: Some(sinks.clone()), ..AttnOpts::scaled(0.3) },
            AttnOpts { window: Some(3), sinks: Some(sinks.clone()), ..AttnOpts::scaled(0.3) },
        ] {
            let a = paged_attention(&q, &kp, &vp, &meta, &opts).unwrap();
            let b = gather_attention(&q, &kp, &vp, &meta, &opts).unwrap();
            assert!(max_diff(&a, &b) < 1e-5, "{dt:?} {opts:?}: {}", max_diff(&a, &b));
            let plain = paged_attention(&q, &kp, &vp, &meta, &AttnOpts::scaled(0.3)).unwrap();
            assert!(max_diff(&a, &plain) > 1e-3, "{opts:?} changes the output");
        }
        // MLA: one latent head of 24 (16 latent + 8 RoPE key) read as K, its first 16 as V.
        let lp = Tensor::zeros((nb * bs, 1, 24), dt, &Device::Cpu).unwrap();
        write_rows(&lp, &rand((n, 1, 24), 10), &fill).unwrap();
        let q = rand((meta.num_tokens(), 5, 24), 11);
        let opts = AttnOpts { dv: Some(16), ..AttnOpts::scaled(0.2) };
        let a = paged_attention(&q, &lp, &lp, &meta, &opts).unwrap();
        assert_eq!(a.dims(), &[meta.num_tokens(), 5, 16]);
        let b = gather_attention(&q, &lp, &lp, &meta, &opts).unwrap();
        assert!(max_diff(&a, &b) < 1e-5, "{dt:?} latent: {}", max_diff(&a, &b));
    }
}

#[test]
fn a_block_table_outside_the_pool_is_an_error() {
    let k_pool = Tensor::zeros((8, 1, 8), DType::F32, &Device::Cpu).unwrap();
    let mut meta = AttnMeta::new(4);
    meta.push(1, 1, &[5]);
    let q = rand((1, 1, 8), 1);
    assert!(paged_attention(&q, &k_pool, &k_pool, &meta, &AttnOpts::scaled(1.0)).is_err());
}

/// Decode rows enough to keep the threads busy take one tile per row over every KV head
/// (`few`'s block kernels on AVX-512, the slots read whole): against the gather path on bf16
/// pools, with a chunk beside them, a window and sinks (one thread: four rows are enough).
#[test]
fn decode_rows_over_every_kv_head_at_once_match_gather() {
    let (bs, nb, hkv, hq, d) = (4, 96, 3, 9, 32);
    let mut meta = AttnMeta::new(bs);
    let mut fill = AttnMeta::new(bs);
    let mut next = 0u32;
    for (q, c) in [(1usize, 23usize), (1, 9), (1, 1), (6, 14), (1, 30), (1, 17), (1, 4)] {
        let bt: Vec<u32> = (next..next + c.div_ceil(bs) as u32).rev().collect();
        next += c.div_ceil(bs) as u32;
        meta.push(q, c, &bt);
        fill.push(c, c, &bt);
    }
    let n = fill.num_tokens();
    let kp = Tensor::zeros((nb * bs, hkv, d), DType::BF16, &Device::Cpu).unwrap();
    let vp = kp.zeros_like().unwrap();
    write_kv(&kp, &vp, &rand((n, hkv, d), 12), &rand((n, hkv, d), 13), &fill).unwrap();
    let q = rand((meta.num_tokens(), hq, d), 14);
    let sinks: Vec<f32> = (0..hq).map(|h| h as f32 * 0.3 - 1.0).collect();
    let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    for opts in [
        AttnOpts::scaled(0.2),
        AttnOpts { window: Some(7), ..AttnOpts::scaled(0.2) },
        AttnOpts { sinks: Some(sinks), ..AttnOpts::scaled(0.2) },
    ] {
        let a = pool.install(|| paged_attention(&q, &kp, &vp, &meta, &opts)).unwrap();
        let b = gather_attention(&q, &kp, &vp, &meta, &opts).unwrap();
        let diff = (a - b).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
        assert!(diff < 1e-5, "{opts:?}: max abs diff {diff}");
    }
}
