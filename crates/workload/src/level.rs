//! What one load level is asked to do and what it produced: the arrival process, the plan of
//! a level (warm-up, measured and cool-down counts, a time trim, timeouts, retries, the
//! record sink, the stop signal), the steady window and the level's records. Plain
//! descriptions: this module imports no other module of the crate; the drivers import it.
//!
//! Warm-up and cool-down requests (by count, or by their intended send time) are run but left
//! out of the statistics, as the seeds ask; [`LevelRun::phase`] says which is which. Like
//! vLLM's `bench serve` and oha, a level keeps every raw record and derives the window after.

use goodput_core::{ClientRecord, Phase, Stamp};
use std::sync::Arc;
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
    /// A trace's requests at its own times, `speedup` times faster: `rate` is what that
    /// offers on average (requests per second), `requests` how many the trace window holds.
    Trace { speedup: f64, rate: f64, requests: usize },
}

impl Arrival {
    /// The load level in its own unit (users, or requests per second).
    pub fn load(&self) -> f64 {
        match *self {
            Arrival::Closed { users, .. } => users as f64,
            Arrival::Rate { rate, .. } => rate,
            Arrival::Burst { size } => size as f64,
            Arrival::Trace { rate, .. } => rate,
        }
    }

    /// The closed-loop users of this arrival: its `users`, or 1 for a rate or a burst (what
    /// [`UnitPlan::users`] of a [`LevelPlan`] holds).
    pub fn users(&self) -> usize {
        match *self {
            Arrival::Closed { users, .. } => users,
            Arrival::Rate { .. } | Arrival::Burst { .. } | Arrival::Trace { .. } => 1,
        }
    }
}

/// How a closed loop's users start. All at once, N users send their first requests in the
/// same instant and, with requests of one shape, finish and send again together, wave after
/// wave (a request started later ends later by as much, so the first wave's spread is the one
/// the level keeps); staggered starts keep their sends spread over each request's time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Ramp {
    /// User `k` of `N` starts `k · d / N` after the level's start (`d` zero: all at once).
    Over(Duration),
    /// Users join one per ended unit: user 0 at once, user `k` once the level's `k`-th unit
    /// has ended, after a seeded random share of the time since the one before ended. The
    /// ramp paces itself by the target: one that serves requests one after another (a
    /// saturated core) gets a new user per request time, so the users' starts spread over
    /// about one request time at the full load; one whose request time does not grow with
    /// load over a few (≈ ln N) request times.
    Paced,
}

impl Default for Ramp {
    /// All at once.
    fn default() -> Self {
        Ramp::Over(Duration::ZERO)
    }
}

/// A retry policy: after a retryable failure ([`goodput_core::Outcome::retryable`]: an error
/// or a timeout, not a refusal), wait `backoff · 2^(k−1)` before attempt `k + 1`, at most
/// `max` times. Off (`max = 0`) by default, as a benchmark should see failures as they are.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RetryPolicy {
    /// Retries at most per request (0: off).
    pub max: u32,
    /// Wait before the first retry; doubled before each next one.
    pub backoff: Duration,
}

/// Warm-up and cool-down by time: requests intended in the first `start` of the level, or in
/// the last `end` of its sending period, are left out of the statistics (on top of any
/// warm-up and cool-down counts).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Trim {
    /// Left out from the level's start (zero: none).
    pub start: Duration,
    /// Left out before the end of sending (zero: none).
    pub end: Duration,
}

/// The steady window of a level: ids in `[from_id, to_id)` intended in `[from, to)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Window {
    /// First measured id.
    pub from_id: u64,
    /// First id past the measured ones (cool-down).
    pub to_id: u64,
    /// Earliest measured intended send time (`None`: no time trim at the start).
    pub from: Option<Stamp>,
    /// Intended sends from here on are cool-down (`None`: no time trim at the end).
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

    /// The part of the level `r` belongs to: warm-up wins over cool-down, by id or by time.
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

/// Where a level reports each record as it finishes, with its final [`Phase`]: at once when
/// the phase is already certain, else when the level ends (see [`crate::LevelPlan`]: only a
/// time trim at the end of a level bounded by count waits, as its end of sending is the last
/// intended send).
///
/// A callback rather than a channel: it costs nothing when the caller needs only a count or a
/// field, clones a record only when the caller does, and a channel is one closure away
/// (`RecordSink::new(move |r, p| { let _ = tx.send((r.clone(), p)); })`). It is called on the
/// load generator's own tasks, from several at once: keep it short and never block in it.
#[derive(Clone)]
pub struct RecordSink(Arc<Report>);

/// What a [`RecordSink`] calls.
type Report = dyn Fn(&ClientRecord, Phase) + Send + Sync;

impl RecordSink {
    /// A sink calling `f` once per record.
    pub fn new(f: impl Fn(&ClientRecord, Phase) + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }

    /// Reports `record`, which belongs to `phase`.
    pub fn report(&self, record: &ClientRecord, phase: Phase) {
        (self.0)(record, phase)
    }
}

impl std::fmt::Debug for RecordSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RecordSink")
    }
}

/// The units of one level and how their requests are sent. A unit is one request (a
/// single-request scenario, inside a [`LevelPlan`]) or several: multi-turn sessions, agent
/// tasks and RAG queries, which `users` closed-loop users each run one after another.
/// Warm-up and cool-down are whole units, by count.
#[derive(Clone, Debug)]
pub struct UnitPlan {
    /// Closed-loop users. In a [`LevelPlan`]: [`Arrival::users`] of its arrival (a closed
    /// loop of single requests takes its users from the arrival itself).
    pub users: usize,
    /// Measured units (the most, for a level with a duration).
    pub units: usize,
    /// Units run first and left out of the statistics. In a closed loop, at least: every
    /// user's first unit, and every unit taken before the last user started, is warm-up too
    /// (see [`UnitPlan::total`]), so no cold first-wave request, and none sent before the
    /// level's full load, is measured.
    pub warmup: usize,
    /// Units run after the measured ones (keeping the load up while those finish) and left
    /// out of the statistics.
    pub cooldown: usize,
    /// A request without its end marker after this long counts as timed out (and is abandoned).
    pub timeout: Duration,
    /// Whether and how failed requests are sent again.
    pub retry: RetryPolicy,
    /// Seed of the requests and of the arrival process.
    pub seed: u64,
    /// First request id of the level (ids are unique over a run).
    pub first_id: u64,
    /// Where each record goes as soon as its phase is certain (see [`RecordSink`]); the
    /// level's records are kept in [`LevelRun::records`] all the same.
    pub sink: Option<RecordSink>,
    /// Raised by the caller to end the level early (an interrupted run): no unit starts after
    /// it, units in progress run on.
    pub stop: Stop,
    /// Closed loops: how the users start.
    pub ramp: Ramp,
    /// Called with every record the moment it ends, whatever is certain of its phase then (for
    /// a live view): its phase as known at that moment, `Measured` for one a time trim at the
    /// end may still make cool-down. The [`UnitPlan::sink`] rules do not apply; the same
    /// manners do (short, never blocking).
    pub progress: Option<RecordSink>,
}

/// A request to stop sending, shared by the caller and a level's users: once raised, no new
/// unit (request, session, task, query) starts and no further turn of a session is sent.
#[derive(Clone, Debug, Default)]
pub struct Stop(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl Stop {
    pub fn raise(&self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    pub fn raised(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl UnitPlan {
    /// Units run in all: warm-up, measured and cool-down. A closed loop runs more when its
    /// warm-up grows to cover every user's first unit and the units taken before the last
    /// user started (the level's window says how many).
    pub fn total(&self) -> u64 {
        (self.warmup as u64).saturating_add(self.units as u64).saturating_add(self.cooldown as u64)
    }

    /// The window of a level of units of `per_unit` request ids each: by ids alone.
    pub fn window(&self, per_unit: u64, start: Stamp) -> Window {
        let (warm, measured) = (self.warmup as u64 * per_unit, self.units as u64 * per_unit);
        Window::new(self.first_id, warm, measured, Trim::default(), start, None, &[])
    }
}

/// One level of a run: how requests arrive, how long the level may send, the time trim, and
/// the units (single requests here) with their counts.
#[derive(Clone, Debug)]
pub struct LevelPlan {
    /// How requests arrive (single requests only; units run closed loop).
    pub arrival: Arrival,
    /// Stop issuing new requests this long after the level started (requests in flight
    /// finish); `None`: run exactly `unit.warmup + unit.units + unit.cooldown`. Single
    /// requests only.
    pub duration: Option<Duration>,
    /// Warm-up and cool-down by time. Single requests only.
    pub trim: Trim,
    /// Closed loop of single requests: each think time drawn uniformly from
    /// `think · (1 ± think_jitter)` (0: exactly `think`), seeded by the plan's seed and the
    /// request's id. Between 0 and 1.
    pub think_jitter: f64,
    /// Open loops (a rate, a trace): at most this many requests in flight. An arrival that
    /// finds them all busy waits for one to end (vLLM `bench serve --max-concurrency`); its
    /// latency still starts at its scheduled time, and the wait shows in its send lag.
    pub max_in_flight: Option<usize>,
    /// Open loops, traces and bursts split over machines: this process sends only its
    /// shard's requests of the one schedule ([`crate::shard`]).
    pub shard: Option<crate::shard::Shard>,
    /// The counts, timeout, retries, seed, first id and sink.
    pub unit: UnitPlan,
}

impl LevelPlan {
    /// `unit`'s requests arriving as `arrival`, bounded by count: no time trim, think jitter
    /// or cap on requests in flight.
    pub fn new(arrival: Arrival, unit: UnitPlan) -> Self {
        LevelPlan {
            arrival,
            duration: None,
            trim: Trim::default(),
            think_jitter: 0.0,
            max_in_flight: None,
            shard: None,
            unit,
        }
    }
}

/// What a level produced.
#[derive(Clone, Debug)]
pub struct LevelRun {
    /// Every record, warm-up and cool-down included, in completion order.
    pub records: Vec<ClientRecord>,
    /// The steady window.
    pub window: Window,
    /// When the level started (before its first request was due).
    pub start: Stamp,
    /// When its last request ended.
    pub end: Stamp,
    /// Closed loops: the ramp the users started over (zero: all at once); `None` otherwise.
    pub ramp: Option<Duration>,
    /// Open loops, traces and bursts: how many requests of the level's schedule it went
    /// through (every shard's included: the ids `first_id ..first_id + schedule`), whether or
    /// not this process sent them; `None` for closed loops and sessions.
    pub schedule: Option<u64>,
}

impl LevelRun {
    /// The part of the level `r` belongs to.
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
