//! Runs one load level against a target: closed loop (N virtual users), open loop (a request
//! rate, constant, Poisson or gamma) or a burst (every request at t0: a cold start). Latencies
//! start at each request's *intended* send time, so a slow target cannot hide its queueing by
//! slowing the generator down (no coordinated omission); the actual send lag is recorded
//! beside it.
//!
//! Warm-up and cool-down requests (by count, or by their intended send time) are run but left
//! out of the statistics; [`LevelRun::phase`] says which is which. An optional retry policy
//! sends failed requests again; the record keeps the first intended and sent times, so a
//! retried request's latency includes every attempt, and counts its retries.

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
    /// Every request of the level due at once, at its start (a cold start or a traffic
    /// spike): `size` requests, no warm-up.
    Burst { size: usize },
}

impl Arrival {
    /// The load level in its own unit (users, or requests per second).
    pub fn load(&self) -> f64 {
        match *self {
            Arrival::Closed { users, .. } => users as f64,
            Arrival::Rate { rate, .. } => rate,
            Arrival::Burst { size } => size as f64,
        }
    }
}

/// A retry policy: after a retryable failure ([`goodput_core::Outcome::retryable`]: an error
/// or a timeout, not a refusal), wait `backoff · 2^(k−1)` before attempt `k + 1`, at most
/// `max` times. Off (`max = 0`) by default, as a benchmark should see failures as they are.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RetryPolicy {
    pub max: u32,
    pub backoff: Duration,
}

/// Warm-up and cool-down by time: requests intended in the first `start` of the level, or in
/// the last `end` of its sending period, are left out of the statistics (on top of any
/// warm-up and cool-down counts).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Trim {
    pub start: Duration,
    pub end: Duration,
}

/// Which part of a level a request belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Warmup,
    Measured,
    Cooldown,
}

/// The steady window of a level: ids in `[from_id, to_id)` intended in `[from, to)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Window {
    pub from_id: u64,
    pub to_id: u64,
    pub from: Option<Stamp>,
    pub to: Option<Stamp>,
}

impl Window {
    /// The window of a level whose ids `first_id + warm_ids .. first_id + warm_ids + measured_ids`
    /// are measured, trimmed by `trim` from `start` and from the end of sending (`sending_end`,
    /// or the last intended send time of `records`).
    pub fn new(
        first_id: u64,
        warm_ids: u64,
        measured_ids: u64,
        trim: Trim,
        start: Stamp,
        sending_end: Option<Stamp>,
        records: &[ClientRecord],
    ) -> Self {
        let from = (!trim.start.is_zero()).then(|| start.plus(trim.start));
        let to = (!trim.end.is_zero()).then(|| {
            let end = sending_end.unwrap_or_else(|| records.iter().map(|r| r.intended).max().unwrap_or(start));
            end.minus(trim.end)
        });
        let from_id = first_id + warm_ids;
        Window { from_id, to_id: from_id.saturating_add(measured_ids), from, to }
    }

    pub fn phase(&self, r: &ClientRecord) -> Phase {
        if r.id < self.from_id || self.from.is_some_and(|f| r.intended < f) {
            Phase::Warmup
        } else if r.id >= self.to_id || self.to.is_some_and(|t| r.intended >= t) {
            Phase::Cooldown
        } else {
            Phase::Measured
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
    /// Requests sent after the measured ones (keeping the load up while those finish) and left
    /// out of the statistics.
    pub cooldown: usize,
    /// Warm-up and cool-down by time.
    pub trim: Trim,
    /// A request without its end marker after this long counts as timed out (and is abandoned).
    pub timeout: Duration,
    pub retry: RetryPolicy,
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
/// tasks, RAG queries): `users` each run one unit after another. Warm-up and cool-down are
/// whole units, by count.
#[derive(Clone, Debug)]
pub struct UnitPlan {
    pub users: usize,
    /// Measured units.
    pub units: usize,
    /// Units run first and left out of the statistics.
    pub warmup: usize,
    /// Units run after the measured ones and left out of the statistics.
    pub cooldown: usize,
    pub timeout: Duration,
    pub retry: RetryPolicy,
    pub seed: u64,
    /// First request id of the level.
    pub first_id: u64,
}

/// What a level produced.
#[derive(Clone, Debug)]
pub struct LevelRun {
    /// Every record, warm-up and cool-down included, in completion order.
    pub records: Vec<ClientRecord>,
    /// The steady window.
    pub window: Window,
    pub start: Stamp,
    pub end: Stamp,
}

impl LevelRun {
    /// A level of units of `per_unit` request ids each (sessions, tasks, queries).
    pub fn of_units(records: Vec<ClientRecord>, plan: &UnitPlan, per_unit: u64, start: Stamp, end: Stamp) -> Self {
        let window = Window::new(
            plan.first_id,
            plan.warmup as u64 * per_unit,
            plan.units as u64 * per_unit,
            Trim::default(),
            start,
            None,
            &records,
        );
        LevelRun { records, window, start, end }
    }

    pub fn phase(&self, r: &ClientRecord) -> Phase {
        self.window.phase(r)
    }
    /// The records of the steady window (warm-up and cool-down excluded).
    pub fn measured(&self) -> impl Iterator<Item = &ClientRecord> {
        self.records.iter().filter(move |r| self.window.phase(r) == Phase::Measured)
    }
    /// Requests left out as warm-up and as cool-down.
    pub fn excluded(&self) -> (usize, usize) {
        let n = |p: Phase| self.records.iter().filter(|r| self.window.phase(r) == p).count();
        (n(Phase::Warmup), n(Phase::Cooldown))
    }
}

/// Sends `req` and follows it, giving up on an attempt after `timeout` (it is then abandoned
/// and recorded as timed out), and retrying as `retry` allows. The record keeps the first
/// attempt's intended and sent times and counts the retries.
pub(crate) async fn send<T: Target>(
    target: &T,
    req: WorkRequest,
    intended: Stamp,
    timeout: Duration,
    retry: RetryPolicy,
) -> ClientRecord {
    let mut first_sent = None;
    let mut attempt = 0u32;
    let mut rec = loop {
        // The last possible attempt takes the request; earlier ones send a copy (with retries
        // off, a prompt is never copied).
        if attempt >= retry.max {
            break attempt_once(target, req, intended, timeout).await;
        }
        let rec = attempt_once(target, req.clone(), intended, timeout).await;
        first_sent.get_or_insert(rec.sent);
        if rec.is_ok() || !rec.outcome.retryable() {
            break rec;
        }
        attempt += 1;
        tokio::time::sleep(retry.backoff.saturating_mul(1 << (attempt - 1).min(16))).await;
    };
    rec.intended = intended;
    rec.sent = first_sent.unwrap_or(rec.sent);
    rec.retries = attempt;
    rec
}

/// One attempt, abandoned after `timeout` (then recorded as timed out, sent at `intended`).
async fn attempt_once<T: Target>(target: &T, req: WorkRequest, intended: Stamp, timeout: Duration) -> ClientRecord {
    let (id, input, required) = (req.id, req.prompt.len(), req.params.required_output_tokens());
    let mut rec = match tokio::time::timeout(timeout, target.run(req, intended)).await {
        Ok(rec) => rec,
        Err(_) => ClientRecord::unanswered(id, intended, input, target.clock().now(), Outcome::Timeout),
    };
    rec.required_output_tokens = required;
    rec
}

async fn one<T: Target>(
    target: &T,
    scenario: &Scenario,
    vocab: usize,
    plan: &LevelPlan,
    id: u64,
    intended: Stamp,
) -> ClientRecord {
    send(target, scenario.request(plan.seed, id, vocab), intended, plan.timeout, plan.retry).await
}

/// Runs `plan` against `target`; returns when every request has ended.
pub async fn run_level<T: Target>(target: Arc<T>, scenario: Arc<Scenario>, vocab: usize, plan: LevelPlan) -> LevelRun {
    let clock = target.clock();
    let total = (plan.warmup + plan.requests + plan.cooldown) as u64;
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
        Arrival::Burst { .. } => {
            // Every request is due at the level's start; the target sees them all at once.
            let mut tasks = Vec::with_capacity(total.min(1 << 16) as usize);
            for i in 0..total {
                let (target, scenario, plan, records) =
                    (target.clone(), scenario.clone(), plan.clone(), records.clone());
                tasks.push(tokio::spawn(async move {
                    let rec = one(&*target, &scenario, vocab, &plan, plan.first_id + i, start).await;
                    records.lock().expect("records lock").push(rec);
                }));
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
    let sending_end = deadline.map(|d| clock.stamp(d));
    let window =
        Window::new(plan.first_id, plan.warmup as u64, plan.requests as u64, plan.trim, start, sending_end, &records);
    LevelRun { records, window, start, end }
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
                http: None,
                required_output_tokens: None,
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
        LevelPlan {
            arrival,
            requests,
            warmup,
            cooldown: 0,
            trim: Trim::default(),
            timeout: Duration::from_secs(5),
            retry: RetryPolicy::default(),
            seed: 1,
            first_id: 100,
            duration: None,
        }
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
        p.cooldown = 3;
        let run = run_level(t, s, 1000, p).await;
        assert_eq!(run.records.len(), 11);
        assert_eq!(run.excluded(), (2, 3));
        let mut measured: Vec<u64> = run.measured().map(|r| r.id).collect();
        measured.sort();
        assert_eq!(measured, (102..108).collect::<Vec<_>>());
        for r in &run.records {
            let want = match r.id {
                100..=101 => Phase::Warmup,
                102..=107 => Phase::Measured,
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
                Outcome::Refused("bad request".into())
            } else {
                Outcome::Error("overloaded".into())
            };
            let mut r = ClientRecord::unanswered(req.id, intended, req.prompt.len(), now, outcome);
            r.sent = now;
            r
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn retries_are_counted_backed_off_and_timed_from_the_first_attempt() {
        let s = Arc::new(Scenario::builtin("short-qa", 2048).unwrap());
        let flaky = |fail, refuse| {
            Arc::new(Flaky { clock: Clock::new(), fail, refuse, attempts: Mutex::new(Default::default()) })
        };
        let mut p = plan(Arrival::Closed { users: 2, think: Duration::ZERO }, 4, 0);
        p.retry = RetryPolicy { max: 3, backoff: Duration::from_millis(10) };
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
        p.retry = RetryPolicy::default();
        let run = run_level(flaky(1, false), s, 1000, p).await;
        assert!(run.records.iter().all(|r| r.retries == 0 && !r.is_ok()));
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
