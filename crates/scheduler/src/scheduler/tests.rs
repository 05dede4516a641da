use super::*;
use crate::seq_blocks;
use proptest::prelude::*;
use std::collections::HashMap;

/// A fake model over a fake KV pool: it writes each new token into the slot each KV-cache
/// group's block table names, checks that every new position reads back, through each
/// group's table, the tokens it sees (a sliding group: its window), and samples a token that
/// depends on what the last position sees in every group. A wrong position, a lost token, a
/// bad recompute, a block freed while a window still sees it, or a prefix-cache block holding
/// other tokens changes the output or fails the check.
struct FakeRunner {
    slots: HashMap<usize, TokenId>,
    vocab: u32,
    /// Each request's tokens as the runner was given them (the truth the tables must hold).
    history: HashMap<RequestId, Vec<TokenId>>,
}

impl FakeRunner {
    fn new(vocab: u32) -> Self {
        Self { slots: HashMap::new(), vocab, history: HashMap::new() }
    }
    fn step(&mut self, out: &SchedulerOutput, cfg: &SchedulerConfig) -> Vec<Option<TokenId>> {
        let bs = cfg.block_size;
        let slot = |bt: &[u32], pos: usize| {
            assert_ne!(bt[pos / bs], BlockPool::NULL_BLOCK, "position {pos} is read from the null block");
            bt[pos / bs] as usize * bs + pos % bs
        };
        out.seqs
            .iter()
            .map(|s| {
                let h = self.history.entry(s.id).or_default();
                // Positions served from the prefix cache that this request never sent are
                // unknown here (checked through the sampled tokens instead).
                h.resize(s.start, UNKNOWN);
                h.extend(&s.tokens);
                for (g, bt) in s.block_tables.iter().enumerate() {
                    for (i, &t) in s.tokens.iter().enumerate() {
                        self.slots.insert(g << 40 | slot(bt, s.start + i), t);
                    }
                }
                let mut seen = Vec::new();
                for p in s.start..s.context_len() {
                    seen.clear();
                    for (g, (bt, w)) in s.block_tables.iter().zip(&cfg.group_windows).enumerate() {
                        let from = w.map_or(0, |w| seq_blocks::first_seen(p, w));
                        for (q, &truth) in h.iter().enumerate().take(p + 1).skip(from) {
                            let t = self.slots[&(g << 40 | slot(bt, q))];
                            if truth != UNKNOWN {
                                assert_eq!(t, truth, "request {} group {g} reads position {q}", s.id);
                            }
                            seen.push(t);
                        }
                    }
                }
                s.samples.then(|| next_token(&seen, self.vocab))
            })
            .collect()
    }
}

const UNKNOWN: TokenId = TokenId::MAX;

/// What the last position of `ctx` sees in each group, one group after the other.
fn visible(ctx: &[TokenId], windows: &[Option<usize>]) -> Vec<TokenId> {
    let p = ctx.len() - 1;
    windows.iter().flat_map(|w| &ctx[w.map_or(0, |w| seq_blocks::first_seen(p, w))..]).copied().collect()
}

fn next_token(ctx: &[TokenId], vocab: u32) -> TokenId {
    let mut h: u64 = 1469598103934665603;
    for &t in ctx {
        h = (h ^ t as u64).wrapping_mul(1099511628211);
    }
    (h % vocab as u64) as TokenId
}

/// Greedy output of the fake model for one request alone (one full group).
fn reference(prompt: &[TokenId], p: &SamplingParams, eos: Option<TokenId>, vocab: u32) -> Vec<TokenId> {
    reference_in(prompt, p, eos, vocab, &[None])
}

/// Greedy output of the fake model for one request alone over groups of `windows`.
fn reference_in(
    prompt: &[TokenId],
    p: &SamplingParams,
    eos: Option<TokenId>,
    vocab: u32,
    windows: &[Option<usize>],
) -> Vec<TokenId> {
    let mut ctx = prompt.to_vec();
    let mut out = Vec::new();
    loop {
        let t = next_token(&visible(&ctx, windows), vocab);
        ctx.push(t);
        out.push(t);
        let ok = out.len() >= p.min_tokens;
        if (ok && !p.ignore_eos && Some(t) == eos) || (ok && p.stop_token_ids.contains(&t)) || out.len() >= p.max_tokens
        {
            return out;
        }
    }
}

fn req(id: RequestId, prompt: Vec<TokenId>, max_tokens: usize) -> NewRequest {
    NewRequest { id, prompt, params: SamplingParams::greedy_exact(max_tokens), arrival: Stamp(id) }
}

fn cfg(num_blocks: usize, block_size: usize, budget: usize, max_seqs: usize) -> SchedulerConfig {
    SchedulerConfig {
        max_num_batched_tokens: budget,
        max_prefill_tokens: None,
        max_num_seqs: max_seqs,
        num_blocks,
        block_size,
        enable_prefix_caching: false,
        max_model_len: 4096,
        eos_token_id: None,
        group_windows: vec![None],
    }
}

/// Runs until idle, checking the invariants of every step; returns finished records by id.
fn run_to_end(
    s: &mut Scheduler,
    runner: &mut FakeRunner,
    max_steps: usize,
) -> HashMap<RequestId, (EngineRecord, Vec<TokenId>)> {
    let mut done = HashMap::new();
    let mut t = 100;
    for _ in 0..max_steps {
        if !s.has_work() {
            break;
        }
        t += 10;
        let out = s.schedule(Stamp(t));
        assert!(out.num_tokens() <= s.config().max_num_batched_tokens);
        assert!(out.seqs.len() <= s.config().max_num_seqs);
        assert!(s.num_running() <= s.config().max_num_seqs);
        for q in &out.seqs {
            assert!(!q.tokens.is_empty());
            assert!(q.block_table().len() * s.config().block_size >= q.context_len());
            assert!(!q.block_table().contains(&BlockPool::NULL_BLOCK));
        }
        s.pool().check_invariants().unwrap();
        let sampled = runner.step(&out, s.config());
        t += 10;
        let upd = s.update(&out, &sampled, Stamp(t));
        s.pool().check_invariants().unwrap();
        for (rec, toks) in upd.finished {
            done.insert(rec.id, (rec, toks));
        }
    }
    assert!(!s.has_work(), "scheduler did not finish within {max_steps} steps");
    let p = s.pool();
    assert_eq!(p.num_free_blocks(), p.usable_blocks(), "blocks leaked");
    done
}

#[test]
fn one_request_prefills_then_decodes_with_stamps() {
    let mut s = Scheduler::new(cfg(64, 4, 64, 8)).unwrap();
    s.add(req(1, vec![5; 10], 3), Stamp(50)).unwrap();
    let mut r = FakeRunner::new(100);
    let out = s.schedule(Stamp(60));
    assert_eq!(out.seqs.len(), 1);
    assert_eq!((out.prefill_tokens, out.decode_seqs), (10, 0));
    assert_eq!(out.seqs[0].block_table().len(), 3); // 10 tokens in blocks of 4
    let sampled = r.step(&out, s.config());
    let upd = s.update(&out, &sampled, Stamp(70));
    assert_eq!(upd.tokens.len(), 1);
    let out = s.schedule(Stamp(80));
    assert_eq!((out.prefill_tokens, out.decode_seqs, out.seqs[0].start), (0, 1, 10));
    let done = run_to_end(&mut s, &mut r, 10);
    let (rec, toks) = &done[&1];
    assert_eq!(toks, &reference(&[5; 10], &SamplingParams::greedy_exact(3), None, 100));
    assert_eq!(rec.queued, Stamp(50));
    assert_eq!(rec.first_scheduled, Some(Stamp(60)));
    assert_eq!(rec.first_token, Some(Stamp(70)));
    assert_eq!(rec.token_times.len(), 3);
    assert_eq!(rec.finish_reason, FinishReason::Length);
}

#[test]
fn a_step_reports_its_attention_work() {
    // Budget 8: request 1 (10 tokens) takes 8, then 2 + a decode beside request 2's chunk.
    let mut s = Scheduler::new(cfg(64, 4, 8, 8)).unwrap();
    s.add(req(1, vec![5; 10], 3), Stamp(0)).unwrap();
    let mut r = FakeRunner::new(100);
    let out = s.schedule(Stamp(1));
    // 8 tokens at positions 1..=8 attend 1 + 2 + … + 8 = 36 positions; nothing is sampled.
    assert_eq!((out.prefill_attention(), out.decode_context(), out.sampled()), (36, 0, 0));
    let upd = s.update(&out, &r.step(&out, &s.config().clone()), Stamp(2));
    assert!(upd.tokens.is_empty());
    let out = s.schedule(Stamp(3));
    // The last 2 prompt tokens after 8 cached: 2·8 + 3 = 19, and the first token is sampled.
    assert_eq!((out.prefill_attention(), out.decode_context(), out.sampled()), (19, 0, 1));
    s.update(&out, &r.step(&out, &s.config().clone()), Stamp(4));
    s.add(req(2, vec![6; 5], 2), Stamp(5)).unwrap();
    let out = s.schedule(Stamp(6));
    // Request 1 decodes at context 11; request 2 prefills 5 tokens (15) and samples.
    assert_eq!((out.prefill_attention(), out.decode_context(), out.sampled()), (15, 11, 2));
}

#[test]
fn long_prompt_is_prefilled_in_chunks_beside_decodes() {
    let mut s = Scheduler::new(cfg(128, 4, 32, 8)).unwrap();
    let mut r = FakeRunner::new(100);
    s.add(req(1, vec![1; 5], 20), Stamp(0)).unwrap();
    let out = s.schedule(Stamp(1));
    let sampled = r.step(&out, s.config());
    s.update(&out, &sampled, Stamp(2));
    s.add(req(2, (0..100).collect(), 2), Stamp(3)).unwrap();
    let mut chunks = Vec::new();
    for t in 0..4 {
        let out = s.schedule(Stamp(10 + t));
        assert_eq!(out.decode_seqs, 1, "the decode runs in every step");
        let p = out.seqs.iter().find(|q| q.id == 2).unwrap();
        chunks.push((p.start, p.tokens.len(), p.samples));
        let sampled = r.step(&out, s.config());
        s.update(&out, &sampled, Stamp(20 + t));
    }
    assert_eq!(chunks, vec![(0, 31, false), (31, 31, false), (62, 31, false), (93, 7, true)]);
    let done = run_to_end(&mut s, &mut r, 50);
    assert_eq!(done[&2].1, reference(&(0..100).collect::<Vec<_>>(), &SamplingParams::greedy_exact(2), None, 100));
}

#[test]
fn max_num_seqs_and_budget_limit_admission() {
    let mut s = Scheduler::new(cfg(256, 4, 20, 3)).unwrap();
    for id in 0..5 {
        s.add(req(id, vec![id as u32; 6], 4), Stamp(0)).unwrap();
    }
    let out = s.schedule(Stamp(1));
    // 20 tokens of budget: 6 + 6 + 6 and the fourth gets 2 tokens, but only 3 sequences may run.
    assert_eq!(out.seqs.len(), 3);
    assert_eq!(s.num_waiting(), 2);
    let mut r = FakeRunner::new(50);
    let sampled = r.step(&out, s.config());
    s.update(&out, &sampled, Stamp(2));
    let done = run_to_end(&mut s, &mut r, 100);
    assert_eq!(done.len(), 5);
}

/// With `max_prefill_tokens`, a step that already holds that many prefill tokens starts no
/// further prompt: long prompts go one per step (the first of each step always starts), short
/// ones join until the cap is reached, a running prompt's chunks hold the queue back, decodes
/// are not held back. Without it, prompts join while the budget lasts.
#[test]
fn a_prefill_cap_starts_prompts_one_step_at_a_time() {
    let long = |id| req(id, (0..1024).map(|t| t as TokenId % 50).collect(), 4);
    let short = |id| req(id, vec![7; 128], 4);
    let start = |cap: Option<usize>, prompts: Vec<NewRequest>| {
        let mut s = Scheduler::new(SchedulerConfig { max_prefill_tokens: cap, ..cfg(512, 16, 2048, 64) }).unwrap();
        prompts.into_iter().for_each(|r| s.add(r, Stamp(1)).unwrap());
        s
    };
    // One step: its (id, new tokens), then its results applied (token 9 where it samples).
    let step = |s: &mut Scheduler, t: u64| {
        let out = s.schedule(Stamp(t));
        let sampled: Vec<Option<TokenId>> = out.seqs.iter().map(|q| q.samples.then_some(9)).collect();
        s.update(&out, &sampled, Stamp(t));
        out.seqs.iter().map(|q| (q.id, q.tokens.len())).collect::<Vec<_>>()
    };
    assert_eq!(step(&mut start(None, vec![long(1), long(2), long(3)]), 2), [(1, 1024), (2, 1024)]);
    let mut s = start(Some(512), vec![long(1), long(2), long(3)]);
    assert_eq!(step(&mut s, 2), [(1, 1024)]);
    assert_eq!(step(&mut s, 3), [(1, 1), (2, 1024)], "1 decodes beside 2's prefill; 3 waits");
    assert_eq!(step(&mut s, 4), [(1, 1), (2, 1), (3, 1024)]);
    let mut s = start(Some(512), (1..=6).map(short).collect());
    assert_eq!(step(&mut s, 2), [(1, 128), (2, 128), (3, 128), (4, 128)], "short prompts join up to 512");
    // A prompt longer than the budget: its chunks hold the later prompt back.
    let mut s = start(Some(512), vec![req(1, vec![3; 3000], 2), short(2)]);
    assert_eq!(step(&mut s, 2), [(1, 2048)]);
    assert_eq!(step(&mut s, 3), [(1, 952)]);
    assert_eq!(step(&mut s, 4), [(1, 1), (2, 128)]);
}

#[test]
fn preemption_recomputes_newest_and_keeps_outputs_and_first_scheduled() {
    // 6 usable blocks of 4 tokens; two requests each growing to 4 blocks cannot both fit.
    let mut s = Scheduler::new(cfg(7, 4, 64, 8)).unwrap();
    let mut r = FakeRunner::new(97);
    s.add(req(1, vec![3; 6], 10), Stamp(0)).unwrap();
    s.add(req(2, vec![4; 6], 10), Stamp(0)).unwrap();
    let done = run_to_end(&mut s, &mut r, 200);
    for (id, p) in [(1u64, 3u32), (2, 4)] {
        let (rec, toks) = &done[&id];
        assert_eq!(toks, &reference(&[p; 6], &SamplingParams::greedy_exact(10), None, 97), "request {id}");
        assert_eq!(rec.generated_tokens, 10);
        assert_eq!(rec.token_times.len(), 10);
    }
    assert_eq!(done[&1].0.preemptions, 0);
    assert!(done[&2].0.preemptions >= 1, "the newer request is preempted");
    // first_scheduled is the very first step, never reset.
    assert_eq!(done[&2].0.first_scheduled, Some(Stamp(110)));
}

#[test]
fn prefix_cache_hits_are_capped_before_the_last_token() {
    let mut c = cfg(64, 16, 512, 8);
    c.enable_prefix_caching = true;
    let mut s = Scheduler::new(c).unwrap();
    let mut r = FakeRunner::new(1000);
    let prompt: Vec<TokenId> = (0..40).collect();
    s.add(req(1, prompt.clone(), 2), Stamp(0)).unwrap();
    run_to_end(&mut s, &mut r, 10);
    assert_eq!(s.pool().num_cached_blocks(), 2, "two full blocks of the 41 computed tokens are cached");
    s.add(req(2, prompt.clone(), 2), Stamp(0)).unwrap();
    let out = s.schedule(Stamp(1));
    assert_eq!((out.prefix_hit_tokens, out.prefix_query_tokens), (32, 40));
    assert_eq!((out.seqs[0].start, out.seqs[0].tokens.len()), (32, 8));
    let sampled = r.step(&out, s.config());
    s.update(&out, &sampled, Stamp(2));
    let done = run_to_end(&mut s, &mut r, 10);
    assert_eq!(done[&2].0.cached_tokens, 32);
    assert_eq!(done[&2].1, reference(&prompt, &SamplingParams::greedy_exact(2), None, 1000));
    // A prompt of exactly two blocks may only hit one: the last token must be computed.
    s.add(req(3, (0..32).collect(), 1), Stamp(0)).unwrap();
    let out = s.schedule(Stamp(3));
    assert_eq!(out.prefix_hit_tokens, 16);
    s.abort(3, Stamp(4)).unwrap();
    assert_eq!(s.blocks_used(), 0);
}

#[test]
fn stop_conditions() {
    let vocab = 13;
    let prompt = vec![1u32, 2, 3];
    let free_run = reference(&prompt, &SamplingParams::greedy_exact(50), None, vocab);
    let eos = free_run[4];
    let first_eos = free_run.iter().position(|&t| t == eos).unwrap();
    let mut c = cfg(256, 4, 64, 8);
    c.eos_token_id = Some(eos);
    let mut s = Scheduler::new(c).unwrap();
    let mut r = FakeRunner::new(vocab);
    let plain = SamplingParams { max_tokens: 50, ..Default::default() };
    let with_min = SamplingParams { max_tokens: 50, min_tokens: first_eos + 2, ..Default::default() };
    let stop_tok =
        SamplingParams { max_tokens: 50, ignore_eos: true, stop_token_ids: vec![free_run[2]], ..Default::default() };
    for (id, p) in [(1, plain.clone()), (2, with_min.clone()), (3, stop_tok.clone())] {
        s.add(NewRequest { id, prompt: prompt.clone(), params: p, arrival: Stamp(0) }, Stamp(0)).unwrap();
    }
    let done = run_to_end(&mut s, &mut r, 200);
    assert_eq!(done[&1].1.len(), first_eos + 1);
    assert_eq!(done[&1].0.finish_reason, FinishReason::Stop);
    assert_eq!(done[&2].1, reference(&prompt, &with_min, Some(eos), vocab));
    assert!(done[&2].1.len() > first_eos + 1);
    let stop_at = free_run.iter().position(|&t| t == free_run[2]).unwrap();
    assert_eq!(done[&3].1.len(), stop_at + 1);
}

#[test]
fn admission_errors_are_clear() {
    let mut c = cfg(5, 4, 64, 8); // 4 usable blocks = 16 tokens
    c.max_model_len = 64;
    let s = Scheduler::new(c).unwrap().with_vocab_size(100);
    let p = |n| SamplingParams::greedy_exact(n);
    assert_eq!(s.check(0, &p(1)), Err(AdmissionError::EmptyPrompt));
    assert_eq!(s.check(3, &p(0)), Err(AdmissionError::InvalidParams(goodput_core::ParamsError::ZeroMaxTokens)));
    assert!(matches!(s.check(64, &p(1)), Err(AdmissionError::PromptTooLong { .. })));
    assert!(matches!(s.check(60, &p(10)), Err(AdmissionError::ContextTooLong { .. })));
    let e = s.check(10, &p(8)).unwrap_err();
    assert!(matches!(e, AdmissionError::ExceedsPool { needed: 5, usable: 4, .. }), "{e:?}");
    assert!(e.to_string().contains("--kv-blocks"));
    assert!(s.check(10, &p(7)).is_ok()); // 16 tokens held at most
    let mut s = s;
    assert!(matches!(s.add(req(1, vec![100], 1), Stamp(0)), Err(AdmissionError::TokenOutOfVocab { token: 100, .. })));
    s.add(req(1, vec![1], 1), Stamp(0)).unwrap();
    assert_eq!(s.add(req(1, vec![1], 1), Stamp(0)), Err(AdmissionError::DuplicateId(1)));
}

#[test]
fn abort_returns_blocks_at_once() {
    let mut s = Scheduler::new(cfg(32, 4, 64, 8)).unwrap();
    let mut r = FakeRunner::new(10);
    s.add(req(1, vec![1; 20], 5), Stamp(0)).unwrap();
    s.add(req(2, vec![2; 20], 5), Stamp(0)).unwrap();
    let out = s.schedule(Stamp(1));
    let sampled = r.step(&out, s.config());
    s.update(&out, &sampled, Stamp(2));
    assert_eq!(s.blocks_used(), 10); // 20 prompt tokens each in blocks of 4
    assert_eq!(s.tokens_held(), 40);
    let (rec, toks) = s.abort(1, Stamp(3)).unwrap();
    assert_eq!((rec.finish_reason, toks.len(), rec.generated_tokens), (FinishReason::Abort, 1, 1));
    assert_eq!(s.blocks_used(), 5);
    assert!(s.abort(1, Stamp(4)).is_none());
    s.abort_all(FinishReason::Abort, Stamp(5));
    assert_eq!(s.blocks_used(), 0);
    s.pool().check_invariants().unwrap();
}

#[test]
fn shared_prefix_blocks_count_once_in_tokens_held() {
    let mut c = cfg(64, 4, 64, 8);
    c.enable_prefix_caching = true;
    let mut s = Scheduler::new(c).unwrap();
    let mut r = FakeRunner::new(10);
    s.add(req(1, vec![7; 9], 1), Stamp(0)).unwrap();
    let out = s.schedule(Stamp(1));
    let sampled = r.step(&out, s.config());
    s.update(&out, &sampled, Stamp(2)); // finished; its 2 full blocks stay cached
    s.add(req(2, vec![7; 9], 5), Stamp(0)).unwrap();
    s.add(req(3, vec![7; 9], 5), Stamp(0)).unwrap();
    let out = s.schedule(Stamp(3));
    assert_eq!(out.prefix_hit_tokens, 16);
    let sampled = r.step(&out, s.config());
    s.update(&out, &sampled, Stamp(4));
    // 8 shared tokens + 1 own token each.
    assert_eq!(s.tokens_held(), 10);
    assert_eq!(s.blocks_used(), 4);
    // Both decode at context 10: 8 shared positions read once, 2 of its own each.
    assert_eq!(s.decode_distinct_next(), 12);
    let out = s.schedule(Stamp(5));
    assert_eq!((out.decode_context(), out.decode_distinct_context), (20, 12));
}

/// KV-cache groups: one full group, one sliding, or a mix (gpt-oss-like and more).
fn arb_windows() -> impl Strategy<Value = Vec<Option<usize>>> {
    prop_oneof![
        Just(vec![None]),
        (1usize..12).prop_map(|w| vec![Some(w)]),
        (1usize..12).prop_map(|w| vec![Some(w), None]),
        (1usize..12, 1usize..12).prop_map(|(a, b)| vec![None, Some(a), Some(b)]),
    ]
}

fn arb_case() -> impl Strategy<Value = (SchedulerConfig, Vec<(Vec<TokenId>, usize, u64)>)> {
    let prefill_cap = prop::option::of(1usize..40);
    (2usize..40, 1usize..6, 1usize..64, 1usize..6, any::<bool>(), arb_windows(), prefill_cap).prop_flat_map(
        |(nb, bs, budget, seqs, cache, windows, prefill_cap)| {
            let c = SchedulerConfig {
                max_num_batched_tokens: budget,
                max_prefill_tokens: prefill_cap,
                max_num_seqs: seqs,
                num_blocks: nb,
                block_size: bs,
                enable_prefix_caching: cache,
                max_model_len: 4096,
                eos_token_id: Some(3),
                group_windows: windows,
            };
            let fits = c.clone();
            let reqs = prop::collection::vec((prop::collection::vec(0u32..4, 1..20), 1usize..12, 0u64..30), 1..12)
                .prop_map(move |v| {
                    v.into_iter().filter(|(p, m, _)| fits.blocks_alone(p.len() + m - 1) < fits.num_blocks).collect()
                });
            (Just(c), reqs)
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    /// Whatever the pool size, budget, caching, KV-cache groups and arrival order: every
    /// admitted request finishes, its output equals the single-request reference, no step
    /// breaks the limits, a sliding group never holds more than its window needs, and every
    /// block is free at the end.
    #[test]
    fn any_workload_finishes_with_reference_outputs((c, reqs) in arb_case()) {
        let mut s = Scheduler::new(c.clone()).unwrap();
        let mut runner = FakeRunner::new(5);
        let mut expected = HashMap::new();
        let mut t = 0u64;
        let mut pending: Vec<(RequestId, Vec<TokenId>, usize, u64)> =
            reqs.into_iter().enumerate().map(|(i, (p, m, at))| (i as u64, p, m, at)).collect();
        pending.sort_by_key(|x| x.3);
        let mut done = HashMap::new();
        for step in 0..5000u64 {
            while let Some(x) = pending.first() {
                if x.3 > step { break; }
                let (id, p, m, _) = pending.remove(0);
                let params = SamplingParams { max_tokens: m, ..Default::default() };
                expected.insert(id, reference_in(&p, &params, Some(3), 5, &c.group_windows));
                s.add(NewRequest { id, prompt: p, params, arrival: Stamp(t) }, Stamp(t)).unwrap();
            }
            if !s.has_work() && pending.is_empty() { break; }
            t += 1;
            let out = s.schedule(Stamp(t));
            prop_assert!(out.num_tokens() <= c.max_num_batched_tokens);
            prop_assert!(s.num_running() <= c.max_num_seqs);
            s.pool().check_invariants().map_err(|e| TestCaseError::fail(e.0))?;
            for q in &out.seqs {
                for (bt, w) in q.block_tables.iter().zip(&c.group_windows) {
                    let held = bt.iter().filter(|&&b| b != BlockPool::NULL_BLOCK).count();
                    let most = w.map_or(bt.len(), |w| (w - 1 + q.tokens.len()).div_ceil(c.block_size) + 1);
                    prop_assert!(held <= most, "a window of {:?} holds {} blocks", w, held);
                }
            }
            let sampled = runner.step(&out, s.config());
            t += 1;
            let upd = s.update(&out, &sampled, Stamp(t));
            let by_kind = s.kv_by_kind();
            prop_assert_eq!(by_kind.is_some(), c.group_windows.iter().any(Option::is_some));
            if let Some(k) = by_kind {
                prop_assert_eq!(k.full + k.sliding, s.blocks_used());
                // The distinct blocks of the running sequences' sliding tables, counted apart.
                let mut sliding: Vec<u32> = s
                    .running
                    .iter()
                    .flat_map(|q| q.blocks.tables().iter().zip(&c.group_windows))
                    .filter(|(_, w)| w.is_some())
                    .flat_map(|(t, _)| t.held())
                    .collect();
                sliding.sort_unstable();
                sliding.dedup();
                prop_assert_eq!(k.sliding, sliding.len());
            }
            for (rec, toks) in upd.finished {
                    prop_assert!(rec.first_scheduled.unwrap() >= rec.queued);
                prop_assert!(rec.first_token.unwrap() >= rec.first_scheduled.unwrap());
                done.insert(rec.id, toks);
            }
        }
        prop_assert!(!s.has_work() && pending.is_empty(), "deadlock or livelock");
        prop_assert_eq!(done, expected);
        let p = s.pool();
        prop_assert_eq!(p.num_free_blocks(), p.usable_blocks());
        p.check_invariants().map_err(|e| TestCaseError::fail(e.0))?;
    }
}
