//! Runs one level of single requests against a target: closed loop (N virtual users), open
//! loop (a request rate, constant, Poisson or gamma) or a burst (every request at t0: a cold
//! start). Latencies start at each request's *intended* send time, so a slow target cannot
//! hide its queueing by slowing the generator down (no coordinated omission, as in wrk2 and
//! oha); the actual send lag is recorded beside it.
//!
//! A closed loop's users start over a ramp and may jitter their think time; an open loop may
//! cap the requests in flight (an arrival then waits for a free slot, its latency still
//! counted from its scheduled time).
//!
//! An optional retry policy sends failed requests again; the record keeps the first intended
//! and sent times, so a retried request's latency includes every attempt, and counts its
//! retries.

use crate::drive::{join_all, send, Collector};
use crate::level::{Arrival, LevelPlan, LevelRun, UnitPlan, Window};
use crate::prompts::NextDue;
use crate::prompts::Prompts;
use crate::users::{closed_loop, Users};
use goodput_core::{ClientRecord, Stamp, Target};
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Gamma};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Gaps between open-loop arrivals, in seconds.
pub struct Gaps {
    rate: f64,
    gamma: Option<Gamma<f64>>,
    rng: rand::rngs::SmallRng,
}

impl Gaps {
    /// Gaps of mean `1 / rate`: constant, or gamma-distributed of shape `burstiness`.
    pub fn new(rate: f64, burstiness: Option<f64>, seed: u64) -> Self {
        let rate = rate.max(1e-9);
        // Shape b, scale 1/(rate·b): mean 1/rate, coefficient of variation 1/√b.
        let gamma = burstiness.filter(|b| *b > 0.0).and_then(|b| Gamma::new(b, 1.0 / (rate * b)).ok());
        Self { rate, gamma, rng: rand::rngs::SmallRng::seed_from_u64(seed ^ 0xA11CE) }
    }

    /// The next gap, in seconds.
    pub fn next_gap(&mut self) -> f64 {
        match &self.gamma {
            Some(g) => g.sample(&mut self.rng),
            None => 1.0 / self.rate,
        }
    }
}

/// What every request of a level of single requests needs.
struct Level<T> {
    target: Arc<T>,
    scenario: Arc<dyn Prompts>,
    vocab: usize,
    plan: UnitPlan,
    collector: Collector,
    /// Open loops: one permit per request in flight (`LevelPlan::max_in_flight`).
    slots: Option<Arc<tokio::sync::Semaphore>>,
    /// The requests of the schedule this process sends (all without a shard).
    shard: Option<crate::shard::Shard>,
}

impl<T> Level<T> {
    /// Whether this process sends request `i` of the level.
    fn sends(&self, i: u64) -> bool {
        self.shard.is_none_or(|s| s.takes(i))
    }
}

impl<T: Target> Level<T> {
    /// Sends request number `i` of the level, due at `intended`, and keeps its record. With
    /// a cap on requests in flight it first waits for a free slot (the wait is part of its
    /// latency, which starts at `intended`, and of its send lag).
    async fn request(&self, i: u64, intended: Stamp) {
        let _slot = match &self.slots {
            Some(s) => s.clone().acquire_owned().await.ok(),
            None => None,
        };
        let req = self.scenario.request(self.plan.seed, self.plan.first_id + i, i, self.vocab);
        let mut rec = send(&*self.target, req, intended, self.plan.timeout, self.plan.retry).await;
        (rec.session, rec.turn) = self.scenario.turn(i).map_or((None, None), |(s, t)| (Some(s), Some(t)));
        self.collector.push(rec);
    }

    /// Request `i`, then, for a session's turn, the subagents it calls (all at once, each its
    /// own chain) and, once they have all ended, the session's next turn, each due when the
    /// trace says (`t0` the level's start, at `pace`'s speed-up); none due past its deadline.
    fn turns(
        self: Arc<Self>,
        mut i: u64,
        mut intended: Stamp,
        t0: tokio::time::Instant,
        pace: (f64, Option<Instant>),
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
        Box::pin(async move {
            let (speedup, deadline) = pace;
            let wait = |s: f64| tokio::time::Instant::now() + Duration::from_secs_f64((s / speedup).min(86_400.0));
            loop {
                self.request(i, intended).await;
                let calls = self.scenario.calls(i).into_iter().filter(|(j, _)| *j < self.plan.total());
                let subagents: Vec<_> = calls
                    .map(|(j, delay)| {
                        let (level, at) = (self.clone(), wait(delay));
                        crate::pool::spawn(async move {
                            if deadline.is_none_or(|d| at.into_std() < d) && level.sleep_until(at).await {
                                let intended = level.target.clock().stamp(at.into_std());
                                level.turns(j, intended, t0, pace).await;
                            }
                        })
                    })
                    .collect();
                join_all(subagents).await;
                let Some((next, due)) = self.scenario.next_turn(i).filter(|(j, _)| *j < self.plan.total()) else {
                    break;
                };
                let at = match due {
                    NextDue::After(s) => wait(s),
                    NextDue::At(s) => t0 + Duration::from_secs_f64((s / speedup).clamp(0.0, 366.0 * 86_400.0)),
                };
                if deadline.is_some_and(|d| at.into_std() >= d) || !self.sleep_until(at).await {
                    break;
                }
                (i, intended) = (next, self.target.clock().stamp(at.max(tokio::time::Instant::now()).into_std()));
            }
        })
    }

    /// Sleeps until `at`; whether the level goes on (it was not stopped meanwhile).
    async fn sleep_until(&self, at: tokio::time::Instant) -> bool {
        tokio::time::sleep_until(at).await;
        !self.plan.stop.raised()
    }

    /// Closed loop: each user's next request is due the moment its previous one ended (plus
    /// a think time, jittered by `jitter`). Returns the warm-up and ramp of the loop.
    async fn closed(
        self: &Arc<Self>,
        think: Duration,
        jitter: f64,
        deadline: Option<Instant>,
    ) -> crate::users::Started {
        let level = self.clone();
        let on_warm = move |w| level.collector.warmed(w);
        closed_loop(Users::of(&self.plan, deadline), self.clone(), on_warm, move |level, i| async move {
            level.request(i, level.target.clock().now()).await;
            let think = jittered(think, jitter, level.plan.seed, level.plan.first_id + i);
            if !think.is_zero() {
                tokio::time::sleep(think).await;
            }
        })
        .await
    }

    /// Open loop: requests due on the arrival process's schedule, whatever the target does.
    /// The requests of the schedule it went through.
    async fn open(self: &Arc<Self>, rate: f64, burstiness: Option<f64>, deadline: Option<Instant>) -> u64 {
        let mut gaps = Gaps::new(rate, burstiness, self.plan.seed);
        let mut at = 0.0f64;
        self.scheduled(deadline, 1.0, move |_| {
            let now = at;
            at += gaps.next_gap();
            now
        })
        .await
    }

    /// A trace: request `i` due at its own time, `speedup` times faster, whatever the target
    /// does (an open loop). The requests of the schedule it went through.
    async fn traced(self: &Arc<Self>, speedup: f64, deadline: Option<Instant>) -> u64 {
        let prompts = self.scenario.clone();
        self.scheduled(deadline, speedup, move |i| prompts.due(i, speedup).unwrap_or(0.0).max(0.0)).await
    }

    /// Sends request `i` at `at(i)` seconds after the level's start (`at` called in order of
    /// `i`, times ascending), until all are sent, the deadline passes or the level stops.
    /// Returns how many requests of the schedule it went through (this shard's or another's).
    /// A session's later turns are sent by its first ([`Level::turns`], at `speedup`).
    async fn scheduled(
        self: &Arc<Self>,
        deadline: Option<Instant>,
        speedup: f64,
        mut at: impl FnMut(u64) -> f64,
    ) -> u64 {
        let (clock, total) = (self.target.clock(), self.plan.total());
        let t0 = tokio::time::Instant::now();
        let mut tasks = crate::drive::Aborting::default();
        let mut through = 0;
        for i in 0..total {
            // Clamped to a year: the front ends bound rates and speedups, and no schedule may
            // turn into a Duration that panics or an Instant that overflows.
            let due = t0 + Duration::from_secs_f64(at(i).clamp(0.0, 366.0 * 86_400.0));
            if deadline.is_some_and(|d| due.into_std() >= d) || self.plan.stop.raised() {
                break;
            }
            through = i + 1;
            // Another shard's request: its time is drawn all the same, so the schedule is one.
            if !self.sends(i) || self.scenario.follows(i) {
                continue;
            }
            tokio::time::sleep_until(due).await;
            if self.plan.stop.raised() {
                through = i;
                break;
            }
            let (level, intended) = (self.clone(), clock.stamp(due.into_std()));
            tasks.push(crate::pool::spawn(level.turns(i, intended, t0, (speedup, deadline))));
        }
        join_all(tasks).await;
        through
    }

    /// A burst: every request due at the level's `start`; the target sees them all at once.
    /// The requests of the schedule (all of it).
    async fn burst(self: &Arc<Self>, start: Stamp) -> u64 {
        let tasks = (0..self.plan.total()).filter(|&i| self.sends(i)).map(|i| {
            let level = self.clone();
            crate::pool::spawn(async move { level.request(i, start).await })
        });
        join_all(tasks.collect::<Vec<_>>()).await;
        self.plan.total()
    }
}

/// `think` drawn uniformly from `think · (1 ± jitter)`, the same for the same seed and request
/// id whichever user sends it; exactly `think` without jitter.
pub fn jittered(think: Duration, jitter: f64, seed: u64, id: u64) -> Duration {
    if think.is_zero() || jitter <= 0.0 {
        return think;
    }
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed ^ id.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ 0x7415);
    let j = jitter.min(1.0);
    think.mul_f64(rng.random_range(1.0 - j..=1.0 + j))
}

/// Runs `plan` with requests of `scenario` against `target`; returns when every request has
/// ended. A closed loop takes its users from `plan.arrival`.
pub async fn run_level<T: Target>(
    target: Arc<T>,
    scenario: Arc<dyn Prompts>,
    vocab: usize,
    plan: LevelPlan,
) -> LevelRun {
    let clock = target.clock();
    let start = clock.now();
    let deadline = plan.duration.map(|d| clock.instant(start) + d);
    let sending_end = deadline.map(|d| clock.stamp(d));
    let (trim, u) = (plan.trim, &plan.unit);
    let window = |records: &[ClientRecord]| {
        Window::new(u.first_id, u.warmup as u64, u.units as u64, trim, start, sending_end, records)
    };
    // Without a known end of sending, a time trim at the end waits for the last send.
    let open_end = sending_end.is_none() && !trim.end.is_zero();
    let collector = Collector::new(window(&[]), open_end, u);
    let closed = matches!(plan.arrival, Arrival::Closed { .. });
    let collector = if closed { collector.closed(1) } else { collector };
    let open = matches!(plan.arrival, Arrival::Rate { .. } | Arrival::Trace { .. });
    let slots = plan.max_in_flight.filter(|_| open).map(|n| Arc::new(tokio::sync::Semaphore::new(n.max(1))));
    let plan_unit = UnitPlan { users: plan.arrival.users(), ..u.clone() };
    let shard = plan.shard.filter(|_| !closed);
    let level = Arc::new(Level { target, scenario, vocab, plan: plan_unit, collector, slots, shard });
    let (ramp, schedule) = match plan.arrival {
        Arrival::Closed { think, .. } => (Some(level.closed(think, plan.think_jitter, deadline).await.ramp), None),
        Arrival::Rate { rate, burstiness } => (None, Some(level.open(rate, burstiness, deadline).await)),
        Arrival::Burst { .. } => (None, Some(level.burst(start).await)),
        Arrival::Trace { speedup, .. } => (None, Some(level.traced(speedup, deadline).await)),
    };
    let mut run = level.collector.finish(start, clock.now(), window).0;
    (run.ramp, run.schedule) = (ramp, schedule);
    run
}

#[cfg(test)]
mod tests;
