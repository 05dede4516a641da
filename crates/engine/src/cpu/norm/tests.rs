use super::*;
use candle_core::Device;
use std::mem::MaybeUninit;

fn rand(shape: (usize, usize), seed: u64) -> Tensor {
    let mut next = crate::cpu::common::test_values(seed);
    let v: Vec<f32> = (0..shape.0 * shape.1).map(|_| next()).collect();
    Tensor::from_vec(v, shape, &Device::Cpu).unwrap()
}

fn values(t: &Tensor) -> Vec<f32> {
    t.flatten_all().unwrap().to_vec1().unwrap()
}

/// Every build this CPU runs, and the portable loop.
fn rms_builds() -> Vec<RmsFn> {
    let mut b: Vec<RmsFn> = vec![rms_portable];
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx512f") {
            b.push(x86::rms_avx512);
        }
        if std::is_x86_feature_detected!("avx2") {
            b.push(x86::rms_avx2);
        }
    }
    b
}

/// By hand: the row (3, 4) has mean square 12.5, so it is divided by √12.5 = 3.5355…, then
/// times the weight (1, 2): (0.848 528, 2.262 742).
#[test]
fn a_row_by_hand() {
    let x = Tensor::from_vec(vec![3f32, 4.0], (1, 2), &Device::Cpu).unwrap();
    let w = Tensor::from_vec(vec![1f32, 2.0], 2, &Device::Cpu).unwrap();
    let got = values(&rms_norm(&x, &w, 0.0).unwrap().expect("taken"));
    assert!((got[0] - 0.848_528_1).abs() < 1e-6 && (got[1] - 2.262_741_7).abs() < 1e-6, "{got:?}");
}

/// Within 2e-6 (relative) of candle's `rms_norm` (which divides where this multiplies by
/// the reciprocal, and sums in another order), on rows longer and shorter than 16 values and
/// on a strided input; the same bits on every build.
#[test]
fn agrees_with_candle_and_every_build_gives_the_same_bits() {
    for (t, n) in [(37, 576), (5, 7), (300, 64)] {
        let wide = rand((t, n + 9), 1);
        let x = wide.narrow(1, 3, n).unwrap();
        let w = rand((1, n), 2).flatten_all().unwrap();
        let got = values(&rms_norm(&x, &w, 1e-5).unwrap().expect("taken"));
        let want = values(&candle_nn::ops::rms_norm(&x.contiguous().unwrap(), &w, 1e-5).unwrap());
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() <= 2e-6 * w.abs().max(1e-3), "{g} vs {w} ({t} × {n})");
        }
        let (xs, ws) = (values(&x), values(&w));
        for build in rms_builds() {
            let mut o = vec![MaybeUninit::<f32>::uninit(); n];
            for r in 0..t {
                // SAFETY: only the builds this CPU runs are listed.
                unsafe { build(&xs[r * n..(r + 1) * n], &ws, 1e-5, &mut o) };
                let o: Vec<f32> = o.iter().map(|v| unsafe { v.assume_init() }).collect();
                assert!(o.iter().zip(&got[r * n..(r + 1) * n]).all(|(a, b)| a.to_bits() == b.to_bits()));
            }
        }
    }
}

/// The add is candle's bit for bit, strided inputs included; anything but two f32 CPU tensors
/// of one shape is left to candle, as is a weight of the wrong length.
#[test]
fn add_equals_candle_s_and_other_inputs_are_declined() {
    let a = rand((1500, 600), 3).narrow(1, 10, 576).unwrap();
    let b = rand((1500, 576), 4);
    let got = add(&a, &b).unwrap().expect("taken");
    assert_eq!(got.dims(), [1500, 576]);
    let want = values(&(&a + &b).unwrap());
    assert!(values(&got).iter().zip(&want).all(|(x, y)| x.to_bits() == y.to_bits()));
    let ab = a.to_dtype(DType::BF16).unwrap();
    assert!(add(&ab, &ab).unwrap().is_none());
    assert!(add(&a, &b.narrow(0, 0, 3).unwrap()).unwrap().is_none());
    let w = rand((1, 575), 5).flatten_all().unwrap();
    assert!(rms_norm(&b, &w, 1e-5).unwrap().is_none());
    assert!(rms_norm(&ab, &ab.narrow(0, 0, 1).unwrap().flatten_all().unwrap(), 1e-5).unwrap().is_none());
}
