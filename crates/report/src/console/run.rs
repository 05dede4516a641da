//! A finished run as the console shows it: its tables in order — the sweep (with chosen
//! latency columns), the HTTP and server-side views, a merged run's shards, the last level's
//! multi-turn, agent and RAG tables, predicted against measured, the soak — then what a
//! simulation cost and the conclusion; and the warning a retry storm earns.

use super::latency::{levels_with, LatencyColumns};
use crate::columns::Output;
use goodput_results::prediction::Simulation;
use goodput_results::RunSummary;

/// The run's blocks of text, in the order they are printed, the conclusion last.
pub fn run(
    s: &RunSummary,
    columns: Option<&LatencyColumns>,
    sim: Option<&Simulation>,
    conclusion: &str,
    table: Output,
) -> Vec<String> {
    let unit = s.load_unit;
    let mut out = vec![match columns {
        Some(cols) => levels_with(&s.levels, unit, &s.model, &s.workload.description, table, cols),
        None => super::levels(&s.levels, unit, &s.model, &s.workload.description, table),
    }];
    let server = [super::http(&s.levels, unit), super::server(&s.levels, unit), super::spec_decode(&s.levels, unit)];
    out.extend(server.into_iter().flatten());
    if let Some(m) = &s.merged {
        out.push(super::shards(m, &unit.to_string()));
    }
    if let Some(last) = s.levels.last() {
        if !last.turns.is_empty() {
            out.push(super::turns(&last.turns, last.summary.load, unit));
            out.extend(last.sessions.as_ref().map(super::sessions));
        }
        if let Some(ag) = &last.agent {
            out.push(super::agent(ag, last.summary.load, unit));
        }
        if let Some(r) = &last.rag {
            out.push(super::rag(r, &last.summary, unit));
        }
    }
    if let Some(p) = &s.prediction {
        out.push(super::prediction(s, p, unit));
    }
    if let Some(soak) = &s.soak {
        out.push(super::soak(soak, unit));
    }
    if let Some(sim) = sim {
        out.push(format!(
            "simulation: {} engine steps in {:.2} s ({:.0} steps/s), {:.1} s of measured windows simulated ({:.0}× real time)",
            sim.steps,
            sim.wall_s,
            sim.steps as f64 / sim.wall_s,
            sim.simulated_s,
            sim.simulated_s / sim.wall_s
        ));
    }
    out.push(conclusion.to_string());
    out
}

/// The warning of a run whose retries fed on themselves (the share of attempts that were
/// retries rising with load), if it did.
pub fn retry_storm(s: &RunSummary) -> Option<String> {
    let storm = s.verdict().retry_storm?;
    let shares: Vec<String> =
        storm.iter().map(|r| format!("{:.0} % at {} {}", r.share * 100.0, r.load, s.load_unit)).collect();
    Some(format!(
        "warning: retries feed on themselves: the share of attempts that were retries rises with load ({}); the extra attempts are load the target would not otherwise have had",
        shares.join(", ")
    ))
}
