//! How far a prediction (the simulated twin of a run) is from the measurement, and whether
//! that distance is more than the measurement's own noise.
//!
//! - `prediction_error` = predicted ÷ measured − 1 (> 0: the twin predicts too much).
//! - `mape` (mean absolute percentage error) = the mean of |error| over a set of errors (a
//!   family's levels), as a fraction.
//! - A level's error is **beyond the noise** when the prediction lies outside what the
//!   measurement itself could have come out as: with repeats, |error| > the repeats'
//!   relative spread ((max − min) ÷ median, [`crate::spread::Spread`]); for a single run,
//!   the predicted value outside the measured value's 95 % interval. Within the noise, no
//!   run of the same workload could tell the twin wrong.

use crate::interval::Interval;

/// predicted ÷ measured − 1; `None` when either is missing or not finite, or the
/// measurement is 0.
pub fn prediction_error(measured: Option<f64>, predicted: Option<f64>) -> Option<f64> {
    let (m, p) = (measured?, predicted?);
    (m != 0.0 && m.is_finite() && p.is_finite()).then(|| p / m - 1.0)
}

/// The mean of |e| over `errors` (NaN left out); `None` when none is left.
pub fn mape(errors: &[f64]) -> Option<f64> {
    let v: Vec<f64> = errors.iter().filter(|e| !e.is_nan()).map(|e| e.abs()).collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// Whether `predicted` lies outside the measurement's 95 % `interval` (an open end bounds
/// nothing); `None` without an interval.
pub fn outside_interval(predicted: f64, interval: Option<&Interval>) -> Option<bool> {
    let i = interval?;
    if i.lo.is_none() && i.hi.is_none() {
        return None;
    }
    Some(i.lo.is_some_and(|lo| predicted < lo) || i.hi.is_some_and(|hi| predicted > hi))
}

/// Whether a level's `error` (over repeats, their median) is larger than the repeats'
/// `relative_spread` of the measurement.
pub fn beyond_spread(error: f64, relative_spread: f64) -> bool {
    error.abs() > relative_spread
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_and_their_mean_by_hand() {
        // 110 predicted for 100 measured: +10 %; 45 for 50: −10 %; 130 for 100: +30 %.
        let e: Vec<f64> = [(100.0, 110.0), (50.0, 45.0), (100.0, 130.0)]
            .iter()
            .map(|&(m, p)| prediction_error(Some(m), Some(p)).unwrap())
            .collect();
        assert!((e[0] - 0.10).abs() < 1e-12 && (e[1] + 0.10).abs() < 1e-12 && (e[2] - 0.30).abs() < 1e-12);
        // (0.10 + 0.10 + 0.30) / 3
        assert!((mape(&e).unwrap() - 0.5 / 3.0).abs() < 1e-12);
        assert_eq!(mape(&[]), None);
        assert_eq!(mape(&[f64::NAN]), None);
        assert_eq!(prediction_error(Some(0.0), Some(1.0)), None);
        assert_eq!(prediction_error(None, Some(1.0)), None);
        assert_eq!(prediction_error(Some(1.0), Some(f64::INFINITY)), None);
    }

    #[test]
    fn the_noise_is_the_interval_or_the_repeats_spread() {
        let i = Interval::closed(90.0, 120.0);
        assert_eq!(outside_interval(100.0, Some(&i)), Some(false));
        assert_eq!(outside_interval(121.0, Some(&i)), Some(true));
        assert_eq!(outside_interval(89.0, Some(&i)), Some(true));
        let open = Interval { lo: Some(90.0), hi: None };
        assert_eq!(outside_interval(1e9, Some(&open)), Some(false), "an open end bounds nothing");
        assert_eq!(outside_interval(1.0, None), None);
        assert_eq!(outside_interval(1.0, Some(&Interval { lo: None, hi: None })), None);
        // Repeats 0.9, 1.0, 1.3: relative spread 0.4; an error of −35 % is within it, +45 % not.
        assert!(!beyond_spread(-0.35, 0.4) && beyond_spread(0.45, 0.4));
    }
}
