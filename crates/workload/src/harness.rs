//! The load generator's own CPU work, in a simulation.
//!
//! Some scenarios compute on the harness before their model call: a RAG query embeds the
//! question with a real sentence encoder, searches the index, reranks and tokenises the
//! prompt. In a measured run that work takes the harness core's time, and queries that reach
//! it together share that core, so their model calls reach the engine late and together. In
//! a simulation the same code runs outside virtual time (it takes none), so a twin would send
//! every query the instant its user is ready. [`SharedCore`] puts the work back: each stage
//! spends its measured cost of CPU time on the harness's virtual cores, shared by the stages
//! on them at once (processor sharing: `n` jobs on `k` cores each run at `min(1, k/n)` of a
//! core's speed, as threads time-sliced on pinned cores do).

use goodput_core::Clock;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// Virtual CPU cores, shared equally by the work on them (see the module doc). Its times are
/// the run's [`Clock`]'s, which a simulation's paused runtime drives; it sleeps on the
/// runtime's timers (whole milliseconds), so work ends on the first tick after it is done.
#[derive(Debug)]
pub struct SharedCore {
    cores: usize,
    state: Mutex<CoreState>,
    /// Signalled whenever a job joins or leaves (everyone's finishing time moves).
    changed: Notify,
}

#[derive(Debug, Default)]
struct CoreState {
    /// CPU seconds each job on the core still needs, by job number.
    jobs: Vec<(u64, f64)>,
    /// When `jobs` was last brought up to date.
    at: Option<Instant>,
    next: u64,
}

/// Below this many CPU seconds a job is done (the runtime's timers are whole milliseconds, and
/// `f64` sums drift).
const DONE_S: f64 = 1e-9;

impl CoreState {
    /// The share of a core each job gets on `cores` cores.
    fn rate(&self, cores: usize) -> f64 {
        (cores as f64 / self.jobs.len().max(1) as f64).min(1.0)
    }

    /// Charges the time since `at` to the jobs on `cores` cores.
    fn advance(&mut self, now: Instant, cores: usize) {
        if let Some(at) = self.at {
            let each = now.saturating_duration_since(at).as_secs_f64() * self.rate(cores);
            self.jobs.iter_mut().for_each(|(_, left)| *left -= each);
        }
        self.at = Some(now);
    }
}

impl SharedCore {
    /// `cores` cores (at least one).
    pub fn new(cores: usize) -> Self {
        Self { cores: cores.max(1), state: Mutex::default(), changed: Notify::new() }
    }

    /// Runs `work` of CPU time on the cores, as read on `clock`: returns when it is done,
    /// later than `work` if other work shared the cores meanwhile.
    pub async fn run(&self, work: Duration, clock: &Clock) {
        let now = || clock.instant(clock.now());
        if work.is_zero() {
            return;
        }
        let id = {
            let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
            s.advance(now(), self.cores);
            let id = s.next;
            s.next += 1;
            s.jobs.push((id, work.as_secs_f64()));
            id
        };
        self.changed.notify_waiters();
        loop {
            // Registered before the state is read, so no change between the two is missed.
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let finish = {
                let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
                let now = now();
                s.advance(now, self.cores);
                let rate = s.rate(self.cores);
                let Some(i) = s.jobs.iter().position(|(j, _)| *j == id) else { return };
                let left = s.jobs[i].1;
                if left <= DONE_S {
                    s.jobs.swap_remove(i);
                    drop(s);
                    self.changed.notify_waiters();
                    return;
                }
                now + Duration::from_secs_f64(left / rate)
            };
            tokio::select! {
                _ = tokio::time::sleep_until(finish.into()) => {}
                _ = changed => {}
            }
        }
    }
}

/// In a simulation, the CPU time each harness stage of a query costs, spent on the harness's
/// [`SharedCore`].
#[derive(Debug)]
pub struct HarnessWork<S> {
    /// Each stage's CPU time.
    pub costs: Vec<(S, Duration)>,
    pub core: SharedCore,
}

impl<S: PartialEq> HarnessWork<S> {
    /// `costs` on a harness of `cores` cores.
    pub fn new(costs: Vec<(S, Duration)>, cores: usize) -> Self {
        Self { costs, core: SharedCore::new(cores) }
    }

    /// Spends stage `stage`'s cost on the cores, read on `clock` (nothing for a stage without
    /// one).
    pub async fn spend(&self, stage: S, clock: &Clock) {
        if let Some((_, d)) = self.costs.iter().find(|(s, _)| *s == stage) {
            self.core.run(*d, clock).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn runtime_now() -> Instant {
        tokio::time::Instant::now().into_std()
    }

    /// When each of `jobs` (start, CPU ms) finishes, in ms after the first start.
    async fn finishes(cores: usize, jobs: &[(u64, u64)]) -> Vec<f64> {
        let core = Arc::new(SharedCore::new(cores));
        let clock = Clock::with_source(runtime_now);
        let t0 = tokio::time::Instant::now();
        let handles: Vec<_> = jobs
            .iter()
            .map(|&(start, ms)| {
                let core = core.clone();
                tokio::spawn(async move {
                    tokio::time::sleep_until(t0 + Duration::from_millis(start)).await;
                    core.run(Duration::from_millis(ms), &clock).await;
                    tokio::time::Instant::now().duration_since(t0).as_secs_f64() * 1e3
                })
            })
            .collect();
        let mut out = Vec::new();
        for h in handles {
            out.push(h.await.unwrap());
        }
        out
    }

    #[tokio::test(start_paused = true)]
    async fn work_alone_takes_its_time_and_shared_work_shares_the_core() {
        assert_eq!(finishes(1, &[(0, 20)]).await, [20.0]);
        // Two at once: each at half speed, both done at 40.
        assert_eq!(finishes(1, &[(0, 20), (0, 20)]).await, [40.0, 40.0]);
        // By hand: A alone 0–10 (10 of 20 done); A and B at half speed 10–30 (A's last 10, B's
        // first 10); B alone 30–40.
        assert_eq!(finishes(1, &[(0, 20), (10, 20)]).await, [30.0, 40.0]);
        // Three: 0–30 all three at a third (10 each; C done at 30); A and B at a half 30–50
        // (A's last 10, B's next 10); B alone 50–60.
        assert_eq!(finishes(1, &[(0, 20), (0, 30), (0, 10)]).await, [50.0, 60.0, 30.0]);
        assert_eq!(finishes(1, &[(5, 0)]).await, [5.0]);
        // Two cores: two jobs run at full speed; a third makes each 2/3. By hand: 0–30 all at
        // 2/3 (20 each: A and C done); B alone at full speed 30–40.
        assert_eq!(finishes(2, &[(0, 20), (0, 20)]).await, [20.0, 20.0]);
        assert_eq!(finishes(2, &[(0, 20), (0, 30), (0, 20)]).await, [30.0, 40.0, 30.0]);
    }

    #[tokio::test(start_paused = true)]
    async fn stages_without_a_cost_take_no_time() {
        let w = HarnessWork::new(vec![("embed", Duration::from_millis(7))], 1);
        let clock = Clock::with_source(runtime_now);
        let t0 = tokio::time::Instant::now();
        w.spend("retrieve", &clock).await;
        assert_eq!(t0.elapsed(), Duration::ZERO);
        w.spend("embed", &clock).await;
        assert_eq!(t0.elapsed(), Duration::from_millis(7));
    }
}
