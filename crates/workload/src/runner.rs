//! Runs one load level against a target: closed loop (N virtual users) or open loop (a
//! request rate, constant or Poisson). Latencies start at each request's *intended* send time,
//! so a slow target cannot hide its queueing by slowing the generator down (no coordinated
//! omission); the actual send lag is recorded beside it.

use crate::scenario::Scenario;
use goodput_core::{ClientRecord, Outcome, Stamp, Target, WorkRequest};
use rand::SeedableRng;
use rand_distr::{Distribution, Gamma};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How requests arrive.
#[derive(Clone, Debug, PartialEq)]
pub enum Arrival {
    /// `users` virtual users, each sending its next request when the previous one ended
    /// (plus `think` time).
    Closed { users: usize, think: Duration },
    /// Requests at `rate` per second. `burstiness`: `None` spaces them evenly; `Some(b)` draws
    /// gaps from a gamma distribution of shape `b` and mean `1/rate` (vLLM's `--burstiness`):
    /// 1 is a Poisson process, below 1 burstier, above 1 more regular.
    Rate { rate: f64, burstiness: Option<f64> },
}

impl Arrival {
    /// The load level in its own unit (users, or requests per second).
    pub fn load(&self) -> f64 {
        match *self {
            Arrival::Closed { users, .. } => users as f64,
            Arrival::Rate { rate, .. } => rate,
        }
    }
}

/// One level of a run.
#[derive(Clone, Debug)]
pub struct LevelPlan {
    pub arrival: Arrival,
    /// Measured requests (the most, when `duration` is set).
    pub requests: usize,
    /// Stop issuing new requests this long after the level started (requests in flight
    /// finish); `None`: run exactly `warmup + requests`.
    pub duration: Option<Duration>,
    /// Requests sent first and left out of the statistics.
    pub warmup: usize,
    /// A request without its end marker after this long counts as timed out (and is abandoned).
    pub timeout: Duration,
    /// Seed of the scenario's requests and of the arrival process.
    pub seed: u64,
    /// First request id of the level (ids are unique over a run).
    pub first_id: u64,
}

/// Gaps between open-loop arrivals, in seconds.
pub struct Gaps {
    rate: f64,
    gamma: Option<Gamma<f64>>,
    rng: rand::rngs::SmallRng,
}

impl Gaps {
    pub fn new(rate: f64, burstiness: Option<f64>, seed: u64) -> Self {
        let rate = rate.max(1e-9);
        // Shape b, scale 1/(rate·b): mean 1/rate, coefficient of variation 1/√b.
        let gamma = burstiness.filter(|b| *b > 0.0).and_then(|b| Gamma::new(b, 1.0 / (rate * b)).ok());
        Self { rate, gamma, rng: rand::rngs::SmallRng::seed_from_u64(seed ^ 0xA11CE) }
    }

    pub fn next_gap(&mut self) -> f64 {
        match &self.gamma {
            Some(g) => g.sample(&mut self.rng),
            None => 1.0 / self.rate,
        }
    }
}

/// One level of closed-loop work in units of several requests (multi-turn sessions, agent
/// tasks, RAG queries): `users` each run one unit after another.
#[derive(Clone, Debug)]
pub struct UnitPlan {
    pub users: usize,
    /// Measured units.
    pub units: usize,
    /// Units run first and left out of the statistics.
    pub warmup: usize,
    pub timeout: Duration,
    pub seed: u64,
    /// First request id of the level.
    pub first_id: u64,
}

/// What a level produced.
#[derive(Clone, Debug)]
pub struct LevelRun {
    /// Every record, warm-up included, in completion order.
    pub records: Vec<ClientRecord>,
    /// Ids below this are warm-up requests.
    pub measured_from: u64,
    pub start: Stamp,
    pub end: Stamp,
}

impl LevelRun {
    /// The records of the steady window (warm-up excluded).
    pub fn measured(&self) -> impl Iterator<Item = &ClientRecord> {
        self.records.iter().filter(move |r| r.id >= self.measured_from)
    }
}

/// Sends `req` and follows it, giving up after `timeout` (the request is then abandoned and
/// recorded as timed out).
pub(crate) async fn send<T: Target>(target: &T, req: WorkRequest, intended: Stamp, timeout: Duration) -> ClientRecord {
    let (id, input) = (req.id, req.prompt.len());
    match tokio::time::timeout(timeout, target.run(req, intended)).await {
        Ok(rec) => rec,
        Err(_) => ClientRecord::unanswered(id, intended, input, target.clock().now(), Outcome::Timeout),
    }
}

async fn one<T: Target>(
    target: &T,
    scenario: &Scenario,
    vocab: usize,
    plan: &LevelPlan,
    id: u64,
    intended: Stamp,
) -> ClientRecord {
    send(target, scenario.request(plan.seed, id, vocab), intended, plan.timeout).await
}

/// Runs `plan` against `target`; returns when every request has ended.
pub async fn run_level<T: Target>(target: Arc<T>, scenario: Arc<Scenario>, vocab: usize, plan: LevelPlan) -> LevelRun {
    let clock = target.clock();
    let total = (plan.warmup + plan.requests) as u64;
    let records = Arc::new(Mutex::new(Vec::with_capacity(total.min(1 << 16) as usize)));
    let start = clock.now();
    let deadline = plan.duration.map(|d| clock.instant(start) + d);
    let open = move || deadline.is_none_or(|d| std::time::Instant::now() < d);
    let plan = Arc::new(plan);
    match plan.arrival.clone() {
        Arrival::Closed { users, think } => {
            let next = Arc::new(AtomicU64::new(0));
            let mut tasks = Vec::with_capacity(users);
            for _ in 0..users.max(1) {
                let (target, scenario, plan, next, records) =
                    (target.clone(), scenario.clone(), plan.clone(), next.clone(), records.clone());
                tasks.push(tokio::spawn(async move {
                    loop {
                        if !open() {
                            break;
                        }
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= total {
                            break;
                        }
                        // Closed loop: the next request is due the moment the previous ended.
                        let intended = target.clock().now();
                        let rec = one(&*target, &scenario, vocab, &plan, plan.first_id + i, intended).await;
                        records.lock().expect("records lock").push(rec);
                        if !think.is_zero() {
                            tokio::time::sleep(think).await;
                        }
                    }
                }));
            }
            for t in tasks {
                let _ = t.await;
            }
        }
        Arrival::Rate { rate, burstiness } => {
            let mut gaps = Gaps::new(rate, burstiness, plan.seed);
            let t0 = tokio::time::Instant::now();
            let mut at = 0.0f64;
            let mut tasks = Vec::with_capacity(total.min(1 << 16) as usize);
            for i in 0..total {
                let due = t0 + Duration::from_secs_f64(at);
                if deadline.is_some_and(|d| due.into_std() >= d) {
                    break;
                }
                tokio::time::sleep_until(due).await;
                let intended = clock.stamp(due.into_std());
                let (target, scenario, plan, records) =
                    (target.clone(), scenario.clone(), plan.clone(), records.clone());
                tasks.push(tokio::spawn(async move {
                    let rec = one(&*target, &scenario, vocab, &plan, plan.first_id + i, intended).await;
                    records.lock().expect("records lock").push(rec);
                }));
                at += gaps.next_gap();
            }
            for t in tasks {
                let _ = t.await;
            }
        }
    }
    let end = clock.now();
    let records = Arc::try_unwrap(records)
        .map(|m| m.into_inner().unwrap_or_default())
        .unwrap_or_else(|a| a.lock().expect("records lock").clone());
    LevelRun { records, measured_from: plan.first_id + plan.warmup as u64, start, end }
}

#[cfg(test)]
mod tests {
    use super::*;
    use goodput_core::{Chunk, Clock, WorkRequest};
    use std::sync::atomic::AtomicUsize;

    /// A target with a fixed service time that counts how many requests run at once.
    struct Fake {
        clock: Clock,
        in_flight: AtomicUsize,
        peak: AtomicUsize,
        service: Duration,
    }

    impl Target for Fake {
        fn clock(&self) -> Clock {
            self.clock
        }
        fn describe(&self) -> String {
            "fake".into()
        }
        async fn run(&self, req: WorkRequest, intended: Stamp) -> ClientRecord {
            let sent = self.clock.now();
            let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            self.peak.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(self.service).await;
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
            let end = self.clock.now();
            let n = req.params.max_tokens;
            ClientRecord {
                id: req.id,
                intended,
                sent,
                chunks: vec![Chunk { at: end, tokens: n as u32 }],
                end,
                input_tokens: req.prompt.len(),
                output_tokens: n,
                outcome: Outcome::Ok,
                retries: 0,
                engine: None,
                output_ids: Vec::new(),
                session: None,
                turn: None,
            }
        }
    }

    fn fake(ms: u64) -> Arc<Fake> {
        Arc::new(Fake {
            clock: Clock::new(),
            in_flight: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            service: Duration::from_millis(ms),
        })
    }

    fn plan(arrival: Arrival, requests: usize, warmup: usize) -> LevelPlan {
        LevelPlan { arrival, requests, warmup, timeout: Duration::from_secs(5), seed: 1, first_id: 100, duration: None }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn closed_loop_keeps_exactly_n_in_flight_and_counts_warmup() {
        let t = fake(20);
        let s = Arc::new(Scenario::builtin("short-qa", 2048).unwrap());
        let run = run_level(t.clone(), s, 1000, plan(Arrival::Closed { users: 4, think: Duration::ZERO }, 12, 4)).await;
        assert_eq!(run.records.len(), 16);
        assert_eq!(run.measured().count(), 12);
        assert_eq!(t.peak.load(Ordering::SeqCst), 4);
        let mut ids: Vec<u64> = run.records.iter().map(|r| r.id).collect();
        ids.sort();
        assert_eq!(ids, (100..116).collect::<Vec<_>>());
        // 16 requests of 20 ms over 4 users: about 80 ms.
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
        p.timeout = Duration::from_millis(50);
        let run = run_level(t, s, 1000, p).await;
        assert_eq!(run.records.len(), 2);
        assert!(run.records.iter().all(|r| r.outcome == Outcome::Timeout));
    }
}
