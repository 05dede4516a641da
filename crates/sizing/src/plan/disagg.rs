//! `goodput plan --trace FILE --disaggregate [xPyD,…]`: the trace served by `x` prefill and
//! `y` decode replicas of one configuration (`crate::fleet::disagg`), beside the
//! aggregated fleet of `--replicas`, behind each router; the answer says which wins under
//! the SLOs and by how much.
//!
//! The K/V of a request's prompt crosses from its prefill to its decode replica at the
//! GPUs' link: NVLink when every replica of the split fits on one node, the network (RDMA)
//! otherwise, each GPU sending its shard in parallel, plus `--transfer-latency` a hand-over.
//! The prefill pool is behind the row's router; the decode pool is least-loaded (a decode
//! replica is limited by the requests it holds, and the K/V arrives with the request, so a
//! prefix tree buys it nothing).

use super::error::refuse;
use super::fleet::{load, plan_of, simulate, FleetPlan};
use super::replay::{projected, PolicyRun, ReplicaSpec, Tally, TraceSource};
use super::{FleetSpec, PlanSpec, Said, Setting};
use super::{PlanError, Result};
use crate::fleet::disagg::{drive_disaggregated, Disaggregated, Transfer};
use crate::fleet::router::{Policy, Router};
use crate::hardware::Gpu;
use crate::sim::SimEngine;
use goodput_workload::trace::Trace;

/// `2P6D,3P5D` (or `all`: every split of `replicas`).
fn splits(s: &str, replicas: usize) -> Result<Vec<(usize, usize)>> {
    if s.trim() == "all" {
        if replicas < 2 {
            refuse!("--disaggregate: a split needs at least 2 replicas (--replicas {replicas})");
        }
        return Ok((1..replicas).map(|x| (x, replicas - x)).collect());
    }
    s.split(',')
        .map(|part| {
            let p = part.trim().to_ascii_uppercase();
            let parsed = p.strip_suffix('D').and_then(|r| r.split_once('P')).and_then(|(x, y)| {
                let (x, y) = (x.parse::<usize>().ok()?, y.parse::<usize>().ok()?);
                (x >= 1 && y >= 1 && x + y <= 4096).then_some((x, y))
            });
            parsed.ok_or_else(|| {
                PlanError::Spec(format!("--disaggregate `{part}`: a split is xPyD, e.g. 2P6D (x, y ≥ 1)"))
            })
        })
        .collect()
}

/// The hand-over of a split of `replicas` replicas like `p`'s.
fn transfer(p: &ReplicaSpec, replicas: usize, latency_s: f64) -> Result<Transfer> {
    let Some((cost, g)) = &p.projection else {
        refuse!("--disaggregate prices the K/V hand-over over a GPU's links: plan it on --gpus, not on a --profile");
    };
    let (w, d, e) = (&cost.roofline.work, &cost.roofline.device, &cost.roofline.eff);
    let on_node = replicas * p.gpus <= g.gpus_per_node;
    let bytes_per_second = if on_node { d.link * e.link } else { d.internode * e.internode };
    if bytes_per_second <= 0.0 {
        refuse!(
            "{} has no network between its nodes in the hardware catalog: {replicas} replicas of {} GPUs span nodes",
            g.name,
            p.gpus
        );
    }
    // Every layer's K/V of a prompt token (sliding layers' too: a window's worth is most of a
    // short prompt, and the hand-over sends what the prefill wrote).
    Ok(Transfer { bytes_per_token: w.kv_bytes_per_token + w.sliding_kv_bytes_per_token, bytes_per_second, latency_s })
}

fn simulate_split(
    a: &PlanSpec,
    f: &FleetSpec,
    set: &Setting,
    p: &ReplicaSpec,
    policy: &Policy,
    trace: &Trace,
    (x, y): (usize, usize),
) -> Result<PolicyRun> {
    let started = std::time::Instant::now();
    let sched = goodput_scheduler::SchedulerConfig {
        enable_prefix_caching: p.sched.enable_prefix_caching && trace.shares_prefixes(),
        ..p.sched.clone()
    };
    let engines =
        |n: usize| (0..n).map(|_| SimEngine::new(sched.clone(), p.cost.clone())).collect::<Result<Vec<_>, _>>();
    let mut fleet = Disaggregated {
        prefill: engines(x)?,
        decode: engines(y)?,
        prefill_router: Router::new(policy.clone(), x, a.seed),
        decode_router: Router::new(Policy::LeastLoaded, y, a.seed),
        transfer: transfer(p, x + y, f.transfer_latency.as_secs_f64())?,
        scrape_ns: (f.scrape_interval.as_nanos() as u64).max(1),
    };
    let mut tally = Tally::for_trace(trace, f.speedup, &f.request_overhead);
    let mut source = TraceSource::new(trace, f.speedup, set.spec.vocab_size, policy, f.chat_template_tokens);
    let out = drive_disaggregated(&mut fleet, &mut source, &mut |r| tally.add(&r, &set.slos));
    let mut counts = vec![0usize; x];
    for r in &out.prefill_routed {
        counts[r.replica] += 1;
    }
    let gpus = (x + y) * p.gpus;
    let gpu_hours = gpus as f64 * tally.end_s() / 3600.0;
    let mut run = tally.into_run(format!("{}, {x}P{y}D", policy.name()), gpu_hours, gpus, &counts);
    run.wall_s = started.elapsed().as_secs_f64();
    Ok(run)
}

/// The sentence comparing the best of `splits` (with their `(x, y)`) with the aggregated fleet
/// behind the same router.
fn verdict(policy: &str, agg: &PolicyRun, splits: &[((usize, usize), &PolicyRun)]) -> Option<String> {
    let share = |r: &PolicyRun| r.good as f64 / r.requests.max(1) as f64;
    let better = |a: &&((usize, usize), &PolicyRun), b: &&((usize, usize), &PolicyRun)| {
        share(a.1).total_cmp(&share(b.1)).then(b.1.gpu_hours.total_cmp(&a.1.gpu_hours))
    };
    let &((x, y), best) = splits.iter().max_by(better)?;
    let d = (share(best) - share(agg)) * 100.0;
    let split = format!("{x}P{y}D");
    Some(if d > 0.05 {
        format!("Behind {policy}, {split} wins: {:.1} % of requests within the SLOs against {:.1} % aggregated (+{d:.1} points) on {:.2} against {:.2} GPU-hours.", share(best) * 100.0, share(agg) * 100.0, best.gpu_hours, agg.gpu_hours)
    } else if d < -0.05 {
        format!("Behind {policy}, aggregation wins: {:.1} % within the SLOs against {:.1} % for the best split, {split} ({d:.1} points).", share(agg) * 100.0, share(best) * 100.0)
    } else {
        format!("Behind {policy}, disaggregation does not pay: {split} meets the SLOs for {:.1} % of requests, as the aggregated fleet does ({:.1} %).", share(best) * 100.0, share(agg) * 100.0)
    })
}

/// The aggregated fleet and each prefill/decode split of `which` replaying the fleet's trace
/// behind each router, with a verdict per router.
pub fn run(
    a: &PlanSpec,
    f: &FleetSpec,
    set: &Setting,
    gpus: &[Gpu],
    which: &str,
    say: &mut dyn FnMut(Said),
) -> Result<FleetPlan> {
    if f.autoscale.is_some() {
        refuse!("--disaggregate with --autoscale: scaling two pools is not simulated yet; give fixed --replicas");
    }
    if f.profile.is_some() {
        refuse!("--disaggregate prices the K/V hand-over over a GPU's links: plan it on --gpus, not on a --profile");
    }
    if !((1..=4096).contains(&f.replicas) && f.speedup.is_finite() && f.speedup > 0.0) {
        refuse!("--replicas: 1 to 4096; --speedup: a positive factor");
    }
    let p = projected(a, set, gpus)?;
    let splits = splits(which, f.replicas)?;
    let trace = load(a, f, set, &p, say)?;
    let (mut runs, mut verdicts) = (Vec::new(), Vec::new());
    for policy in &f.router {
        say(Said::Step(&format!("plan --trace: {} aggregated …", policy.name())));
        let mut agg = simulate(a, f, set, &p, policy.clone(), &trace)?;
        agg.router = format!("{}, aggregated {}", policy.name(), f.replicas);
        let mut split_runs = Vec::new();
        for &split in &splits {
            say(Said::Step(&format!("plan --trace: {} {}P{}D …", policy.name(), split.0, split.1)));
            split_runs.push(simulate_split(a, f, set, &p, policy, &trace, split)?);
        }
        let paired: Vec<_> = splits.iter().copied().zip(&split_runs).collect();
        verdicts.extend(verdict(policy.name(), &agg, &paired));
        runs.push(agg);
        runs.extend(split_runs);
    }
    Ok(plan_of(f, set, &p, &trace, runs, &verdicts.join(" ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_are_read_and_refused_by_name() {
        assert_eq!(splits("2P6D, 3p5d", 8).unwrap(), [(2, 6), (3, 5)]);
        assert_eq!(splits("all", 3).unwrap(), [(1, 2), (2, 1)]);
        for bad in ["2P", "0P4D", "P4D", "2x6", "2P0D"] {
            let e = splits(bad, 8).unwrap_err().to_string();
            assert!(e.contains(bad) && e.contains("xPyD"), "{e}");
        }
        assert!(splits("all", 1).unwrap_err().to_string().contains("at least 2"));
    }
}
