//! Step times with the spread of the measured ones. A fitted model gives each step its
//! expected time; the engine's steps scatter around it (the fit's residuals: ±8 % at the
//! median on this machine, ±20 % at P90), and that scatter is what queues turn into TTFT
//! tails. [`Sampled`] multiplies each step's expected time by a ratio drawn from the
//! profile's own measured ÷ predicted distribution (its 101 percentiles, interpolated), with a
//! seeded counter-based generator: the same calls in the same order draw the same ratios.

use crate::cost::{StepCost, StepWork};
use std::sync::atomic::{AtomicU64, Ordering};

/// A step cost whose every step is `base`'s time × a ratio drawn from `ratios`.
#[derive(Debug)]
pub struct Sampled<C> {
    base: C,
    /// measured ÷ predicted at the 0th, 1st, …, 100th percentile, ascending.
    ratios: Vec<f64>,
    seed: u64,
    draws: AtomicU64,
}

/// The 101 percentiles a [`Sampled`] draws from.
pub const RATIO_PERCENTILES: usize = 101;

impl<C: StepCost> Sampled<C> {
    /// `None` unless `ratios` holds 101 finite, positive, ascending percentiles.
    pub fn new(base: C, ratios: Vec<f64>, seed: u64) -> Option<Self> {
        let ok = ratios.len() == RATIO_PERCENTILES
            && ratios.iter().all(|r| r.is_finite() && *r > 0.0)
            && ratios.windows(2).all(|w| w[0] <= w[1]);
        ok.then_some(Self { base, ratios, seed, draws: AtomicU64::new(0) })
    }

    /// The ratio at the quantile `u` in [0, 1): the percentiles' inverse CDF, linear between.
    pub fn ratio_at(&self, u: f64) -> f64 {
        let x = u.clamp(0.0, 1.0) * (RATIO_PERCENTILES - 1) as f64;
        let lo = (x.floor() as usize).min(RATIO_PERCENTILES - 2);
        let t = x - lo as f64;
        self.ratios[lo] + t * (self.ratios[lo + 1] - self.ratios[lo])
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
    /// The next ratio of the sequence.
    fn draw(&self) -> f64 {
        let i = self.draws.fetch_add(1, Ordering::Relaxed);
        let u = (splitmix(self.seed ^ i.wrapping_mul(0xD6E8_FEB8_6659_FD93)) >> 11) as f64 / (1u64 << 53) as f64;
        self.ratio_at(u)
    }
}

impl<C: StepCost> StepCost for Sampled<C> {
    fn step_seconds(&self, w: &StepWork) -> f64 {
        self.base.step_seconds(w) * self.draw()
    }
    fn gap_seconds(&self) -> f64 {
        self.base.gap_seconds()
    }
    /// One draw per step handed on, as many as `step_seconds` one by one would take.
    fn decode_run_seconds(&self, first: &StepWork, steps: usize, each: &mut dyn FnMut(f64) -> bool) {
        self.base.decode_run_seconds(first, steps, &mut |s| each(s * self.draw()));
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
        assert!((s.ratio_at(0.0) - 0.5).abs() < 1e-12 && (s.ratio_at(0.255) - 0.755).abs() < 1e-12);
        assert!((s.ratio_at(1.0) - 1.5).abs() < 1e-12);
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
}
