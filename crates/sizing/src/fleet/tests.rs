use super::router::Policy;
use super::*;
use crate::cost::{LinearCost, StepCost};
use crate::sim::{drive, ClosedLoop, Timed};
use goodput_core::SamplingParams;
use goodput_scheduler::{NewRequest, SchedulerConfig};
use std::sync::Arc;
use std::time::Duration;

fn cost() -> Arc<dyn StepCost> {
    // 2 ms a step, 20 µs a prefill token, 50 µs a decode sequence, 30 µs between steps.
    Arc::new(LinearCost::classic([2e-3, 2e-5, 0.0, 5e-5, 0.0, 0.0], 3e-5))
}

fn engine() -> SimEngine {
    let cfg = SchedulerConfig { max_num_seqs: 16, num_blocks: 2048, max_model_len: 4096, ..Default::default() };
    SimEngine::new(cfg, cost()).unwrap()
}

/// Request `i`: one of `groups` 64-token system prompts (drawn in a stride coprime with the
/// replica counts, so round-robin does not line them up with replicas), then 32 of its own.
fn request(i: u64, groups: u64, at: Stamp) -> NewRequest {
    let g = ((i * 37) % groups) as u32;
    let mut prompt: Vec<u32> = (0..64).map(|t| 1000 * (g + 1) + t).collect();
    prompt.extend((0..32).map(|t| 100_000 + (i as u32) * 64 + t));
    NewRequest { id: i, prompt, params: SamplingParams::greedy_exact(24), arrival: at }
}

fn arrivals(n: u64, gap_ms: u64, groups: u64) -> Vec<(Stamp, NewRequest)> {
    (0..n).map(|i| (Stamp(i * gap_ms * 1_000_000), request(i, groups, Stamp(i * gap_ms * 1_000_000)))).collect()
}

fn fleet(n: usize, policy: Policy, scrape: Duration) -> Fleet {
    Fleet::new((0..n).map(|_| engine()).collect(), Router::new(policy, n, 1), scrape)
}

#[test]
fn a_fleet_of_one_is_the_single_engine_loop() {
    let mut alone = engine();
    let single = drive(&mut alone, &mut Timed::new(arrivals(200, 3, 4)));
    let mut f = fleet(1, Policy::RoundRobin, Duration::from_secs(1));
    let out = drive_fleet(&mut f, &mut Timed::new(arrivals(200, 3, 4)));
    assert_eq!(out.replicas[0].records, single.records);
    assert_eq!(out.replicas[0].steps.len(), single.steps.len());
    // Closed loop too: users react to the ends the same way.
    let make = |i: u64, at: Stamp| request(i, 4, at);
    let single = drive(&mut engine(), &mut ClosedLoop::new(6, 120, Duration::from_millis(5), make));
    let mut f = fleet(1, Policy::LeastLoaded, Duration::from_millis(100));
    let out = drive_fleet(&mut f, &mut ClosedLoop::new(6, 120, Duration::from_millis(5), make));
    assert_eq!(out.replicas[0].records, single.records);
}

#[test]
fn every_request_is_routed_once_and_ends_once() {
    for policy in [Policy::RoundRobin, Policy::Random, Policy::PowerOfTwo, Policy::LeastLoaded, Policy::cache_aware()] {
        let name = policy.name();
        let mut f = fleet(4, policy, Duration::from_millis(50));
        let out = drive_fleet(&mut f, &mut Timed::new(arrivals(400, 1, 8)));
        assert_eq!(out.routed.len(), 400, "{name}");
        let mut ids: Vec<u64> = out.replicas.iter().flat_map(|r| r.records.iter().map(|x| x.id)).collect();
        ids.sort_unstable();
        assert_eq!(ids, (0..400).collect::<Vec<_>>(), "{name}");
        for (r, rep) in out.replicas.iter().enumerate() {
            let sent = out.routed.iter().filter(|x| x.replica == r).count();
            assert_eq!(rep.records.len(), sent, "{name}: replica {r}");
            assert!(rep.records.iter().all(|x| x.generated_tokens == 24));
        }
        // The router's in-flight counts come back to zero.
        assert_eq!(f.router.in_flight(), [0; 4], "{name}");
    }
}

/// Prompt tokens the replicas' prefix caches served, over all prompt tokens.
fn hit_rate(out: &FleetOutput) -> f64 {
    let recs = out.replicas.iter().flat_map(|r| r.records.iter());
    let (cached, all) = recs.fold((0, 0), |(c, a), r| (c + r.cached_tokens, a + r.prompt_tokens));
    cached as f64 / all as f64
}

#[test]
fn cache_aware_routing_keeps_the_hits_round_robin_scatters() {
    // 61 system prompts, each about 13 times in 800 requests, over four replicas, a request
    // every 2 ms. Round-robin sends each prefix to all four (four first misses of it), cache-
    // aware keeps each on one (one miss). 64 of 96 prompt tokens are shared, so at most 2/3
    // hit: about (13 − 4)/13 · 2/3 = 0.46 against (13 − 1)/13 · 2/3 = 0.62.
    let run = |policy| {
        let mut f = fleet(4, policy, Duration::from_millis(50));
        drive_fleet(&mut f, &mut Timed::new(arrivals(800, 2, 61)))
    };
    let (rr, ca) = (run(Policy::RoundRobin), run(Policy::cache_aware()));
    let (h_rr, h_ca) = (hit_rate(&rr), hit_rate(&ca));
    assert!(h_ca > 0.58 && h_ca <= 2.0 / 3.0 + 1e-9, "cache-aware {h_ca}");
    assert!(h_rr > 0.4 && h_rr < 0.52, "round-robin {h_rr}");
    // Each prefix stays on one replica.
    for g in 0..61u64 {
        let mut on: Vec<usize> = ca.routed.iter().filter(|r| (r.id * 37) % 61 == g).map(|r| r.replica).collect();
        on.sort_unstable();
        on.dedup();
        assert_eq!(on.len(), 1, "prefix {g} went to {on:?}");
    }
}

#[test]
fn a_stale_load_view_herds_a_burst_onto_one_replica() {
    // 64 requests at once: with a scrape every 10 s the least-loaded router sees four idle
    // replicas for the whole burst and sends all to the first; every 100 µs of virtual time
    // is not enough either, as a burst arrives within one instant. Spread over 64 ms, a 1 ms
    // scrape spreads them.
    let burst: Vec<(Stamp, NewRequest)> = (0..64).map(|i| (Stamp(0), request(i, 64, Stamp(0)))).collect();
    let mut f = fleet(4, Policy::LeastLoaded, Duration::from_secs(10));
    let out = drive_fleet(&mut f, &mut Timed::new(burst));
    assert!(out.routed.iter().all(|r| r.replica == 0));
    let spread = arrivals(64, 1, 64);
    let mut f = fleet(4, Policy::LeastLoaded, Duration::from_millis(1));
    let out = drive_fleet(&mut f, &mut Timed::new(spread));
    let per: Vec<usize> = (0..4).map(|r| out.routed.iter().filter(|x| x.replica == r).count()).collect();
    assert!(per.iter().all(|&c| c >= 8), "{per:?}");
}

/// 10 req/s for 20 s, 300 req/s for 30 s (beyond one replica, about 240), 10 req/s for 30 s.
fn rise_and_fall() -> Vec<(Stamp, NewRequest)> {
    let mut t = 0.0;
    let mut arrivals = Vec::new();
    let mut i = 0;
    while t < 80.0 {
        let rate = if (20.0..50.0).contains(&t) { 300.0 } else { 10.0 };
        t += 1.0 / rate;
        let at = Stamp((t * 1e9) as u64);
        arrivals.push((at, request(i, 61, at)));
        i += 1;
    }
    arrivals
}

#[test]
fn an_autoscaled_fleet_follows_the_load_after_its_start_up() {
    use super::autoscale::{Rule, Scaler, Signal};
    let arrivals = rise_and_fall();
    let total = arrivals.len();
    let rule = Rule {
        signal: Signal::Requests,
        target: 6.0,
        min: 1,
        max: 4,
        interval: Duration::from_secs(2),
        cooldown: Duration::from_secs(5),
        startup: Duration::from_secs(3),
        stabilization: Duration::ZERO,
    };
    let mut f = fleet(4, Policy::LeastLoaded, Duration::from_millis(500)).with_scaler(Scaler::new(rule, 4, 1));
    let out = drive_fleet(&mut f, &mut Timed::new(arrivals));
    let s = f.scaler.as_ref().unwrap();
    let ended: usize = out.replicas.iter().map(|r| r.records.len()).sum();
    assert_eq!(ended, total);
    // It grew after the rise and shrank after the fall.
    let peak = s.events.iter().map(|e| e.replicas).max().unwrap();
    let first_up = s.events.iter().find(|e| e.replicas > 1).unwrap();
    assert!(peak >= 2 && first_up.at_s >= 20.0, "{:?}", s.events);
    assert_eq!(s.events.last().unwrap().replicas, 1, "{:?}", s.events);
    // No replica but the first took a request before its start-up ended.
    let ready = first_up.at_s + 3.0;
    assert!(out.routed.iter().filter(|r| r.replica > 0).all(|r| r.at.0 as f64 / 1e9 >= ready - 1e-9));
    // Billed between one replica throughout and four throughout.
    let end = out.replicas.iter().flat_map(|r| r.records.iter().map(|x| x.finished.0)).max().unwrap() as f64 / 1e9;
    assert!(s.billed_s > end && s.billed_s < 4.0 * end, "{} of {end}", s.billed_s);
}

#[test]
fn decode_runs_change_no_record() {
    // Every term priced, the context too, so each step of a run costs its own.
    let cost: Arc<dyn StepCost> = Arc::new(LinearCost::classic([2e-3, 2e-5, 1e-9, 5e-5, 1e-7, 1e-6], 3e-5));
    let engines = |n: usize| {
        let cfg = SchedulerConfig { max_num_seqs: 16, num_blocks: 300, max_model_len: 4096, ..Default::default() };
        (0..n).map(|_| SimEngine::new(cfg.clone(), cost.clone()).unwrap()).collect::<Vec<_>>()
    };
    let rule = autoscale::Rule {
        signal: Signal::Requests,
        target: 4.0,
        min: 1,
        max: 4,
        interval: Duration::from_millis(200),
        cooldown: Duration::from_millis(400),
        startup: Duration::from_millis(300),
        stabilization: Duration::ZERO,
    };
    for policy in [Policy::RoundRobin, Policy::PowerOfTwo, Policy::LeastLoaded, Policy::cache_aware()] {
        for scaled in [false, true] {
            let run = |keep_steps: bool| {
                let mut f = Fleet::new(engines(4), Router::new(policy.clone(), 4, 1), Duration::from_millis(40));
                if scaled {
                    f = f.with_scaler(Scaler::new(rule.clone(), 4, 1));
                }
                f.keep_steps = keep_steps;
                let out = drive_fleet(&mut f, &mut Timed::new(arrivals(300, 4, 8)));
                let billed = f.scaler.as_ref().map(|s| s.billed_s);
                (out, billed, f.engines.iter().map(|e| e.scheduler().pool().num_free_blocks()).collect::<Vec<_>>())
            };
            let ((steps, billed, free), (runs, billed_runs, free_runs)) = (run(true), run(false));
            let name = format!("{} scaled {scaled}", policy.name());
            assert_eq!(runs.routed, steps.routed, "{name}");
            for (a, b) in steps.replicas.iter().zip(&runs.replicas) {
                assert_eq!(a.records, b.records, "{name}");
            }
            assert_eq!((billed, free), (billed_runs, free_runs), "{name}");
            assert!(runs.replicas.iter().all(|r| r.steps.is_empty()));
        }
    }
}

#[test]
fn a_queue_time_rule_grows_the_fleet_once_requests_wait() {
    use super::autoscale::{Rule, Scaler, Signal};
    // Past one replica's rate requests queue; 50 ms of waiting is the target.
    let rule = Rule {
        signal: Signal::QueueTime,
        target: 0.05,
        min: 1,
        max: 4,
        interval: Duration::from_secs(2),
        cooldown: Duration::from_secs(5),
        startup: Duration::from_secs(3),
        stabilization: Duration::ZERO,
    };
    let arrivals = rise_and_fall();
    let total = arrivals.len();
    let mut f = fleet(4, Policy::LeastLoaded, Duration::from_millis(500)).with_scaler(Scaler::new(rule, 4, 1));
    let out = drive_fleet(&mut f, &mut Timed::new(arrivals));
    assert_eq!(out.replicas.iter().map(|r| r.records.len()).sum::<usize>(), total);
    let s = f.scaler.as_ref().unwrap();
    let first_up = s.events.iter().find(|e| e.replicas > 1).expect("it grew");
    // Nothing waits at 10 req/s: it grew only once the burst queued, on a wait above 50 ms.
    assert!(first_up.at_s >= 20.0 && first_up.value > 0.05, "{:?}", s.events);
    assert_eq!(s.events.last().unwrap().replicas, 1, "{:?}", s.events);
}
