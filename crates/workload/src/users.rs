//! The closed loop of N virtual users that every closed-loop driver shares (single requests,
//! sessions, agent tasks, RAG queries): users started over a ramp rather than all in one
//! instant, and a warm-up that covers every user's first unit. Users that start together send
//! together, and with units of one shape finish and send again together, wave after wave; and
//! the first wave meets a cold target all at once. So users start over a ramp ([`Ramp`]: user
//! `k` of `N` at `k · ramp / N`, or one per ended unit), and a unit counts as warm-up when it
//! is among the first `warmup` or was taken before every user had started: measured units
//! start only once all `N` users are in flight, so each runs at the level's full load from
//! its start, and every first unit (the ramp's, the cold first wave) is warm-up (the measured
//! count stays what was asked; the warm-up grows instead). Waiting further, for the last first
//! unit to end, would add one request time at full load to every level and measure nothing
//! the units taken meanwhile do not: they already run among `N` in flight.

use crate::level::{Ramp, Stop, UnitPlan};
use rand::{Rng, SeedableRng};
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How a closed loop runs its units.
pub(crate) struct Users {
    /// Virtual users (at least one runs).
    pub users: usize,
    pub ramp: Ramp,
    /// Warm-up units at least (the plan's count; [`closed_loop`] may run more).
    pub warmup: u64,
    /// Units after the warm-up: measured and cool-down.
    pub after: u64,
    /// No unit starts once this has passed (runtime time: virtual on a paused runtime).
    pub deadline: Option<Instant>,
    pub stop: Stop,
    /// Seeds a paced ramp's join delays.
    pub seed: u64,
}

impl Users {
    /// The closed loop of `plan`'s users and units, sending until `deadline`.
    pub fn of(plan: &UnitPlan, deadline: Option<Instant>) -> Self {
        Users {
            users: plan.users,
            ramp: plan.ramp,
            warmup: plan.warmup as u64,
            after: (plan.units as u64).saturating_add(plan.cooldown as u64),
            deadline,
            stop: plan.stop.clone(),
            seed: plan.seed,
        }
    }
}

/// What a closed loop did beyond its units.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Started {
    /// Warm-up units: unit numbers below this are warm-up.
    pub warmup: u64,
    /// The ramp the users started over: user `k` of `N` about `k · ramp / N` after the
    /// first (exactly, for [`Ramp::Over`]).
    pub ramp: Duration,
}

/// Unit numbers: the next one, the first not to run, and the warm-up once decided, under one
/// lock so that no unit at or above a decided warm-up is taken before `on_warm` has heard of it.
struct Counter {
    next: u64,
    /// Unbounded until the warm-up is decided.
    limit: u64,
    /// Until then, units beyond a user's first stop here (see [`EARLY_UNITS`]).
    early: u64,
    warm: Option<u64>,
}

/// Units per user a closed loop runs at most, on average, before every user has started:
/// past it, users that have ended their first unit wait for the last to start. Only a paced
/// ramp whose target keeps units waiting (so that users do not join) gets there; without it
/// the warm-up would grow without end.
pub(crate) const EARLY_UNITS: u64 = 8;

/// What the users share.
struct Shared {
    units: Mutex<Counter>,
    /// Users that have not taken their first unit (nor left without one).
    unstarted: AtomicUsize,
    /// The level's first units to end, for a paced ramp.
    joins: tokio::sync::watch::Sender<Joins>,
    /// When each user started, from the level's start.
    starts: Mutex<Vec<Option<Duration>>>,
}

/// When the level's first units ended (up to one per user), and whether any user has left
/// (no unit is left to run, the level stopped or its deadline passed): then no one joins.
#[derive(Default)]
struct Joins {
    ends: Vec<Duration>,
    over: bool,
    /// The warm-up is decided (users waiting for it go on).
    decided: bool,
}

impl Shared {
    /// The next unit number to run, if any is left: `Err(())` when none is until the warm-up
    /// is decided. A user's `first` unit is always given before then.
    fn take(&self, first: bool) -> Result<Option<u64>, ()> {
        let mut c = self.units.lock().unwrap_or_else(PoisonError::into_inner);
        if c.warm.is_none() && !first && c.next >= c.early {
            return Err(());
        }
        Ok((c.next < c.limit).then(|| {
            c.next += 1;
            c.next - 1
        }))
    }

    /// One user has taken its first unit (or left without one); the last one decides the
    /// warm-up.
    fn started(&self, users: &Users, on_warm: &(dyn Fn(u64) + Send + Sync)) {
        if self.unstarted.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.decide(users, on_warm);
        }
    }

    /// Decides the warm-up once — the plan's count, or every unit taken so far if that is
    /// more — and tells `on_warm`.
    fn decide(&self, users: &Users, on_warm: &(dyn Fn(u64) + Send + Sync)) -> u64 {
        let mut c = self.units.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(w) = c.warm {
            return w;
        }
        let w = users.warmup.max(c.next);
        (c.limit, c.warm) = (w.saturating_add(users.after), Some(w));
        on_warm(w);
        self.joins.send_modify(|j| j.decided = true);
        w
    }
}

/// Runs units over `users.users` closed-loop users: each user takes the next unit number as
/// soon as its previous unit ended, until `warmup + after` are taken (the warm-up as
/// decided), `stop` is raised or the deadline passed (units in progress finish). `unit(ctx, i)`
/// runs unit `i`; `on_warm(w)` is called once, as soon as the warm-up is decided (units below
/// `w` are warm-up) and before any unit at or above `w` ends. Returns the warm-up and the ramp.
pub(crate) async fn closed_loop<C, F, Fut>(
    users: Users,
    ctx: Arc<C>,
    on_warm: impl Fn(u64) + Send + Sync + 'static,
    unit: F,
) -> Started
where
    C: Send + Sync + 'static,
    F: Fn(Arc<C>, u64) -> Fut + Copy + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let n = users.users.max(1);
    let early = users.warmup.max(n as u64).saturating_add(EARLY_UNITS.saturating_mul(n as u64));
    let units = Mutex::new(Counter { next: 0, limit: u64::MAX, early, warm: None });
    let (joins, _) = tokio::sync::watch::channel(Joins::default());
    let starts = Mutex::new(vec![None; n]);
    let shared = Arc::new(Shared { units, unstarted: AtomicUsize::new(n), joins, starts });
    let (users, on_warm) = (Arc::new(users), Arc::new(on_warm));
    let t0 = tokio::time::Instant::now();
    let tasks = (0..n).map(|k| {
        let (shared, users, on_warm, ctx) = (shared.clone(), users.clone(), on_warm.clone(), ctx.clone());
        crate::pool::spawn(async move { user(k, n, t0, &shared, &users, &*on_warm, ctx, unit).await })
    });
    crate::drive::join_all(tasks.collect::<Vec<_>>()).await;
    let warmup = shared.decide(&users, &*on_warm);
    let last = shared.starts.lock().unwrap_or_else(PoisonError::into_inner).iter().flatten().max().copied();
    let ramp = match users.ramp {
        _ if n == 1 => Duration::ZERO,
        Ramp::Over(d) => d,
        Ramp::Paced => last.unwrap_or_default().mul_f64(n as f64 / (n - 1) as f64),
    };
    Started { warmup, ramp }
}

/// User `k` of `n`: waits for its start on the ramp, then runs units until there are none left.
#[allow(clippy::too_many_arguments)]
async fn user<C, F, Fut>(
    k: usize,
    n: usize,
    t0: tokio::time::Instant,
    shared: &Shared,
    users: &Users,
    on_warm: &(dyn Fn(u64) + Send + Sync),
    ctx: Arc<C>,
    unit: F,
) where
    F: Fn(Arc<C>, u64) -> Fut,
    Fut: Future<Output = ()>,
{
    let open = || users.deadline.is_none_or(|d| tokio::time::Instant::now().into_std() < d) && !users.stop.raised();
    let joined = match users.ramp {
        Ramp::Over(d) => {
            tokio::time::sleep(d.mul_f64(k as f64 / n as f64)).await;
            true
        }
        Ramp::Paced if k > 0 => join(k, users.seed, &shared.joins).await,
        Ramp::Paced => true,
    };
    if joined && open() {
        shared.starts.lock().unwrap_or_else(PoisonError::into_inner)[k] = Some(t0.elapsed());
    }
    let mut first = true;
    while joined && open() {
        let i = match shared.take(first) {
            Ok(Some(i)) => i,
            Ok(None) => break,
            Err(()) => {
                let mut rx = shared.joins.subscribe();
                let _ = rx.wait_for(|j| j.decided).await;
                continue;
            }
        };
        if first {
            first = false;
            shared.started(users, on_warm);
        }
        unit(ctx.clone(), i).await;
        // A unit that ends at once (a refused connection) must not keep the worker from the
        // rest of the level's tasks and timers.
        tokio::task::coop::consume_budget().await;
        shared.joins.send_if_modified(|j| {
            let more = j.ends.len() < n;
            if more {
                j.ends.push(t0.elapsed());
            }
            more
        });
    }
    shared.joins.send_modify(|j| j.over = true);
    if first {
        // Left without a first unit: nobody waits for it.
        shared.started(users, on_warm);
    }
}

/// A paced ramp's user `k` (≥ 1): waits for the level's `k`-th unit to end, then for a
/// seeded random share of the time since the one before it ended (since the level's start
/// for the first). `false` when the level is over first.
async fn join(k: usize, seed: u64, joins: &tokio::sync::watch::Sender<Joins>) -> bool {
    let mut rx = joins.subscribe();
    let gap = {
        let Ok(j) = rx.wait_for(|j| j.over || j.ends.len() >= k).await else { return false };
        if j.ends.len() < k {
            return false;
        }
        j.ends[k - 1] - if k >= 2 { j.ends[k - 2] } else { Duration::ZERO }
    };
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed ^ (k as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x3A3A);
    tokio::time::sleep(gap.mul_f64(rng.random::<f64>())).await;
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    fn users(n: usize, ramp: Ramp, warmup: u64, after: u64) -> Users {
        Users { users: n, ramp, warmup, after, deadline: None, stop: Stop::default(), seed: 1 }
    }

    /// Each unit's (number, start and end in ms after the level's start) on a paused clock.
    type Log = Arc<Mutex<Vec<(u64, u64, u64)>>>;

    /// Runs a closed loop whose unit `i` takes `ms(i)` milliseconds of virtual time.
    async fn run(u: Users, ms: fn(u64) -> u64) -> (Started, Vec<(u64, u64, u64)>, Option<u64>) {
        let log = Log::default();
        let warm = Arc::new(Mutex::new(None));
        let t0 = tokio::time::Instant::now();
        let w = warm.clone();
        let ctx = Arc::new((log.clone(), t0));
        let started = closed_loop(
            u,
            ctx,
            move |x| *w.lock().unwrap() = Some(x),
            move |c, i| async move {
                let start = c.1.elapsed().as_millis() as u64;
                tokio::time::sleep(Duration::from_millis(ms(i))).await;
                c.0.lock().unwrap().push((i, start, c.1.elapsed().as_millis() as u64));
            },
        )
        .await;
        let mut log = log.lock().unwrap().clone();
        log.sort();
        let warm = *warm.lock().unwrap();
        (started, log, warm)
    }

    #[tokio::test(start_paused = true)]
    async fn users_start_evenly_over_the_ramp() {
        // 4 users over 400 ms, units of 1 s: first units start at 0, 100, 200, 300 ms.
        let (s, log, _) = run(users(4, Ramp::Over(Duration::from_millis(400)), 0, 4), |_| 1000).await;
        let starts: Vec<u64> = log.iter().take(4).map(|x| x.1).collect();
        assert_eq!(starts, [0, 100, 200, 300]);
        assert_eq!(s.ramp, Duration::from_millis(400));
        // Zero: all at once.
        let (s, log, _) = run(users(4, Ramp::Over(Duration::ZERO), 0, 4), |_| 1000).await;
        assert!(log.iter().take(4).all(|x| x.1 == 0));
        assert_eq!(s.ramp, Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn a_paced_ramp_lets_one_user_join_per_ended_unit() {
        // Units of 800 ms whatever the load: user 0 runs alone until its first unit ends.
        let (s, log, _) = run(users(4, Ramp::Paced, 0, 12), |_| 800).await;
        assert_eq!(log.iter().filter(|x| x.1 < 800).count(), 1, "{log:?}");
        // At any moment, at most one user more than the units ended by then is running.
        for &(_, at, _) in &log {
            let running = log.iter().filter(|x| x.1 <= at && x.2 > at).count();
            let ended = log.iter().filter(|x| x.2 <= at).count();
            assert!(running <= 1 + ended, "at {at} ms: {running} running, {ended} ended: {log:?}");
        }
        // All four run at once in the end; the last joined after the third unit ended (at
        // 1600 ms at the earliest), so the ramp (its start · 4/3) is at least 2133 ms.
        let at_once = log.iter().any(|&(_, at, _)| log.iter().filter(|x| x.1 <= at && x.2 > at).count() == 4);
        assert!(at_once, "{log:?}");
        assert!(s.ramp >= Duration::from_millis(2133), "{:?}", s.ramp);
        // Seeded: the same run again.
        let times = |log: &[(u64, u64, u64)]| {
            let mut t: Vec<(u64, u64)> = log.iter().map(|x| (x.1, x.2)).collect();
            t.sort();
            t
        };
        let (again, log2, _) = run(users(4, Ramp::Paced, 0, 12), |_| 800).await;
        assert_eq!((again, times(&log2)), (s, times(&log)));
    }

    #[tokio::test(start_paused = true)]
    async fn warm_up_covers_every_user_s_first_unit_and_what_was_taken_before_the_last_started() {
        // 3 users over 300 ms, explicit warm-up 1, units of 1 s. Units 0..3 are the first units
        // (taken at 0, 100, 200 ms): the last user started at 200 ms, so warm-up 3, then 4
        // measured and cool-down units, each taken with all 3 users in flight.
        let (s, log, warm) = run(users(3, Ramp::Over(Duration::from_millis(300)), 1, 4), |_| 1000).await;
        assert_eq!((s.warmup, warm), (3, Some(3)));
        assert_eq!(log.iter().map(|x| x.0).collect::<Vec<_>>(), (0..7).collect::<Vec<_>>(), "each unit once");
        let last_start = log.iter().take(3).map(|x| x.1).max().unwrap();
        assert_eq!(last_start, 200);
        for &(i, at, _) in log.iter().filter(|x| x.0 >= 3) {
            let in_flight = log.iter().filter(|x| x.1 <= at && x.2 > at).count();
            assert!(in_flight == 3 && at >= last_start, "unit {i} at {at} ms: {in_flight} in flight: {log:?}");
        }
        // Units of 100 ms over a 300 ms ramp: user 0 took units at 0 and 100 ms, user 1 its
        // first at 100 ms, user 2 its first at 200 ms: those four are warm-up, and any taken
        // at 200 ms before user 2's; every later unit is taken at 200 ms or after.
        let (s, log, _) = run(users(3, Ramp::Over(Duration::from_millis(300)), 0, 2), |_| 100).await;
        assert!(s.warmup >= 4 && log.len() as u64 == s.warmup + 2, "{s:?} {log:?}");
        assert!(log.iter().filter(|x| x.0 >= s.warmup).all(|x| x.1 >= 200), "{log:?}");
        // An explicit warm-up beyond that stands.
        let (s, log, _) = run(users(3, Ramp::Over(Duration::ZERO), 7, 2), |_| 1000).await;
        assert_eq!((s.warmup, log.len()), (7, 9));
    }

    #[tokio::test(start_paused = true)]
    async fn a_paced_ramp_measures_only_once_every_user_runs() {
        // Units of 800 ms: users join one per ended unit; every measured unit is taken with
        // all 4 users in flight.
        let (s, log, warm) = run(users(4, Ramp::Paced, 0, 8), |_| 800).await;
        let w = warm.unwrap();
        assert_eq!(s.warmup, w);
        assert_eq!(log.len() as u64, w + 8);
        for &(i, at, _) in log.iter().filter(|x| x.0 >= w) {
            let in_flight = log.iter().filter(|x| x.1 <= at && x.2 > at).count();
            assert_eq!(in_flight, 4, "unit {i} at {at} ms: {log:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn users_answered_at_once_wait_for_a_late_one_instead_of_warming_up_without_end() {
        // 3 users over 3 s, units of 1 ms: user 0 runs units until 3 + 8 · 3 = 27 are taken,
        // then waits; user 1 takes its first (27) at 1 s, user 2 its first (28) at 2 s: warm-up
        // 29, then 5 measured units, all from 2 s on.
        let (s, log, warm) = run(users(3, Ramp::Over(Duration::from_millis(3000)), 0, 5), |_| 1).await;
        assert_eq!((s.warmup, warm), (29, Some(29)));
        assert_eq!(log.len(), 34);
        assert!(log.iter().filter(|x| x.0 >= 29).all(|x| x.1 >= 2000), "{log:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_deadline_or_a_stop_ends_the_loop_and_the_warm_up_is_still_decided() {
        let mut u = users(3, Ramp::Over(Duration::from_millis(3000)), 0, 100);
        u.deadline = Some(tokio::time::Instant::now().into_std() + Duration::from_millis(1500));
        // Users start at 0, 1000 and 2000 ms; the third never does. Every unit started before
        // the deadline; all of them were taken before every user had started.
        let (s, log, warm) = run(u, |_| 1000).await;
        assert!(log.iter().all(|x| x.1 < 1500), "{log:?}");
        assert_eq!((s.warmup, warm), (log.len() as u64, Some(log.len() as u64)));
        let u = users(2, Ramp::Over(Duration::ZERO), 0, 100);
        u.stop.raise();
        let (s, log, _) = run(u, |_| 10).await;
        assert_eq!((s.warmup, log.len()), (0, 0));
    }
}
