//! The spread of a metric over repeats of one run (`goodput run --repeats N`): the same
//! workload (same seed, same levels) run N times, each repeat's value of a level's metric
//! computed from that repeat's own requests by the contract's definitions
//! ([`Key::value`]), then summarized across the repeats. The value reported is the **median**
//! over the repeats (robust to one disturbed repeat, as vLLM's `--num-runs` and hyperfine's
//! median are); the **spread** is the range, min to max, and the **relative spread** is that
//! range over the median's magnitude. With three repeats the range is what the data can
//! honestly show: a standard deviation of three values is mostly noise of its own.
//!
//! This is the run-to-run noise a single run's bootstrap cannot show (a disturbed machine,
//! a cache warmed differently); `goodput compare` takes the repeats as its noise
//! ([`crate::compare::compare_repeats`]).

use crate::compare::Key;
use goodput_core::ClientRecord;
use serde::{Deserialize, Serialize};

/// One metric's values over the repeats, summarized.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Spread {
    /// Repeats with a value (a repeat whose level has none, e.g. every request failed, is
    /// left out and counted out of `n`).
    #[schemars(range(min = 1))]
    pub n: usize,
    /// The median over the repeats (the mean of the two middle values for an even count).
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// (max − min) / |median|: 0 when every repeat agrees; infinite when the median is 0 and
    /// the repeats do not all agree.
    pub relative: f64,
}

impl Spread {
    /// The spread of `values` (NaN ignored); `None` when none is left.
    pub fn of(values: &[f64]) -> Option<Spread> {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
        v.sort_by(f64::total_cmp);
        let median = crate::stats::percentile_sorted(&v, 50.0)?;
        let (min, max) = (v[0], v[v.len() - 1]);
        let range = max - min;
        let relative = if range == 0.0 {
            0.0
        } else if median == 0.0 {
            f64::INFINITY
        } else {
            range / median.abs()
        };
        Some(Spread { n: v.len(), median, min, max, relative })
    }
}

/// One key's value in each repeat (`None` where the repeat's level has none) and their spread.
#[derive(Clone, Debug, PartialEq)]
pub struct KeySpread {
    pub key: Key,
    pub values: Vec<Option<f64>>,
    pub spread: Spread,
}

/// The spread of each key over one level's records in each repeat; a key no repeat has a
/// value for gives no entry.
pub fn over_repeats(repeats: &[Vec<&ClientRecord>], keys: &[Key]) -> Vec<KeySpread> {
    keys.iter()
        .filter_map(|&key| {
            let values: Vec<Option<f64>> = repeats.iter().map(|r| key.value(r).filter(|v| v.is_finite())).collect();
            let present: Vec<f64> = values.iter().flatten().copied().collect();
            Some(KeySpread { key, values, spread: Spread::of(&present)? })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use goodput_core::{ClientRecord, RecordBuilder, Stamp};

    #[test]
    fn spread_of_three_by_hand() {
        // Sorted 0.90, 1.00, 1.30: median 1.00, range 0.40, relative 0.40 / 1.00.
        let s = Spread::of(&[1.30, 0.90, 1.00]).unwrap();
        assert_eq!((s.n, s.median, s.min, s.max), (3, 1.00, 0.90, 1.30));
        assert!((s.relative - 0.40).abs() < 1e-12);
    }

    #[test]
    fn spread_of_an_even_count_takes_the_middle_mean() {
        // 2, 4, 6, 10: median (4 + 6) / 2 = 5, range 8, relative 8 / 5 = 1.6.
        let s = Spread::of(&[10.0, 2.0, 6.0, 4.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (5.0, 2.0, 10.0));
        assert!((s.relative - 1.6).abs() < 1e-12);
    }

    #[test]
    fn spread_edges() {
        assert_eq!(Spread::of(&[]), None);
        assert_eq!(Spread::of(&[f64::NAN]), None);
        let one = Spread::of(&[7.0, f64::NAN]).unwrap();
        assert_eq!((one.n, one.median, one.relative), (1, 7.0, 0.0));
        assert_eq!(Spread::of(&[0.0, 0.0]).unwrap().relative, 0.0);
        assert_eq!(Spread::of(&[0.0, 0.0, 1.0]).unwrap().relative, f64::INFINITY);
        // A negative median (a change, say) spreads by its magnitude: -2, -1, 0 → 2 / 1.
        assert_eq!(Spread::of(&[-2.0, -1.0, 0.0]).unwrap().relative, 2.0);
    }

    /// A completed request whose first of 5 tokens comes `ttft_ms` after it was sent.
    fn record(ttft_ms: u64) -> ClientRecord {
        let ms = |x: u64| Stamp(x * 1_000_000);
        RecordBuilder::new(ttft_ms)
            .input(10)
            .end(ms(ttft_ms + 50))
            .tokens_at((0..5).map(|i| ms(ttft_ms + 10 * i)))
            .build()
    }

    #[test]
    fn over_repeats_takes_each_repeats_own_value() {
        // Repeat 1: TTFTs 100, 300 → P50 200 ms; repeat 2: 200, 200 → 200; repeat 3: 400 → 400.
        let reps = [vec![record(100), record(300)], vec![record(200), record(200)], vec![record(400)]];
        let refs: Vec<Vec<&ClientRecord>> = reps.iter().map(|r| r.iter().collect()).collect();
        let out = over_repeats(&refs, &[Key::parse("ttft_p50").unwrap()]);
        assert_eq!(out.len(), 1);
        let got: Vec<f64> = out[0].values.iter().map(|v| (v.unwrap() * 1e3).round()).collect();
        assert_eq!(got, [200.0, 200.0, 400.0]);
        assert!((out[0].spread.median - 0.2).abs() < 1e-9);
        assert!((out[0].spread.relative - 1.0).abs() < 1e-9);
    }
}
