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

use crate::cost::{StepCost, StepHistory, StepWork};
use crate::error::SizingError;
use goodput_core::{EngineRecord, FinishReason, RequestId, Stamp, StepRecord, TokenId};
use goodput_scheduler::{AdmissionError, NewRequest, Scheduler, SchedulerConfig, SchedulerOutput, StepUpdate};
use std::sync::Arc;

/// A scheduled step, running until `end`, or a decode run of several.
#[derive(Debug)]
pub struct Planned {
    out: SchedulerOutput,
    /// A decode run's steps, (start, end) each; empty for a single step.
    run: Vec<(Stamp, Stamp)>,
    gap_ns: u64,
    pub start: Stamp,
    pub end: Stamp,
    /// When the next step may start (end + the gap between busy steps).
    pub next: Stamp,
}

impl Planned {
    /// Steps planned (a decode run's count, else 1).
    pub fn steps(&self) -> usize {
        self.run.len().max(1)
    }

    /// Cuts a decode run to the steps begun before `now`: a request that reaches the
    /// replica at `now` joins the step after the one running, as it would between single
    /// steps. A single step is left whole.
    pub fn cut_before(&mut self, now: Stamp) {
        if self.run.len() > 1 {
            let keep = self.run.partition_point(|(start, _)| *start < now).max(1);
            self.run.truncate(keep);
            self.end = self.run[keep - 1].1;
            self.next = Stamp(self.end.0.saturating_add(self.gap_ns));
        }
    }
}

/// The scheduler and a step-cost model, stepped in virtual time by the caller.
pub struct SimEngine {
    sched: Scheduler,
    cost: Arc<dyn StepCost>,
    steps: u64,
    /// The token every sampled row produces: never end-of-sequence, so a request generates
    /// `max_tokens` (what benchmark workloads ask for with `ignore_eos`).
    token: TokenId,
    /// The steps so far, as the after-prefill and after-idle terms read them.
    history: StepHistory,
}

/// Nanoseconds of a step, at most an hour (a cost model's absurd answer must not overflow
/// the clock; NaN counts as 0).
fn nanos(seconds: f64) -> u64 {
    let s = if seconds.is_nan() { 0.0 } else { seconds.clamp(0.0, 3600.0) };
    // Half up, as `round` for these non-negative values, without its libm call (5 % of a
    // day-long fleet's time).
    (s * 1e9 + 0.5) as u64
}

impl SimEngine {
    pub fn new(cfg: SchedulerConfig, cost: Arc<dyn StepCost>) -> Result<Self, SizingError> {
        cfg.validate().map_err(SizingError::Scheduler)?;
        let token = if cfg.eos_token_id == Some(0) { 1 } else { 0 };
        let sched = Scheduler::new(cfg)?;
        Ok(Self { sched, cost, steps: 0, token, history: StepHistory::default() })
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

    /// Queues a request prefilled on another engine, whose first token it arrives with
    /// (`Scheduler::add_prefilled`; the token is this engine's, as it would have sampled it).
    pub fn add_prefilled(&mut self, req: NewRequest, now: Stamp) -> Result<(), AdmissionError> {
        self.sched.add_prefilled(req, self.token, now)
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
        let work = self.history.before(self.steps, now, StepWork::of_output(&out));
        let busy = nanos(self.cost.step_seconds(&work)).max(1);
        let end = Stamp(now.0.saturating_add(busy));
        let gap_ns = nanos(self.cost.gap_seconds());
        let next = Stamp(end.0.saturating_add(gap_ns));
        Some(Planned { out, run: Vec::new(), gap_ns, start: now, end, next })
    }

    /// [`SimEngine::begin`], or, when the next steps are pure decodes that would go alike
    /// one by one (`Scheduler::decode_run_len`), a run of up to `max` of them, none starting
    /// at or after `horizon`. Each step of a run costs what the same step alone would.
    pub fn begin_run(&mut self, now: Stamp, horizon: Stamp, max: usize) -> Option<Planned> {
        let k = self.sched.decode_run_len(self.token, max);
        if k < 2 {
            return self.begin(now);
        }
        let n = self.sched.num_running() as f64;
        let decodes = StepWork {
            decode_seqs: n,
            decode_context: self.sched.decode_context_next() as f64,
            decode_distinct: Some(self.sched.decode_distinct_next() as f64),
            sampled: n,
            ..StepWork::default()
        };
        let first = self.history.before(self.steps, now, decodes);
        let gap_ns = nanos(self.cost.gap_seconds());
        let mut run = Vec::with_capacity(k);
        let mut start = now;
        self.cost.decode_run_seconds(&first, k, &mut |seconds| {
            let end = Stamp(start.0.saturating_add(nanos(seconds).max(1)));
            run.push((start, end));
            start = Stamp(end.0.saturating_add(gap_ns));
            start < horizon
        });
        let (first, end) = (run[0].0, run[run.len() - 1].1);
        let out = SchedulerOutput::default();
        Some(Planned { out, run, gap_ns, start: first, end, next: Stamp(end.0.saturating_add(gap_ns)) })
    }

    /// Ends a planned step at its `end`: applies its tokens and returns the step's record
    /// (as the engine writes it; the whole step counts as forward time) and the update. A
    /// decode run has no record of its own (this one spans it and counts no work): drive
    /// runs with [`SimEngine::end_quiet`].
    pub fn end(&mut self, p: Planned) -> (StepRecord, StepUpdate) {
        let update = self.apply(&p);
        (self.record(&p), update)
    }

    /// Ends a planned step without its record: a day-long fleet keeps no steps, and the
    /// record's counts (tokens held, KV by kind) walk every sequence.
    pub fn end_quiet(&mut self, p: Planned) -> StepUpdate {
        let update = self.apply(&p);
        self.steps += 1;
        update
    }

    fn apply(&mut self, p: &Planned) -> StepUpdate {
        let token = self.token;
        let finished = p.out.sampled().saturating_sub(p.out.decode_seqs);
        self.history.after(self.steps + p.steps() as u64 - 1, p.end, p.out.prefill_tokens > 0, finished);
        if !p.run.is_empty() {
            let ends: Vec<Stamp> = p.run.iter().map(|(_, end)| *end).collect();
            let ran = self.sched.decode_run(token, &ends);
            debug_assert!(ran, "a decode run planned on this scheduler applies");
            self.steps += p.run.len() as u64 - 1;
            return StepUpdate { time: p.end, ..StepUpdate::default() };
        }
        let sampled: Vec<Option<TokenId>> = p.out.seqs.iter().map(|s| s.samples.then_some(token)).collect();
        self.sched.update(&p.out, &sampled, p.end)
    }

    /// The record of step `p`, just applied.
    fn record(&mut self, p: &Planned) -> StepRecord {
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
            decode_distinct_context: Some(p.out.decode_distinct_context),
            sampled: p.out.sampled(),
            // The simulator's cost model has no routing (the planner's side is issue 27's).
            experts: None,
            kv_by_kind: self.sched.kv_by_kind(),
            graph: None,
        };
        drop(pool);
        self.steps += 1;
        StepRecord { tokens_held: self.sched.tokens_held(), ..record }
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
