//! Percentiles and summaries of raw samples.
//!
//! **Percentile definition.** `percentile(xs, p)` sorts the samples and interpolates linearly
//! between the two closest ranks: with `n` sorted samples `x[0] ≤ … ≤ x[n-1]`, the rank is
//! `r = p/100 · (n − 1)`, and the result is `x[⌊r⌋] + (r − ⌊r⌋)·(x[⌈r⌉] − x[⌊r⌋])`. This is
//! NumPy's default (`method="linear"`), which vLLM's `bench serve` uses, so our P99 and
//! theirs agree on the same samples. P0 is the minimum and P100 the maximum.
//! Percentiles are always taken over all raw samples, never averaged across windows.

use serde::{Deserialize, Serialize};

/// The `p`-th percentile (0 ≤ p ≤ 100) of `samples` as defined in the module docs; `None`
/// when there are no samples or `p` is out of range. NaN samples are ignored.
pub fn percentile(samples: &[f64], p: f64) -> Option<f64> {
    let mut v: Vec<f64> = samples.iter().copied().filter(|x| !x.is_nan()).collect();
    v.sort_by(f64::total_cmp);
    percentile_sorted(&v, p)
}

/// [`percentile`] of samples already sorted ascending (no NaN).
pub fn percentile_sorted(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() || !(0.0..=100.0).contains(&p) {
        return None;
    }
    let r = p / 100.0 * (sorted.len() - 1) as f64;
    let lo = r.floor() as usize;
    let hi = r.ceil() as usize;
    Some(sorted[lo] + (r - lo as f64) * (sorted[hi] - sorted[lo]))
}

/// Items counted by kind: each kind once, with its counts summed and the example of its first
/// item, most frequent first (ties in the kind's order). How a level's failures and server
/// anomalies, and a run's failures over all its levels, are tallied.
pub fn tally<K: Ord, E>(items: impl IntoIterator<Item = (K, usize, E)>) -> Vec<(K, usize, E)> {
    use std::collections::btree_map::Entry;
    let mut by: std::collections::BTreeMap<K, (usize, E)> = Default::default();
    for (kind, n, example) in items {
        match by.entry(kind) {
            Entry::Vacant(v) => {
                v.insert((n, example));
            }
            Entry::Occupied(mut o) => o.get_mut().0 += n,
        }
    }
    let mut v: Vec<(K, usize, E)> = by.into_iter().map(|(k, (n, e))| (k, n, e)).collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v
}

/// Count, mean, spread and the usual percentiles of a set of samples.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Summary {
    /// Number of samples the statistics are computed from.
    #[schemars(range(min = 1))]
    pub n: usize,
    pub mean: f64,
    /// Sample standard deviation (n − 1 in the denominator; 0 for one sample).
    #[schemars(range(min = 0.0))]
    pub stddev: f64,
    pub min: f64,
    pub p50: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
}

impl Summary {
    /// Summarises `samples` (NaN ignored); `None` when nothing is left.
    pub fn of(samples: &[f64]) -> Option<Self> {
        let mut v: Vec<f64> = samples.iter().copied().filter(|x| !x.is_nan()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let mean = v.iter().sum::<f64>() / n as f64;
        let var = if n > 1 { v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64 } else { 0.0 };
        let p = |q| percentile_sorted(&v, q).unwrap_or(f64::NAN);
        Some(Self {
            n,
            mean,
            stddev: var.sqrt(),
            min: v[0],
            p50: p(50.0),
            p90: p(90.0),
            p95: p(95.0),
            p99: p(99.0),
            max: v[n - 1],
        })
    }

    /// Relative spread: stddev / mean (0 when the mean is 0).
    pub fn cv(&self) -> f64 {
        if self.mean == 0.0 {
            0.0
        } else {
            self.stddev / self.mean
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn hand_computed_percentiles() {
        let xs = [15.0, 20.0, 35.0, 40.0, 50.0];
        // r = 0.4 * 4 = 1.6 → 20 + 0.6 * 15 = 29
        assert!((percentile(&xs, 40.0).unwrap() - 29.0).abs() < 1e-12);
        assert_eq!(percentile(&xs, 50.0), Some(35.0));
        // r = 0.99 * 4 = 3.96 → 40 + 0.96 * 10 = 49.6
        assert!((percentile(&xs, 99.0).unwrap() - 49.6).abs() < 1e-12);
        assert_eq!(percentile(&xs, 0.0), Some(15.0));
        assert_eq!(percentile(&xs, 100.0), Some(50.0));
        assert_eq!(percentile(&[7.0], 90.0), Some(7.0));
        assert_eq!(percentile(&[], 50.0), None);
        assert_eq!(percentile(&xs, 101.0), None);
        // Unsorted input is sorted first (TGI's benchmark forgot this once).
        assert_eq!(percentile(&[50.0, 15.0, 40.0, 20.0, 35.0], 50.0), Some(35.0));
    }

    #[test]
    fn hand_computed_summary() {
        let s = Summary::of(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).unwrap();
        assert_eq!((s.n, s.mean, s.min, s.max), (8, 5.0, 2.0, 9.0));
        // Σ(x-5)² = 9+1+1+1+0+0+4+16 = 32; sample variance 32/7.
        assert!((s.stddev - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
        assert_eq!(s.p50, 4.5);
        assert!(Summary::of(&[f64::NAN]).is_none());
    }

    proptest! {
        #[test]
        fn percentiles_are_monotone_bounded_and_order_free(mut xs in prop::collection::vec(-1e6f64..1e6, 1..200), a in 0.0f64..100.0, b in 0.0f64..100.0) {
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            let pl = percentile(&xs, lo).unwrap();
            let ph = percentile(&xs, hi).unwrap();
            prop_assert!(pl <= ph + 1e-9);
            let max = xs.iter().copied().fold(f64::MIN, f64::max);
            let min = xs.iter().copied().fold(f64::MAX, f64::min);
            prop_assert_eq!(percentile(&xs, 100.0).unwrap(), max);
            prop_assert_eq!(percentile(&xs, 0.0).unwrap(), min);
            xs.reverse();
            prop_assert_eq!(percentile(&xs, lo).unwrap(), pl);
        }
    }

    /// b twice (3 + 1), a once (2), c once (4): c 4, b 4 (tied, then by kind: b before c),
    /// a 2; each with its first example.
    #[test]
    fn a_tally_sums_by_kind_keeps_the_first_example_and_puts_the_most_first() {
        let t = tally([("b", 3, "b1"), ("a", 2, "a1"), ("c", 4, "c1"), ("b", 1, "b2")]);
        assert_eq!(t, [("b", 4, "b1"), ("c", 4, "c1"), ("a", 2, "a1")]);
    }
}
