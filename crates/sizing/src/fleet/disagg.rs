//! Prefill/decode disaggregation (DistServe, Splitwise, Dynamo, llm-d, SGLang's PD mode): a
//! request's prompt runs on one of `x` prefill replicas, which samples its first token; its
//! K/V then crosses to one of `y` decode replicas (`latency + prompt tokens × bytes per token
//! ÷ bandwidth`, [`Transfer`]), which admits it as a decode once the transfer ended and
//! generates the rest. Each replica is the real scheduler with its step cost, as in
//! [`super::Fleet`]; both pools have their own router, and all run on one virtual clock.
//!
//! A request's record joins both halves: arrival, queue and first token from the prefill
//! replica, every later token and the end from the decode replica, so the transfer and the
//! decode replica's queue show in the gap between the first two tokens (and in TPOT).

use super::router::{Load, Router};
use super::{Routed, MAX_RUN};
use crate::sim::{Planned, SimEngine, Source};
use goodput_core::{EngineRecord, RequestId, Stamp};
use goodput_scheduler::{AdmissionError, NewRequest};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

/// The K/V hand-over from a prefill to a decode replica.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Transfer {
    /// K/V bytes per prompt token each GPU sends (its shard; the GPUs of a replica send in
    /// parallel).
    pub bytes_per_token: f64,
    /// Bytes per second of one GPU's path to its peer (NVLink within a node, RDMA across).
    pub bytes_per_second: f64,
    /// Fixed seconds of a hand-over (connection, descriptors, the decode side's ack).
    pub latency_s: f64,
}

impl Transfer {
    /// Seconds to hand over the K/V of `tokens` prompt tokens.
    pub fn seconds(&self, tokens: usize) -> f64 {
        self.latency_s + tokens as f64 * self.bytes_per_token / self.bytes_per_second.max(1.0)
    }
}

/// Prefill and decode replicas behind their routers, and the hand-over between them.
pub struct Disaggregated {
    pub prefill: Vec<SimEngine>,
    pub decode: Vec<SimEngine>,
    pub prefill_router: Router,
    pub decode_router: Router,
    pub transfer: Transfer,
    /// Nanoseconds between two scrapes of the replicas' load (≥ 1).
    pub scrape_ns: u64,
}

/// Where each request's two halves went, and the requests refused.
#[derive(Debug, Default)]
pub struct DisaggOutput {
    pub prefill_routed: Vec<Routed>,
    pub decode_routed: Vec<Routed>,
    pub refused: Vec<(RequestId, AdmissionError)>,
    /// Seconds of every hand-over.
    pub transfer_s: Vec<f64>,
}

#[derive(Default)]
struct Slot {
    busy: Option<Planned>,
    inbox: Vec<NewRequest>,
    ended: Vec<EngineRecord>,
}

/// One pool's replicas: the engines, what each is running, and its router.
struct Pool<'a> {
    engines: &'a mut [SimEngine],
    router: &'a mut Router,
    slots: Vec<Slot>,
    decodes: bool,
}

impl Pool<'_> {
    fn scrape(&mut self) {
        let loads: Vec<Load> = self
            .engines
            .iter()
            .map(|e| Load { running: e.scheduler().num_running(), waiting: e.scheduler().num_waiting() })
            .collect();
        self.router.scrape(&loads);
    }

    /// Ends the steps due by `now`.
    fn end_steps(&mut self, now: Stamp) {
        for (e, s) in self.engines.iter_mut().zip(&mut self.slots) {
            if let Some(p) = s.busy.take_if(|p| p.next <= now) {
                s.ended.extend(e.end_quiet(p).finished.into_iter().map(|(r, _)| r));
            }
        }
    }

    /// Sends `req` to a replica's inbox; a decode run there stops before the next step.
    fn route(&mut self, req: NewRequest, now: Stamp) -> Routed {
        let (r, tree_hit) = self.router.route(&req.prompt);
        let routed = Routed { id: req.id, replica: r, at: now, tree_hit };
        let slot = &mut self.slots[r];
        slot.inbox.push(req);
        if let Some(p) = &mut slot.busy {
            p.cut_before(now);
        }
        routed
    }

    /// Idle replicas take their inboxes and begin their next step; the refused come back.
    fn begin(&mut self, now: Stamp) -> Vec<(RequestId, AdmissionError, EngineRecord)> {
        let mut refused = Vec::new();
        for (r, (e, s)) in self.engines.iter_mut().zip(&mut self.slots).enumerate() {
            if s.busy.is_some() {
                continue;
            }
            for req in s.inbox.drain(..) {
                let (id, arrival, prompt) = (req.id, req.arrival, req.prompt.len());
                let added = if self.decodes { e.add_prefilled(req, now) } else { e.add(req, now) };
                if let Err(err) = added {
                    self.router.finished(r);
                    refused.push((id, err, crate::sim::refused_record(id, arrival, prompt, now)));
                }
            }
            if e.has_work() {
                s.busy = e.begin_run(now, Stamp(u64::MAX), MAX_RUN);
            }
        }
        refused
    }

    /// Records of requests ended, with their replicas (the router told).
    fn ended(&mut self) -> Vec<EngineRecord> {
        let mut out = Vec::new();
        for (r, s) in self.slots.iter_mut().enumerate() {
            for rec in s.ended.drain(..) {
                self.router.finished(r);
                out.push(rec);
            }
        }
        out
    }

    fn next_step(&self) -> Option<Stamp> {
        self.slots.iter().filter_map(|s| s.busy.as_ref().map(|p| p.next)).min()
    }
}

/// One request between its two halves.
struct Handover {
    /// The request as its source made it (its whole `max_tokens`).
    request: NewRequest,
    prefill: Option<EngineRecord>,
}

/// A request's record from its prefill and decode halves.
fn joined(prefill: &EngineRecord, decode: EngineRecord) -> EngineRecord {
    let mut token_times = prefill.token_times.clone();
    token_times.extend(decode.token_times);
    EngineRecord {
        token_times,
        preemptions: prefill.preemptions + decode.preemptions,
        arrival: prefill.arrival,
        queued: prefill.queued,
        first_scheduled: prefill.first_scheduled,
        first_token: prefill.first_token,
        prompt_tokens: prefill.prompt_tokens,
        cached_tokens: prefill.cached_tokens,
        ..decode
    }
}

/// Runs `source` through the disaggregated fleet until it has nothing more and every request
/// ended, handing each request's joined record to `sink` as it ends.
pub fn drive_disaggregated(
    fleet: &mut Disaggregated,
    source: &mut dyn Source,
    sink: &mut dyn FnMut(EngineRecord),
) -> DisaggOutput {
    let transfer = fleet.transfer;
    let scrape_ns = fleet.scrape_ns.max(1);
    let slots = |n: usize| (0..n).map(|_| Slot::default()).collect::<Vec<_>>();
    let mut pre = Pool {
        slots: slots(fleet.prefill.len()),
        engines: &mut fleet.prefill,
        router: &mut fleet.prefill_router,
        decodes: false,
    };
    let mut dec = Pool {
        slots: slots(fleet.decode.len()),
        engines: &mut fleet.decode,
        router: &mut fleet.decode_router,
        decodes: true,
    };
    let mut out = DisaggOutput::default();
    let mut waiting: HashMap<RequestId, Handover> = HashMap::new();
    // Hand-overs in flight: (when the K/V has arrived, request).
    let mut crossing: BinaryHeap<Reverse<(Stamp, RequestId)>> = BinaryHeap::new();
    let (mut now, mut next_scrape) = (Stamp(0), Stamp(0));
    loop {
        if now >= next_scrape {
            pre.scrape();
            dec.scrape();
            next_scrape = Stamp(now.0 - now.0 % scrape_ns + scrape_ns);
        }
        pre.end_steps(now);
        dec.end_steps(now);
        while let Some(req) = source.due(now) {
            // The prefill replica makes the first token only.
            let mut first = req.clone();
            first.params.max_tokens = 1;
            first.params.min_tokens = first.params.min_tokens.min(1);
            out.prefill_routed.push(pre.route(first, now));
            waiting.insert(req.id, Handover { request: req, prefill: None });
        }
        while let Some(Reverse((_, id))) = crossing.peek().copied().filter(|Reverse((at, _))| *at <= now) {
            crossing.pop();
            // Every crossing request waits for its decode half (it leaves `waiting` only then).
            if let Some(req) = waiting.get(&id).map(|h| h.request.clone()) {
                out.decode_routed.push(dec.route(req, now));
            }
        }
        for (id, err, rec) in pre.begin(now).into_iter().chain(dec.begin(now)) {
            waiting.remove(&id);
            source.finished(&rec, now);
            out.refused.push((id, err));
            sink(rec);
        }
        for rec in pre.ended() {
            let Some(h) = waiting.get_mut(&rec.id) else { continue };
            if h.request.params.max_tokens <= 1 || rec.generated_tokens == 0 {
                // Nothing left to decode (or nothing came): the prefill half is the request.
                waiting.remove(&rec.id);
                source.finished(&rec, rec.finished);
                sink(rec);
                continue;
            }
            let s = transfer.seconds(rec.prompt_tokens);
            out.transfer_s.push(s);
            crossing.push(Reverse((Stamp(rec.finished.0 + (s * 1e9).round() as u64), rec.id)));
            h.prefill = Some(rec);
        }
        for rec in dec.ended() {
            let Some(Handover { prefill: Some(p), .. }) = waiting.remove(&rec.id) else { continue };
            let whole = joined(&p, rec);
            source.finished(&whole, whole.finished);
            sink(whole);
        }
        let events = [pre.next_step(), dec.next_step(), source.next_due(), crossing.peek().map(|Reverse((t, _))| *t)];
        let Some(next) = events.into_iter().flatten().min() else { break };
        now = now.max(next.min(next_scrape));
    }
    out
}

#[cfg(test)]
#[path = "disagg/tests.rs"]
mod tests;
