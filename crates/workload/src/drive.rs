//! What every driver shares: sending one request (its timeout and retries), and the collector
//! that gathers a level's records from every user and reports each one to the caller's sink
//! as soon as its phase is certain (oha's manner: workers hand raw records to one collector;
//! the records still come back whole with the level). The drivers (`runner`, `multiturn`,
//! `agent`, `rag`, `dataset`) import this and the closed loop (`users`); it imports neither.

use crate::level::{LevelRun, RecordSink, RetryPolicy, UnitPlan, Window};
use goodput_core::{ClientRecord, Outcome, Phase, Stamp, Target, TaskRecord, WorkRequest};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use tokio::task::JoinHandle;

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
    rec.drawn_input_tokens = Some(input);
    rec
}

/// Waits for every task (a task that panicked has nothing more to give).
pub(crate) async fn join_all(tasks: impl Into<Aborting>) {
    let mut tasks = tasks.into();
    while let Some(t) = tasks.0.front_mut() {
        let _ = t.await;
        tasks.0.pop_front();
    }
}

/// A level's tasks, aborted if the level is dropped before they end (an interrupt's grace
/// ran out): on a worker pool they would run on, sending, past the level's end.
#[derive(Default)]
pub(crate) struct Aborting(std::collections::VecDeque<JoinHandle<()>>);

impl Aborting {
    pub(crate) fn push(&mut self, t: JoinHandle<()>) {
        self.0.push_back(t);
    }
}

impl From<Vec<JoinHandle<()>>> for Aborting {
    fn from(v: Vec<JoinHandle<()>>) -> Self {
        Aborting(v.into())
    }
}

impl Drop for Aborting {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

/// Gathers a level's records and tasks from all its users, and hands each record to the
/// sink with its final phase: at once when `early` already decides it, else at the end.
pub(crate) struct Collector {
    phases: Mutex<Phases>,
    /// The end of the window is not known until the level ends (a time trim before the last
    /// intended send): records `early` would call measured wait for [`Collector::finish`].
    open_end: bool,
    sink: Option<RecordSink>,
    progress: Option<RecordSink>,
    records: Mutex<Vec<ClientRecord>>,
    tasks: Mutex<Vec<TaskRecord>>,
}

/// What decides a record's phase while the level runs.
struct Phases {
    /// The window as known so far.
    early: Window,
    /// A closed loop whose warm-up is not decided yet ([`Collector::closed`]): every record
    /// that ends before it is decided is warm-up.
    pending: bool,
    /// Request ids per unit, and the first id of the level (to place a decided warm-up).
    per_unit: u64,
    first_id: u64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Collector {
    /// A collector for a level of `plan` whose window is `early` when it starts; with
    /// `open_end`, the window's `to` is not known yet (and `early.to` is ignored).
    pub fn new(early: Window, open_end: bool, plan: &UnitPlan) -> Self {
        let early = Window { to: if open_end { None } else { early.to }, ..early };
        let phases = Phases { early, pending: false, per_unit: 1, first_id: plan.first_id };
        Self {
            phases: Mutex::new(phases),
            open_end,
            sink: plan.sink.clone(),
            progress: plan.progress.clone(),
            records: Mutex::default(),
            tasks: Mutex::default(),
        }
    }

    /// The collector of a closed loop of units of `per_unit` request ids: its warm-up is
    /// decided while it runs ([`Collector::warmed`]).
    pub fn closed(self, per_unit: u64) -> Self {
        {
            let mut p = lock(&self.phases);
            (p.pending, p.per_unit) = (true, per_unit.max(1));
        }
        self
    }

    /// The closed loop's warm-up is decided: units below `units` are warm-up; the measured
    /// ids follow them.
    pub fn warmed(&self, units: u64) {
        let mut p = lock(&self.phases);
        let from = p.first_id.saturating_add(units.saturating_mul(p.per_unit));
        p.early = shifted(p.early, from);
        p.pending = false;
    }

    /// The phase of `r` if it is certain before the level ends.
    fn certain(&self, r: &ClientRecord) -> Option<Phase> {
        let p = lock(&self.phases);
        if p.pending {
            return Some(Phase::Warmup);
        }
        let phase = p.early.phase(r);
        (!self.open_end || phase != Phase::Measured).then_some(phase)
    }

    /// Keeps a finished request's record, reporting it now if its phase is certain.
    pub fn push(&self, record: ClientRecord) {
        let certain = self.certain(&record);
        if let Some(progress) = &self.progress {
            progress.report(&record, certain.unwrap_or(Phase::Measured));
        }
        if let (Some(sink), Some(phase)) = (&self.sink, certain) {
            sink.report(&record, phase);
        }
        lock(&self.records).push(record);
    }

    /// Keeps a finished task.
    pub fn push_task(&self, task: TaskRecord) {
        lock(&self.tasks).push(task);
    }

    /// Ends the level: its window, computed by `window` from every record (its ids moved
    /// past a closed loop's decided warm-up), and the records held back, reported now with
    /// their phase in it. Returns the level and its tasks, in completion order.
    pub fn finish(
        &self,
        start: Stamp,
        end: Stamp,
        window: impl FnOnce(&[ClientRecord]) -> Window,
    ) -> (LevelRun, Vec<TaskRecord>) {
        let records = std::mem::take(&mut *lock(&self.records));
        let window = shifted(window(&records), lock(&self.phases).early.from_id);
        if let Some(sink) = &self.sink {
            for r in records.iter().filter(|r| self.certain(r).is_none()) {
                sink.report(r, window.phase(r));
            }
        }
        let tasks = std::mem::take(&mut *lock(&self.tasks));
        (LevelRun { records, window, start, end, ramp: None, schedule: None }, tasks)
    }
}

/// `w` with its measured ids starting at `from_id` (as many as before).
fn shifted(w: Window, from_id: u64) -> Window {
    Window { from_id, to_id: from_id.saturating_add(w.to_id - w.from_id), ..w }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::level::Trim;
    use std::sync::Arc;

    fn rec(id: u64, ms: u64) -> ClientRecord {
        let at = Stamp(ms * 1_000_000);
        ClientRecord::unanswered(id, at, 1, at, Outcome::Ok)
    }

    type Seen = Arc<Mutex<Vec<(u64, Phase)>>>;

    fn collecting() -> (RecordSink, Seen) {
        let seen = Seen::default();
        let s = seen.clone();
        (RecordSink::new(move |r, p| s.lock().unwrap().push((r.id, p))), seen)
    }

    #[test]
    fn an_open_end_holds_back_only_what_the_end_trim_may_still_change() {
        // Ids 10..20 measured, 20.. cool-down; trimmed 5 ms at the start and 5 ms before the
        // last intended send.
        let trim = crate::Trim { start: Duration::from_millis(5), end: Duration::from_millis(5) };
        let window = |rs: &[ClientRecord]| Window::new(0, 10, 10, trim, Stamp(0), None, rs);
        let (sink, seen) = collecting();
        let (progress, live) = collecting();
        let plan = UnitPlan { sink: Some(sink), progress: Some(progress), ..crate::testing::units(1, 10, 10) };
        let c = Collector::new(window(&[]), true, &plan);
        c.push(rec(3, 50)); // warm-up by id
        c.push(rec(12, 2)); // warm-up by time
        c.push(rec(25, 50)); // cool-down by id
        c.push(rec(13, 50)); // measured unless within 5 ms of the last send: held
        c.push(rec(14, 58)); // held, then cool-down by time
        assert_eq!(*seen.lock().unwrap(), [(3, Phase::Warmup), (12, Phase::Warmup), (25, Phase::Cooldown)]);
        let (run, _) = c.finish(Stamp(0), Stamp(1), window);
        assert_eq!(run.window.to, Some(Stamp(53_000_000)), "5 ms before the last send, at 58 ms");
        assert_eq!(seen.lock().unwrap()[3..], [(13, Phase::Measured), (14, Phase::Cooldown)]);
        assert_eq!(run.records.len(), 5);
        // The live view saw all five as they ended, the held ones as measured.
        assert_eq!(live.lock().unwrap().len(), 5);
        assert_eq!(live.lock().unwrap()[3..], [(13, Phase::Measured), (14, Phase::Measured)]);
    }

    #[test]
    fn phases_are_written_in_snake_case() {
        let json = serde_json::to_string(&[Phase::Warmup, Phase::Measured, Phase::Cooldown]).unwrap();
        assert_eq!(json, r#"["warmup","measured","cooldown"]"#);
        assert_eq!(serde_json::from_str::<crate::Phase>("\"cooldown\"").unwrap(), Phase::Cooldown);
    }

    #[test]
    fn a_closed_loop_s_records_are_warm_up_until_its_warm_up_is_decided() {
        // Units of 2 ids from id 100; planned: 1 warm-up unit, 3 measured (ids 102..108).
        let window = Window::new(100, 2, 6, Trim::default(), Stamp(0), None, &[]);
        let (sink, seen) = collecting();
        let (progress, live) = collecting();
        let plan = UnitPlan { sink: Some(sink), progress: Some(progress), ..crate::testing::units(2, 3, 1) };
        let c = Collector::new(window, false, &plan).closed(2);
        c.push(rec(104, 1)); // before the decision: warm-up, whatever its id
        c.warmed(3); // units 0..3 (ids 100..106) are warm-up; ids 106..112 measured
        c.push(rec(105, 2));
        c.push(rec(106, 3));
        c.push(rec(112, 4));
        let want = [(104, Phase::Warmup), (105, Phase::Warmup), (106, Phase::Measured), (112, Phase::Cooldown)];
        assert_eq!(*seen.lock().unwrap(), want);
        assert_eq!(*live.lock().unwrap(), want, "progress sees every record as it ends");
        let (run, _) = c.finish(Stamp(0), Stamp(1), |_| window);
        assert_eq!((run.window.from_id, run.window.to_id), (106, 112));
        assert_eq!(run.measured().count(), 1);
    }
}
