//! An autoscaler over a fleet's replicas, as Kubernetes' HPA (and KEDA on vLLM's metrics)
//! sizes them: every `interval` the signal's mean over the serving replicas sets the desired
//! count, `⌈serving × value ÷ target⌉` within `min..=max`; no change within `cooldown` of the
//! last one. A replica added is billed from the decision and takes requests only after
//! `startup` (pulling weights, loading, warming up); one removed stops taking requests at
//! once and is billed until its last request ends (drained).

use goodput_core::Stamp;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// What the autoscaler reads of each serving replica.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Signal {
    /// Requests running and waiting (vLLM's `num_requests_running + num_requests_waiting`).
    Requests,
    /// KV blocks in use over the usable ones.
    KvUsage,
    /// Seconds the longest-waiting queued request of a replica has waited (0 when none
    /// waits): the queue time a request admitted now would report.
    QueueTime,
}

/// A scaling rule.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Rule {
    pub signal: Signal,
    /// The signal's value per replica the rule aims at.
    pub target: f64,
    pub min: usize,
    pub max: usize,
    pub interval: Duration,
    pub cooldown: Duration,
    pub startup: Duration,
    /// Scale-down stabilization (Kubernetes' HPA: 300 s by default): a shrink goes only to
    /// the largest count the rule asked for within this window, so a signal that drops to
    /// nothing once queues drain does not halve the fleet the moment it recovers.
    #[serde(default)]
    pub stabilization: Duration,
}

/// Where a replica is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Off,
    /// Billed, taking requests from the stamp on.
    Starting(Stamp),
    Serving,
    /// Billed, taking no new requests; off once its last one ends.
    Draining,
}

/// A change of the fleet's size.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ScaleEvent {
    pub at_s: f64,
    /// Replicas serving or starting after the change.
    pub replicas: usize,
    /// The signal's mean over the serving replicas that decided it.
    pub value: f64,
}

/// The autoscaler's state over `n` replicas (the most it may run).
#[derive(Debug)]
pub struct Scaler {
    pub rule: Rule,
    pub state: Vec<State>,
    billed_since: Vec<Option<Stamp>>,
    /// Replica-seconds billed so far.
    pub billed_s: f64,
    pub next_eval: Stamp,
    last_change: Option<Stamp>,
    pub events: Vec<ScaleEvent>,
    /// The counts asked for within the stabilization window, oldest first.
    asked: std::collections::VecDeque<(Stamp, usize)>,
}

fn ns(d: Duration) -> u64 {
    d.as_nanos().min(u64::MAX as u128) as u64
}

impl Scaler {
    /// `initial` replicas serving from the start (clamped to the rule's bounds and to `n`).
    pub fn new(rule: Rule, n: usize, initial: usize) -> Self {
        let up = initial.clamp(rule.min.max(1), rule.max.max(1)).min(n);
        let state = (0..n).map(|i| if i < up { State::Serving } else { State::Off }).collect();
        let billed_since = (0..n).map(|i| (i < up).then_some(Stamp(0))).collect();
        let asked = Default::default();
        Self {
            rule,
            state,
            billed_since,
            billed_s: 0.0,
            next_eval: Stamp(0),
            last_change: None,
            events: Vec::new(),
            asked,
        }
    }

    /// Replicas serving or starting.
    pub fn up(&self) -> usize {
        self.state.iter().filter(|s| matches!(s, State::Serving | State::Starting(_))).count()
    }

    pub fn serving(&self, r: usize) -> bool {
        self.state[r] == State::Serving
    }

    /// The desired count for a mean `value` over `serving` replicas.
    pub fn desired(&self, serving: usize, value: f64) -> usize {
        let want = (serving.max(1) as f64 * value / self.rule.target).ceil() as usize;
        want.clamp(self.rule.min.max(1), self.rule.max.max(1)).min(self.state.len())
    }

    /// Starting replicas whose start-up is over serve; drained ones (`idle(r)`) go off.
    pub fn advance(&mut self, now: Stamp, idle: impl Fn(usize) -> bool) -> Vec<(usize, bool)> {
        let mut changed = Vec::new();
        for r in 0..self.state.len() {
            match self.state[r] {
                State::Starting(at) if at <= now => {
                    self.state[r] = State::Serving;
                    changed.push((r, true));
                }
                State::Draining if idle(r) => {
                    self.state[r] = State::Off;
                    self.bill(r, now);
                }
                _ => {}
            }
        }
        changed
    }

    fn bill(&mut self, r: usize, now: Stamp) {
        if let Some(since) = self.billed_since[r].take() {
            self.billed_s += now.secs_since(since);
        }
    }

    /// Evaluates the rule at `now` on the mean `value` of the serving replicas; `in_flight`
    /// of each replica picks the one to drain. Returns the replicas whose routing changes.
    pub fn evaluate(&mut self, now: Stamp, value: f64, in_flight: &[usize]) -> Vec<(usize, bool)> {
        self.next_eval = Stamp(now.0.saturating_add(ns(self.rule.interval).max(1)));
        let serving = self.state.iter().filter(|s| **s == State::Serving).count();
        let (up, asked) = (self.up(), self.desired(serving, value));
        let since = now.0.saturating_sub(ns(self.rule.stabilization));
        self.asked.retain(|(t, _)| t.0 >= since);
        self.asked.push_back((now, asked));
        // Up at once; down only to the most asked for within the window.
        let want = if asked < up { self.asked.iter().map(|(_, n)| *n).max().unwrap_or(asked) } else { asked };
        let cooled = self.last_change.is_none_or(|t| now.0.saturating_sub(t.0) >= ns(self.rule.cooldown));
        if want == up || !cooled {
            return Vec::new();
        }
        let mut changed = Vec::new();
        if want > up {
            let ready = Stamp(now.0.saturating_add(ns(self.rule.startup)));
            let off: Vec<usize> =
                (0..self.state.len()).filter(|&r| self.state[r] == State::Off).take(want - up).collect();
            for r in off {
                self.state[r] = State::Starting(ready);
                self.billed_since[r] = Some(now);
            }
        } else {
            for _ in want..up {
                let pick = (0..self.state.len())
                    .filter(|&r| matches!(self.state[r], State::Serving | State::Starting(_)))
                    .min_by_key(|&r| (matches!(self.state[r], State::Serving), in_flight.get(r).copied().unwrap_or(0)));
                if let Some(r) = pick {
                    self.state[r] = State::Draining;
                    changed.push((r, false));
                }
            }
        }
        self.last_change = Some(now);
        self.events.push(ScaleEvent { at_s: now.0 as f64 / 1e9, replicas: self.up(), value });
        changed
    }

    /// Bills every replica still up at `now` (the end of the run).
    pub fn close(&mut self, now: Stamp) {
        for r in 0..self.state.len() {
            self.bill(r, now);
        }
    }

    /// When the scaler next has something to do: an evaluation or a start-up ending.
    pub fn next_event(&self) -> Stamp {
        let ready = self.state.iter().filter_map(|s| if let State::Starting(t) = s { Some(*t) } else { None }).min();
        ready.map_or(self.next_eval, |t| t.min(self.next_eval))
    }
}

#[cfg(test)]
#[path = "autoscale/tests.rs"]
mod tests;
