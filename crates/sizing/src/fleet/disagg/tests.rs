use super::*;
use crate::cost::{LinearCost, StepCost};
use crate::fleet::router::Policy;
use crate::fleet::{drive_fleet, Fleet};
use crate::sim::Timed;
use goodput_core::SamplingParams;
use goodput_scheduler::SchedulerConfig;
use std::sync::Arc;
use std::time::Duration;

fn engine() -> SimEngine {
    // 2 ms a step, 20 µs a prefill token, 50 µs a decode sequence.
    let cost: Arc<dyn StepCost> = Arc::new(LinearCost::classic([2e-3, 2e-5, 0.0, 5e-5, 0.0, 0.0], 0.0));
    let cfg = SchedulerConfig { max_num_seqs: 32, num_blocks: 4096, max_model_len: 8192, ..Default::default() };
    SimEngine::new(cfg, cost).unwrap()
}

/// Request `i`: a prompt of its own (long every fourth one), `out` tokens.
fn arrivals(n: u64, gap_ms: u64, out: usize) -> Vec<(Stamp, NewRequest)> {
    (0..n)
        .map(|i| {
            let at = Stamp(i * gap_ms * 1_000_000);
            let len = if i % 4 == 0 { 2000 } else { 100 };
            let prompt = (0..len).map(|t| (i * 10_000 + t) as u32).collect();
            (at, NewRequest { id: i, prompt, params: SamplingParams::greedy_exact(out), arrival: at })
        })
        .collect()
}

fn disaggregated(x: usize, y: usize, transfer: Transfer) -> Disaggregated {
    Disaggregated {
        prefill: (0..x).map(|_| engine()).collect(),
        decode: (0..y).map(|_| engine()).collect(),
        prefill_router: Router::new(Policy::RoundRobin, x, 1),
        decode_router: Router::new(Policy::LeastLoaded, y, 1),
        transfer,
        scrape_ns: 10_000_000,
    }
}

/// 1 ms and 128 KiB a token over 50 GB/s: a 2000-token prompt crosses in 6.2 ms.
const LINK: Transfer = Transfer { bytes_per_token: 131_072.0, bytes_per_second: 50e9, latency_s: 1e-3 };

#[test]
fn every_request_ends_once_with_its_tokens_and_crosses_between_its_first_two() {
    let mut f = disaggregated(2, 2, LINK);
    let mut records = Vec::new();
    let out = drive_disaggregated(&mut f, &mut Timed::new(arrivals(120, 20, 40)), &mut |r| records.push(r));
    assert_eq!(records.len(), 120);
    assert!(out.refused.is_empty());
    assert_eq!((out.prefill_routed.len(), out.decode_routed.len(), out.transfer_s.len()), (120, 120, 120));
    let mut ids: Vec<u64> = records.iter().map(|r| r.id).collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..120).collect::<Vec<_>>());
    for r in &records {
        assert_eq!((r.generated_tokens, r.token_times.len()), (40, 40), "{}", r.id);
        assert_eq!(r.first_token, Some(r.token_times[0]));
        let crossing = LINK.seconds(r.prompt_tokens);
        let gap = r.token_times[1].secs_since(r.token_times[0]);
        assert!(gap >= crossing - 1e-9, "request {}: {gap} s between its first tokens, the crossing {crossing}", r.id);
        assert!(r.token_times.windows(2).all(|w| w[0] <= w[1]) && r.finished == r.token_times[39]);
    }
    // Both routers' in-flight counts come back to zero; every pool took a share.
    assert_eq!((f.prefill_router.in_flight(), f.decode_router.in_flight()), (&[0, 0][..], &[0, 0][..]));
    assert!((0..2).all(|r| out.decode_routed.iter().any(|x| x.replica == r)));
    assert!((LINK.seconds(2000) - (1e-3 + 2000.0 * 131_072.0 / 50e9)).abs() < 1e-15);
}

#[test]
fn decode_replicas_never_wait_on_a_long_prompt() {
    // Aggregated, a 2000-token prompt shares steps with the decodes (40 ms of prefill);
    // disaggregated, decodes only ever share steps with decodes.
    let max_gap = |records: &[EngineRecord]| {
        let gaps = records.iter().flat_map(|r| r.token_times[1..].windows(2).map(|w| w[1].secs_since(w[0])));
        gaps.fold(0.0f64, f64::max)
    };
    let mut one =
        Fleet::new(vec![engine(), engine()], Router::new(Policy::RoundRobin, 2, 1), Duration::from_millis(10));
    let agg = drive_fleet(&mut one, &mut Timed::new(arrivals(80, 25, 60)));
    let agg: Vec<EngineRecord> = agg.replicas.into_iter().flat_map(|r| r.records).collect();
    let mut f = disaggregated(1, 1, LINK);
    let mut dis = Vec::new();
    drive_disaggregated(&mut f, &mut Timed::new(arrivals(80, 25, 60)), &mut |r| dis.push(r));
    assert_eq!((agg.len(), dis.len()), (80, 80));
    let (a, d) = (max_gap(&agg), max_gap(&dis));
    assert!(a > 0.03 && d < 0.01, "longest gap after the second token: aggregated {a} s, disaggregated {d} s");
}
