//! `goodput plan --curve`: the interactivity curve the field reads (SemiAnalysis'
//! InferenceMAX, MLPerf's interactive scenario): for each configuration, concurrency swept in
//! doublings, and at each level the throughput per GPU (input + output, and output alone)
//! against the tokens per second each user sees (the median of `per_user_tps`) and against
//! TTFT P95. The Pareto frontier across configurations is marked: no other point gives both
//! more throughput per GPU and more speed per user. With prices, a second frontier: cost per
//! output token against speed per user, across the priced configurations (a cheaper GPU can
//! win there while never reaching the throughput frontier). The answer is the point of that
//! cost frontier of the points that meet the SLOs, the cheapest; unpriced, the point of most
//! output per GPU among those that meet them.

use super::search::Load;
use super::Result;
use super::{config, PlanSpec, Said, Setting};
use crate::hardware::Gpu;
use serde::Serialize;

/// One simulated level of one configuration.
#[derive(Clone, Debug, Serialize)]
pub struct Point {
    pub gpu: String,
    pub layout: String,
    pub gpus_per_replica: usize,
    /// Concurrent users per replica (all its engines).
    pub users: usize,
    pub output_tps_per_gpu: f64,
    pub total_tps_per_gpu: f64,
    /// Median output tokens per second one user sees.
    pub tps_per_user: f64,
    pub ttft_p95_s: f64,
    pub slos_hold: bool,
    /// On the Pareto frontier of throughput per GPU against tokens per second per user.
    pub frontier: bool,
    /// On the Pareto frontier of cost per output token (lower) against tokens per second per
    /// user, across the priced configurations.
    pub cost_frontier: bool,
    /// On the Pareto frontier of throughput per GPU against TTFT P95 (lower).
    pub ttft_frontier: bool,
    pub cost_per_million_output_tokens: Option<f64>,
}

/// The curve of every configuration, as written to JSON.
#[derive(Debug, Serialize)]
pub struct Curve {
    pub model: String,
    pub scenario: String,
    pub slos: Vec<String>,
    pub points: Vec<Point>,
    /// Configurations that cannot run, and why.
    pub unfit: Vec<(String, String, String)>,
    pub answer: String,
    pub assumptions: Vec<String>,
}

/// Concurrency levels per engine: 1, 2, 4, … up to the engine's sequence cap.
fn levels(max_seqs: usize) -> Vec<usize> {
    std::iter::successors(Some(1usize), |u| Some(u * 2)).take_while(|&u| u <= max_seqs.max(1)).collect()
}

fn sweep(a: &PlanSpec, set: &Setting, g: &Gpu, p: config::Prepared, layout: String) -> Result<Vec<Point>> {
    let engines = p.engines;
    let gpus = p.cost.layout.gpus() as f64;
    let sim = set.sim(a, p.cost, p.sched);
    let price = set.prices.get(&g.name).copied();
    let mut out = Vec::new();
    for u in levels(a.max_num_seqs) {
        let l = sim.level(Load::Users(u))?;
        let s = &l.summary;
        let per_gpu = |tps: f64| tps * engines as f64 / gpus;
        let output = per_gpu(s.output_throughput);
        out.push(Point {
            gpu: g.name.clone(),
            layout: layout.clone(),
            gpus_per_replica: gpus as usize,
            users: u * engines,
            output_tps_per_gpu: output,
            total_tps_per_gpu: per_gpu(s.output_throughput + s.input_throughput),
            tps_per_user: s.per_user_tps.as_ref().map_or(0.0, |x| x.p50),
            ttft_p95_s: s.ttft.as_ref().map_or(f64::NAN, |x| x.p95),
            slos_hold: l.holds(),
            frontier: false,
            cost_frontier: false,
            ttft_frontier: false,
            cost_per_million_output_tokens: price.filter(|_| output > 0.0).map(|p| p / (output * 3600.0) * 1e6),
        });
    }
    Ok(out)
}

/// Whether `q` beats `p` on both axes (at least as good on each, better on one), higher being
/// better on both.
fn beats(q: &Point, p: &Point, axes: fn(&Point) -> (f64, f64)) -> bool {
    goodput_metrics::pareto::dominates(axes(q), axes(p))
}

/// Marks the points no other point beats: throughput per GPU against tokens per second per
/// user and against TTFT P95, and (priced points) cost per output token against tokens per
/// second per user.
fn mark_frontier(points: &mut [Point]) {
    let speed: fn(&Point) -> (f64, f64) = |p| (p.output_tps_per_gpu, p.tps_per_user);
    let ttft: fn(&Point) -> (f64, f64) =
        |p| (p.output_tps_per_gpu, if p.ttft_p95_s.is_finite() { -p.ttft_p95_s } else { f64::NEG_INFINITY });
    let cost: fn(&Point) -> (f64, f64) =
        |p| (-p.cost_per_million_output_tokens.unwrap_or(f64::INFINITY), p.tps_per_user);
    let on = |p: &Point, axes| !points.iter().any(|q| beats(q, p, axes));
    let priced: Vec<Point> = points.iter().filter(|p| p.cost_per_million_output_tokens.is_some()).cloned().collect();
    let flags: Vec<[bool; 3]> = points
        .iter()
        .map(|p| {
            let cheap = p.cost_per_million_output_tokens.is_some() && !priced.iter().any(|q| beats(q, p, cost));
            [on(p, speed), on(p, ttft), cheap]
        })
        .collect();
    for (p, [f, t, c]) in points.iter_mut().zip(flags) {
        (p.frontier, p.ttft_frontier, p.cost_frontier) = (f, t, c);
    }
}

/// The point that meets the SLOs at the least cost per output token (the cost frontier of
/// the points that hold), or, unpriced, the holding point of most output per GPU. Points that
/// miss the SLOs may sit on the frontiers drawn, but are never the answer.
fn choice(points: &[Point]) -> Option<&Point> {
    let holding = || points.iter().filter(|p| p.slos_hold);
    let cheapest = holding().filter(|p| p.cost_per_million_output_tokens.is_some()).min_by(|a, b| {
        let cost = |p: &Point| p.cost_per_million_output_tokens.unwrap_or(f64::INFINITY);
        cost(a).total_cmp(&cost(b)).then(b.tps_per_user.total_cmp(&a.tps_per_user))
    });
    cheapest.or_else(|| holding().max_by(|a, b| a.output_tps_per_gpu.total_cmp(&b.output_tps_per_gpu)))
}

/// The curve of every configuration of `gpus`, each step said through `say`.
pub fn run(a: &PlanSpec, set: &Setting, gpus: &[Gpu], say: &mut dyn FnMut(Said)) -> Result<Curve> {
    let mut points = Vec::new();
    let mut unfit = Vec::new();
    for g in gpus {
        for layout in config::layouts(a, &set.spec) {
            say(Said::Step(&format!("plan --curve: {} {layout}", g.name)));
            // Why a configuration has no curve is a reason shown in its row.
            let swept = match config::prepare(a, &set.spec, g, layout, &set.eff, set.mean_in + set.mean_out) {
                Ok(p) => sweep(a, set, g, p, layout.label()).map_err(|e| e.to_string()),
                Err(why) => Err(why.to_string()),
            };
            match swept {
                Ok(p) => points.extend(p),
                Err(why) => unfit.push((g.name.clone(), layout.label(), why)),
            }
        }
    }
    mark_frontier(&mut points);
    let slos: Vec<String> = set.slos.iter().map(|s| s.to_string()).collect();
    let answer = match choice(&points) {
        Some(p) => format!(
            "Meeting {} {}: {} {} at {} users per replica — {:.0} output tok/s per GPU ({:.0} input + output), {:.1} tok/s per user, TTFT P95 {:.2} s{}. Error bar: {}.",
            slos.join(", "),
            if p.cost_per_million_output_tokens.is_some() {
                "at the least cost per output token"
            } else {
                "with the most output per GPU (no prices given)"
            },
            p.gpu,
            p.layout,
            p.users,
            p.output_tps_per_gpu,
            p.total_tps_per_gpu,
            p.tps_per_user,
            p.ttft_p95_s,
            p.cost_per_million_output_tokens.map_or(String::new(), |c| format!(
                ", ${c:.3} per million output tokens with every GPU used at this point (`plan` for a given load adds its headroom and whole replicas, so it pays more per token)"
            )),
            set.error_bar
        ),
        None => format!("No point of any configuration meets {}: see the curve.", slos.join(", ")),
    };
    let curve = Curve {
        model: set.spec.name.clone(),
        scenario: a.scenario.clone(),
        slos,
        points,
        unfit,
        answer,
        assumptions: super::answer::assumptions(a, set),
    };
    Ok(curve)
}
