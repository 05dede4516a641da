//! The engine thread and its cloneable handle: submit requests, receive each request's token
//! events with their stamps and its final record, abort, shut down, and follow step records.

use crate::error::{EngineError, Result};
use crate::model::Llama;
use crate::step::{EngineConfig, EngineCore};
use flume::{unbounded, Receiver, Sender};
use goodput_core::{
    Clock, EngineRecord, FailureKind, FinishReason, RequestId, SamplingParams, Stamp, StepRecord, TokenId,
};
use goodput_scheduler::SchedulerConfig;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// What a request's stream carries.
#[derive(Clone, Debug, PartialEq)]
pub enum RequestEvent {
    /// A generated token: its index among the request's tokens and when it was sampled.
    Token { token: TokenId, index: usize, time: Stamp },
    /// The request ended (any reason); its record and every generated token.
    Finished { record: EngineRecord, tokens: Vec<TokenId> },
    /// The request was refused or failed.
    Error(String),
}

/// A snapshot of the engine's state, between two steps.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EngineStats {
    pub running: usize,
    pub waiting: usize,
    pub blocks_used: usize,
    pub usable_blocks: usize,
    pub tokens_held: usize,
    /// Requests with an open event stream.
    pub streams: usize,
}

/// The engine's state, published after every step and command for lock-free readers (a
/// server's admission check, its /metrics): gauges of the moment and cumulative counters.
#[derive(Debug, Default)]
pub struct EngineGauges {
    pub running: AtomicUsize,
    pub waiting: AtomicUsize,
    /// Requests submitted and not yet taken by the engine thread, plus `waiting` as last
    /// published: what an admission limit counts. Raised by [`EngineHandle::submit_bounded`]
    /// in the same atomic operation that checks the limit, so a burst cannot overshoot it.
    pub queued: AtomicUsize,
    pub blocks_used: AtomicUsize,
    /// Of `blocks_used`, those held by sliding-window layers (0 without them).
    pub blocks_sliding: AtomicUsize,
    pub usable_blocks: AtomicUsize,
    pub tokens_held: AtomicUsize,
    pub steps_total: AtomicU64,
    pub preemptions_total: AtomicU64,
    pub prefix_query_tokens_total: AtomicU64,
    pub prefix_hit_tokens_total: AtomicU64,
}

impl EngineGauges {
    /// Publishes the engine's state. `taken`: requests moved from the channel into the
    /// scheduler since the last publish (already counted in `queued`, now in `waiting`).
    fn publish(&self, core: &EngineCore, taken: &mut usize) {
        let s = core.scheduler();
        self.running.store(s.num_running(), Ordering::Relaxed);
        let waiting = s.num_waiting();
        let before = self.waiting.swap(waiting, Ordering::Relaxed);
        // queued += (waiting − before) − taken, as one atomic step that never goes below 0.
        let up = waiting;
        let down = before + std::mem::take(taken);
        let _ = self.queued.fetch_update(Ordering::AcqRel, Ordering::Acquire, |q| Some((q + up).saturating_sub(down)));
        self.blocks_used.store(s.blocks_used(), Ordering::Relaxed);
        self.blocks_sliding.store(s.kv_by_kind().map_or(0, |k| k.sliding), Ordering::Relaxed);
        self.usable_blocks.store(s.pool().usable_blocks(), Ordering::Relaxed);
        self.tokens_held.store(s.tokens_held(), Ordering::Relaxed);
    }

    /// A submitted request that never reached the scheduler.
    fn unqueue(&self) {
        let _ = self.queued.fetch_update(Ordering::AcqRel, Ordering::Acquire, |q| Some(q.saturating_sub(1)));
    }

    fn count_step(&self, r: &StepRecord) {
        self.steps_total.fetch_add(1, Ordering::Relaxed);
        self.preemptions_total.fetch_add(r.preemptions as u64, Ordering::Relaxed);
        self.prefix_query_tokens_total.fetch_add(r.prefix_query_tokens as u64, Ordering::Relaxed);
        self.prefix_hit_tokens_total.fetch_add(r.prefix_hit_tokens as u64, Ordering::Relaxed);
    }
}

enum Command {
    Stats(Sender<EngineStats>),
    Add { id: RequestId, prompt: Vec<TokenId>, params: SamplingParams, arrival: Stamp, events: Sender<RequestEvent> },
    Abort(RequestId),
    Shutdown { drain: bool },
}

/// A submitted request: its id and its event stream. Dropping it aborts the request if it is
/// still in the engine (a client that gives up stops costing the engine at once, even while
/// its request is still queued).
pub struct RequestStream {
    pub id: RequestId,
    pub events: Receiver<RequestEvent>,
    cancel: Sender<Command>,
}

impl Drop for RequestStream {
    fn drop(&mut self) {
        // A no-op in the engine when the request has already ended.
        let _ = self.cancel.send(Command::Abort(self.id));
    }
}

impl RequestStream {
    /// Waits for the end of the request; returns its record and tokens.
    pub fn wait(self) -> Result<(EngineRecord, Vec<TokenId>)> {
        for ev in self.events.iter() {
            match ev {
                RequestEvent::Finished { record, tokens } => return Ok((record, tokens)),
                RequestEvent::Error(e) => return Err(EngineError::Request(e)),
                RequestEvent::Token { .. } => {}
            }
        }
        Err(EngineError::Stopped)
    }
}

/// A handle to the engine thread; clone it freely.
#[derive(Clone)]
pub struct EngineHandle {
    tx: Sender<Command>,
    clock: Clock,
    next_id: Arc<AtomicU64>,
    limits: Arc<SchedulerConfig>,
    vocab_size: usize,
    gauges: Arc<EngineGauges>,
}

impl EngineHandle {
    pub fn clock(&self) -> Clock {
        self.clock
    }

    pub fn limits(&self) -> &SchedulerConfig {
        &self.limits
    }

    /// Submits a request. Bad requests (empty, too long for the context or the pool, bad
    /// parameters) are refused here, before they reach the engine thread.
    pub fn submit(&self, prompt: Vec<TokenId>, params: SamplingParams) -> Result<RequestStream> {
        self.submit_bounded(prompt, params, usize::MAX)
    }

    /// [`EngineHandle::submit`], refused with [`EngineError::Overloaded`] when `max_queued`
    /// requests already wait (submitted and not yet scheduled, see [`EngineGauges::queued`]).
    /// The check and the count are one atomic step: concurrent callers cannot overshoot.
    pub fn submit_bounded(
        &self,
        prompt: Vec<TokenId>,
        params: SamplingParams,
        max_queued: usize,
    ) -> Result<RequestStream> {
        let arrival = self.clock.now();
        self.limits.check(prompt.len(), &params)?;
        if let Some(&t) = prompt.iter().find(|&&t| t as usize >= self.vocab_size) {
            return Err(goodput_scheduler::AdmissionError::TokenOutOfVocab { token: t, vocab: self.vocab_size }.into());
        }
        let queued = &self.gauges.queued;
        queued
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |q| (q < max_queued).then_some(q + 1))
            .map_err(|waiting| EngineError::Overloaded { waiting, limit: max_queued })?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = unbounded();
        if self.tx.send(Command::Add { id, prompt, params, arrival, events: tx }).is_err() {
            self.gauges.unqueue();
            return Err(EngineError::Stopped);
        }
        Ok(RequestStream { id, events: rx, cancel: self.tx.clone() })
    }

    /// The engine's state between two steps (waits for the current step to end).
    pub fn stats(&self) -> Result<EngineStats> {
        let (tx, rx) = flume::bounded(1);
        self.tx.send(Command::Stats(tx)).map_err(|_| EngineError::Stopped)?;
        rx.recv().map_err(|_| EngineError::Stopped)
    }

    /// Aborts a request; its KV blocks return to the pool before the next step.
    pub fn abort(&self, id: RequestId) {
        let _ = self.tx.send(Command::Abort(id));
    }

    /// [`EngineHandle::stats`] without waiting for the engine thread.
    pub async fn stats_async(&self) -> Result<EngineStats> {
        let (tx, rx) = flume::bounded(1);
        self.tx.send_async(Command::Stats(tx)).await.map_err(|_| EngineError::Stopped)?;
        rx.recv_async().await.map_err(|_| EngineError::Stopped)
    }

    /// The state published after the last step or command (no round trip to the engine).
    pub fn gauges(&self) -> &EngineGauges {
        &self.gauges
    }

    /// Stops the engine from any handle: with `drain`, what runs finishes first; without,
    /// every request ends at once (aborted) and new ones are refused.
    pub fn stop(&self, drain: bool) {
        let _ = self.tx.send(Command::Shutdown { drain });
    }
}

/// The running engine: its thread and a handle.
pub struct Engine {
    handle: EngineHandle,
    thread: Option<JoinHandle<()>>,
}

impl Engine {
    /// Starts the engine thread over `model`. Step records go to `steps` when given; pass an
    /// unbounded sender (a full bounded one would stall the engine).
    pub fn start(model: Llama, cfg: EngineConfig, clock: Clock, steps: Option<Sender<StepRecord>>) -> Result<Self> {
        let limits = cfg.scheduler_config(&model)?;
        let vocab_size = model.spec.vocab_size;
        let (tx, rx) = unbounded::<Command>();
        let (ready_tx, ready_rx) = flume::bounded::<Result<()>>(1);
        let gauges = Arc::new(EngineGauges::default());
        let published = gauges.clone();
        let thread = std::thread::Builder::new()
            .name("goodput-engine".into())
            .spawn(move || {
                let cpus = cfg.cpus.clone();
                let delay = cfg.step_delay;
                let ready = ready_tx.clone();
                let body = move || {
                    // The scheduler is single-threaded (Rc), so the core is built on the
                    // thread that runs the loop.
                    let core = match EngineCore::new(model, &cfg, clock) {
                        Ok(c) => {
                            let _ = ready_tx.send(Ok(()));
                            c
                        }
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                            return;
                        }
                    };
                    published.publish(&core, &mut 0);
                    run_loop(core, rx, steps, &published, delay);
                };
                let Some(cpus) = cpus else { return body() };
                // Pinned: this thread and a pool of one compute thread per CPU, all on `cpus`;
                // the loop runs inside the pool, so every parallel kernel stays there.
                let pool = crate::affinity::pin_current(&cpus).and_then(|_| {
                    let pin = cpus.clone();
                    rayon::ThreadPoolBuilder::new()
                        .num_threads(cpus.len())
                        .thread_name(|i| format!("goodput-compute-{i}"))
                        .start_handler(move |_| {
                            crate::affinity::pin_current_or_warn(&pin, "the engine's compute pool");
                        })
                        .build()
                        .map_err(|e| EngineError::Thread { what: "the compute threads", reason: e.to_string() })
                });
                match pool {
                    Ok(pool) => pool.install(body),
                    Err(e) => {
                        let _ = ready.send(Err(e));
                    }
                }
            })
            .map_err(|e| EngineError::Thread { what: "the engine thread", reason: e.to_string() })?;
        ready_rx.recv().map_err(|_| EngineError::Stopped)??;
        let handle = EngineHandle {
            tx,
            clock,
            next_id: Arc::new(AtomicU64::new(0)),
            limits: Arc::new(limits),
            vocab_size,
            gauges,
        };
        Ok(Self { handle, thread: Some(thread) })
    }

    pub fn handle(&self) -> EngineHandle {
        self.handle.clone()
    }

    /// Stops the engine: with `drain`, running and queued requests finish first; without,
    /// they are aborted. Waits for the thread.
    pub fn shutdown(mut self, drain: bool) {
        let _ = self.handle.tx.send(Command::Shutdown { drain });
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        if let Some(t) = self.thread.take() {
            let _ = self.handle.tx.send(Command::Shutdown { drain: false });
            let _ = t.join();
        }
    }
}

fn run_loop(
    mut core: EngineCore,
    rx: Receiver<Command>,
    steps: Option<Sender<StepRecord>>,
    gauges: &EngineGauges,
    delay: std::time::Duration,
) {
    let mut streams: HashMap<RequestId, Sender<RequestEvent>> = HashMap::new();
    let mut stopping = false;
    let mut taken = 0;
    loop {
        if !core.has_work() && !stopping {
            // Idle: block for a command; every handle gone means nobody can ask for more.
            match rx.recv() {
                Ok(cmd) => handle_command(&mut core, &mut streams, &mut stopping, &mut taken, gauges, cmd),
                Err(_) => break,
            }
        }
        for cmd in rx.try_iter() {
            handle_command(&mut core, &mut streams, &mut stopping, &mut taken, gauges, cmd);
        }
        gauges.publish(&core, &mut taken);
        if core.has_work() {
            if !delay.is_zero() {
                std::thread::sleep(delay);
            }
            step_once(&mut core, &mut streams, &steps, gauges);
            gauges.publish(&core, &mut taken);
        } else if stopping {
            break;
        }
    }
}

fn send_finished(streams: &mut HashMap<RequestId, Sender<RequestEvent>>, done: Vec<(EngineRecord, Vec<TokenId>)>) {
    for (record, tokens) in done {
        if let Some(tx) = streams.remove(&record.id) {
            let _ = tx.send(RequestEvent::Finished { record, tokens });
        }
    }
}

fn handle_command(
    core: &mut EngineCore,
    streams: &mut HashMap<RequestId, Sender<RequestEvent>>,
    stopping: &mut bool,
    taken: &mut usize,
    gauges: &EngineGauges,
    cmd: Command,
) {
    match cmd {
        Command::Stats(reply) => {
            let s = core.scheduler();
            let _ = reply.send(EngineStats {
                running: s.num_running(),
                waiting: s.num_waiting(),
                blocks_used: s.blocks_used(),
                usable_blocks: s.pool().usable_blocks(),
                tokens_held: s.tokens_held(),
                streams: streams.len(),
            });
        }
        Command::Add { id, prompt, params, arrival, events } => {
            if *stopping {
                gauges.unqueue();
                let _ = events.send(RequestEvent::Error("the engine is shutting down".into()));
                return;
            }
            match core.add_request(id, prompt, params, arrival) {
                Ok(()) => {
                    *taken += 1;
                    streams.insert(id, events);
                }
                Err(e) => {
                    gauges.unqueue();
                    let _ = events.send(RequestEvent::Error(e.to_string()));
                }
            }
        }
        Command::Abort(id) => {
            if let Some(done) = core.abort(id) {
                send_finished(streams, vec![done]);
            }
        }
        Command::Shutdown { drain } => {
            *stopping = true;
            if !drain {
                let done = core.abort_all(FinishReason::Abort);
                send_finished(streams, done);
            }
        }
    }
}

fn step_once(
    core: &mut EngineCore,
    streams: &mut HashMap<RequestId, Sender<RequestEvent>>,
    steps: &Option<Sender<StepRecord>>,
    gauges: &EngineGauges,
) {
    match core.step() {
        Ok(Some(out)) => {
            gauges.count_step(&out.record);
            // The gauges are published before any token goes out: whoever sees a token reads
            // the state of the step that made it (KV blocks held, running). Nothing was taken
            // from the channel since the publish before the step, hence no `taken`.
            gauges.publish(core, &mut 0);
            // The step record goes out first: whoever sees a request finish can already read
            // the step that finished it.
            if let Some(s) = steps {
                let _ = s.send(out.record);
            }
            let update = out.update;
            let mut gone = Vec::new();
            for &(id, token, index) in &update.tokens {
                if let Some(tx) = streams.get(&id) {
                    if tx.send(RequestEvent::Token { token, index, time: update.time }).is_err() {
                        gone.push(id);
                    }
                }
            }
            send_finished(streams, update.finished);
            // A receiver that went away (its client disconnected) aborts its request at once.
            for id in gone {
                if streams.remove(&id).is_some() {
                    core.abort(id);
                }
            }
        }
        Ok(None) => {}
        Err(e) => {
            let msg = format!("engine step failed: {e}");
            for (record, _) in core.abort_all(FinishReason::Error) {
                if let Some(tx) = streams.remove(&record.id) {
                    let _ = tx.send(RequestEvent::Error(msg.clone()));
                }
            }
        }
    }
}

impl goodput_core::Target for EngineHandle {
    fn clock(&self) -> Clock {
        self.clock
    }

    fn describe(&self) -> String {
        "in-process engine".into()
    }

    /// Submits to the engine thread and follows the event stream. Each token is stamped when
    /// the client side receives it (the in-process analogue of a chunk arriving), so client
    /// TTFT ≥ engine queue + prefill time.
    async fn run(&self, req: goodput_core::WorkRequest, intended: Stamp) -> goodput_core::ClientRecord {
        use goodput_core::{Chunk, ClientRecord, Outcome};
        let input_tokens = req.prompt.len();
        let sent = self.clock.now();
        let mut rec = ClientRecord::unanswered(req.id, intended, input_tokens, sent, Outcome::Ok);
        rec.sent = sent;
        // Capped: max_tokens is the caller's, and the engine refuses what exceeds the context.
        rec.chunks.reserve(req.params.max_tokens.min(self.limits.max_model_len));
        let stream = match self.submit(req.prompt, req.params) {
            Ok(s) => s,
            Err(e) => {
                rec.end = self.clock.now();
                rec.outcome = Outcome::refused(FailureKind::Invalid, e.to_string());
                return rec;
            }
        };
        loop {
            match stream.events.recv_async().await {
                Ok(RequestEvent::Token { .. }) => {
                    rec.chunks.push(Chunk { at: self.clock.now(), tokens: 1 });
                }
                Ok(RequestEvent::Finished { record, tokens }) => {
                    rec.end = self.clock.now();
                    rec.output_tokens = tokens.len();
                    rec.output_ids = tokens;
                    if record.finish_reason == FinishReason::Abort || record.finish_reason == FinishReason::Error {
                        rec.outcome = Outcome::error(
                            FailureKind::Engine,
                            format!("the engine ended the request ({:?})", record.finish_reason),
                        );
                    }
                    rec.engine = Some(record);
                    return rec;
                }
                Ok(RequestEvent::Error(e)) => {
                    rec.end = self.clock.now();
                    rec.output_tokens = rec.chunks.len();
                    rec.outcome = Outcome::error(FailureKind::Engine, e);
                    return rec;
                }
                Err(_) => {
                    rec.end = self.clock.now();
                    rec.output_tokens = rec.chunks.len();
                    rec.outcome = Outcome::error(FailureKind::Engine, "the engine stopped");
                    return rec;
                }
            }
        }
    }
}
