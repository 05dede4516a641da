//! The seeded bootstrap every interval of goodput is drawn with: resamples of `n` items with
//! replacement, each index uniform over `0..n` (rand's `random_range`, free of the modulo
//! bias of `next() % n`), from a `SmallRng` seeded once, so the same seed gives the same
//! intervals. Used by run comparison (`compare`) and by the sizing crate's fit.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// A stream of bootstrap resamples of `n` items.
pub struct Bootstrap {
    rng: SmallRng,
    n: usize,
    idx: Vec<usize>,
}

impl Bootstrap {
    /// Resamples of `n` items (none when `n` is 0), reproducible from `seed`.
    pub fn new(n: usize, seed: u64) -> Self {
        Self { rng: SmallRng::seed_from_u64(seed), n, idx: Vec::with_capacity(n) }
    }

    /// The next resample: `n` indices drawn uniformly with replacement.
    pub fn next_sample(&mut self) -> &[usize] {
        self.idx.clear();
        let (rng, n) = (&mut self.rng, self.n);
        self.idx.extend((0..n).map(|_| rng.random_range(0..n)));
        &self.idx
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_resamples_and_every_index_is_in_range() {
        let (mut a, mut b) = (Bootstrap::new(7, 42), Bootstrap::new(7, 42));
        for _ in 0..50 {
            let s = a.next_sample().to_vec();
            assert_eq!(s, b.next_sample());
            assert_eq!(s.len(), 7);
            assert!(s.iter().all(|&i| i < 7));
        }
        assert_ne!(Bootstrap::new(7, 1).next_sample(), Bootstrap::new(7, 2).next_sample());
        assert!(Bootstrap::new(0, 1).next_sample().is_empty());
    }

    /// Uniform draws: over 3 items (where `u64 % 3` would be biased, if only slightly) each
    /// index comes up a third of the time within 1 %.
    #[test]
    fn indices_are_uniform() {
        let mut b = Bootstrap::new(3, 9);
        let mut counts = [0usize; 3];
        for _ in 0..100_000 {
            b.next_sample().iter().for_each(|&i| counts[i] += 1);
        }
        for c in counts {
            assert!((c as f64 / 300_000.0 - 1.0 / 3.0).abs() < 0.01, "{counts:?}");
        }
    }
}
