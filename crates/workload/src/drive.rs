//! What every driver shares: sending one request (its timeout and retries), the closed loop
//! of N virtual users, and the collector that gathers a level's records from every user and
//! reports each one to the caller's sink as soon as its phase is certain (oha's manner:
//! workers hand raw records to one collector; the records still come back whole with the
//! level). The drivers (`runner`, `multiturn`, `agent`, `rag`, `dataset`) import this; it
//! imports none of them.

use crate::level::{LevelRun, RecordSink, RetryPolicy, Stop, Window};
use goodput_core::{ClientRecord, Outcome, Phase, Stamp, Target, TaskRecord, WorkRequest};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};
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
    rec
}

/// Runs units `0..total` over `users` closed-loop users (at least one): each user takes the
/// next unit number as soon as its previous unit ended, until all are taken, `stop` is raised
/// or, with a `deadline`, until it passed (units in progress finish). `unit(ctx, i)` runs
/// unit `i`.
pub(crate) async fn closed_loop<C, F, Fut>(
    users: usize,
    total: u64,
    deadline: Option<Instant>,
    stop: &Stop,
    ctx: Arc<C>,
    unit: F,
) where
    C: Send + Sync + 'static,
    F: Fn(Arc<C>, u64) -> Fut + Copy + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let next = Arc::new(AtomicU64::new(0));
    let users = (0..users.max(1)).map(|_| {
        let (next, ctx, stop) = (next.clone(), ctx.clone(), stop.clone());
        tokio::spawn(async move {
            // The runtime's time: virtual when a simulation runs on a paused runtime.
            while deadline.is_none_or(|d| tokio::time::Instant::now().into_std() < d) && !stop.raised() {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= total {
                    break;
                }
                unit(ctx.clone(), i).await;
            }
        })
    });
    join_all(users.collect()).await;
}

/// Waits for every task (a task that panicked has nothing more to give).
pub(crate) async fn join_all(tasks: Vec<JoinHandle<()>>) {
    for t in tasks {
        let _ = t.await;
    }
}

/// Gathers a level's records and tasks from all its users, and hands each record to the
/// sink with its final phase: at once when `early` already decides it, else at the end.
pub(crate) struct Collector {
    /// The window as known when the level starts.
    early: Window,
    /// The end of the window is not known until the level ends (a time trim before the last
    /// intended send): records `early` would call measured wait for [`Collector::finish`].
    open_end: bool,
    sink: Option<RecordSink>,
    records: Mutex<Vec<ClientRecord>>,
    tasks: Mutex<Vec<TaskRecord>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Collector {
    /// A collector for a level whose window is `early` when it starts; with `open_end`, the
    /// window's `to` is not known yet (and `early.to` is ignored).
    pub fn new(early: Window, open_end: bool, sink: Option<RecordSink>) -> Self {
        let early = Window { to: if open_end { None } else { early.to }, ..early };
        Self { early, open_end, sink, records: Mutex::default(), tasks: Mutex::default() }
    }

    /// The phase of `r` if it is certain before the level ends.
    fn certain(&self, r: &ClientRecord) -> Option<Phase> {
        let p = self.early.phase(r);
        (!self.open_end || p != Phase::Measured).then_some(p)
    }

    /// Keeps a finished request's record, reporting it now if its phase is certain.
    pub fn push(&self, record: ClientRecord) {
        if let (Some(sink), Some(phase)) = (&self.sink, self.certain(&record)) {
            sink.report(&record, phase);
        }
        lock(&self.records).push(record);
    }

    /// Keeps a finished task.
    pub fn push_task(&self, task: TaskRecord) {
        lock(&self.tasks).push(task);
    }

    /// Ends the level: its window, computed by `window` from every record, and the records
    /// held back, reported now with their phase in it. Returns the level and its tasks, in
    /// completion order.
    pub fn finish(
        &self,
        start: Stamp,
        end: Stamp,
        window: impl FnOnce(&[ClientRecord]) -> Window,
    ) -> (LevelRun, Vec<TaskRecord>) {
        let records = std::mem::take(&mut *lock(&self.records));
        let window = window(&records);
        if let Some(sink) = &self.sink {
            for r in records.iter().filter(|r| self.certain(r).is_none()) {
                sink.report(r, window.phase(r));
            }
        }
        let tasks = std::mem::take(&mut *lock(&self.tasks));
        (LevelRun { records, window, start, end }, tasks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let c = Collector::new(window(&[]), true, Some(sink));
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
    }

    #[test]
    fn phases_are_written_in_snake_case() {
        let json = serde_json::to_string(&[Phase::Warmup, Phase::Measured, Phase::Cooldown]).unwrap();
        assert_eq!(json, r#"["warmup","measured","cooldown"]"#);
        assert_eq!(serde_json::from_str::<crate::Phase>("\"cooldown\"").unwrap(), Phase::Cooldown);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_closed_loop_runs_every_unit_once_and_stops_at_its_deadline() {
        let done = Arc::new(Mutex::new(Vec::new()));
        let go = Stop::default();
        closed_loop(3, 10, None, &go, done.clone(), |d, i| async move { d.lock().unwrap().push(i) }).await;
        let mut units = done.lock().unwrap().clone();
        units.sort();
        assert_eq!(units, (0..10).collect::<Vec<_>>());
        let count = Arc::new(AtomicU64::new(0));
        let deadline = Some(Instant::now());
        closed_loop(3, 10, deadline, &go, count.clone(), |c, _| async move {
            c.fetch_add(1, Ordering::Relaxed);
        })
        .await;
        assert_eq!(count.load(Ordering::Relaxed), 0);
        // Raised after the fourth unit: no unit starts after it.
        let (stop, done) = (Stop::default(), Arc::new(AtomicU64::new(0)));
        let ctx = Arc::new((stop.clone(), done.clone()));
        closed_loop(1, 10, None, &stop, ctx, |c, i| async move {
            c.1.fetch_add(1, Ordering::Relaxed);
            if i == 3 {
                c.0.raise();
            }
        })
        .await;
        assert_eq!(done.load(Ordering::Relaxed), 4);
    }
}
