//! The simulated engine as a [`Target`]: `goodput_sizing`'s [`SimEngine`] (the real scheduler
//! with a step-cost model in place of the model runner) on a paused tokio runtime, driven by
//! the very workload code of a measured run, so the same records, metrics and report come out.
//!
//! **Time.** The runtime's clock is paused: it jumps to the next timer whenever every task
//! waits, so the simulation runs as fast as the CPU allows. Tokio's timers tick in whole
//! milliseconds, as they do in a real run, which is right for the workload (its arrivals and
//! think times fire on those ticks in a real run too) but far too coarse for engine steps of
//! a fraction of a millisecond. So the engine keeps its own time in nanoseconds and only lets
//! the runtime catch up to the last tick before each step's end (every workload event before
//! the end has happened by then); the run's [`Clock`] reads the later of the runtime's time
//! and the engine's last published step end, so a user reacting to a finished request sends
//! at the exact end, not at the next tick.

use goodput_core::{
    Chunk, ClientRecord, Clock, FailureKind, Outcome, RequestId, Stamp, StepRecord, Target, TokenId, WorkRequest,
};
use goodput_scheduler::{NewRequest, SchedulerConfig};
use goodput_sizing::sim::SimEngine;
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

thread_local! {
    /// The latest time read or published on this thread's simulation, as an `Instant`.
    static LATEST: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// The simulation's time source: the paused runtime's time, never before the engine's last
/// published step end (nor before any earlier reading, so it is monotonic, also outside the
/// runtime between two levels, when time stands still).
fn virtual_now() -> Instant {
    let runtime = tokio::runtime::Handle::try_current().ok().map(|_| tokio::time::Instant::now().into_std());
    LATEST.with(|l| {
        let t = match (runtime, l.get()) {
            (Some(r), Some(p)) => r.max(p),
            (Some(r), None) => r,
            (None, Some(p)) => p,
            (None, None) => Instant::now(),
        };
        l.set(Some(t));
        t
    })
}

fn publish(t: Instant) {
    LATEST.with(|l| l.set(Some(l.get().map_or(t, |p| p.max(t)))));
}

/// The clock of a simulation on `rt` (a current-thread runtime started paused): its origin is
/// the runtime's start, where its millisecond ticks begin.
pub fn clock(rt: &tokio::runtime::Runtime) -> Clock {
    let _in = rt.enter();
    LATEST.with(|l| l.set(None));
    Clock::with_source(virtual_now)
}

enum Command {
    Add { req: NewRequest, events: UnboundedSender<Event> },
    Abort(RequestId),
}

enum Event {
    Token(Stamp),
    Finished { record: goodput_core::EngineRecord, tokens: Vec<TokenId> },
}

/// The handle the workload drives.
pub struct SimTarget {
    tx: UnboundedSender<Command>,
    /// Events sent and not yet taken by their followers (see [`engine_loop`]).
    pending: Arc<AtomicUsize>,
    clock: Clock,
    next_id: AtomicU64,
    limits: Arc<SchedulerConfig>,
    vocab: usize,
    /// What the simulation stands for, for reports.
    pub description: String,
}

impl SimTarget {
    /// Starts the simulated engine on `local` (its scheduler is single-threaded), sending its
    /// steps to `steps`.
    pub fn start(
        local: &tokio::task::LocalSet,
        engine: SimEngine,
        clock: Clock,
        vocab: usize,
        steps: flume::Sender<StepRecord>,
        description: String,
    ) -> Self {
        let (tx, rx) = unbounded_channel();
        let limits = Arc::new(engine.config().clone());
        let pending = Arc::new(AtomicUsize::new(0));
        local.spawn_local(engine_loop(engine, rx, steps, clock, pending.clone()));
        Self { tx, pending, clock, next_id: AtomicU64::new(0), limits, vocab, description }
    }
}

/// A request's follower: takes its events, counting them off the engine's pending count, and
/// aborts the request if it goes away before the end (its unread events uncounted too).
struct Follow<'a> {
    id: RequestId,
    rx: UnboundedReceiver<Event>,
    tx: &'a UnboundedSender<Command>,
    pending: &'a AtomicUsize,
    done: bool,
}

impl Follow<'_> {
    async fn next(&mut self) -> Option<Event> {
        let ev = self.rx.recv().await?;
        settle(self.pending, 1);
        Some(ev)
    }
}

impl Drop for Follow<'_> {
    fn drop(&mut self) {
        settle(self.pending, self.rx.len());
        if !self.done {
            let _ = self.tx.send(Command::Abort(self.id));
        }
    }
}

fn settle(pending: &AtomicUsize, n: usize) {
    let _ = pending.fetch_update(Ordering::AcqRel, Ordering::Acquire, |p| Some(p.saturating_sub(n)));
}

impl Target for SimTarget {
    fn clock(&self) -> Clock {
        self.clock
    }

    fn describe(&self) -> String {
        self.description.clone()
    }

    /// As the in-process engine's target, with the engine's own stamps for tokens and end.
    async fn run(&self, req: WorkRequest, intended: Stamp) -> ClientRecord {
        let sent = self.clock.now();
        let mut rec = ClientRecord::unanswered(req.id, intended, req.prompt.len(), sent, Outcome::Ok);
        rec.sent = sent;
        let refuse = |mut rec: ClientRecord, msg: String| {
            rec.outcome = Outcome::refused(FailureKind::Invalid, msg);
            rec
        };
        if let Err(e) = self.limits.check(req.prompt.len(), &req.params) {
            return refuse(rec, e.to_string());
        }
        if let Some(&t) = req.prompt.iter().find(|&&t| t as usize >= self.vocab) {
            return refuse(rec, format!("token id {t} is outside the vocabulary ({})", self.vocab));
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (events, rx) = unbounded_channel();
        let new = NewRequest { id, prompt: req.prompt, params: req.params, arrival: sent };
        if self.tx.send(Command::Add { req: new, events }).is_err() {
            rec.outcome = Outcome::error(FailureKind::Engine, "the simulated engine stopped");
            return rec;
        }
        let mut follow = Follow { id, rx, tx: &self.tx, pending: &self.pending, done: false };
        while let Some(ev) = follow.next().await {
            match ev {
                Event::Token(at) => rec.chunks.push(Chunk { at, tokens: 1 }),
                Event::Finished { record, tokens } => {
                    follow.done = true;
                    rec.end = record.finished;
                    rec.output_tokens = tokens.len();
                    rec.output_ids = tokens;
                    rec.engine = Some(record);
                    return rec;
                }
            }
        }
        follow.done = true;
        rec.end = self.clock.now();
        rec.output_tokens = rec.chunks.len();
        rec.outcome = Outcome::error(FailureKind::Engine, "the simulated engine stopped");
        rec
    }
}

/// The last millisecond tick at or before `s` (the runtime's timers fire on these).
fn tick_floor(s: Stamp) -> Stamp {
    Stamp(s.0 - s.0 % 1_000_000)
}

fn take(sim: &mut SimEngine, streams: &mut HashMap<RequestId, UnboundedSender<Event>>, cmd: Command, now: Stamp) {
    match cmd {
        Command::Add { req, events } => {
            let id = req.id;
            match sim.add(req, now) {
                Ok(()) => {
                    streams.insert(id, events);
                }
                // Checked by the target before sending; an id clash cannot happen.
                Err(_) => drop(events),
            }
        }
        Command::Abort(id) => {
            streams.remove(&id);
            sim.abort(id, now);
        }
    }
}

/// The engine's loop in virtual time (see the module docs).
async fn engine_loop(
    mut sim: SimEngine,
    mut rx: UnboundedReceiver<Command>,
    steps: flume::Sender<StepRecord>,
    clock: Clock,
    pending: Arc<AtomicUsize>,
) {
    let mut streams = HashMap::new();
    let mut e = clock.now();
    loop {
        while let Ok(cmd) = rx.try_recv() {
            take(&mut sim, &mut streams, cmd, e);
        }
        let planned = if sim.has_work() { sim.begin(e) } else { None };
        let Some(p) = planned else {
            // Idle: wait for the next request; its time is the engine's.
            let Some(cmd) = rx.recv().await else { return };
            e = e.max(clock.now());
            take(&mut sim, &mut streams, cmd, e);
            continue;
        };
        // The step runs: whoever the previous step's tokens woke reacts now (as a client does
        // while the engine computes its next step), stamped at that step's end; what they send
        // is taken when this step ends. One yield is not a barrier (the runtime resumes a
        // yielded task after a bounded number of others), so yield until every event sent is
        // taken — bounded, should a follower never come back to its events.
        for _ in 0..4096 {
            tokio::task::yield_now().await;
            if pending.load(Ordering::Acquire) == 0 {
                break;
            }
        }
        let tick = tick_floor(p.end);
        if clock.instant(tick) > tokio::time::Instant::now().into_std() {
            tokio::time::sleep_until(clock.instant(tick).into()).await;
            // Tasks woken on this tick run before the step ends.
            tokio::task::yield_now().await;
        }
        publish(clock.instant(p.end));
        e = p.next;
        let (record, update) = sim.end(p);
        let _ = steps.send(record);
        let sent = |tx: &UnboundedSender<Event>, ev: Event| {
            if tx.send(ev).is_ok() {
                pending.fetch_add(1, Ordering::AcqRel);
            }
        };
        for &(id, _, _) in &update.tokens {
            if let Some(tx) = streams.get(&id) {
                sent(tx, Event::Token(update.time));
            }
        }
        for (record, tokens) in update.finished {
            if let Some(tx) = streams.remove(&record.id) {
                sent(&tx, Event::Finished { record, tokens });
            }
        }
    }
}
