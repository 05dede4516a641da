use super::super::*;
use proptest::prelude::*;
use std::collections::HashMap;

const TOKEN: TokenId = 1;

type Done = HashMap<RequestId, (EngineRecord, Vec<TokenId>)>;
/// (prompt, max_tokens, arrival step) of each request.
type Reqs = Vec<(Vec<TokenId>, usize, u64)>;

/// Step `i` is scheduled at `10 i` and its tokens stamped `10 i + 5`; the requests due at a
/// step are added before it. With `runs`, every stretch a decode run can take (up to `cap`
/// steps, none past the next arrival) is applied as one. The pool's invariants are checked
/// after every step and run.
fn drive(c: &SchedulerConfig, reqs: &[(Vec<TokenId>, usize, u64)], runs: bool, cap: usize) -> (Done, usize) {
    let mut s = Scheduler::new(c.clone()).unwrap();
    let mut pending: Vec<(u64, RequestId, Vec<TokenId>, usize)> =
        reqs.iter().enumerate().map(|(i, (p, m, at))| (*at, i as u64, p.clone(), *m)).collect();
    pending.sort_by_key(|x| (x.0, x.1));
    let mut pending: std::collections::VecDeque<_> = pending.into();
    let (mut done, mut ran) = (Done::new(), 0);
    let mut step = 0u64;
    while step < 20_000 && (s.has_work() || !pending.is_empty()) {
        while pending.front().is_some_and(|x| x.0 <= step) {
            let (_, id, prompt, m) = pending.pop_front().unwrap();
            let r = NewRequest { id, prompt, params: SamplingParams::greedy_exact(m), arrival: Stamp(step * 10) };
            let _ = s.add(r, Stamp(step * 10));
        }
        let until_arrival = pending.front().map_or(u64::MAX, |x| x.0 - step) as usize;
        let k = if runs { s.decode_run_len(TOKEN, cap.min(until_arrival)) } else { 0 };
        if k >= 1 {
            let times: Vec<Stamp> = (0..k as u64).map(|j| Stamp((step + j) * 10 + 5)).collect();
            assert!(s.decode_run(TOKEN, &times));
            // Asking for more than the run allows changes nothing.
            assert!(!s.decode_run(TOKEN, &vec![Stamp(0); s.decode_run_len(TOKEN, usize::MAX) + 1]));
            s.pool().check_invariants().unwrap();
            step += k as u64;
            ran += k;
            continue;
        }
        let next = (s.decode_run_len(TOKEN, 1) == 1).then(|| (s.decode_context_next(), s.decode_distinct_next()));
        let out = s.schedule(Stamp(step * 10));
        assert_eq!(out.decode_distinct_context, distinct_slots(&out, c.block_size));
        if let Some(next) = next {
            assert_eq!(next, (out.decode_context(), out.decode_distinct_context));
        }
        let sampled: Vec<Option<TokenId>> = out.seqs.iter().map(|q| q.samples.then_some(TOKEN)).collect();
        let upd = s.update(&out, &sampled, Stamp(step * 10 + 5));
        s.pool().check_invariants().unwrap();
        done.extend(upd.finished.into_iter().map(|(r, t)| (r.id, (r, t))));
        step += 1;
    }
    assert!(!s.has_work(), "did not finish");
    (done, ran)
}

/// The distinct (block, offset) slots the decode sequences of `out` attend, counted one by one.
fn distinct_slots(out: &SchedulerOutput, bs: usize) -> u64 {
    let slots: std::collections::HashSet<(u32, usize)> = out
        .seqs
        .iter()
        .filter(|q| q.is_decode)
        .flat_map(|q| (0..q.context_len()).map(move |p| (q.block_table()[p / bs], p % bs)))
        .collect();
    slots.len() as u64
}

fn arb_case() -> impl Strategy<Value = (SchedulerConfig, Reqs, usize)> {
    (2usize..60, 1usize..6, 1usize..64, 1usize..8, any::<bool>(), 1usize..40).prop_flat_map(
        |(nb, bs, budget, seqs, cache, cap)| {
            let c = SchedulerConfig {
                max_num_batched_tokens: budget,
                max_prefill_tokens: None,
                max_num_seqs: seqs,
                num_blocks: nb,
                block_size: bs,
                enable_prefix_caching: cache,
                max_model_len: 64,
                eos_token_id: Some(3),
                group_windows: vec![None],
            };
            let fits = c.clone();
            // Prompts of few distinct tokens share prefixes; outputs up to 40 tokens.
            let reqs = prop::collection::vec((prop::collection::vec(0u32..3, 1..20), 1usize..40, 0u64..80), 1..10)
                .prop_map(move |v| {
                    v.into_iter().filter(|(p, m, _)| fits.blocks_alone(p.len() + m - 1) < fits.num_blocks).collect()
                });
            (Just(c), reqs, Just(cap))
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    /// Whatever the pool, budget, caching and arrivals: a driver that takes every decode run
    /// it can ends every request with the record (token stamps, cached tokens, preemptions)
    /// and tokens of one that steps one at a time.
    #[test]
    fn runs_go_as_single_steps((c, reqs, cap) in arb_case()) {
        let (single, none) = drive(&c, &reqs, false, cap);
        let (batched, _) = drive(&c, &reqs, true, cap);
        prop_assert_eq!(none, 0);
        prop_assert_eq!(single, batched);
    }
}

#[test]
fn a_run_stops_short_of_a_finish_a_waiting_request_and_the_pool() {
    let cfg = |blocks, eos| SchedulerConfig {
        num_blocks: blocks,
        block_size: 4,
        max_model_len: 100,
        eos_token_id: eos,
        ..Default::default()
    };
    let start = |c: SchedulerConfig, max: [usize; 2], token: TokenId| {
        let mut s = Scheduler::new(c).unwrap();
        for (id, m) in [1, 2].into_iter().zip(max) {
            let params = SamplingParams { max_tokens: m, ..Default::default() };
            s.add(NewRequest { id, prompt: vec![7; 4], params, arrival: Stamp(0) }, Stamp(0)).unwrap();
        }
        // Waiting requests and a prefill first: no run.
        assert_eq!(s.decode_run_len(TOKEN, 100), 0);
        let out = s.schedule(Stamp(0));
        s.update(&out, &[Some(token), Some(token)], Stamp(1));
        s
    };
    // Both decode, one block each; request 2 has 9 tokens to go, so a run takes 8 (the
    // 18 free blocks would cover far more).
    let s = start(cfg(21, None), [30, 10], TOKEN);
    assert_eq!(s.decode_context_next(), 10);
    assert_eq!(s.decode_run_len(TOKEN, 100), 8);
    assert_eq!(s.decode_run_len(TOKEN, 3), 3);
    // Two free blocks: one more each, positions up to 8, so 4 steps.
    let s = start(cfg(5, None), [10, 10], TOKEN);
    assert_eq!(s.decode_run_len(TOKEN, 100), 4);
    // An end-of-sequence token (not ignored) could stop anyone: no run; another token runs.
    let s = start(cfg(21, Some(TOKEN)), [20, 20], 2);
    assert_eq!(s.decode_run_len(TOKEN, 100), 0);
    assert_eq!(s.decode_run_len(2, 100), 18);
}

#[test]
fn a_busy_pool_under_runs_ends_as_under_single_steps() {
    // Shared prefixes, a pool that preempts, arrivals while others decode.
    let c = SchedulerConfig {
        num_blocks: 24,
        block_size: 4,
        max_model_len: 64,
        enable_prefix_caching: true,
        ..Default::default()
    };
    let reqs: Reqs =
        (0..8).map(|i| (vec![i % 2, 1, 2, (i % 3) as TokenId, 0, 1], 20 + i as usize, 5 * i as u64)).collect();
    let (single, _) = drive(&c, &reqs, false, 64);
    let (batched, ran) = drive(&c, &reqs, true, 64);
    assert_eq!(single.len(), 8);
    assert!(ran > 40, "{ran} steps in runs");
    assert_eq!(single, batched);
    assert!(single.values().any(|(r, _)| r.preemptions > 0) || single.values().any(|(r, _)| r.cached_tokens > 0));
}

#[test]
fn a_prefilled_request_decodes_from_its_first_token() {
    let c = SchedulerConfig { num_blocks: 9, block_size: 4, max_model_len: 100, ..Default::default() };
    let mut s = Scheduler::new(c).unwrap();
    let params = SamplingParams::greedy_exact(5);
    let req = |id| NewRequest { id, prompt: vec![7; 10], params: params.clone(), arrival: Stamp(0) };
    assert!(s.add_prefilled(NewRequest { params: SamplingParams::greedy_exact(1), ..req(9) }, 3, Stamp(0)).is_err());
    s.add_prefilled(req(1), 3, Stamp(5)).unwrap();
    // Admitted as a decode: 11 positions in 3 blocks, one token computed (the first sampled).
    let out = s.schedule(Stamp(10));
    assert_eq!((out.prefill_tokens, out.decode_seqs, out.seqs[0].start), (0, 1, 10));
    assert_eq!(out.seqs[0].tokens, [3]);
    assert_eq!(s.blocks_used(), 3);
    s.update(&out, &[Some(TOKEN)], Stamp(11));
    // Four more tokens, one of them already made elsewhere: three decode steps remain.
    let mut steps = 1;
    let rec = loop {
        let out = s.schedule(Stamp(20 + steps));
        steps += 1;
        if let Some((rec, toks)) = s.update(&out, &[Some(TOKEN)], Stamp(21 + steps)).finished.pop() {
            assert_eq!(toks, [3, TOKEN, TOKEN, TOKEN, TOKEN]);
            break rec;
        }
    };
    assert_eq!((steps, rec.generated_tokens, rec.token_times.len()), (4, 5, 4));
    assert_eq!((rec.first_scheduled, rec.prompt_tokens, rec.cached_tokens), (Some(Stamp(10)), 10, 0));
    assert_eq!(s.blocks_used(), 0);
}
