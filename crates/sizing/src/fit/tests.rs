use super::*;
use crate::cost::StepCost;
use rand::SeedableRng;
use rand_distr::{Distribution, Normal};

const TRUE: [f64; 6] = [5e-4, 2e-5, 2e-9, 3e-5, 2e-8, 1e-5];

/// Steps shaped like a profile's grid: prefill chunks at several contexts, decode batches at
/// several contexts, and mixed steps.
fn grid() -> Vec<StepWork> {
    let mut out = Vec::new();
    for chunk in [16.0, 64.0, 256.0, 1024.0] {
        for ctx in [0.0, 256.0, 1024.0] {
            for sampled in [0.0, 1.0] {
                let attn = chunk * ctx + chunk * (chunk + 1.0) / 2.0;
                out.push(StepWork { prefill_tokens: chunk, prefill_attention: attn, sampled, ..Default::default() });
            }
        }
    }
    // Batches of short prompts completed in one step: many sampled rows, no decode.
    for b in [4.0, 16.0, 64.0] {
        for len in [4.0, 16.0] {
            out.push(StepWork {
                prefill_tokens: b * len,
                prefill_attention: b * len * (len + 1.0) / 2.0,
                sampled: b,
                ..Default::default()
            });
        }
    }
    for b in [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0] {
        for ctx in [32.0, 256.0, 1024.0] {
            out.push(StepWork { decode_seqs: b, decode_context: b * ctx, sampled: b, ..Default::default() });
            let attn = 128.0 * ctx + 128.0 * 129.0 / 2.0;
            out.push(StepWork {
                prefill_tokens: 128.0,
                prefill_attention: attn,
                decode_seqs: b,
                decode_context: b * ctx,
                decode_distinct: None,
                sampled: b + 1.0,
                experts_touched: None,
                since_prefill: None,
                fresh: None,
                idle_s: None,
            });
        }
    }
    out
}

fn noisy(work: &[StepWork], noise: f64, seed: u64) -> Vec<Sample> {
    let cost = LinearCost::classic(TRUE, 0.0);
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let n = Normal::new(0.0, noise).unwrap();
    // Three repeats of each shape, each with its own multiplicative noise.
    (0..3)
        .flat_map(|_| work.iter())
        .map(|w| Sample { work: *w, seconds: cost.step_seconds(w) * (1.0 + n.sample(&mut rng)) })
        .collect()
}

#[test]
fn noiseless_steps_give_back_the_coefficients() {
    let fit = fit(&noisy(&grid(), 0.0, 1), &Term::ALL, &FitOptions { bootstrap: 20, seed: 1 }).unwrap();
    for (t, want) in fit.terms.iter().zip(TRUE) {
        assert!((t.coefficient - want).abs() <= 1e-6 * want, "{:?}: {} vs {want}", t.term, t.coefficient);
        assert!(t.measured);
    }
    assert!(fit.r2 > 0.999_999_99, "{}", fit.r2);
    assert!(fit.residuals.p99 < 1e-9);
}

#[test]
fn noisy_steps_give_back_the_coefficients_within_their_intervals() {
    // 3 % noise per step. Over 20 noise draws, the 95 % intervals hold the true coefficient
    // about 95 % of the time (at least 85 % of the 120 intervals), and none reaches 0.
    let (mut held, mut total) = (0, 0);
    for seed in 0..20 {
        let fit = fit(&noisy(&grid(), 0.03, seed), &Term::ALL, &FitOptions { bootstrap: 100, seed }).unwrap();
        for (t, want) in fit.terms.iter().zip(TRUE) {
            total += 1;
            held += usize::from(t.lo <= want && want <= t.hi);
            assert!(t.lo > 0.0 && t.hi - t.lo < want, "{:?}: interval [{}, {}] too wide", t.term, t.lo, t.hi);
            assert!((t.coefficient - want).abs() < 0.5 * want, "{:?}: {} vs {want}", t.term, t.coefficient);
        }
        assert!(fit.residuals.p50 < 0.04 && fit.residuals.p50 > 0.005, "{:?}", fit.residuals);
        assert!(fit.residuals.bias.abs() < 0.01);
    }
    assert!(held * 100 >= total * 85, "{held} of {total} intervals hold the truth");
}

#[test]
fn terms_the_steps_never_vary_are_left_out() {
    // Decode-only steps: nothing about prefill can be learned.
    let work: Vec<StepWork> = grid().into_iter().filter(|w| w.prefill_tokens == 0.0).collect();
    let fit = fit(&noisy(&work, 0.0, 2), &Term::ALL, &FitOptions { bootstrap: 10, seed: 1 }).unwrap();
    let pre = fit.term(Term::PrefillTokens).unwrap();
    assert!(!pre.measured && pre.coefficient == 0.0);
    assert!(fit.term(Term::DecodeContext).unwrap().measured);
    // decode_seqs and sampled_rows are the same column here: their sum is what is known.
    let both = fit.term(Term::DecodeSeqs).unwrap().coefficient + fit.term(Term::SampledRows).unwrap().coefficient;
    assert!((both - (TRUE[3] + TRUE[5])).abs() < 1e-9);
}

#[test]
fn nnls_keeps_coefficients_non_negative() {
    // Unconstrained: x = (1, −1). Constrained: x₂ = 0 and x₁ the projection.
    let a = DMatrix::from_row_slice(3, 2, &[1.0, 0.0, 0.0, 1.0, 1.0, 1.0]);
    let b = DVector::from_vec(vec![1.0, -1.0, 0.0]);
    let x = nnls(&a, &b).unwrap();
    assert_eq!(x[1], 0.0);
    // min (x−1)² + x² → x = 0.5
    assert!((x[0] - 0.5).abs() < 1e-12, "{x}");
}

#[test]
fn bad_steps_are_refused() {
    assert_eq!(fit(&[], &Term::ALL, &FitOptions::default()), Err(FitError::NoSteps));
    let w = StepWork { decode_seqs: 1.0, sampled: 1.0, ..Default::default() };
    let bad = [Sample { work: w, seconds: 0.0 }];
    assert_eq!(fit(&bad, &Term::ALL, &FitOptions::default()), Err(FitError::BadDuration(0.0)));
    let few = vec![Sample { work: w, seconds: 1e-3 }; 4];
    assert!(matches!(fit(&few, &Term::ALL, &FitOptions::default()), Err(FitError::TooFew(4, 3, 6))));
}

#[test]
fn a_table_fit_recovers_a_kernel_switch_a_linear_fit_cannot() {
    // Decode steps whose per-row cost jumps past 8 rows (a skinny kernel, then gemm): a
    // linear model is off by tens of percent somewhere; the table fits every batch.
    let truth = |b: f64| if b <= 8.0 { 1e-3 + b * 0.8e-3 } else { 6e-3 + b * 1.0e-3 };
    let samples: Vec<Sample> = (1..=64)
        .map(|b| {
            let b = b as f64;
            Sample {
                work: StepWork { decode_seqs: b, decode_context: b * 100.0, sampled: b, ..Default::default() },
                seconds: truth(b),
            }
        })
        .collect();
    let worst = |f: &Fit| {
        let c = f.cost(0.0);
        samples.iter().map(|s| (c.step_seconds(&s.work) / s.seconds - 1.0).abs()).fold(0.0, f64::max)
    };
    let linear = fit(&samples, &Term::ALL, &FitOptions { bootstrap: 0, seed: 0 }).unwrap();
    let table = fit(&samples, &Term::table(64, 64, 6400), &FitOptions { bootstrap: 0, seed: 0 }).unwrap();
    assert!(worst(&linear) > 0.1, "linear: {}", worst(&linear));
    // Knots on both sides of the switch (8 and 9): every batch within a few percent.
    for b in [1.0, 2.0, 4.0, 8.0, 9.0, 12.0, 16.0, 32.0, 64.0] {
        let w = StepWork { decode_seqs: b, decode_context: b * 100.0, sampled: b, ..Default::default() };
        let got = table.cost(0.0).step_seconds(&w);
        assert!((got / truth(b) - 1.0).abs() < 0.02, "{b}: {got} vs {}", truth(b));
    }
    assert!(worst(&table) < 0.03, "table: {}", worst(&table));
}

#[test]
fn a_context_table_follows_the_cache_cliff_a_linear_term_averages() {
    // Decode steps of 1–64 sequences at contexts 64–1536: a context token costs 100 ns while
    // the step's K/V fits the cache (Σ context ≤ 4096) and 3 × as much past it.
    let ctx_cost = |c: f64| if c <= 4096.0 { c * 100e-9 } else { 4096.0 * 100e-9 + (c - 4096.0) * 300e-9 };
    let truth = |b: f64, c: f64| 1e-3 + b * 0.1e-3 + ctx_cost(b * c);
    let mut samples = Vec::new();
    for b in [1.0, 2.0, 3.0, 4.0, 5.0, 8.0, 9.0, 16.0, 17.0, 32.0, 33.0, 64.0] {
        for c in [64.0, 512.0, 1024.0, 1536.0] {
            let work = StepWork { decode_seqs: b, decode_context: b * c, sampled: b, ..Default::default() };
            samples.push(Sample { work, seconds: truth(b, c) });
        }
    }
    let max_context = samples.iter().map(|s| s.work.decode_context as usize).max().unwrap();
    let terms = Term::table(64, 64, max_context);
    assert!(terms.contains(&Term::Context(512)) && terms.contains(&Term::Context(131_072)));
    assert!(!terms.contains(&Term::DecodeContext));
    let linear = fit(&samples, &Term::ALL, &FitOptions { bootstrap: 0, seed: 0 }).unwrap().cost(0.0);
    let table = fit(&samples, &terms, &FitOptions { bootstrap: 0, seed: 0 }).unwrap().cost(0.0);
    let error = |c: &LinearCost, b: f64, ctx: f64| {
        let w = StepWork { decode_seqs: b, decode_context: b * ctx, sampled: b, ..Default::default() };
        c.step_seconds(&w) / truth(b, ctx) - 1.0
    };
    // In the cache (16 × 256 = 4096) and far past it (64 × 1536), between measured shapes.
    for (b, ctx) in [(16.0, 256.0), (4.0, 700.0), (64.0, 1536.0), (48.0, 1200.0)] {
        assert!(error(&table, b, ctx).abs() < 0.03, "table at {b} × {ctx}: {}", error(&table, b, ctx));
    }
    let worst = [(16.0, 256.0), (4.0, 700.0), (64.0, 1536.0), (48.0, 1200.0)]
        .into_iter()
        .map(|(b, ctx)| error(&linear, b, ctx).abs())
        .fold(0.0, f64::max);
    assert!(worst > 0.1, "a linear context term averages the cliff: {worst}");
}

#[test]
fn the_spread_kept_for_sampling_is_the_measured_over_predicted_ratio_keeping_the_total() {
    let cost = LinearCost::classic([1e-3, 0.0, 0.0, 1e-4, 0.0, 0.0], 0.0);
    // Steps of 1 and 10 decode rows (predicted 1.1 and 2 ms), measured 0.8 ×, 1 × or 1.5 ×.
    let mut samples = Vec::new();
    for b in [1.0, 10.0] {
        for k in [0.8, 1.0, 1.5] {
            let work = StepWork { decode_seqs: b, sampled: b, ..Default::default() };
            samples.push(Sample { work, seconds: cost.step_seconds(&work) * k });
        }
    }
    let (_, r) = quality(&samples, &cost);
    assert_eq!(r.ratios.len(), 101);
    assert!(r.ratios.windows(2).all(|w| w[0] <= w[1]));
    // The ratios' shape: 0.8 at the bottom, 1.5 at the top, scaled so their mean is
    // Σ measured ÷ Σ predicted (= 1.1 here, each ratio on both step sizes).
    let mean = r.ratios.iter().sum::<f64>() / 101.0;
    assert!((mean - 1.1).abs() < 1e-9, "{mean}");
    let k = 1.1 / mean;
    assert!((r.ratios[0] / r.ratios[100] - 0.8 / 1.5).abs() < 1e-9 && k > 0.0);
}

/// Decode steps whose attention costs `rate(b, c)` seconds a context token at `b` sequences of
/// `c` context each, on top of 1 ms a step and 20 µs a sequence; three steps of each shape.
fn decodes(shapes: &[(f64, f64)], rate: impl Fn(f64, f64) -> f64) -> Vec<Sample> {
    shapes
        .iter()
        .flat_map(|&(b, c)| {
            let work = StepWork { decode_seqs: b, decode_context: b * c, sampled: b, ..Default::default() };
            let seconds = 1e-3 + 2e-5 * b + rate(b, c) * b * c;
            std::iter::repeat_n(Sample { work, seconds }, 3)
        })
        .collect()
}

/// A few long sequences cost more a token than many short ones: 400 ns ÷ √batch up to 256
/// tokens each, falling to half of that at 1024 tokens and flat beyond.
fn per_token(b: f64, c: f64) -> f64 {
    let by_context = 1.0 - 0.5 * ((c - 256.0) / 768.0).clamp(0.0, 1.0);
    400e-9 / b.sqrt() * by_context
}

#[test]
fn a_batch_and_context_table_recovers_its_cells_and_fills_the_ones_never_measured() {
    // Each batch at 64 and 256 tokens a sequence (the same rate: it and the batch's own cost
    // are told apart), and at 4096; batch 16 never beyond 256, 1024 never measured.
    let mut shapes = Vec::new();
    for b in [1.0, 2.0, 4.0, 8.0, 16.0] {
        for c in [64.0, 256.0, 4096.0] {
            shapes.push((b, c));
        }
    }
    shapes.retain(|&s| s != (16.0, 4096.0));
    let samples = decodes(&shapes, per_token);
    // A step's own cost per batch, as the tokens table prices it.
    let mut terms: Vec<Term> = [1, 2, 4, 8, 16].into_iter().map(Term::Tokens).collect();
    terms.extend(Term::seq_table(16, 4096));
    let f = fit(&samples, &terms, &FitOptions { bootstrap: 0, seed: 0 }).unwrap();
    let cell = |b, c| f.term(Term::SeqContext(b, c)).unwrap();
    for (b, c) in [(1, 256), (4, 4096), (8, 256), (16, 256)] {
        let want = per_token(b as f64, c as f64);
        assert!((cell(b, c).coefficient / want - 1.0).abs() < 1e-6, "{b}×{c}: {:?} vs {want}", cell(b, c));
        assert!(cell(b, c).measured);
    }
    // Batch 3 lies between measured 2 and 4, and 1024 tokens a sequence was never measured:
    // filled, not fitted.
    assert!(!cell(3, 256).measured && !cell(2, 1024).measured && !cell(16, 4096).measured);
    // 1024 is a fifth of the way from 256 to 4096: linear between the row's cells.
    let want = cell(2, 256).coefficient + (cell(2, 4096).coefficient - cell(2, 256).coefficient) * 768.0 / 3840.0;
    assert!((cell(2, 1024).coefficient - want).abs() < 1e-15);
    // Batch 16's row holds 256 only: flat along the context.
    assert_eq!(cell(16, 4096).coefficient, cell(16, 256).coefficient);
    // Batch 3's row holds nothing: between batches 2 and 4 of its column.
    let want = (cell(2, 256).coefficient + cell(4, 256).coefficient) / 2.0;
    assert!((cell(3, 256).coefficient - want).abs() < 1e-15);
}

#[test]
fn held_out_error_prefers_the_terms_that_price_unseen_shapes() {
    let mut shapes = Vec::new();
    for b in [1.0, 2.0, 3.0, 4.0, 5.0, 8.0, 9.0, 16.0, 17.0, 32.0] {
        for c in [64.0, 256.0, 1024.0, 1536.0] {
            shapes.push((b, c));
        }
    }
    let samples = decodes(&shapes, per_token);
    let base: Vec<Term> = Term::table(32, 1, 0).into_iter().filter(|t| matches!(t, Term::Tokens(_))).collect();
    let sigma: Vec<Term> = base
        .iter()
        .copied()
        .chain(Term::table(1, 1, 32 * 1536).into_iter().filter(|t| matches!(t, Term::Context(_))))
        .collect();
    let additive: Vec<Term> = base.iter().copied().chain(Term::batch_length_tables(32, 1536)).collect();
    let (a, b) = (held_out(&samples, &sigma, 5).unwrap(), held_out(&samples, &additive, 5).unwrap());
    assert_eq!(a.steps, samples.len());
    assert!(b.mean < a.mean * 0.75, "Σ context {a:?}, batch + context {b:?}");
}

#[test]
fn spread_is_kept_per_band_of_step_length_and_thin_bands_join_the_one_below() {
    // 150 steps predicted at 1.5 ms and 20 at 50 ms, all exact; 120 steps predicted at 0.2 s,
    // half at 0.9 of it and half at 1.1.
    let mut steps: Vec<(f64, f64)> = vec![(0.0015, 0.0015); 150];
    steps.extend(vec![(0.05, 0.05); 20]);
    steps.extend((0..120).map(|i| (0.2, if i % 2 == 0 { 0.18 } else { 0.22 })));
    let bands = ratio_bands(&steps);
    // The empty bands and the 20 steps of the 0.03 s band (fewer than 100) join the first;
    // the 0.1 s band stands (the 0.3 s one is empty and joins it).
    let shape: Vec<(f64, usize)> = bands.iter().map(|b| (b.from_s, b.steps)).collect();
    assert_eq!(shape, [(0.0, 170), (0.1, 120)]);
    assert!(bands[0].ratios.iter().all(|r| (r - 1.0).abs() < 1e-12));
    // By hand: 0.9 up to the 49th percentile, 1.0 at the 50th (between the two halves), 1.1
    // from the 51st; their mean is 1.0, the band's Σ measured ÷ Σ predicted: no scaling.
    let r = &bands[1].ratios;
    assert_eq!(r.len(), 101);
    assert!((r[0] - 0.9).abs() < 1e-12 && (r[50] - 1.0).abs() < 1e-9 && (r[100] - 1.1).abs() < 1e-12, "{r:?}");
    // Skewed, a band's ratios are scaled to keep its total time: 100 steps at 1, 20 at 2.
    let skew: Vec<(f64, f64)> = (0..120).map(|i| (0.2, if i < 100 { 0.2 } else { 0.4 })).collect();
    let b = &ratio_bands(&skew)[0];
    let mean = b.ratios.iter().sum::<f64>() / 101.0;
    assert!((mean - 140.0 / 120.0).abs() < 1e-12, "{mean}");
    // Fewer than 100 steps in all: no bands (the pooled ratios serve).
    assert!(ratio_bands(&steps[..99]).is_empty());
}
