//! The simulated engine: the real [`goodput_scheduler::Scheduler`] (same block pool, same
//! token budget, sequence cap, prefix caching and preemption) with a [`StepCost`] in place of
//! the model runner, in virtual time. It produces the engine's own records (request records
//! from the scheduler, step records as the engine writes them), so everything downstream is
//! the same code as for a measured run.
//!
//! A step is taken in two halves so that a driver can let the world move while it "runs":
//! [`SimEngine::begin`] schedules at a stamp and says when the step ends, [`SimEngine::end`]
//! applies its tokens at that stamp. [`run_arrivals`] is the plain discrete-event driver for a
//! list of timed arrivals; goodput's front end drives the same engine from the workload code.

use crate::cost::{StepCost, StepWork};
use crate::error::SizingError;
use goodput_core::{EngineRecord, FinishReason, RequestId, Stamp, StepRecord, TokenId};
use goodput_scheduler::{AdmissionError, NewRequest, Scheduler, SchedulerConfig, SchedulerOutput, StepUpdate};
use std::sync::Arc;

/// A scheduled step, running until `end`.
#[derive(Debug)]
pub struct Planned {
    out: SchedulerOutput,
    pub start: Stamp,
    pub end: Stamp,
    /// When the next step may start (end + the gap between busy steps).
    pub next: Stamp,
}

/// The scheduler and a step-cost model, stepped in virtual time by the caller.
pub struct SimEngine {
    sched: Scheduler,
    cost: Arc<dyn StepCost>,
    steps: u64,
    /// The token every sampled row produces: never end-of-sequence, so a request generates
    /// `max_tokens` (what benchmark workloads ask for with `ignore_eos`).
    token: TokenId,
}

/// Nanoseconds of a step, at most an hour (a cost model's absurd answer must not overflow
/// the clock; NaN counts as 0).
fn nanos(seconds: f64) -> u64 {
    let s = if seconds.is_nan() { 0.0 } else { seconds.clamp(0.0, 3600.0) };
    (s * 1e9).round() as u64
}

impl SimEngine {
    pub fn new(cfg: SchedulerConfig, cost: Arc<dyn StepCost>) -> Result<Self, SizingError> {
        cfg.validate().map_err(SizingError::Scheduler)?;
        let token = if cfg.eos_token_id == Some(0) { 1 } else { 0 };
        let sched = Scheduler::new(cfg).map_err(|e| SizingError::Scheduler(e.to_string()))?;
        Ok(Self { sched, cost, steps: 0, token })
    }

    pub fn config(&self) -> &SchedulerConfig {
        self.sched.config()
    }

    pub fn scheduler(&self) -> &Scheduler {
        &self.sched
    }

    pub fn has_work(&self) -> bool {
        self.sched.has_work()
    }

    /// Queues a request at `now` (its `arrival` is when the caller accepted it).
    pub fn add(&mut self, req: NewRequest, now: Stamp) -> Result<(), AdmissionError> {
        self.sched.add(req, now)
    }

    pub fn abort(&mut self, id: RequestId, now: Stamp) -> Option<(EngineRecord, Vec<TokenId>)> {
        self.sched.abort(id, now)
    }

    pub fn abort_all(&mut self, now: Stamp) -> Vec<(EngineRecord, Vec<TokenId>)> {
        self.sched.abort_all(FinishReason::Abort, now)
    }

    /// Schedules a step starting at `now`; `None` when nothing can be scheduled.
    pub fn begin(&mut self, now: Stamp) -> Option<Planned> {
        let out = self.sched.schedule(now);
        if out.is_empty() {
            return None;
        }
        let busy = nanos(self.cost.step_seconds(&StepWork::of_output(&out))).max(1);
        let end = Stamp(now.0.saturating_add(busy));
        let next = Stamp(end.0.saturating_add(nanos(self.cost.gap_seconds())));
        Some(Planned { out, start: now, end, next })
    }

    /// Ends a planned step at its `end`: applies its tokens and returns the step's record
    /// (as the engine writes it; the whole step counts as forward time) and the update.
    pub fn end(&mut self, p: Planned) -> (StepRecord, StepUpdate) {
        let sampled: Vec<Option<TokenId>> = p.out.seqs.iter().map(|s| s.samples.then_some(self.token)).collect();
        let update = self.sched.update(&p.out, &sampled, p.end);
        let pool = self.sched.pool();
        let record = StepRecord {
            step: self.steps,
            start: p.start,
            end: p.end,
            schedule_s: 0.0,
            forward_s: p.end.secs_since(p.start),
            sample_s: 0.0,
            prefill_tokens: p.out.prefill_tokens,
            decode_seqs: p.out.decode_seqs,
            num_seqs: p.out.seqs.len(),
            running: self.sched.num_running(),
            waiting: self.sched.num_waiting(),
            blocks_used: pool.usable_blocks() - pool.num_free_blocks(),
            usable_blocks: pool.usable_blocks(),
            block_size: pool.block_size(),
            tokens_held: 0,
            preemptions: p.out.preempted.len(),
            prefix_hit_tokens: p.out.prefix_hit_tokens,
            prefix_query_tokens: p.out.prefix_query_tokens,
            prefill_attention: p.out.prefill_attention(),
            decode_context: p.out.decode_context(),
            sampled: p.out.sampled(),
            // The simulator's cost model has no routing (the planner's side is issue 27's).
            experts: None,
            kv_by_kind: self.sched.kv_by_kind(),
        };
        drop(pool);
        self.steps += 1;
        (StepRecord { tokens_held: self.sched.tokens_held(), ..record }, update)
    }
}

/// What a driven simulation gives back: every request's record and every step.
#[derive(Debug, Default)]
pub struct SimOutput {
    pub records: Vec<EngineRecord>,
    pub refused: Vec<(RequestId, AdmissionError)>,
    pub steps: Vec<StepRecord>,
}

/// Where a plain simulation's requests come from.
pub trait Source {
    /// The next request due at or before `now`, if any.
    fn due(&mut self, now: Stamp) -> Option<NewRequest>;
    /// When the next request is due, if one is known.
    fn next_due(&self) -> Option<Stamp>;
    /// A request ended at `at` (a closed-loop user sends its next one).
    fn finished(&mut self, record: &EngineRecord, at: Stamp);
}

/// Requests at fixed times (open loop), sorted by stamp.
pub struct Timed(std::collections::VecDeque<(Stamp, NewRequest)>);

impl Timed {
    pub fn new(mut arrivals: Vec<(Stamp, NewRequest)>) -> Self {
        arrivals.sort_by_key(|(at, _)| *at);
        Self(arrivals.into())
    }
}

impl Source for Timed {
    fn due(&mut self, now: Stamp) -> Option<NewRequest> {
        if self.0.front().is_some_and(|(at, _)| *at <= now) {
            self.0.pop_front().map(|(_, r)| r)
        } else {
            None
        }
    }
    fn next_due(&self) -> Option<Stamp> {
        self.0.front().map(|(at, _)| *at)
    }
    fn finished(&mut self, _: &EngineRecord, _: Stamp) {}
}

/// Runs `source` through `engine` until it has nothing more and every request ended: the
/// plain discrete-event loop. As on the engine thread, requests are taken between steps, and
/// whoever a step's tokens wake reacts while the next step runs (so a closed-loop user's next
/// request joins the step after next, as in a measured run).
pub fn drive(engine: &mut SimEngine, source: &mut dyn Source) -> SimOutput {
    let mut out = SimOutput::default();
    let mut now = Stamp(0);
    let mut just_finished: Vec<EngineRecord> = Vec::new();
    loop {
        while let Some(req) = source.due(now) {
            let (id, arrival, prompt) = (req.id, req.arrival, req.prompt.len());
            if let Err(e) = engine.add(req, now) {
                // Refused at once: its user (closed loop) goes on with its next request.
                let record = refused_record(id, arrival, prompt, now);
                source.finished(&record, now);
                out.refused.push((id, e));
            }
        }
        let planned = if engine.has_work() { engine.begin(now) } else { None };
        for r in just_finished.drain(..) {
            source.finished(&r, r.finished);
            out.records.push(r);
        }
        match planned {
            Some(p) => {
                now = p.next;
                let (step, update) = engine.end(p);
                out.steps.push(step);
                just_finished.extend(update.finished.into_iter().map(|(r, _)| r));
            }
            // Idle (or blocked until something changes): jump to the next arrival.
            None => match source.next_due() {
                Some(at) => now = now.max(at),
                None => break,
            },
        }
    }
    out
}

/// A closed loop: `users` users, each sending its next request `think` after its previous
/// one ended, until `total` were sent; `make(i, at)` is request number `i`, due at `at`.
pub struct ClosedLoop<F: FnMut(u64, Stamp) -> NewRequest> {
    make: F,
    total: u64,
    issued: u64,
    think_ns: u64,
    ready: std::collections::BinaryHeap<std::cmp::Reverse<Stamp>>,
}

impl<F: FnMut(u64, Stamp) -> NewRequest> ClosedLoop<F> {
    pub fn new(users: usize, total: u64, think: std::time::Duration, make: F) -> Self {
        let ready = (0..users.max(1)).map(|_| std::cmp::Reverse(Stamp(0))).collect();
        Self { make, total, issued: 0, think_ns: think.as_nanos() as u64, ready }
    }
}

impl<F: FnMut(u64, Stamp) -> NewRequest> Source for ClosedLoop<F> {
    fn due(&mut self, now: Stamp) -> Option<NewRequest> {
        let at = self.next_due().filter(|at| *at <= now)?;
        self.ready.pop();
        self.issued += 1;
        Some((self.make)(self.issued - 1, at))
    }
    fn next_due(&self) -> Option<Stamp> {
        (self.issued < self.total).then(|| self.ready.peek().map(|r| r.0)).flatten()
    }
    fn finished(&mut self, _: &EngineRecord, at: Stamp) {
        self.ready.push(std::cmp::Reverse(Stamp(at.0 + self.think_ns)));
    }
}

/// The record of a request refused at `at`: no token, finished at once.
pub(crate) fn refused_record(id: RequestId, arrival: Stamp, prompt_tokens: usize, at: Stamp) -> EngineRecord {
    EngineRecord {
        id,
        arrival,
        queued: at,
        first_scheduled: None,
        first_token: None,
        token_times: Vec::new(),
        finished: at,
        prompt_tokens,
        cached_tokens: 0,
        generated_tokens: 0,
        preemptions: 0,
        finish_reason: FinishReason::Error,
    }
}

/// [`drive`] over requests at fixed times.
pub fn run_arrivals(engine: &mut SimEngine, arrivals: Vec<(Stamp, NewRequest)>) -> SimOutput {
    drive(engine, &mut Timed::new(arrivals))
}

#[cfg(test)]
#[path = "sim/tests.rs"]
mod tests;
