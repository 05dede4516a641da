//! 95 % confidence intervals of the statistics goodput reports, and what they say of an SLO.
//!
//! - **A percentile** gets the distribution-free order-statistic interval: with `n` samples
//!   sorted `x₍₁₎ ≤ … ≤ x₍ₙ₎`, the number of samples below the true `q`-quantile is
//!   Binomial(n, q), so `[x₍ₗ₎, x₍ᵤ₎]` covers it with probability at least 95 % when
//!   `P(B < l) ≤ 2.5 %` and `P(B ≥ u) ≤ 2.5 %`. Exact for any distribution, and honest about
//!   small samples: the upper end exists only from [`min_samples`] on (72 for P95, 368 for
//!   P99); below that the interval is open above (`hi = None`): the data cannot bound the
//!   percentile.
//! - **A mean** gets the normal interval `mean ± 1.96·s/√n` (from 2 samples).
//! - **A maximum and a rate** (error_rate, timeout_rate) are taken as counted: a level's
//!   errors are events of this run, not a sample of a latency distribution, and no interval
//!   of a share separates 0 % from 1 % below some 300 requests, so an interval would make
//!   every SLO on them uncertain.
//! - **A throughput** gets a bootstrap over time blocks of the window ([`block_bootstrap`]):
//!   the window cut into equal blocks, the blocks resampled with replacement. A bootstrap over
//!   requests cannot do this: it keeps the window and so gives a count per window a zero-width
//!   interval.

use crate::resample::Bootstrap;
use crate::slo::{Slo, Stat};
use serde::{Deserialize, Serialize};

/// Two-sided confidence of every interval here.
pub const CONFIDENCE: f64 = 0.95;

/// A 95 % confidence interval; an end that the data cannot bound is `None`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Interval {
    pub lo: Option<f64>,
    pub hi: Option<f64>,
}

impl Interval {
    /// An interval with both ends known.
    pub fn closed(lo: f64, hi: f64) -> Self {
        Interval { lo: Some(lo), hi: Some(hi) }
    }

    /// `12.1–14.8`, `12.1–?` (open above), with `digits` decimals of `scale × x`.
    pub fn text(&self, scale: f64, digits: usize) -> String {
        let end = |x: Option<f64>| x.map_or("?".to_string(), |v| format!("{:.digits$}", v * scale));
        format!("{}–{}", end(self.lo), end(self.hi))
    }

    /// Half the width relative to `value` (0.05 = ±5 %); `None` when open or `value` is 0.
    pub fn relative_half_width(&self, value: f64) -> Option<f64> {
        let (lo, hi) = (self.lo?, self.hi?);
        (value != 0.0).then(|| (hi - lo) / 2.0 / value.abs())
    }
}

/// `ln C(n, k)`, through `ln Γ` of integers summed (exact enough for the ranks here).
fn ln_choose(n: usize, k: usize, ln_fact: &[f64]) -> f64 {
    ln_fact[n] - ln_fact[k] - ln_fact[n - k]
}

/// `P(B ≤ k)` for every `k` in `0..=n`, `B ~ Binomial(n, q)`; exact (log space) up to
/// [`EXACT_UP_TO`] samples.
fn binomial_cdf(n: usize, q: f64) -> Vec<f64> {
    let mut ln_fact = vec![0.0f64; n + 1];
    for i in 1..=n {
        ln_fact[i] = ln_fact[i - 1] + (i as f64).ln();
    }
    let (lq, lp) = (q.ln(), (1.0 - q).ln());
    let mut acc = 0.0;
    (0..=n)
        .map(|k| {
            acc += (ln_choose(n, k, &ln_fact) + k as f64 * lq + (n - k) as f64 * lp).exp();
            acc.min(1.0)
        })
        .collect()
}

/// Above this many samples the binomial is taken as normal (its ranks differ by under one).
pub const EXACT_UP_TO: usize = 20_000;

/// The 1-based ranks `(l, u)` of the order-statistic interval of the `q`-quantile of `n`
/// samples; `None` for an end the samples cannot give (`l` below 1, `u` above `n`).
pub fn quantile_ranks(n: usize, q: f64) -> (Option<usize>, Option<usize>) {
    if n == 0 || !(0.0..=1.0).contains(&q) {
        return (None, None);
    }
    let tail = (1.0 - CONFIDENCE) / 2.0;
    if n > EXACT_UP_TO {
        let (m, sd) = (n as f64 * q, (n as f64 * q * (1.0 - q)).sqrt());
        let l = (m - 1.959_964 * sd).floor() as i64;
        let u = (m + 1.959_964 * sd).ceil() as i64 + 1;
        let l = (l >= 1).then_some(l as usize);
        let u = (u <= n as i64).then_some(u as usize);
        return (l, u);
    }
    let cdf = binomial_cdf(n, q);
    // Lower: the largest l with P(B ≤ l − 1) ≤ tail.
    let l = (1..=n).rev().find(|&l| cdf[l - 1] <= tail);
    // Upper: the smallest u with P(B ≤ u − 1) ≥ 1 − tail.
    let u = (1..=n).find(|&u| cdf[u - 1] >= 1.0 - tail);
    (l, u)
}

/// The fewest samples whose `q`-quantile interval is closed above: `q^n ≤ 2.5 %`.
pub fn min_samples(q: f64) -> usize {
    if q <= 0.0 {
        return 1;
    }
    if q >= 1.0 {
        return usize::MAX;
    }
    (((1.0 - CONFIDENCE) / 2.0).ln() / q.ln()).ceil().max(1.0) as usize
}

/// The 95 % interval of the `p`-th percentile (0–100) of `samples` (NaN ignored).
pub fn percentile_interval(samples: &[f64], p: f64) -> Option<Interval> {
    let mut v: Vec<f64> = samples.iter().copied().filter(|x| !x.is_nan()).collect();
    v.sort_by(f64::total_cmp);
    percentile_interval_sorted(&v, p)
}

/// [`percentile_interval`] of samples sorted ascending.
pub fn percentile_interval_sorted(sorted: &[f64], p: f64) -> Option<Interval> {
    if sorted.is_empty() {
        return None;
    }
    let (l, u) = quantile_ranks(sorted.len(), p / 100.0);
    Some(Interval { lo: l.map(|r| sorted[r - 1]), hi: u.map(|r| sorted[r - 1]) })
}

/// The 95 % interval of the mean of `samples` (NaN ignored): `mean ± 1.96·s/√n`.
pub fn mean_interval(samples: &[f64]) -> Option<Interval> {
    let s = crate::Summary::of(samples)?;
    if s.n < 2 {
        return Some(Interval { lo: None, hi: None });
    }
    let half = 1.959_964 * s.stddev / (s.n as f64).sqrt();
    Some(Interval::closed(s.mean - half, s.mean + half))
}

/// The interval of `stat` over `samples`: percentiles and means have one; a maximum and a
/// rate are as counted (`None`), and so are P0 and P100 (the minimum and the maximum).
pub fn stat_interval(samples: &[f64], stat: Stat) -> Option<Interval> {
    match stat {
        Stat::P(p) if p > 0.0 && p < 100.0 => percentile_interval(samples, p),
        Stat::P(_) => None,
        Stat::Mean => mean_interval(samples),
        Stat::Max | Stat::Rate => None,
    }
}

/// What a level's measurement says of one SLO, its interval taken into account.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Confidence {
    /// The whole interval meets the bound (or the statistic has none and meets it).
    Holds,
    /// The value meets the bound, but its interval reaches past it: it may not hold.
    HoldsNotSignificant,
    /// The value misses the bound, but its interval reaches back within it.
    BreaksNotSignificant,
    /// The whole interval misses the bound.
    Breaks,
    /// Nothing was measured.
    NoData,
}

impl Confidence {
    /// Judges `value` with its `interval` against `slo`.
    pub fn of(slo: &Slo, value: Option<f64>, interval: Option<Interval>) -> Confidence {
        let Some(v) = value.filter(|v| !v.is_nan()) else { return Confidence::NoData };
        let holds = slo.holds(v);
        let Some(i) = interval else {
            return if holds { Confidence::Holds } else { Confidence::Breaks };
        };
        // The end on the bound's side: the worse end of the interval (open: unbounded).
        let (worse, better) = if slo.metric.higher_is_better() { (i.lo, i.hi) } else { (i.hi, i.lo) };
        match holds {
            true if worse.is_some_and(|w| slo.holds(w)) => Confidence::Holds,
            true => Confidence::HoldsNotSignificant,
            false if better.is_some_and(|b| !slo.holds(b)) => Confidence::Breaks,
            false => Confidence::BreaksNotSignificant,
        }
    }

    /// The SLO holds with 95 % confidence.
    pub fn surely_holds(self) -> bool {
        self == Confidence::Holds
    }

    /// `holds`, `holds (not significant)`, …: what the tables print.
    pub fn word(self) -> &'static str {
        match self {
            Confidence::Holds => "holds",
            Confidence::HoldsNotSignificant => "holds, not significant",
            Confidence::BreaksNotSignificant => "breaks, not significant",
            Confidence::Breaks => "breaks",
            Confidence::NoData => "no data",
        }
    }
}

/// A 95 % interval of a count per second over a window, by a circular moving-block bootstrap
/// over time (Künsch): `events` are `(seconds since the window's start, weight)` (a
/// request's end with weight 1, a token's arrival with its count), the window `[0,
/// window_s)` is cut into [`BINS`] equal bins, and each of `rounds` resamples strings together
/// blocks of `block` consecutive bins (wrapping at the end) from uniformly drawn starts (seeded)
/// until it spans the window; the rate's 2.5th and 97.5th percentiles over the resamples are
/// the interval. Blocks as long as the counts stay correlated (a request's E2E in a closed
/// loop) keep that correlation, which resampling single requests or bins would hide. `None`
/// without a window, or when a block is more than an eighth of it (too few blocks to tell).
pub fn block_bootstrap(
    events: impl IntoIterator<Item = (f64, f64)>,
    window_s: f64,
    block: usize,
    rounds: usize,
    seed: u64,
) -> Option<Interval> {
    if block == 0 || block * 8 > BINS || !(window_s.is_finite() && window_s > 0.0) || rounds == 0 {
        return None;
    }
    let width = window_s / BINS as f64;
    let mut bins = vec![0.0f64; BINS];
    for (t, w) in events {
        if t.is_finite() && t >= 0.0 {
            bins[((t / width) as usize).min(BINS - 1)] += w;
        }
    }
    let blocks = BINS.div_ceil(block);
    let mut draws = Bootstrap::new(BINS, seed);
    let mut rates: Vec<f64> = (0..rounds)
        .map(|_| {
            let starts = &draws.next_sample()[..blocks];
            let total: f64 = (0..BINS).map(|k| bins[(starts[k / block] + k % block) % BINS]).sum();
            total / window_s
        })
        .collect();
    rates.sort_by(f64::total_cmp);
    Some(Interval::closed(
        crate::stats::percentile_sorted(&rates, 2.5)?,
        crate::stats::percentile_sorted(&rates, 97.5)?,
    ))
}

/// The bins a window is cut into for [`block_bootstrap`].
pub const BINS: usize = 200;

/// The block length, in bins, of a window of `window_s` whose counts stay correlated over
/// `correlation_s` (a request's median E2E): at least one bin, at most an eighth of the window.
/// A closed loop measuring 2 requests per user has a window of some 3 E2Es; its blocks are
/// then shorter than the correlation, and the interval holds the variation within the window,
/// not all of it (run-to-run drift is `compare`'s noise floor or the repeats' spread).
pub fn block_for(window_s: f64, correlation_s: f64) -> usize {
    let bins = correlation_s / (window_s / BINS as f64);
    if bins.is_finite() {
        (bins.ceil() as usize).clamp(1, BINS / 8)
    } else {
        1
    }
}

/// Bootstrap rounds of a throughput's interval.
pub const ROUNDS: usize = 1000;

/// An SLO checked at one level.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SloResult {
    pub slo: Slo,
    pub value: Option<f64>,
    /// The value meets the bound (the point estimate).
    pub holds: bool,
    /// The value's 95 % interval ([`crate::interval`]); absent for a maximum or a rate (taken
    /// as counted) and in results written before intervals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<Interval>,
    /// What the value and its interval say of the bound; absent in results written before
    /// intervals (read as [`SloResult::confidence`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<Confidence>,
}

impl SloResult {
    /// Checks `slo` against `samples` (the per-request values of its metric) and `value`.
    pub fn judge(slo: Slo, value: Option<f64>, samples: &[f64]) -> SloResult {
        let interval = value.and_then(|_| stat_interval(samples, slo.stat));
        let confidence = Confidence::of(&slo, value, interval);
        SloResult { slo, value, holds: value.is_some_and(|v| slo.holds(v)), interval, confidence: Some(confidence) }
    }

    /// How much of its bound the value uses: value ÷ bound, or bound ÷ value where higher is
    /// better (1 at the bound, above 1 past it); `None` without a value or with a zero bound.
    pub fn used(&self) -> Option<f64> {
        let v = self.value?;
        let b = self.slo.bound;
        let used = if self.slo.metric.higher_is_better() { b / v } else { v / b };
        used.is_finite().then_some(used)
    }

    /// The stored confidence, or for older results the point verdict as counted.
    pub fn confidence(&self) -> Confidence {
        self.confidence.unwrap_or(match (self.value, self.holds) {
            (None, _) => Confidence::NoData,
            (Some(_), true) => Confidence::Holds,
            (Some(_), false) => Confidence::Breaks,
        })
    }
}

/// The fewest measured requests a level needs for the percentiles it reports and judges: a
/// 95 % interval closed above ([`min_samples`]) for every per-request percentile among `slos`
/// (ITL's samples are its gaps, many per request; P0 and P100 are the minimum and the maximum,
/// judged as counted) and for the P95 every table shows; at most `at_most`.
pub fn min_requests(slos: &[Slo], at_most: usize) -> usize {
    use crate::slo::Metric;
    slos.iter()
        .filter(|s| s.metric != Metric::Itl)
        .filter_map(|s| match s.stat {
            Stat::P(p) if p > 0.0 && p < 100.0 => Some(min_samples(p / 100.0).min(at_most)),
            _ => None,
        })
        .fold(min_samples(0.95), usize::max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slo::parse_slos;

    #[test]
    fn ranks_are_the_binomial_s_by_hand() {
        // n = 10, median: P(B ≤ 1) = 11/1024 = 1.07 %, P(B ≤ 2) = 56/1024 = 5.5 %: l = 2;
        // P(B ≤ 7) = 968/1024 = 94.5 %, P(B ≤ 8) = 1013/1024 = 98.9 %: u = 9.
        assert_eq!(quantile_ranks(10, 0.5), (Some(2), Some(9)));
        // 0.95^71 = 2.62 % > 2.5 %, 0.95^72 = 2.49 %: P95 is closed above from 72 samples.
        assert_eq!(min_samples(0.95), 72);
        assert_eq!(min_samples(0.99), 368);
        assert_eq!(min_samples(0.5), 6);
        assert_eq!(quantile_ranks(71, 0.95).1, None);
        assert_eq!(quantile_ranks(72, 0.95).1, Some(72));
        // The normal ranks agree with the exact ones where both apply (±1).
        let exact = quantile_ranks(EXACT_UP_TO, 0.95);
        let m = EXACT_UP_TO as f64 * 0.95;
        let sd = (EXACT_UP_TO as f64 * 0.95 * 0.05).sqrt();
        let (l, u) = ((m - 1.96 * sd).floor() as usize, (m + 1.96 * sd).ceil() as usize + 1);
        assert!(exact.0.unwrap().abs_diff(l) <= 1 && exact.1.unwrap().abs_diff(u) <= 1, "{exact:?} vs {l}, {u}");
    }

    #[test]
    fn a_percentile_interval_holds_its_value_and_is_open_on_few_samples() {
        let xs: Vec<f64> = (1..=100).map(f64::from).collect();
        let i = percentile_interval(&xs, 95.0).unwrap();
        let p95 = crate::percentile(&xs, 95.0).unwrap();
        assert!(i.lo.unwrap() <= p95 && p95 <= i.hi.unwrap(), "{i:?} {p95}");
        // 8 requests: the P95 has no upper bound.
        let few = percentile_interval(&xs[..8], 95.0).unwrap();
        assert_eq!(few.hi, None);
        assert_eq!(few.text(1.0, 0), format!("{:.0}–?", few.lo.unwrap()));
    }

    /// Coverage: over 400 samples of 100 draws, the interval of the median of U(0, 1) holds
    /// 0.5 at least about 95 % of the time.
    #[test]
    fn the_interval_covers_the_true_percentile() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        let covered = (0..400)
            .filter(|_| {
                let xs: Vec<f64> = (0..100).map(|_| rng.random::<f64>()).collect();
                let i = percentile_interval(&xs, 90.0).unwrap();
                i.lo.unwrap() <= 0.9 && 0.9 <= i.hi.unwrap()
            })
            .count();
        assert!(covered >= 370, "{covered} of 400");
    }

    #[test]
    fn confidence_reads_the_interval_against_the_bound() {
        let slo = parse_slos("tpot_p95=50ms").unwrap()[0];
        let at = |v: f64, lo: f64, hi: Option<f64>| Confidence::of(&slo, Some(v), Some(Interval { lo: Some(lo), hi }));
        assert_eq!(at(0.040, 0.038, Some(0.045)), Confidence::Holds);
        assert_eq!(at(0.0498, 0.047, Some(0.0505)), Confidence::HoldsNotSignificant);
        assert_eq!(at(0.040, 0.038, None), Confidence::HoldsNotSignificant, "open above: unproven");
        assert_eq!(at(0.052, 0.049, Some(0.055)), Confidence::BreaksNotSignificant);
        assert_eq!(at(0.060, 0.055, Some(0.07)), Confidence::Breaks);
        assert_eq!(Confidence::of(&slo, None, None), Confidence::NoData);
        assert_eq!(Confidence::of(&slo, Some(0.01), None), Confidence::Holds, "as counted");
        // P100 is the maximum: as counted, not an interval no sample count can close.
        assert_eq!(stat_interval(&[1.0, 2.0, 3.0], Stat::P(100.0)), None);
        assert!(stat_interval(&[1.0, 2.0, 3.0], Stat::P(50.0)).is_some());
        // Higher is better: the interval's low end is the one against the bound.
        let tps = parse_slos("per_user_tps_p50=10").unwrap()[0];
        let i = Interval::closed(9.0, 14.0);
        assert_eq!(Confidence::of(&tps, Some(12.0), Some(i)), Confidence::HoldsNotSignificant);
        assert_eq!(Confidence::of(&tps, Some(12.0), Some(Interval::closed(11.0, 14.0))), Confidence::Holds);
    }

    #[test]
    fn the_mean_interval_by_hand() {
        // 1..=5: mean 3, s = √2.5 = 1.5811; half-width 1.96·1.5811/√5 = 1.3859.
        let i = mean_interval(&[1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
        assert!((i.lo.unwrap() - 1.6141).abs() < 1e-3 && (i.hi.unwrap() - 4.3859).abs() < 1e-3, "{i:?}");
        assert_eq!(mean_interval(&[1.0]).unwrap(), Interval { lo: None, hi: None });
    }

    #[test]
    fn a_steady_rate_has_a_narrow_block_interval_and_a_bursty_one_a_wide_one() {
        // 10 s at 20 events per second, one at the middle of every 50 ms bin: every block
        // holds the same, the interval is the rate itself.
        let even = (0..200).map(|i| (i as f64 * 0.05 + 0.025, 1.0));
        let i = block_bootstrap(even, 10.0, 10, 500, 1).unwrap();
        assert!((i.lo.unwrap() - 20.0).abs() < 1e-9 && (i.hi.unwrap() - 20.0).abs() < 1e-9, "{i:?}");
        // The same 200 events, all in the first half: the rate is still 20/s, the interval wide.
        let bursty = (0..200).map(|i| (i as f64 * 0.025, 1.0));
        let i = block_bootstrap(bursty, 10.0, 10, 500, 1).unwrap();
        assert!(i.lo.unwrap() < 16.0 && i.hi.unwrap() > 24.0, "{i:?}");
        assert!(block_bootstrap([(0.0, 1.0)], 1.0, 26, 100, 1).is_none(), "too few blocks");
        // 10 s cut into 200 bins of 50 ms: a 0.5 s E2E spans 10 of them.
        assert_eq!(block_for(10.0, 0.5), 10);
        assert_eq!(block_for(10.0, 0.0), 1);
        assert_eq!(block_for(10.0, 4.0), BINS / 8, "at most an eighth of the window");
    }

    #[test]
    fn a_level_measures_what_its_percentiles_need() {
        assert_eq!(min_requests(&parse_slos("error_rate=1%").unwrap(), 1_000_000), 72, "the tables' P95");
        assert_eq!(
            min_requests(&parse_slos("ttft_p99=1s,itl_p99.9=1s").unwrap(), 1_000_000),
            368,
            "ITL's gaps do not count"
        );
        assert_eq!(
            min_requests(&parse_slos("ttft_p100=1s").unwrap(), 1_000_000),
            72,
            "a P100 is the maximum, as counted"
        );
        assert_eq!(min_requests(&parse_slos("ttft_p99.99=1s").unwrap(), 1000), 1000, "at most as asked");
    }
}
