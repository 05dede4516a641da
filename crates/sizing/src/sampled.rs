//! Step times with the spread of the measured ones. A fitted model gives each step its
//! expected time; the engine's steps scatter around it (the fit's residuals: ±8 % at the
//! median on this machine, ±20 % at P90), and that scatter is what queues turn into TTFT
//! tails. [`Sampled`] multiplies each step's expected time by a ratio drawn from the
//! profile's own measured ÷ predicted distribution (its 101 percentiles, interpolated), with a
//! seeded counter-based generator: the same calls in the same order draw the same ratios.
//!
//! The scatter depends on the step's length: a step of a millisecond loses a fifth of its
//! time to one interruption that a prefill of 200 ms hardly notices. So a profile keeps one
//! distribution per band of predicted step length (`fit::RatioBand`), and each step
//! draws from its own band's: a long prefill is not given a short decode's worst ratio.

use crate::cost::{StepCost, StepWork};
use std::sync::atomic::{AtomicU64, Ordering};

/// A step cost whose every step is `base`'s time × a ratio drawn from its band's ratios.
#[derive(Debug)]
pub struct Sampled<C> {
    base: C,
    /// From which expected step time (seconds, ascending from 0) each band's ratios apply:
    /// measured ÷ predicted at the 0th, 1st, …, 100th percentile, ascending.
    bands: Vec<(f64, Vec<f64>)>,
    seed: u64,
    draws: AtomicU64,
}

/// The 101 percentiles a [`Sampled`] draws from.
pub const RATIO_PERCENTILES: usize = 101;

impl<C: StepCost> Sampled<C> {
    /// One distribution for every step; `None` unless `ratios` holds 101 finite, positive,
    /// ascending percentiles.
    pub fn new(base: C, ratios: Vec<f64>, seed: u64) -> Option<Self> {
        Self::banded(base, vec![(0.0, ratios)], seed)
    }

    /// One distribution per band of expected step time: `(from seconds, ratios)`, the first
    /// band from 0 and each from a longer time than the one before. `None` unless that holds
    /// and every band's ratios are 101 finite, positive, ascending percentiles.
    pub fn banded(base: C, bands: Vec<(f64, Vec<f64>)>, seed: u64) -> Option<Self> {
        let percentiles = |r: &Vec<f64>| {
            r.len() == RATIO_PERCENTILES
                && r.iter().all(|r| r.is_finite() && *r > 0.0)
                && r.windows(2).all(|w| w[0] <= w[1])
        };
        let ok = bands.first().is_some_and(|b| b.0 == 0.0)
            && bands.windows(2).all(|w| w[0].0 < w[1].0)
            && bands.iter().all(|(_, r)| percentiles(r));
        ok.then_some(Self { base, bands, seed, draws: AtomicU64::new(0) })
    }

    /// The ratio at the quantile `u` in [0, 1) for a step expected to take `expected_s`: its
    /// band's percentiles' inverse CDF, linear between.
    pub fn ratio_at(&self, u: f64, expected_s: f64) -> f64 {
        let band = self.bands.iter().rposition(|(from, _)| expected_s >= *from).unwrap_or(0);
        let ratios = &self.bands[band].1;
        let x = u.clamp(0.0, 1.0) * (RATIO_PERCENTILES - 1) as f64;
        let lo = (x.floor() as usize).min(RATIO_PERCENTILES - 2);
        let t = x - lo as f64;
        ratios[lo] + t * (ratios[lo + 1] - ratios[lo])
    }
}

/// SplitMix64: one well-mixed 64-bit value per counter value.
pub fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl<C: StepCost> Sampled<C> {
    /// The next ratio of the sequence, for a step expected to take `expected_s`.
    fn draw(&self, expected_s: f64) -> f64 {
        let i = self.draws.fetch_add(1, Ordering::Relaxed);
        let u = (splitmix(self.seed ^ i.wrapping_mul(0xD6E8_FEB8_6659_FD93)) >> 11) as f64 / (1u64 << 53) as f64;
        self.ratio_at(u, expected_s)
    }
}

impl<C: StepCost> StepCost for Sampled<C> {
    fn step_seconds(&self, w: &StepWork) -> f64 {
        let s = self.base.step_seconds(w);
        s * self.draw(s)
    }
    fn gap_seconds(&self) -> f64 {
        self.base.gap_seconds()
    }
    /// One draw per step handed on, as many as `step_seconds` one by one would take.
    fn decode_run_seconds(&self, first: &StepWork, steps: usize, each: &mut dyn FnMut(f64) -> bool) {
        self.base.decode_run_seconds(first, steps, &mut |s| each(s * self.draw(s)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::LinearCost;

    fn base() -> LinearCost {
        LinearCost::classic([1e-3, 0.0, 0.0, 1e-4, 0.0, 0.0], 0.0)
    }

    fn work() -> StepWork {
        StepWork { decode_seqs: 10.0, sampled: 10.0, ..StepWork::default() }
    }

    #[test]
    fn draws_follow_the_percentiles_and_repeat_with_the_seed() {
        // Ratios 0.5 … 1.5 evenly: uniform draws, mean 1.
        let ratios: Vec<f64> = (0..101).map(|i| 0.5 + i as f64 / 100.0).collect();
        let s = Sampled::new(base(), ratios.clone(), 7).unwrap();
        assert!((s.ratio_at(0.0, 1.0) - 0.5).abs() < 1e-12 && (s.ratio_at(0.255, 1.0) - 0.755).abs() < 1e-12);
        assert!((s.ratio_at(1.0, 1.0) - 1.5).abs() < 1e-12);
        let expected = base().step_seconds(&work());
        let xs: Vec<f64> = (0..20_000).map(|_| s.step_seconds(&work()) / expected).collect();
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        assert!((mean - 1.0).abs() < 0.01, "{mean}");
        let below = xs.iter().filter(|&&x| x < 0.75).count() as f64 / xs.len() as f64;
        assert!((below - 0.25).abs() < 0.02, "{below}");
        // The same seed draws the same steps; another seed others.
        let draw = |seed| {
            let s = Sampled::new(base(), ratios.clone(), seed).unwrap();
            (0..5).map(|_| s.step_seconds(&work())).collect::<Vec<_>>()
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
    }

    #[test]
    fn percentiles_that_are_not_a_distribution_are_refused() {
        assert!(Sampled::new(base(), vec![1.0; 100], 0).is_none());
        let mut down: Vec<f64> = vec![1.0; 101];
        down[50] = 0.9;
        assert!(Sampled::new(base(), down, 0).is_none());
        assert!(Sampled::new(base(), vec![0.0; 101], 0).is_none());
        let s = Sampled::new(base(), vec![1.0; 101], 0).unwrap();
        assert_eq!(s.step_seconds(&work()), base().step_seconds(&work()));
    }

    #[test]
    fn a_decode_run_draws_as_its_steps_one_by_one() {
        let ratios: Vec<f64> = (0..101).map(|i| 0.5 + i as f64 / 100.0).collect();
        let (by_run, by_step) =
            (Sampled::new(base(), ratios.clone(), 3).unwrap(), Sampled::new(base(), ratios, 3).unwrap());
        let first = StepWork { decode_context: 500.0, ..work() };
        let mut run = Vec::new();
        by_run.decode_run_seconds(&first, 9, &mut |s| {
            run.push(s);
            run.len() < 6
        });
        // Six steps drawn, no more: the next draw is the seventh of both.
        let steps: Vec<f64> = (0..6)
            .map(|j| by_step.step_seconds(&StepWork { decode_context: 500.0 + j as f64 * 10.0, ..first }))
            .collect();
        assert_eq!(run, steps);
        assert_eq!(by_run.step_seconds(&work()), by_step.step_seconds(&work()));
    }

    #[test]
    fn each_step_draws_from_its_own_band() {
        // Steps expected under 10 ms scatter 0.5–1.5; longer ones do not scatter at all.
        let wide: Vec<f64> = (0..101).map(|i| 0.5 + i as f64 / 100.0).collect();
        let s = Sampled::banded(base(), vec![(0.0, wide.clone()), (0.01, vec![1.0; 101])], 5).unwrap();
        assert!((s.ratio_at(0.9, 0.009) - 1.4).abs() < 1e-12);
        assert_eq!(s.ratio_at(0.9, 0.01), 1.0);
        assert_eq!(s.ratio_at(0.0, 7.0), 1.0);
        // base(): 1 ms + 0.1 ms a decode row. 10 rows: 2 ms, drawn; 100 rows: 11 ms, exact.
        let long = StepWork { decode_seqs: 100.0, sampled: 100.0, ..StepWork::default() };
        let short: Vec<f64> = (0..50).map(|_| s.step_seconds(&work()) / 0.002).collect();
        assert!(short.iter().any(|r| (r - 1.0).abs() > 0.1), "{short:?}");
        assert!((0..50).all(|_| (s.step_seconds(&long) - 0.011).abs() < 1e-12));
        // Bands out of order, not from 0, or with a broken distribution are refused.
        assert!(Sampled::banded(base(), vec![(0.0, wide.clone()), (0.0, wide.clone())], 0).is_none());
        assert!(Sampled::banded(base(), vec![(0.001, wide.clone())], 0).is_none());
        assert!(Sampled::banded(base(), vec![(0.0, wide), (0.01, vec![1.0; 3])], 0).is_none());
        assert!(Sampled::banded(base(), Vec::new(), 0).is_none());
    }
}
