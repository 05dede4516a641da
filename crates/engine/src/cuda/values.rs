//! Deterministic values in [-1, 1] for the kernels' checks: the same inputs on the device
//! (`check.rs`) and in the host's emulations (`flash_ref.rs`), from a seed.

/// `n` values in [-1, 1] in steps of 0.001 (xorshift64 from `seed`).
pub(crate) fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % 2001) as f32 / 1000.0 - 1.0
        })
        .collect()
}
