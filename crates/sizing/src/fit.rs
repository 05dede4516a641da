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
    /// The same by band of predicted step length, shortest first: what the simulator draws
    /// from when there are any (a step scatters less the longer it is). Empty in profiles
    /// written before they were kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bands: Vec<RatioBand>,
}

/// The spread of the steps of one band of predicted length.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RatioBand {
    /// The band's shortest predicted step, seconds; it runs to the next band's (0 for the
    /// first band).
    pub from_s: f64,
    /// Fitted steps in the band.
    pub steps: usize,
    /// Measured ÷ predicted at the 0th, 1st, …, 100th percentile, scaled so that their mean is
    /// the band's Σ measured ÷ Σ predicted.
    pub ratios: Vec<f64>,
}

/// Where bands of predicted step length may start (seconds): a factor of about 3 apart.
pub const BAND_EDGES_S: [f64; 7] = [0.0, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3];

/// Fewest steps a band is drawn from: fewer join the band below (or the first, above).
pub const MIN_BAND_STEPS: usize = 100;

/// 101 percentiles of `ratios` (sorted here), scaled so that their mean is `target`.
fn percentiles_scaled(mut ratios: Vec<f64>, target: f64) -> Vec<f64> {
    if ratios.is_empty() {
        return Vec::new();
    }
    ratios.sort_by(f64::total_cmp);
    let mut out: Vec<f64> =
        (0..crate::sampled::RATIO_PERCENTILES).filter_map(|q| percentile_sorted(&ratios, q as f64)).collect();
    let mean = out.iter().sum::<f64>() / out.len() as f64;
    if target > 0.0 && mean > 0.0 {
        out.iter_mut().for_each(|r| *r *= target / mean);
    }
    out
}

/// Bands of [`BAND_EDGES_S`] over `(predicted, measured)` seconds of steps, each of at least
/// [`MIN_BAND_STEPS`] steps (none when all the steps are fewer).
pub fn ratio_bands(steps: &[(f64, f64)]) -> Vec<RatioBand> {
    let band_of = |p: f64| BAND_EDGES_S.iter().rposition(|e| p >= *e).unwrap_or(0);
    let mut groups: Vec<(f64, Vec<(f64, f64)>)> = BAND_EDGES_S.iter().map(|e| (*e, Vec::new())).collect();
    for &(p, m) in steps.iter().filter(|(p, m)| *p > 0.0 && *m > 0.0) {
        groups[band_of(p)].1.push((p, m));
    }
    // Thin bands join the one below; a thin first band joins the next.
    let mut merged: Vec<(f64, Vec<(f64, f64)>)> = Vec::new();
    for (from, g) in groups {
        match merged.last_mut() {
            Some(last) if g.len() < MIN_BAND_STEPS || last.1.len() < MIN_BAND_STEPS => last.1.extend(g),
            _ => merged.push((from, g)),
        }
    }
    if merged.last().is_some_and(|(_, g)| g.len() < MIN_BAND_STEPS) {
        return Vec::new();
    }
    merged
        .into_iter()
        .map(|(from_s, g)| {
            let total = g.iter().map(|(_, m)| m).sum::<f64>() / g.iter().map(|(p, _)| p).sum::<f64>();
            let steps = g.len();
            RatioBand { from_s, steps, ratios: percentiles_scaled(g.into_iter().map(|(p, m)| m / p).collect(), total) }
        })
        .collect()
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
    // A term enters the fit only if the steps exercise it; a cell of the decode-attention
    // table only if a few steps sit mostly in it (it is interpolated from its neighbours
    // otherwise, not decided by the tails of the hats of steps near another knot).
    let tables = crate::cost::Tables::of(terms);
    let measured: Vec<bool> = (0..terms.len())
        .map(|j| match terms[j] {
            t if t.is_attention_cell() => {
                let shares = samples.iter().map(|s| s.work.share(terms[j], &tables));
                shares.filter(|&x| x >= 0.5).sum::<f64>() >= MIN_CELL_STEPS
            }
            _ => x.iter().any(|row| row[j] != 0.0),
        })
        .collect();
    let cols: Vec<usize> = (0..terms.len()).filter(|&j| measured[j]).collect();
    let needed = cols.len() + 3;
    if samples.len() < needed {
        return Err(FitError::TooFew(samples.len(), cols.len(), needed));
    }
    let y: Vec<f64> = samples.iter().map(|s| s.seconds).collect();
    let all: Vec<usize> = (0..samples.len()).collect();
    let coef = solve(&x, &y, &all, &cols)?;
    let boots = bootstrap(&x, &y, &cols, opts)?;
    let mut fits = cols_to_terms(terms, &coef, &boots, &cols);
    fill_cells(&mut fits);
    fill_knots(&mut fits);
    let fit = Fit { terms: fits, r2: 0.0, residuals: Residuals::default(), samples: samples.len() };
    let (r2, residuals) = quality(samples, &fit.cost(0.0));
    Ok(Fit { r2, residuals, ..fit })
}

/// How well a set of terms predicts steps it was not fitted on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HeldOut {
    /// Mean |relative error| of the held-out steps' predicted periods.
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    /// Steps predicted (every fitted step, once).
    pub steps: usize,
}

/// The held-out error of fitting `terms` to `samples`: the steps split into `folds` by their
/// shape (kind, batch, context per sequence and prompt tokens, each rounded to a power of
/// two), so that every shape is held out whole, and each fold predicted by a fit on the
/// others (no bootstrap): the error of pricing shapes the fit never saw, as a workload's
/// steps are. A fold whose complement cannot be fitted is skipped.
pub fn held_out(samples: &[Sample], terms: &[Term], folds: usize) -> Result<HeldOut, FitError> {
    let folds = folds.max(2);
    let shape = |w: &StepWork| {
        let log = |x: f64| if x > 0.0 { x.log2().round() as i64 } else { -1 };
        let per_seq = if w.decode_seqs > 0.0 { w.decode_context / w.decode_seqs } else { 0.0 };
        let key = (log(w.prefill_tokens), w.decode_seqs as i64, log(per_seq));
        let mut h = std::collections::hash_map::DefaultHasher::new();
        std::hash::Hash::hash(&key, &mut h);
        (std::hash::Hasher::finish(&h) % folds as u64) as usize
    };
    let fold: Vec<usize> = samples.iter().map(|s| shape(&s.work)).collect();
    let opts = FitOptions { bootstrap: 0, seed: 0 };
    let mut errors = Vec::new();
    for k in 0..folds {
        let train: Vec<Sample> = samples.iter().zip(&fold).filter(|(_, f)| **f != k).map(|(s, _)| *s).collect();
        let Ok(f) = fit(&train, terms, &opts) else { continue };
        let cost = f.cost(0.0);
        errors.extend(
            samples
                .iter()
                .zip(&fold)
                .filter(|(_, f)| **f == k)
                .map(|(s, _)| (cost.step_seconds(&s.work) - s.seconds) / s.seconds),
        );
    }
    if errors.is_empty() {
        return Err(FitError::NoSteps);
    }
    let abs: Vec<f64> = errors.iter().map(|e| e.abs()).collect();
    let at = |q| percentile(&abs, q).unwrap_or(f64::NAN);
    Ok(HeldOut { mean: abs.iter().sum::<f64>() / abs.len() as f64, p50: at(50.0), p90: at(90.0), steps: abs.len() })
}

/// The steps' worth a cell of the decode-attention table needs to be fitted: Σ of the shares
/// ([`StepWork::share`]) of the steps that sit at least half in it.
pub const MIN_CELL_STEPS: f64 = 3.0;

/// The decode-attention cells no steps measured, interpolated from the measured ones: along
/// the context per sequence first (linearly between the measured knots of the same batch,
/// flat beyond them), then along the batch for batches with none measured. Left at 0 when
/// no cell was measured. An interpolated cell stays `measured: false`.
fn fill_cells(fits: &mut [TermFit]) {
    let cell = |f: &TermFit| match f.term {
        Term::SeqContext(b, c) => Some((b, c)),
        _ => None,
    };
    let mut known: Vec<(u32, u32, f64)> =
        fits.iter().filter(|f| f.measured).filter_map(|f| cell(f).map(|(b, c)| (b, c, f.coefficient))).collect();
    let missing: Vec<usize> = (0..fits.len()).filter(|&i| !fits[i].measured && cell(&fits[i]).is_some()).collect();
    // Along the context per sequence, within each batch.
    let mut along_c = Vec::new();
    for &i in &missing {
        let (b, c) = cell(&fits[i]).expect("a cell");
        let row: Vec<(f64, f64)> = known.iter().filter(|k| k.0 == b).map(|k| (f64::from(k.1), k.2)).collect();
        if let Some(v) = interpolate(&row, f64::from(c)) {
            along_c.push((i, v));
        }
    }
    for (i, v) in &along_c {
        let (b, c) = cell(&fits[*i]).expect("a cell");
        known.push((b, c, *v));
        set(&mut fits[*i], *v);
    }
    // Along the batch, for the rows with no measured cell.
    for &i in missing.iter().filter(|i| !along_c.iter().any(|(j, _)| j == *i)) {
        let (b, c) = cell(&fits[i]).expect("a cell");
        let col: Vec<(f64, f64)> = known.iter().filter(|k| k.1 == c).map(|k| (f64::from(k.0), k.2)).collect();
        if let Some(v) = interpolate(&col, f64::from(b)) {
            set(&mut fits[i], v);
        }
    }
}

/// The additive tables' knots no steps measured, interpolated along their own table from the
/// measured ones (flat beyond them).
fn fill_knots(fits: &mut [TermFit]) {
    let batch = |t: Term| if let Term::BatchContext(b) = t { Some(b) } else { None };
    let length = |t: Term| if let Term::LengthContext(c) = t { Some(c) } else { None };
    for of in [batch, length] {
        let known: Vec<(f64, f64)> = fits
            .iter()
            .filter(|f| f.measured)
            .filter_map(|f| of(f.term).map(|k| (f64::from(k), f.coefficient)))
            .collect();
        for f in fits.iter_mut().filter(|f| !f.measured) {
            if let Some(v) = of(f.term).and_then(|k| interpolate(&known, f64::from(k))) {
                set(f, v);
            }
        }
    }
}

fn set(f: &mut TermFit, v: f64) {
    (f.coefficient, f.lo, f.hi) = (v, v, v);
}

/// The piecewise-linear interpolation of the points `(x, y)` at `x`, flat beyond the outer
/// points; `None` without points.
fn interpolate(points: &[(f64, f64)], x: f64) -> Option<f64> {
    let mut p = points.to_vec();
    p.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (first, last) = (p.first()?, p.last()?);
    if x <= first.0 {
        return Some(first.1);
    }
    if x >= last.0 {
        return Some(last.1);
    }
    let i = p.partition_point(|q| q.0 <= x);
    let (lo, hi) = (p[i - 1], p[i]);
    Some(lo.1 + (hi.1 - lo.1) * (x - lo.0) / (hi.0 - lo.0))
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
    let mut pairs = Vec::with_capacity(samples.len());
    for s in samples {
        let p = cost.step_seconds(&s.work);
        ss_res += (p - s.seconds).powi(2);
        ss_tot += (s.seconds - mean).powi(2);
        rel.push((p - s.seconds) / s.seconds);
        if p > 0.0 && s.seconds > 0.0 {
            ratios.push(s.seconds / p);
            pairs.push((p, s.seconds));
        }
    }
    // Undefined when every step took the same time; 0 then (nothing explained beyond the mean).
    let r2 = if ss_tot > 0.0 { 1.0 - ss_res / ss_tot } else { 0.0 };
    let abs: Vec<f64> = rel.iter().map(|r| r.abs()).collect();
    let p = |xs: &[f64], q| percentile(xs, q).unwrap_or(f64::NAN);
    // Drawn at random, the ratios must keep the fit's total time (Σ measured ÷ Σ predicted),
    // not add their own skew's mean on top: scaled so their mean is that (each band's, its own).
    let predicted: f64 = samples.iter().map(|s| cost.step_seconds(&s.work)).sum();
    let measured: f64 = samples.iter().map(|s| s.seconds).sum();
    let ratios = percentiles_scaled(ratios, if predicted > 0.0 { measured / predicted } else { 0.0 });
    let bands = ratio_bands(&pairs);
    let residuals =
        Residuals { p50: p(&abs, 50.0), p90: p(&abs, 90.0), p99: p(&abs, 99.0), bias: p(&rel, 50.0), ratios, bands };
    (r2, residuals)
}

/// Non-negative least squares, `min ‖Ax − b‖ subject to x ≥ 0`, by Lawson and Hanson's
/// active-set method on the normal equations: `AᵀA` and `Aᵀb` are formed once (the steps
/// are thousands of rows, the terms tens of columns), and each unconstrained subproblem
/// solves `(AᵀA)_PP z = (Aᵀb)_P` over the passive columns by an SVD of that small matrix.
pub fn nnls(a: &DMatrix<f64>, b: &DVector<f64>) -> Result<DVector<f64>, FitError> {
    let (g, h) = (a.transpose() * a, a.transpose() * b);
    let n = a.ncols();
    let mut x = DVector::zeros(n);
    let mut passive = vec![false; n];
    let tol = 1e-12 * a.norm().max(1.0) * b.norm().max(1.0);
    for _ in 0..(3 * n + 3) {
        let w = &h - &g * &x;
        let next = (0..n).filter(|&j| !passive[j] && w[j] > tol).max_by(|&i, &k| w[i].total_cmp(&w[k]));
        let Some(j) = next else { break };
        passive[j] = true;
        for _ in 0..(3 * n + 3) {
            let s = unconstrained(&g, &h, &passive)?;
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

/// The normal equations `g z = h` over the passive columns only (the others held at 0).
fn unconstrained(g: &DMatrix<f64>, h: &DVector<f64>, passive: &[bool]) -> Result<DVector<f64>, FitError> {
    let cols: Vec<usize> = (0..g.ncols()).filter(|&j| passive[j]).collect();
    let sub = g.select_columns(&cols).select_rows(&cols);
    let rhs = DVector::from_iterator(cols.len(), cols.iter().map(|&j| h[j]));
    let svd = sub.svd(true, true);
    let eps = 1e-13 * svd.singular_values.max();
    let sol = svd.solve(&rhs, eps).map_err(|e| FitError::Solve(e.to_string()))?;
    let mut out = DVector::zeros(g.ncols());
    for (k, &j) in cols.iter().enumerate() {
        out[j] = sol[k];
    }
    Ok(out)
}

#[cfg(test)]
#[path = "fit/tests.rs"]
mod tests;
