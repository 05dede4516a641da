use super::*;
use crate::cost::{LinearCost, Term};
use goodput_core::SamplingParams;
use rand::SeedableRng;
use rand_distr::{Distribution, Exp};

/// Every step costs the same.
struct Constant(f64);

impl StepCost for Constant {
    fn step_seconds(&self, _: &StepWork) -> f64 {
        self.0
    }
    fn gap_seconds(&self) -> f64 {
        0.0
    }
}

fn cfg(max_seqs: usize) -> SchedulerConfig {
    SchedulerConfig { max_num_seqs: max_seqs, num_blocks: 4096, max_model_len: 4096, ..Default::default() }
}

fn request(id: u64, prompt: usize, out: usize, at: Stamp) -> NewRequest {
    NewRequest { id, prompt: vec![7; prompt], params: SamplingParams::greedy_exact(out), arrival: at }
}

#[test]
fn batch_of_one_with_a_constant_step_is_m_d_1() {
    // Poisson arrivals at λ, one request per step of D (batch size 1, one token each):
    // Pollaczek–Khinchine mean wait for M/D/1 is ρ·D / (2(1 − ρ)) with ρ = λ·D.
    let (d, rho) = (0.010, 0.7);
    let lambda = rho / d;
    let exp = Exp::new(lambda).unwrap();
    let mut rng = rand::rngs::SmallRng::seed_from_u64(11);
    let mut t = 0.0;
    let arrivals: Vec<(Stamp, NewRequest)> = (0..20_000)
        .map(|i| {
            t += exp.sample(&mut rng);
            let at = Stamp((t * 1e9) as u64);
            // Distinct prompts: no prefix-cache hit shortens anything.
            let mut r = request(i, 8, 1, at);
            r.prompt[0] = i as u32 % 30_000;
            (at, r)
        })
        .collect();
    let mut engine = SimEngine::new(cfg(1), Arc::new(Constant(d))).unwrap();
    let out = run_arrivals(&mut engine, arrivals);
    assert_eq!(out.records.len(), 20_000);
    assert!(out.steps.iter().all(|s| s.num_seqs == 1));
    let waits: Vec<f64> = out.records.iter().map(|r| r.first_scheduled.unwrap().secs_since(r.arrival)).collect();
    let mean = waits.iter().sum::<f64>() / waits.len() as f64;
    let want = rho * d / (2.0 * (1.0 - rho));
    assert!((mean / want - 1.0).abs() < 0.05, "mean wait {mean} vs Pollaczek–Khinchine {want}");
}

#[test]
fn one_request_alone_takes_its_steps_and_gaps() {
    // Prefill of 100 tokens, then 9 decodes at contexts 101..=109.
    let cost = LinearCost::classic([1e-3, 1e-5, 0.0, 2e-5, 1e-7, 0.0], 1e-4);
    let mut engine = SimEngine::new(cfg(8), Arc::new(cost)).unwrap();
    let out = run_arrivals(&mut engine, vec![(Stamp(0), request(1, 100, 10, Stamp(0)))]);
    let r = &out.records[0];
    assert_eq!(out.steps.len(), 10);
    let prefill = 1e-3 + 100.0 * 1e-5;
    assert!((r.first_token.unwrap().secs_since(Stamp(0)) - prefill).abs() < 1e-9);
    let decodes: f64 = (101..=109).map(|c| 1e-3 + 2e-5 + c as f64 * 1e-7).sum();
    let e2e = prefill + decodes + 9.0 * 1e-4;
    assert!((r.finished.secs_since(Stamp(0)) - e2e).abs() < 1e-8, "{} vs {e2e}", r.finished.as_secs());
    assert_eq!(r.token_times.len(), 10);
    let s = &out.steps[3];
    assert_eq!((s.decode_seqs, s.decode_context, s.sampled), (1, 103, 1));
    assert_eq!(out.steps[0].prefill_attention, 100 * 101 / 2);
}

#[test]
fn requests_arriving_during_a_step_wait_for_its_end_and_then_batch() {
    let mut engine = SimEngine::new(cfg(8), Arc::new(Constant(0.010))).unwrap();
    let arrivals =
        vec![(Stamp(0), request(1, 16, 3, Stamp(0))), (Stamp(4_000_000), request(2, 16, 3, Stamp(4_000_000)))];
    let out = run_arrivals(&mut engine, arrivals);
    let by_id = |id| out.records.iter().find(|r| r.id == id).unwrap();
    // Request 2 arrives 4 ms into the first step: queued at 10 ms, scheduled with request 1's decode.
    assert_eq!(by_id(2).queued, Stamp(10_000_000));
    assert_eq!(by_id(2).first_scheduled, Some(Stamp(10_000_000)));
    assert_eq!(out.steps[1].num_seqs, 2);
    assert_eq!(by_id(1).finished, Stamp(30_000_000));
    assert_eq!(by_id(2).finished, Stamp(40_000_000));
}

#[test]
fn a_closed_loop_user_sends_its_next_request_while_the_following_step_runs() {
    // One user, 2 requests of 2 tokens, 10 ms steps: request 0 is prefilled at 0–10 ms and
    // decoded at 10–20 ms; the user's next request, sent at 20 ms, waits out the step that
    // starts then (nothing to run: the engine is idle, so it starts at once) — and with two
    // users, the second user's follow-up joins the step after next.
    let mut engine = SimEngine::new(cfg(8), Arc::new(Constant(0.010))).unwrap();
    let mut src = ClosedLoop::new(1, 2, std::time::Duration::ZERO, |i, at| request(i, 16, 2, at));
    let out = drive(&mut engine, &mut src);
    assert_eq!(out.records.len(), 2);
    let second = out.records.iter().find(|r| r.id == 1).unwrap();
    assert_eq!(second.arrival, Stamp(20_000_000));
    assert_eq!(second.first_scheduled, Some(Stamp(20_000_000)));
    // Two users with 1 and 3 tokens: user A's follow-up (sent at 10 ms, when its 1-token
    // request ends) misses the step starting at 10 ms and joins the one at 20 ms.
    let mut engine = SimEngine::new(cfg(8), Arc::new(Constant(0.010))).unwrap();
    let mut src =
        ClosedLoop::new(2, 3, std::time::Duration::ZERO, |i, at| request(i, 16, if i == 0 { 1 } else { 3 }, at));
    let out = drive(&mut engine, &mut src);
    let third = out.records.iter().find(|r| r.id == 2).unwrap();
    assert_eq!(third.arrival, Stamp(10_000_000));
    assert_eq!(third.first_scheduled, Some(Stamp(20_000_000)));
}

#[test]
fn the_decode_steps_after_a_prefill_are_priced_apart_in_runs_and_alone() {
    // 1 ms a step, 2 ms more for the first decode step after a prefill and 1 ms for the second.
    let cost =
        LinearCost::new(vec![Term::Fixed, Term::AfterPrefill(1), Term::AfterPrefill(2)], vec![1e-3, 2e-3, 1e-3], 0.0);
    let mut engine = SimEngine::new(cfg(8), Arc::new(cost)).unwrap();
    let out = run_arrivals(&mut engine, vec![(Stamp(0), request(1, 100, 6, Stamp(0)))]);
    let r = &out.records[0];
    let gaps: Vec<u64> = r.token_times.windows(2).map(|w| (w[1].0 - w[0].0) / 1_000_000).collect();
    assert_eq!(gaps, [3, 2, 1, 1, 1]);
    assert_eq!(r.first_token, Some(Stamp(1_000_000)));
}

#[test]
fn a_prompt_that_finds_the_engine_idle_pays_the_after_idle_price() {
    // 1 ms a step, 4 ms more after ≥ 256 ms idle. Two one-token requests: the first finds
    // the engine never run (no idle known), the second arrives a second after it finished.
    let cost = LinearCost::new(vec![Term::Fixed, Term::AfterIdle(256)], vec![1e-3, 4e-3], 0.0);
    let mut engine = SimEngine::new(cfg(8), Arc::new(cost)).unwrap();
    let (a, b) = (Stamp(0), Stamp(1_000_000_000));
    let out = run_arrivals(&mut engine, vec![(a, request(1, 8, 1, a)), (b, request(2, 8, 1, b))]);
    let took: Vec<u64> = out.steps.iter().map(|s| s.end.0 - s.start.0).collect();
    assert_eq!(took, [1_000_000, 5_000_000]);
}

#[test]
fn a_newcomer_to_a_batch_weighs_its_share_of_the_after_prefill_price() {
    // 1 ms a step, 4 ms more for the first decode step after a prefill, for a batch all of
    // whose sequences that prefill made. Three prompts together: their first decode step
    // pays it whole. A fourth joins 100 ms later: the step after its prefill holds four
    // sequences, one fresh, and pays a quarter.
    let cost = LinearCost::new(vec![Term::Fixed, Term::AfterPrefill(1)], vec![1e-3, 4e-3], 0.0);
    let mut engine = SimEngine::new(cfg(8), Arc::new(cost)).unwrap();
    let (t0, late) = (Stamp(0), Stamp(100_000_000));
    let mut arrivals: Vec<(Stamp, NewRequest)> = (1..=3).map(|i| (t0, request(i, 8 + i as usize, 200, t0))).collect();
    arrivals.push((late, request(4, 8, 4, late)));
    let out = run_arrivals(&mut engine, arrivals);
    let gaps = |id: u64| -> Vec<u64> {
        let r = out.records.iter().find(|r| r.id == id).unwrap();
        r.token_times.windows(2).map(|w| (w[1].0 - w[0].0) / 1_000).collect()
    };
    assert_eq!(gaps(1)[..3], [5_000, 1_000, 1_000]);
    assert_eq!(gaps(4), [2_000, 1_000, 1_000]);
}
