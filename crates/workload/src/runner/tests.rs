//! The tests of [`super`].
use super::*;
use crate::level::{RetryPolicy, Trim};
use crate::scenario::Scenario;
use crate::testing::{fake, units};
use goodput_core::{Clock, Outcome, Phase, WorkRequest};
use std::sync::atomic::Ordering;
use std::sync::Mutex;

fn plan(arrival: Arrival, requests: usize, warmup: usize) -> LevelPlan {
    let unit = units(arrival.users(), requests, warmup);
    LevelPlan::new(arrival, unit)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessions_turn_waits_for_the_turn_before_and_its_delay() {
    use crate::trace::{read, Trace, TraceFormat, TraceOptions};
    let text = r#"{"session_id": "a", "timestamp": 0, "input_length": 8, "output_length": 2, "hash_ids": [1]}
{"session_id": "a", "delay": 100, "input_length": 12, "output_length": 2, "hash_ids": [1, 2]}
{"session_id": "b", "timestamp": 10, "input_length": 8, "output_length": 2, "hash_ids": [5]}
{"session_id": "a", "timestamp": 20, "input_length": 16, "output_length": 2, "hash_ids": [1, 2, 3]}
"#;
    let path = std::env::temp_dir().join(format!("goodput-runner-sessions-{}.jsonl", std::process::id()));
    std::fs::write(&path, text).unwrap();
    let opts = TraceOptions { window: (0.0, None), block_size: 4 };
    let trace = Trace::new("s".into(), read(&path, TraceFormat::Auto).unwrap(), opts, 512, 1).unwrap();
    let (t, n) = (fake(50), trace.entries.len());
    let p = plan(Arrival::Trace { speedup: 1.0, rate: 1.0, requests: n }, n, 0);
    let run = run_level(t, Arc::new(trace), 1000, p).await;
    let by = |s: u64, turn: u32| run.records.iter().find(|r| r.session == Some(s) && r.turn == Some(turn)).unwrap();
    let ms = |a: goodput_core::Stamp, b: goodput_core::Stamp| (b.0 as f64 - a.0 as f64) / 1e6;
    let (a1, a2, a3) = (by(0, 1), by(0, 2), by(0, 3));
    // Turn 2: 100 ms after turn 1 ended; turn 3 (due at 20 ms) once turn 2 ended.
    assert!((95.0..150.0).contains(&ms(a1.end, a2.intended)), "{}", ms(a1.end, a2.intended));
    assert!((0.0..30.0).contains(&ms(a2.end, a3.intended)), "{}", ms(a2.end, a3.intended));
    // Session b went on its own time, beside session a's first turn.
    assert!(ms(run.start, by(1, 1).intended) < 40.0);
    assert_eq!(run.records.len(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subagent_runs_between_its_callers_turns() {
    use crate::trace::{read, Trace, TraceFormat, TraceOptions};
    let text = r#"{"session_id": "main", "timestamp": 0, "input_length": 8, "output_length": 2, "hash_ids": [1]}
{"session_id": "sub", "parent_session_id": "main", "delay": 50, "input_length": 8, "output_length": 2, "hash_ids": [7]}
{"session_id": "sub", "delay": 10, "input_length": 12, "output_length": 2, "hash_ids": [7, 8]}
{"session_id": "main", "delay": 100, "input_length": 12, "output_length": 2, "hash_ids": [1, 2]}
"#;
    let path = std::env::temp_dir().join(format!("goodput-runner-subagent-{}.jsonl", std::process::id()));
    std::fs::write(&path, text).unwrap();
    let opts = TraceOptions { window: (0.0, None), block_size: 4 };
    let trace = Trace::new("s".into(), read(&path, TraceFormat::Auto).unwrap(), opts, 512, 1).unwrap();
    let p = plan(Arrival::Trace { speedup: 1.0, rate: 1.0, requests: 4 }, 4, 0);
    let run = run_level(fake(40), Arc::new(trace), 1000, p).await;
    let by = |s: u64, turn: u32| run.records.iter().find(|r| r.session == Some(s) && r.turn == Some(turn)).unwrap();
    let ms = |a: goodput_core::Stamp, b: goodput_core::Stamp| (b.0 as f64 - a.0 as f64) / 1e6;
    let (main1, sub1, sub2, main2) = (by(0, 1), by(1, 1), by(1, 2), by(0, 2));
    assert!((45.0..100.0).contains(&ms(main1.end, sub1.intended)), "{}", ms(main1.end, sub1.intended));
    assert!((5.0..60.0).contains(&ms(sub1.end, sub2.intended)), "{}", ms(sub1.end, sub2.intended));
    // The caller went on 100 ms after its subagent's last turn ended, not after its own.
    assert!((95.0..150.0).contains(&ms(sub2.end, main2.intended)), "{}", ms(sub2.end, main2.intended));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_sends_everything_at_once_from_the_level_start() {
    let t = fake(30);
    let s = Arc::new(Scenario::builtin("short-qa", 2048).unwrap());
    let run = run_level(t.clone(), s, 1000, plan(Arrival::Burst { size: 10 }, 10, 0)).await;
    assert_eq!(run.records.len(), 10);
    assert_eq!(t.peak.load(Ordering::SeqCst), 10);
    assert!(run.records.iter().all(|r| r.intended == run.start));
    assert_eq!(run.measured().count(), 10);
    // The load generator notes each request's required length (short-qa ignores EOS:
    // all of max_tokens), which the fake returns.
    assert!(run.records.iter().all(|r| r.required_output_tokens == Some(r.output_tokens)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cooldown_requests_keep_the_load_up_and_are_left_out() {
    let t = fake(10);
    let s = Arc::new(Scenario::builtin("short-qa", 2048).unwrap());
    let mut p = plan(Arrival::Closed { users: 2, think: Duration::ZERO }, 6, 2);
    p.unit.cooldown = 3;
    let run = run_level(t, s, 1000, p).await;
    // Two users' first requests are warm-up, and so is one a user took before the other's
    // first had ended (they end together: it may or may not have).
    let (warm, cool) = run.excluded();
    assert!((2..=3).contains(&warm) && cool == 3, "{:?}", run.excluded());
    assert_eq!(run.records.len(), warm + 6 + 3);
    let from = 100 + warm as u64;
    let mut measured: Vec<u64> = run.measured().map(|r| r.id).collect();
    measured.sort();
    assert_eq!(measured, (from..from + 6).collect::<Vec<_>>());
    for r in &run.records {
        let want = match r.id {
            id if id < from => Phase::Warmup,
            id if id < from + 6 => Phase::Measured,
            _ => Phase::Cooldown,
        };
        assert_eq!(run.phase(r), want, "request {}", r.id);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_time_trim_leaves_out_the_first_and_last_part_of_sending() {
    let t = fake(5);
    let s = Arc::new(Scenario::builtin("short-qa", 2048).unwrap());
    // 100 req/s for 20 requests: intended at 0, 10, …, 190 ms. Trim 45 ms at the start
    // and 45 ms before the last send (190 ms): measured are 50 … 140 ms, ten requests.
    let mut p = plan(Arrival::Rate { rate: 100.0, burstiness: None }, 20, 0);
    p.trim = Trim { start: Duration::from_millis(45), end: Duration::from_millis(45) };
    let run = run_level(t, s, 1000, p).await;
    assert_eq!(run.records.len(), 20);
    assert_eq!(run.measured().count(), 10);
    assert_eq!(run.excluded(), (5, 5));
}

/// A target that fails the first `fail` attempts of every request (a retryable error, or a
/// refusal), then answers.
struct Flaky {
    clock: Clock,
    fail: u32,
    refuse: bool,
    attempts: Mutex<std::collections::HashMap<u64, u32>>,
}

impl Target for Flaky {
    fn clock(&self) -> Clock {
        self.clock
    }
    fn describe(&self) -> String {
        "flaky".into()
    }
    async fn run(&self, req: WorkRequest, intended: Stamp) -> ClientRecord {
        let k = {
            let mut a = self.attempts.lock().unwrap();
            let k = a.entry(req.id).or_default();
            *k += 1;
            *k
        };
        tokio::time::sleep(Duration::from_millis(2)).await;
        let now = self.clock.now();
        let outcome = if k > self.fail {
            Outcome::Ok
        } else if self.refuse {
            Outcome::refused(goodput_core::FailureKind::Http(400), "bad request")
        } else {
            Outcome::error(goodput_core::FailureKind::Http(429), "overloaded")
        };
        let mut r = ClientRecord::unanswered(req.id, intended, req.prompt.len(), now, outcome);
        r.sent = now;
        r
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_are_counted_backed_off_and_timed_from_the_first_attempt() {
    let s = Arc::new(Scenario::builtin("short-qa", 2048).unwrap());
    let flaky =
        |fail, refuse| Arc::new(Flaky { clock: Clock::new(), fail, refuse, attempts: Mutex::new(Default::default()) });
    let mut p = plan(Arrival::Closed { users: 2, think: Duration::ZERO }, 4, 0);
    p.unit.retry = RetryPolicy { max: 3, backoff: Duration::from_millis(10) };
    // Two failures, then success: 2 retries each, with 10 + 20 ms of back-off.
    let run = run_level(flaky(2, false), s.clone(), 1000, p.clone()).await;
    for r in &run.records {
        assert!(r.is_ok());
        assert_eq!(r.retries, 2);
        assert!(r.end.secs_since(r.intended) >= 0.030, "{}", r.end.secs_since(r.intended));
        assert!(r.sent.secs_since(r.intended) < 0.010, "sent is the first attempt's");
    }
    // More failures than the policy allows: the last error stands, after 3 retries.
    let run = run_level(flaky(9, false), s.clone(), 1000, p.clone()).await;
    assert!(run.records.iter().all(|r| r.retries == 3 && matches!(r.outcome, Outcome::Error(_))));
    // A refusal is not retried.
    let run = run_level(flaky(1, true), s.clone(), 1000, p.clone()).await;
    assert!(run.records.iter().all(|r| r.retries == 0 && matches!(r.outcome, Outcome::Refused(_))));
    // No policy: no retry.
    p.unit.retry = RetryPolicy::default();
    let run = run_level(flaky(1, false), s, 1000, p).await;
    assert!(run.records.iter().all(|r| r.retries == 0 && !r.is_ok()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_loop_keeps_exactly_n_in_flight_and_counts_warmup() {
    let t = fake(20);
    let s = Arc::new(Scenario::builtin("short-qa", 2048).unwrap());
    let run = run_level(t.clone(), s, 1000, plan(Arrival::Closed { users: 4, think: Duration::ZERO }, 12, 4)).await;
    let warm = run.excluded().0;
    assert!((4..=7).contains(&warm), "the first wave, and what users took before it ended: {warm}");
    assert_eq!(run.records.len(), warm + 12);
    assert_eq!(run.measured().count(), 12);
    assert_eq!(t.peak.load(Ordering::SeqCst), 4);
    let mut ids: Vec<u64> = run.records.iter().map(|r| r.id).collect();
    ids.sort();
    assert_eq!(ids, (100..100 + ids.len() as u64).collect::<Vec<_>>());
    // 16 or so requests of 20 ms over 4 users: about 80 ms.
    let secs = run.end.secs_since(run.start);
    assert!((0.075..0.5).contains(&secs), "{secs}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_loop_sends_on_schedule_and_measures_from_the_intended_time() {
    let t = fake(50);
    let s = Arc::new(Scenario::builtin("short-qa", 2048).unwrap());
    // 100 req/s evenly: 10 requests over 90 ms, each taking 50 ms: several overlap.
    let run = run_level(t.clone(), s, 1000, plan(Arrival::Rate { rate: 100.0, burstiness: None }, 10, 0)).await;
    assert_eq!(run.records.len(), 10);
    assert!(t.peak.load(Ordering::SeqCst) >= 4);
    let mut intended: Vec<f64> = run.records.iter().map(|r| r.intended.secs_since(run.start)).collect();
    intended.sort_by(f64::total_cmp);
    for (i, x) in intended.iter().enumerate() {
        assert!((x - i as f64 * 0.01).abs() < 0.005, "request {i} intended at {x}");
    }
    for r in &run.records {
        assert!(r.sent >= r.intended);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capped_open_loop_keeps_its_schedule_with_at_most_n_in_flight() {
    let t = fake(100);
    let s = Arc::new(Scenario::builtin("short-qa", 2048).unwrap());
    // 100 req/s evenly, 8 requests of 100 ms each, at most 2 in flight: arrivals at 0, 10,
    // …, 70 ms; they are served two at a time, in four rounds of 100 ms.
    let mut p = plan(Arrival::Rate { rate: 100.0, burstiness: None }, 8, 0);
    p.max_in_flight = Some(2);
    let run = run_level(t.clone(), s, 1000, p).await;
    assert_eq!(run.records.len(), 8);
    assert_eq!(t.peak.load(Ordering::SeqCst), 2, "never more than 2 in flight");
    let mut recs = run.records.clone();
    recs.sort_by_key(|r| r.intended);
    for (i, r) in recs.iter().enumerate() {
        // The schedule stands: latency runs from the arrival, not from the free slot.
        let due = r.intended.secs_since(run.start);
        assert!((due - i as f64 * 0.01).abs() < 0.005, "request {i} intended at {due}");
    }
    // The last arrival (70 ms) waited for the fourth round (from about 300 ms): its wait
    // is in its send lag and its latency.
    let last = recs.last().unwrap();
    assert!(last.sent.secs_since(last.intended) > 0.2, "{}", last.sent.secs_since(last.intended));
    assert!(last.end.secs_since(last.intended) > 0.3);
    // A closed loop has no cap to apply: its users are its concurrency.
    let mut p = plan(Arrival::Closed { users: 3, think: Duration::ZERO }, 6, 3);
    p.max_in_flight = Some(1);
    let t = fake(20);
    run_level(t.clone(), Arc::new(Scenario::builtin("short-qa", 2048).unwrap()), 1000, p).await;
    assert_eq!(t.peak.load(Ordering::SeqCst), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_loop_ramps_its_users_and_never_measures_the_first_wave() {
    // 16 users all at once, an explicit warm-up of 4: still, the first wave is warm-up and
    // no request sent before the last user's first is measured.
    let t = fake(30);
    let s = Arc::new(Scenario::builtin("short-qa", 2048).unwrap());
    let run =
        run_level(t.clone(), s.clone(), 1000, plan(Arrival::Closed { users: 16, think: Duration::ZERO }, 32, 4)).await;
    assert_eq!(run.ramp, Some(Duration::ZERO));
    assert_eq!(run.measured().count(), 32);
    let first_wave: Vec<&ClientRecord> = run.records.iter().filter(|r| r.id < 116).collect();
    assert!(first_wave.iter().all(|r| run.phase(r) == Phase::Warmup));
    let wave_sent = first_wave.iter().map(|r| r.intended).max().unwrap();
    assert!(run.measured().all(|r| r.intended >= wave_sent));
    // Over a ramp of 80 ms, 4 users' first requests are due 0, 20, 40, 60 ms in.
    let mut p = plan(Arrival::Closed { users: 4, think: Duration::ZERO }, 4, 4);
    p.unit.ramp = crate::Ramp::Over(Duration::from_millis(80));
    let run = run_level(fake(200), s, 1000, p).await;
    assert_eq!(run.ramp, Some(Duration::from_millis(80)));
    let mut first: Vec<f64> =
        run.records.iter().filter(|r| r.id < 104).map(|r| r.intended.secs_since(run.start)).collect();
    first.sort_by(f64::total_cmp);
    for (k, x) in first.iter().enumerate() {
        assert!((x - k as f64 * 0.02).abs() < 0.01, "user {k} started at {x}");
    }
}

#[test]
fn jittered_think_times_stay_in_their_band_and_repeat_with_the_seed() {
    let think = Duration::from_millis(100);
    assert_eq!(jittered(think, 0.0, 1, 5), think);
    assert_eq!(jittered(Duration::ZERO, 0.5, 1, 5), Duration::ZERO);
    let xs: Vec<f64> = (0..10_000).map(|id| jittered(think, 0.5, 7, id).as_secs_f64()).collect();
    assert!(xs.iter().all(|x| (0.05..=0.15).contains(x)), "within 100 ms · (1 ± 0.5)");
    let mean = xs.iter().sum::<f64>() / xs.len() as f64;
    assert!((mean - 0.1).abs() < 0.002, "uniform about the think time: {mean}");
    // Both halves of the band are used.
    assert!(xs.iter().any(|&x| x < 0.06) && xs.iter().any(|&x| x > 0.14));
    assert_eq!(jittered(think, 0.5, 7, 42), jittered(think, 0.5, 7, 42));
    assert_ne!(jittered(think, 0.5, 7, 42), jittered(think, 0.5, 8, 42), "another seed, another draw");
}

#[test]
fn gaps_have_the_rate_s_mean_and_the_burstiness_s_spread() {
    let stats = |b: Option<f64>| {
        let mut g = Gaps::new(10.0, b, 7);
        let xs: Vec<f64> = (0..20_000).map(|_| g.next_gap()).collect();
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / xs.len() as f64;
        (mean, var.sqrt() / mean)
    };
    let (m, cv) = stats(None);
    assert!((m - 0.1).abs() < 1e-12 && cv < 1e-9, "constant: {m} {cv}");
    for (b, want_cv) in [(1.0, 1.0), (0.25, 2.0), (4.0, 0.5)] {
        let (m, cv) = stats(Some(b));
        assert!((m - 0.1).abs() < 0.005, "burstiness {b}: mean {m}");
        assert!((cv - want_cv).abs() < 0.08 * want_cv, "burstiness {b}: cv {cv}, want {want_cv}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duration_bounds_the_level() {
    let t = fake(20);
    let s = Arc::new(Scenario::builtin("short-qa", 2048).unwrap());
    let mut p = plan(Arrival::Closed { users: 2, think: Duration::ZERO }, 10_000, 0);
    p.duration = Some(Duration::from_millis(200));
    let run = run_level(t.clone(), s.clone(), 1000, p).await;
    // Two users, 20 ms each, for 200 ms: about 20 requests, not 10,000.
    let n = run.records.len();
    assert!((10..=22).contains(&n), "{n} requests");
    let secs = run.end.secs_since(run.start);
    assert!((0.19..0.5).contains(&secs), "{secs}");
    let mut p = plan(Arrival::Rate { rate: 100.0, burstiness: None }, 10_000, 0);
    p.duration = Some(Duration::from_millis(100));
    let run = run_level(t, s, 1000, p).await;
    assert!((9..=11).contains(&run.records.len()), "{}", run.records.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_requests_time_out_and_are_recorded() {
    let t = fake(300);
    let s = Arc::new(Scenario::builtin("short-qa", 2048).unwrap());
    let mut p = plan(Arrival::Closed { users: 2, think: Duration::ZERO }, 2, 0);
    p.unit.timeout = Duration::from_millis(50);
    let run = run_level(t, s, 1000, p).await;
    assert_eq!(run.measured().count(), 2);
    assert!(run.records.iter().all(|r| r.outcome == Outcome::Timeout));
}
