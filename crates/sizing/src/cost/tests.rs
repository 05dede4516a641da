use super::*;

#[test]
fn a_planned_step_expects_the_experts_a_recorded_one_counts() {
    // 2 sparse layers of 8 experts, top 2: 4 tokens reach 8·(1 − (6/8)^4) = 5.46875 each.
    let shape = ExpertShape { routing: Routing::uniform(8, 2), sparse_layers: 2 };
    let c = LinearCost::new(vec![Term::Fixed, Term::ExpertsTouched], vec![1e-3, 1e-4], 0.0).with_experts(Some(shape));
    let planned = StepWork { decode_seqs: 4.0, ..Default::default() };
    assert!((c.step_seconds(&planned) - (1e-3 + 1e-4 * 2.0 * 5.468_75)).abs() < 1e-12);
    let recorded = StepWork { experts_touched: Some(3.0), ..planned };
    assert!((c.step_seconds(&recorded) - (1e-3 + 3e-4)).abs() < 1e-12);
    // A dense model's cost ignores the term.
    let dense = LinearCost::new(vec![Term::Fixed, Term::ExpertsTouched], vec![1e-3, 1e-4], 0.0);
    assert_eq!(dense.step_seconds(&planned), 1e-3);
    assert_eq!(Term::ExpertsTouched.name(), "experts_touched");
}

#[test]
fn a_linear_cost_is_the_sum_of_its_terms() {
    let c = LinearCost::classic([1e-3, 1e-5, 1e-9, 2e-5, 1e-8, 3e-5], 5e-5);
    let w = StepWork {
        prefill_tokens: 100.0,
        prefill_attention: 5050.0,
        decode_seqs: 4.0,
        decode_context: 400.0,
        decode_distinct: None,
        sampled: 5.0,
        experts_touched: None,
        since_prefill: None,
        fresh: None,
        idle_s: None,
    };
    // 1 ms + 100·10 µs + 5050 ns + 4·20 µs + 400·10 ns + 5·30 µs
    let want = 1e-3 + 1e-3 + 5.05e-6 + 8e-5 + 4e-6 + 1.5e-4;
    assert!((c.step_seconds(&w) - want).abs() < 1e-12);
    assert_eq!(w.value(Term::DecodeContext, &Tables::default()), 400.0);
    assert_eq!(c.coefficient(Term::SampledRows), 3e-5);
}

#[test]
fn repeated_positions_are_priced_apart_only_by_a_model_that_has_the_term() {
    // 8 sequences at 256 positions each, of which a 128-position prefix is shared: 2 048
    // positions attended, 128 + 8 · 128 = 1 152 distinct, 896 repeated.
    let w = StepWork { decode_seqs: 8.0, decode_context: 2048.0, decode_distinct: Some(1152.0), ..Default::default() };
    assert_eq!(w.repeated_context(), 896.0);
    let knots = vec![Term::Context(512), Term::Context(1024), Term::Context(2048)];
    let mut terms = knots.clone();
    terms.push(Term::RepeatedContext);
    // 1 ms at 1 024, 2 ms at 2 048; a repeated position 0.25 µs.
    let with = LinearCost::new(terms, vec![0.5e-3, 1e-3, 2e-3, 0.25e-6], 0.0);
    // The table at the 1 152 distinct positions: 1/8 of the way from 1 024 to 2 048 (1.125 ms),
    // and 896 · 0.25 µs = 0.224 ms.
    assert!((with.step_seconds(&w) - (1.125e-3 + 0.224e-3)).abs() < 1e-12, "{}", with.step_seconds(&w));
    // Without the term the table prices every position attended (2 ms), and a step that
    // does not know its distinct positions is priced so by either.
    let without = LinearCost::new(knots, vec![0.5e-3, 1e-3, 2e-3], 0.0);
    assert!((without.step_seconds(&w) - 2e-3).abs() < 1e-12);
    let unknown = StepWork { decode_distinct: None, ..w };
    assert!((with.step_seconds(&unknown) - 2e-3).abs() < 1e-12);
    assert_eq!(unknown.repeated_context(), 0.0);
    // Along a decode run each step adds a position of its own to every sequence: the
    // repeats stay 896 while the distinct positions grow by 8 a step.
    let mut run = Vec::new();
    with.decode_run_seconds(&w, 3, &mut |s| {
        run.push(s);
        true
    });
    for (j, s) in run.iter().enumerate() {
        let step =
            StepWork { decode_context: 2048.0 + 8.0 * j as f64, decode_distinct: Some(1152.0 + 8.0 * j as f64), ..w };
        assert_eq!(*s, with.step_seconds(&step));
        assert!((s - (1e-3 + (128.0 + 8.0 * j as f64) / 1024.0 * 1e-3 + 0.224e-3)).abs() < 1e-12);
    }
}

#[test]
fn a_table_interpolates_between_its_knots_and_extends_its_last() {
    let terms = Term::table(6, 1, 1500);
    let k: Vec<Term> = [1, 2, 3, 4, 5, 8].into_iter().map(Term::Tokens).collect();
    assert_eq!(terms[..6], k[..]);
    assert_eq!(
        terms[6..],
        [
            Term::Rows(1),
            Term::PrefillAttention,
            Term::DecodeSeqs,
            Term::Context(512),
            Term::Context(1024),
            Term::Context(2048)
        ]
    );
    assert_eq!(knots(64), [1, 2, 3, 4, 5, 8, 9, 16, 17, 32, 33, 64]);
    assert_eq!(knots(3), [1, 2, 3, 4]);
    assert_eq!(context_knots(0), [512]);
    assert_eq!(context_knots(4096), [512, 1024, 2048, 4096]);
    // 1 µs a context token up to 1024, then 3 µs (a cliff); the last knot extends through 0.
    let t = Tables::of(&terms);
    let ctx = |c: f64| {
        let w = StepWork { decode_context: c, ..Default::default() };
        [512, 1024, 2048]
            .iter()
            .zip([0.512e-3, 1.024e-3, 4.096e-3])
            .map(|(&k, v)| w.value(Term::Context(k), &t) * v)
            .sum::<f64>()
    };
    assert!((ctx(256.0) - 0.256e-3).abs() < 1e-12 && (ctx(1536.0) - 2.56e-3).abs() < 1e-12);
    assert!((ctx(4096.0) - 8.192e-3).abs() < 1e-12, "beyond the last knot: its value × c / k");
    // 1 ms at 1 token, 2 at 2, 2.5 at 3, 3 at 4, 4 at 5, 10 at 8 (a kernel switch); 0.5 ms per row.
    let c = LinearCost::new(
        terms.clone(),
        vec![1e-3, 2e-3, 2.5e-3, 3e-3, 4e-3, 10e-3, 0.5e-3, 0.0, 0.0, 0.0, 0.0, 0.0],
        0.0,
    );
    let at = |tokens: f64, rows: f64| {
        let w = StepWork { prefill_tokens: tokens, sampled: rows, ..Default::default() };
        c.step_seconds(&w)
    };
    assert!((at(1.0, 1.0) - 1.5e-3).abs() < 1e-12);
    assert!((at(3.0, 1.0) - (2.5e-3 + 0.5e-3)).abs() < 1e-12);
    assert!((at(6.5, 0.0) - 7e-3).abs() < 1e-12, "halfway between 5 and 8");
    assert!((at(16.0, 1.0) - (20e-3 + 0.5e-3)).abs() < 1e-12, "the last knot grows linearly");
    assert!((at(8.0, 4.0) - (10e-3 + 2e-3)).abs() < 1e-12, "rows beyond their last knot");
}

#[test]
fn steps_know_how_long_ago_the_last_prefill_was() {
    // Each prefill finishes one sequence (a row sampled beyond the decodes) beside one decode.
    let step = |n: u64, prefill: usize| StepRecord {
        step: n,
        prefill_tokens: prefill,
        decode_seqs: 1,
        sampled: 1 + usize::from(prefill > 0),
        ..Default::default()
    };
    // Nothing before the first prefill; a missing step number counts; a prefill restarts.
    let steps = [step(1, 0), step(2, 50), step(3, 0), step(5, 0), step(6, 10), step(7, 0)];
    let since: Vec<Option<u32>> = StepWork::of_records(&steps).iter().map(|w| w.since_prefill).collect();
    assert_eq!(since, [None, None, Some(1), Some(3), Some(4), Some(1)]);
    let w = StepWork::of_records(&steps);
    let t = Tables::default();
    // A decode-only step 1 after a prefill has the term, with its context; a mixed one not.
    let after = StepWork { decode_context: 300.0, ..w[2] };
    assert_eq!(after.value(Term::AfterPrefill(1), &t), 1.0);
    assert_eq!(after.value(Term::AfterPrefillContext(1), &t), 300.0);
    assert_eq!(after.value(Term::AfterPrefill(2), &t), 0.0);
    assert_eq!(w[5].value(Term::AfterPrefill(1), &t), 1.0);
    let mixed = StepWork { prefill_tokens: 4.0, ..w[2] };
    assert_eq!(mixed.value(Term::AfterPrefill(1), &t), 0.0);
    // The prefill made a quarter of a batch of four: a quarter of the term.
    let batch = StepWork { decode_seqs: 4.0, fresh: Some(0.25), ..after };
    assert_eq!(batch.value(Term::AfterPrefill(1), &t), 0.25);
    assert_eq!(batch.value(Term::AfterPrefillContext(1), &t), 75.0);
    let fresh: Vec<Option<f64>> = w.iter().map(|w| w.fresh).collect();
    assert_eq!(fresh, [Some(0.0), Some(0.0), Some(1.0), Some(1.0), Some(1.0), Some(1.0)]);
    assert_eq!(Term::after_prefill().len(), 2 * AFTER_PREFILL_KNOTS.len());
    // Between knots: 5 steps after is halfway from 4 to 6; 24 halfway from 16 to 0 at 32.
    let at = |since| StepWork { since_prefill: Some(since), ..after };
    assert_eq!(at(5).value(Term::AfterPrefill(4), &t), 0.5);
    assert_eq!(at(5).value(Term::AfterPrefill(6), &t), 0.5);
    assert_eq!(at(24).value(Term::AfterPrefill(16), &t), 0.5);
    assert_eq!(at(40).value(Term::AfterPrefill(16), &t), 0.0);
}

#[test]
fn steps_know_how_long_the_engine_sat_idle_before_them() {
    use goodput_core::Stamp;
    let ms = |m: f64| Stamp((m * 1e6) as u64);
    let step = |n: u64, start: f64, end: f64| StepRecord {
        step: n,
        start: ms(start),
        end: ms(end),
        prefill_tokens: 100,
        ..Default::default()
    };
    // Idle 0.1 ms (busy), then 136 ms; a missing step number leaves it unknown.
    let steps = [step(1, 0.0, 5.0), step(2, 5.1, 9.0), step(3, 145.0, 151.0), step(5, 160.0, 161.0)];
    let w = StepWork::of_records(&steps);
    let idle: Vec<Option<f64>> = w.iter().map(|w| w.idle_s.map(|s| (s * 1e4).round() / 1e4)).collect();
    assert_eq!(idle, [None, Some(0.0001), Some(0.136), None]);
    let t = Tables::default();
    assert_eq!(w[1].value(Term::AfterIdle(16), &t), 0.0, "a busy gap is not idleness");
    // 136 ms: halfway from 16 to 256; the tokens term carries the step's 100 tokens.
    assert!((w[2].value(Term::AfterIdle(16), &t) - 0.5).abs() < 1e-9);
    assert!((w[2].value(Term::AfterIdleTokens(256), &t) - 50.0).abs() < 1e-6);
    assert_eq!(w[3].value(Term::AfterIdle(256), &t), 0.0);
    assert_eq!(Term::after_idle().len(), 2 * AFTER_IDLE_MS.len());
    assert_eq!(Term::AfterIdleTokens(16).name(), "after_idle_tokens@16ms");
    // A decode run: only its first step follows the idle.
    let c = LinearCost::new(vec![Term::AfterIdle(256)], vec![1e-3], 0.0);
    let first = StepWork { decode_seqs: 1.0, idle_s: Some(1.0), ..Default::default() };
    let mut seen = Vec::new();
    c.decode_run_seconds(&first, 3, &mut |s| {
        seen.push(s);
        true
    });
    assert_eq!(seen, [1e-3, 0.0, 0.0]);
}

#[test]
fn a_decode_shares_its_context_among_the_cells_of_its_batch_and_length() {
    let terms = Term::seq_table(8, 1024);
    let t = Tables::of(&terms);
    assert_eq!(t.batch, [1, 2, 3, 4, 8]);
    assert_eq!(t.seq_context, [256, 1024]);
    // 6 sequences of 640 tokens: halfway between batches 4 and 8, and contexts 256 and 1024.
    let w = StepWork { decode_seqs: 6.0, decode_context: 6.0 * 640.0, ..Default::default() };
    let share = |b, c| w.share(Term::SeqContext(b, c), &t);
    assert!((share(4, 256) - 0.25).abs() < 1e-12 && (share(8, 1024) - 0.25).abs() < 1e-12);
    let total: f64 = terms.iter().map(|&x| w.share(x, &t)).sum();
    assert!((total - 1.0).abs() < 1e-12);
    // 0.5 µs a token in every cell: the step's attention is 3840 × 0.5 µs.
    let c = LinearCost::new(terms.clone(), vec![0.5e-6; terms.len()], 0.0);
    assert!((c.step_seconds(&w) - 3840.0 * 0.5e-6).abs() < 1e-12);
    assert_eq!(StepWork::default().share(Term::SeqContext(1, 256), &t), 0.0, "no decode, no share");
    assert_eq!(Term::SeqContext(4, 256).name(), "context@4x256");
}

proptest::proptest! {
    #[test]
    fn every_decode_is_priced_whole_by_each_attention_table(b in 1u32..300, per_seq in 1.0f64..20_000.0) {
        // One rate in every cell: any step's attention is its Σ context at that rate,
        // whichever table and whatever its batch and length, inside the knots or beyond.
        let w = StepWork { decode_seqs: f64::from(b), decode_context: f64::from(b) * per_seq, ..Default::default() };
        for terms in [Term::seq_table(64, 1552), Term::batch_length_tables(64, 1552)] {
            let t = Tables::of(&terms);
            let cells: Vec<Term> = terms.iter().copied().filter(|x| x.is_attention_cell()).collect();
            let rows = if matches!(cells[0], Term::SeqContext(..)) { 1.0 } else { 2.0 };
            let share: f64 = cells.iter().map(|&x| w.share(x, &t)).sum();
            proptest::prop_assert!((share - rows).abs() < 1e-9, "{share}");
            let c = LinearCost::new(terms.clone(), vec![1e-7; terms.len()], 0.0);
            let want = rows * 1e-7 * w.decode_context;
            proptest::prop_assert!((c.step_seconds(&w) / want - 1.0).abs() < 1e-9);
        }
    }
}
