//! A fleet in the simulator: replicas, each the real scheduler with its step-cost model
//! ([`SimEngine`]), on one virtual clock behind a [`router::Router`], driven by any
//! [`Source`] — so open-loop traces and closed-loop users route alike.
//!
//! Each replica keeps the order of the single-engine loop ([`crate::sim::drive`]): requests
//! are taken between its steps, and whoever a step's tokens wake reacts while its next step
//! runs. The router sees the replicas' engine load as of its last scrape, every
//! `scrape_interval` of virtual time, as a real router polling the replicas does; its own
//! in-flight counts are always current.

pub mod autoscale;
pub mod disagg;
pub mod router;

use crate::sim::{Planned, SimEngine, SimOutput, Source};
use autoscale::{Scaler, Signal};
use goodput_core::{EngineRecord, RequestId, Stamp};
use router::{Load, Router};

/// The most steps one decode run takes (its stamps are kept until it ends).
const MAX_RUN: usize = 1024;

/// Where one request went.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Routed {
    pub id: RequestId,
    pub replica: usize,
    pub at: Stamp,
    /// The share of its prompt the router's tree held on that replica (cache-aware only).
    pub tree_hit: f64,
}

/// Every replica's records and steps, and where each request went.
#[derive(Debug, Default)]
pub struct FleetOutput {
    pub replicas: Vec<SimOutput>,
    pub routed: Vec<Routed>,
}

/// Replicas behind a router.
pub struct Fleet {
    pub engines: Vec<SimEngine>,
    pub router: Router,
    /// Nanoseconds between two scrapes of the replicas' load (≥ 1).
    pub scrape_ns: u64,
    /// Adds and removes replicas by a rule; without one every replica serves throughout.
    pub scaler: Option<Scaler>,
    /// Whether [`FleetOutput`] keeps every step's record (a day of 32 replicas makes
    /// hundreds of millions; the planner keeps none). Without them, stretches of pure
    /// decode steps run as one event ([`SimEngine::begin_run`]), the same tokens at the same
    /// times.
    pub keep_steps: bool,
}

struct Replica {
    busy: Option<Planned>,
    /// Requests routed here while a step ran: the engine takes them between steps.
    inbox: Vec<(goodput_scheduler::NewRequest, Stamp)>,
    /// Requests that ended in its last step, told to the source once its next step began.
    ended: Vec<EngineRecord>,
}

impl Fleet {
    pub fn new(engines: Vec<SimEngine>, router: Router, scrape_interval: std::time::Duration) -> Self {
        Self { engines, router, scrape_ns: (scrape_interval.as_nanos() as u64).max(1), scaler: None, keep_steps: true }
    }

    /// The same fleet under `scaler`: only its serving replicas take requests.
    pub fn with_scaler(mut self, scaler: Scaler) -> Self {
        for r in 0..self.engines.len() {
            self.router.set_active(r, scaler.serving(r));
        }
        self.scaler = Some(scaler);
        self
    }

    /// The autoscaler's turn at `now`: start-ups that ended, drains that finished, and the
    /// rule when due.
    fn autoscale(&mut self, reps: &[Replica], now: Stamp) {
        let Fleet { engines, router, scaler, .. } = self;
        let Some(s) = scaler else { return };
        let idle = |r: usize| !engines[r].has_work() && reps[r].busy.is_none() && reps[r].inbox.is_empty();
        for (r, on) in s.advance(now, idle) {
            router.set_active(r, on);
        }
        if now < s.next_eval {
            return;
        }
        let serving: Vec<usize> = (0..engines.len()).filter(|&r| s.serving(r)).collect();
        let value = |r: &usize| {
            let e = engines[*r].scheduler();
            match s.rule.signal {
                Signal::Requests => (e.num_running() + e.num_waiting() + reps[*r].inbox.len()) as f64,
                Signal::KvUsage => {
                    let pool = e.pool();
                    (pool.usable_blocks() - pool.num_free_blocks()) as f64 / pool.usable_blocks().max(1) as f64
                }
                Signal::QueueTime => {
                    let queued = e.oldest_waiting().into_iter().chain(reps[*r].inbox.iter().map(|(_, at)| *at));
                    queued.min().map_or(0.0, |t| now.secs_since(t))
                }
            }
        };
        let mean = serving.iter().map(value).sum::<f64>() / serving.len().max(1) as f64;
        for (r, on) in s.evaluate(now, mean, router.in_flight()) {
            router.set_active(r, on);
        }
    }

    fn loads(&self) -> Vec<Load> {
        self.engines
            .iter()
            .map(|e| Load { running: e.scheduler().num_running(), waiting: e.scheduler().num_waiting() })
            .collect()
    }

    /// Routes every request due at `now` into its replica's inbox.
    fn route(&mut self, source: &mut dyn Source, now: Stamp, reps: &mut [Replica], out: &mut FleetOutput) {
        while let Some(req) = source.due(now) {
            let (r, tree_hit) = self.router.route(&req.prompt);
            out.routed.push(Routed { id: req.id, replica: r, at: now, tree_hit });
            reps[r].inbox.push((req, now));
            if let Some(p) = &mut reps[r].busy {
                p.cut_before(now);
            }
        }
    }

    /// Queues replica `r`'s inbox in its engine at `now` (between two of its steps).
    fn take(&mut self, r: usize, rep: &mut Replica, source: &mut dyn Source, now: Stamp, out: &mut FleetOutput) {
        for (req, _) in rep.inbox.drain(..) {
            let (id, arrival, prompt) = (req.id, req.arrival, req.prompt.len());
            if let Err(e) = self.engines[r].add(req, now) {
                self.router.finished(r);
                let record = crate::sim::refused_record(id, arrival, prompt, now);
                source.finished(&record, now);
                out.replicas[r].refused.push((id, e));
            }
        }
    }
}

/// Runs `source` through `fleet` until it has nothing more and every request ended, keeping
/// every request's record in its replica's output.
pub fn drive_fleet(fleet: &mut Fleet, source: &mut dyn Source) -> FleetOutput {
    let mut records: Vec<(usize, EngineRecord)> = Vec::new();
    let mut out = drive_fleet_into(fleet, source, &mut |r, rec| records.push((r, rec)));
    for (r, rec) in records {
        out.replicas[r].records.push(rec);
    }
    out
}

/// [`drive_fleet`], handing each request's record to `sink` (with its replica) as it ends
/// instead of keeping it: a day-long trace's records (every token's time) need not all be
/// held at once.
pub fn drive_fleet_into(
    fleet: &mut Fleet,
    source: &mut dyn Source,
    sink: &mut dyn FnMut(usize, EngineRecord),
) -> FleetOutput {
    let n = fleet.engines.len();
    let mut out = FleetOutput { replicas: (0..n).map(|_| SimOutput::default()).collect(), routed: Vec::new() };
    let mut reps: Vec<Replica> = (0..n).map(|_| Replica { busy: None, inbox: Vec::new(), ended: Vec::new() }).collect();
    let mut now = Stamp(0);
    let mut next_scrape = Stamp(0);
    loop {
        if now >= next_scrape {
            let loads = fleet.loads();
            fleet.router.scrape(&loads);
            next_scrape = Stamp(now.0 - now.0 % fleet.scrape_ns + fleet.scrape_ns);
        }
        fleet.autoscale(&reps, now);
        // Steps ending now apply their tokens.
        for (r, rep) in reps.iter_mut().enumerate() {
            if let Some(p) = rep.busy.take_if(|p| p.next <= now) {
                let update = if fleet.keep_steps {
                    let (step, update) = fleet.engines[r].end(p);
                    out.replicas[r].steps.push(step);
                    update
                } else {
                    fleet.engines[r].end_quiet(p)
                };
                rep.ended.extend(update.finished.into_iter().map(|(rec, _)| rec));
            }
        }
        fleet.route(source, now, &mut reps, &mut out);
        // A run stops before the autoscaler reads KV usage (a run's blocks are taken at its
        // end); the other signals and the router's scrapes see the same counts throughout.
        let horizon = match &fleet.scaler {
            Some(s) if s.rule.signal == Signal::KvUsage => s.next_event(),
            _ => Stamp(u64::MAX),
        };
        for (r, rep) in reps.iter_mut().enumerate() {
            if rep.busy.is_none() {
                fleet.take(r, rep, source, now, &mut out);
                let e = &mut fleet.engines[r];
                if e.has_work() {
                    rep.busy = if fleet.keep_steps { e.begin(now) } else { e.begin_run(now, horizon, MAX_RUN) };
                }
            }
            for rec in rep.ended.drain(..) {
                fleet.router.finished(r);
                source.finished(&rec, rec.finished);
                sink(r, rec);
            }
        }
        let step_end = reps.iter().filter_map(|r| r.busy.as_ref().map(|p| p.next)).min();
        let next = match (step_end, source.next_due()) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) | (None, Some(a)) => a,
            (None, None) => break,
        };
        let scaler = fleet.scaler.as_ref().map_or(next, |s| s.next_event());
        // The next step end or arrival, or a scrape or the autoscaler's turn before it.
        now = now.max(next.min(next_scrape).min(scaler));
    }
    if let Some(s) = &mut fleet.scaler {
        s.close(now);
    }
    out
}

#[cfg(test)]
#[path = "fleet/tests.rs"]
mod tests;
