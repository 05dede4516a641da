//! Fitting the step-cost model to measured steps: non-negative least squares on relative
//! errors (Lawson and Hanson's active-set method over nalgebra's SVD least squares), a
//! bootstrap interval per coefficient, R² and residual percentiles.
//!
//! Relative errors, not absolute ones: a fit on seconds would be decided by the few long
//! prefill steps and leave decode steps (what TPOT is made of) tens of percent off. Each row
//! is divided by its measured time, so every step counts by its relative error.

use crate::cost::StepCost;
use crate::cost::{LinearCost, StepWork, Term};
use goodput_metrics::resample::Bootstrap;
use goodput_metrics::stats::{percentile, percentile_sorted};
use nalgebra::{DMatrix, DVector};
use serde::{Deserialize, Serialize};

/// One measured step: what it did and how long it took (start to end, seconds).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    pub work: StepWork,
    pub seconds: f64,
}

/// How to fit.
#[derive(Clone, Debug)]
pub struct FitOptions {
    /// Bootstrap resamples for the intervals (0: no intervals).
    pub bootstrap: usize,
    /// Seed of the resampling (the same seed, the same intervals).
    pub seed: u64,
}

impl Default for FitOptions {
    fn default() -> Self {
        Self { bootstrap: 200, seed: 0x5eed }
    }
}

/// One coefficient of a fit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TermFit {
    pub term: Term,
    /// Seconds per unit of the term.
    pub coefficient: f64,
    /// The 2.5th and 97.5th percentiles of the bootstrap coefficients (95 % interval).
    pub lo: f64,
    pub hi: f64,
    /// Whether the steps varied this term at all; a term they never exercised is left out of
    /// the fit (coefficient 0) rather than guessed.
    pub measured: bool,
}

/// Relative residuals `(predicted − measured) / measured` of the fitted steps.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Residuals {
    /// Percentiles of the absolute relative residual.
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    /// Median signed relative residual (> 0: the model predicts too long).
    pub bias: f64,
    /// Measured ÷ predicted step time at the 0th, 1st, …, 100th percentile: what the
    /// simulator draws each step's spread from ([`crate::sampled::Sampled`]). Empty in
    /// profiles written before it was kept (their steps take the fitted time).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ratios: Vec<f64>,
}

/// A fitted step-cost model with its uncertainty.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fit {
    pub terms: Vec<TermFit>,
    /// Coefficient of determination of the predicted step seconds (unweighted).
    pub r2: f64,
    pub residuals: Residuals,
    /// Steps fitted.
    pub samples: usize,
}

impl Fit {
    /// The fitted coefficients as a cost model with `gap_s` between busy steps.
    pub fn cost(&self, gap_s: f64) -> LinearCost {
        LinearCost::new(
            self.terms.iter().map(|t| t.term).collect(),
            self.terms.iter().map(|t| t.coefficient).collect(),
            gap_s,
        )
    }

    pub fn term(&self, t: Term) -> Option<&TermFit> {
        self.terms.iter().find(|f| f.term == t)
    }
}

/// Why steps cannot be fitted.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum FitError {
    #[error("no steps to fit")]
    NoSteps,
    #[error("{0} steps are too few to fit {1} terms (at least {2} are needed)")]
    TooFew(usize, usize, usize),
    #[error("a step has a non-positive or non-finite duration ({0} s)")]
    BadDuration(f64),
    #[error("the least-squares solve failed: {0}")]
    Solve(String),
}

/// Fits a linear step-cost model over `terms` to `samples` (see the module docs).
pub fn fit(samples: &[Sample], terms: &[Term], opts: &FitOptions) -> Result<Fit, FitError> {
    if samples.is_empty() {
        return Err(FitError::NoSteps);
    }
    if let Some(s) = samples.iter().find(|s| !(s.seconds.is_finite() && s.seconds > 0.0)) {
        return Err(FitError::BadDuration(s.seconds));
    }
    let x: Vec<Vec<f64>> = samples.iter().map(|s| s.work.values(terms)).collect();
    // A term enters the fit only if the steps exercise it.
    let measured: Vec<bool> = (0..terms.len()).map(|j| x.iter().any(|row| row[j] != 0.0)).collect();
    let cols: Vec<usize> = (0..terms.len()).filter(|&j| measured[j]).collect();
    let needed = cols.len() + 3;
    if samples.len() < needed {
        return Err(FitError::TooFew(samples.len(), cols.len(), needed));
    }
    let y: Vec<f64> = samples.iter().map(|s| s.seconds).collect();
    let all: Vec<usize> = (0..samples.len()).collect();
    let coef = solve(&x, &y, &all, &cols)?;
    let boots = bootstrap(&x, &y, &cols, opts)?;
    let fits = cols_to_terms(terms, &coef, &boots, &cols);
    let fit = Fit { terms: fits, r2: 0.0, residuals: Residuals::default(), samples: samples.len() };
    let (r2, residuals) = quality(samples, &fit.cost(0.0));
    Ok(Fit { r2, residuals, ..fit })
}

/// The coefficients of the `cols` terms fitted on the rows `idx` of `x` (values) and `y`.
fn solve(x: &[Vec<f64>], y: &[f64], idx: &[usize], cols: &[usize]) -> Result<Vec<f64>, FitError> {
    let a = DMatrix::from_fn(idx.len(), cols.len(), |i, j| x[idx[i]][cols[j]] / y[idx[i]]);
    // Columns scaled to a largest magnitude of 1: terms range from 1 to 10⁶ (attention).
    let scale: Vec<f64> = (0..cols.len()).map(|j| a.column(j).amax().max(f64::MIN_POSITIVE)).collect();
    let a = DMatrix::from_fn(a.nrows(), a.ncols(), |i, j| a[(i, j)] / scale[j]);
    let b = DVector::from_element(idx.len(), 1.0);
    let sol = nnls(&a, &b)?;
    Ok(sol.iter().zip(&scale).map(|(c, s)| c / s).collect())
}

/// Coefficients of resampled fits, per column.
fn bootstrap(x: &[Vec<f64>], y: &[f64], cols: &[usize], opts: &FitOptions) -> Result<Vec<Vec<f64>>, FitError> {
    let mut draws = Bootstrap::new(y.len(), opts.seed);
    let mut per_col = vec![Vec::with_capacity(opts.bootstrap); cols.len()];
    for _ in 0..opts.bootstrap {
        for (j, c) in solve(x, y, draws.next_sample(), cols)?.into_iter().enumerate() {
            per_col[j].push(c);
        }
    }
    Ok(per_col)
}

fn cols_to_terms(terms: &[Term], coef: &[f64], boots: &[Vec<f64>], cols: &[usize]) -> Vec<TermFit> {
    terms
        .iter()
        .enumerate()
        .map(|(j, &term)| match cols.iter().position(|&c| c == j) {
            Some(k) => {
                let c = coef[k];
                let lo = percentile(&boots[k], 2.5).unwrap_or(c);
                let hi = percentile(&boots[k], 97.5).unwrap_or(c);
                TermFit { term, coefficient: c, lo, hi, measured: true }
            }
            None => TermFit { term, coefficient: 0.0, lo: 0.0, hi: 0.0, measured: false },
        })
        .collect()
}

/// R² and relative residuals of `cost` over `samples`.
pub fn quality(samples: &[Sample], cost: &LinearCost) -> (f64, Residuals) {
    let n = samples.len() as f64;
    let mean = samples.iter().map(|s| s.seconds).sum::<f64>() / n;
    let (mut ss_res, mut ss_tot) = (0.0, 0.0);
    let mut rel = Vec::with_capacity(samples.len());
    let mut ratios = Vec::with_capacity(samples.len());
    for s in samples {
        let p = cost.step_seconds(&s.work);
        ss_res += (p - s.seconds).powi(2);
        ss_tot += (s.seconds - mean).powi(2);
        rel.push((p - s.seconds) / s.seconds);
        if p > 0.0 && s.seconds > 0.0 {
            ratios.push(s.seconds / p);
        }
    }
    // Undefined when every step took the same time; 0 then (nothing explained beyond the mean).
    let r2 = if ss_tot > 0.0 { 1.0 - ss_res / ss_tot } else { 0.0 };
    let abs: Vec<f64> = rel.iter().map(|r| r.abs()).collect();
    let p = |xs: &[f64], q| percentile(xs, q).unwrap_or(f64::NAN);
    ratios.sort_by(f64::total_cmp);
    let mut ratios: Vec<f64> = if ratios.is_empty() {
        Vec::new()
    } else {
        (0..crate::sampled::RATIO_PERCENTILES).filter_map(|q| percentile_sorted(&ratios, q as f64)).collect()
    };
    // Drawn at random, the ratios must keep the fit's total time (Σ measured ÷ Σ predicted),
    // not add their own skew's mean on top: scaled so their mean is that.
    let predicted: f64 = samples.iter().map(|s| cost.step_seconds(&s.work)).sum();
    let measured: f64 = samples.iter().map(|s| s.seconds).sum();
    let mean = ratios.iter().sum::<f64>() / ratios.len().max(1) as f64;
    if predicted > 0.0 && mean > 0.0 {
        let k = measured / predicted / mean;
        ratios.iter_mut().for_each(|r| *r *= k);
    }
    let residuals =
        Residuals { p50: p(&abs, 50.0), p90: p(&abs, 90.0), p99: p(&abs, 99.0), bias: p(&rel, 50.0), ratios };
    (r2, residuals)
}

/// Non-negative least squares, `min ‖Ax − b‖ subject to x ≥ 0`, by Lawson and Hanson's
/// active-set method; each unconstrained subproblem is solved by nalgebra's SVD.
pub fn nnls(a: &DMatrix<f64>, b: &DVector<f64>) -> Result<DVector<f64>, FitError> {
    let n = a.ncols();
    let mut x = DVector::zeros(n);
    let mut passive = vec![false; n];
    let tol = 1e-12 * a.norm().max(1.0) * b.norm().max(1.0);
    for _ in 0..(3 * n + 3) {
        let w = a.transpose() * (b - a * &x);
        let next = (0..n).filter(|&j| !passive[j] && w[j] > tol).max_by(|&i, &k| w[i].total_cmp(&w[k]));
        let Some(j) = next else { break };
        passive[j] = true;
        for _ in 0..(3 * n + 3) {
            let s = unconstrained(a, b, &passive)?;
            if (0..n).filter(|&i| passive[i]).all(|i| s[i] > 0.0) {
                x = s;
                break;
            }
            // Step from x towards s until the first passive coefficient reaches zero.
            let alpha =
                (0..n).filter(|&i| passive[i] && s[i] <= 0.0).map(|i| x[i] / (x[i] - s[i])).fold(1.0f64, f64::min);
            x += (&s - &x) * alpha;
            for i in 0..n {
                if passive[i] && x[i] <= 1e-15 {
                    passive[i] = false;
                    x[i] = 0.0;
                }
            }
        }
    }
    Ok(x)
}

/// Least squares over the passive columns only (the others held at 0).
fn unconstrained(a: &DMatrix<f64>, b: &DVector<f64>, passive: &[bool]) -> Result<DVector<f64>, FitError> {
    let cols: Vec<usize> = (0..a.ncols()).filter(|&j| passive[j]).collect();
    let sub = a.select_columns(&cols);
    let sol = sub.svd(true, true).solve(b, 1e-12).map_err(|e| FitError::Solve(e.to_string()))?;
    let mut out = DVector::zeros(a.ncols());
    for (k, &j) in cols.iter().enumerate() {
        out[j] = sol[k];
    }
    Ok(out)
}

#[cfg(test)]
#[path = "fit/tests.rs"]
mod tests;
