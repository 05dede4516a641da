//! The sweep's levels from the flags: one [`LevelSpec`] per level given (`--concurrency`,
//! `--rate`, `--burst`, `--stages`, a trace's speedups).

use crate::run::args::RunArgs;
use anyhow::{bail, Result};
use goodput_bench::run::spec::{LevelSpec, MAX_RATE, SEARCH_START};
use goodput_workload::Arrival;
use std::collections::VecDeque;
use std::time::Duration;

/// A trace's levels: one per speedup, by the rate it offers (at most [`MAX_RATE`]).
pub(super) fn trace_levels(a: &RunArgs, t: &goodput_workload::Trace) -> Result<VecDeque<LevelSpec>> {
    let (rate, requests) = (t.rate(), t.entries.len());
    a.trace
        .trace_speedup
        .iter()
        .map(|&speedup| {
            // Offered requests per second, to the thousandth (a level's name in every table).
            let offered = (rate * speedup * 1e3).round() / 1e3;
            if offered > MAX_RATE {
                bail!(
                    "--trace-speedup {speedup}: the trace would offer {offered} requests per second, beyond what \
                     goodput offers (at most {MAX_RATE})"
                );
            }
            let arrival = Arrival::Trace { speedup, rate: offered, requests };
            Ok(LevelSpec { load: arrival.load(), arrival, duration: a.duration })
        })
        .collect()
}

/// The sweep's levels from `--burst`, `--stages`, `--rate` or `--concurrency`.
pub(super) fn levels(a: &RunArgs, burstiness: Option<f64>) -> Result<VecDeque<LevelSpec>> {
    let level = |arrival: Arrival, duration: Option<Duration>| LevelSpec { load: arrival.load(), arrival, duration };
    Ok(match (&a.burst, &a.stages, &a.rate) {
        (Some(sizes), _, _) => {
            if sizes.is_empty() || sizes.contains(&0) {
                bail!("--burst: every level must send at least 1 request, got {sizes:?}");
            }
            sizes.iter().map(|&n| level(Arrival::Burst { size: n }, None)).collect()
        }
        (None, Some(stages), _) => {
            if stages.is_empty() {
                bail!("--stages: give at least one USERSxDURATION stage");
            }
            stages.iter().map(|&(u, d)| level(Arrival::Closed { users: u, think: a.think }, Some(d))).collect()
        }
        (None, None, Some(rates)) => {
            if rates.is_empty() || rates.iter().any(|r| !(r.is_finite() && *r >= 0.001)) {
                bail!(
                    "--rate: every rate must be a positive number, at least 0.001 requests per second, got {rates:?}"
                );
            }
            rates.iter().map(|&r| level(Arrival::Rate { rate: r, burstiness }, a.duration)).collect()
        }
        (None, None, None) if a.concurrency.is_empty() => {
            SEARCH_START.iter().map(|&c| level(Arrival::Closed { users: c, think: a.think }, a.duration)).collect()
        }
        (None, None, None) => {
            if a.concurrency.contains(&0) {
                bail!("--concurrency: every level must be at least 1 user, got {:?}", a.concurrency);
            }
            a.concurrency.iter().map(|&c| level(Arrival::Closed { users: c, think: a.think }, a.duration)).collect()
        }
    })
}
