//! Task-level metrics of work made of several calls — agent tasks (model calls, tools,
//! retrievals) and RAG queries (embed, retrieve, rerank, assemble, model call): task E2E,
//! model calls per task (amplification), the share of a task spent waiting on tools and
//! retrievals, and a per-step breakdown.

use crate::stats::Summary;
use goodput_core::{StepKind, TaskRecord};
use serde::{Deserialize, Serialize};

/// One step position of the task plan, over all tasks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StepSummary {
    pub index: usize,
    pub kind: StepKind,
    pub duration: Option<Summary>,
}

/// The tasks of one level: an agent's tasks or a RAG workload's queries.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TaskSummary {
    pub tasks: usize,
    pub completed: usize,
    /// Task end − task start, in seconds, over completed tasks.
    pub task_e2e: Option<Summary>,
    /// `amplification` = model calls / user tasks.
    pub amplification: f64,
    /// Tool and retrieval calls per task ([`StepKind::is_tool_call`]: a RAG query's embed,
    /// rerank and assemble stages are not calls).
    pub tool_calls_per_task: f64,
    /// Σ tool-wait time / Σ task E2E over completed tasks, where a task's tool-wait time is
    /// the time during which some tool or retrieval runs and no model call does (for a
    /// sequence, the sum of its tool and retrieval steps; parallel tools count once).
    pub tool_wait_share: f64,
    pub steps: Vec<StepSummary>,
}

/// Seconds of `t` during which a tool or retrieval runs and no model call does.
pub fn tool_only_time(t: &TaskRecord) -> f64 {
    // Sweep over the step boundaries, counting running tools and model calls.
    let mut events: Vec<(goodput_core::Stamp, i32, i32)> = Vec::with_capacity(2 * t.steps.len());
    for s in &t.steps {
        let (tool, llm) = (i32::from(s.kind.is_tool_call()), i32::from(s.kind == StepKind::Llm));
        events.push((s.start, tool, llm));
        events.push((s.end, -tool, -llm));
    }
    events.sort_by_key(|e| e.0);
    let (mut tools, mut llms, mut total) = (0, 0, 0.0);
    let mut last = events.first().map(|e| e.0).unwrap_or_default();
    for (at, dt, dl) in events {
        if tools > 0 && llms == 0 {
            total += at.secs_since(last);
        }
        tools += dt;
        llms += dl;
        last = at;
    }
    total
}

pub fn summarize_tasks(tasks: &[TaskRecord]) -> TaskSummary {
    let done: Vec<&TaskRecord> = tasks.iter().filter(|t| t.ok).collect();
    let n = tasks.len().max(1) as f64;
    let calls = tasks.iter().flat_map(|t| &t.steps).filter(|s| s.kind == StepKind::Llm).count() as f64;
    let tools = tasks.iter().flat_map(|t| &t.steps).filter(|s| s.kind.is_tool_call()).count() as f64;
    let e2e: Vec<f64> = done.iter().map(|t| t.end.secs_since(t.start)).collect();
    let wait: f64 = done.iter().map(|t| tool_only_time(t)).sum();
    let total: f64 = e2e.iter().sum();
    let max_steps = done.iter().map(|t| t.steps.len()).max().unwrap_or(0);
    let steps = (0..max_steps)
        .map(|i| {
            let d: Vec<f64> = done.iter().filter_map(|t| t.steps.get(i)).map(|s| s.end.secs_since(s.start)).collect();
            let kind = done.iter().find_map(|t| t.steps.get(i)).map_or(StepKind::Llm, |s| s.kind);
            StepSummary { index: i + 1, kind, duration: Summary::of(&d) }
        })
        .collect();
    TaskSummary {
        tasks: tasks.len(),
        completed: done.len(),
        task_e2e: Summary::of(&e2e),
        amplification: calls / n,
        tool_calls_per_task: tools / n,
        tool_wait_share: if total > 0.0 { wait / total } else { 0.0 },
        steps,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use goodput_core::{Stamp, TaskStep};

    fn ms(x: u64) -> Stamp {
        Stamp(x * 1_000_000)
    }

    fn step(kind: &str, a: u64, b: u64) -> TaskStep {
        let kind = StepKind::ALL.into_iter().find(|k| k.name() == kind).expect("a step kind");
        TaskStep { kind, start: ms(a), end: ms(b) }
    }

    #[test]
    fn hand_computed_tasks() {
        // Task 1: llm 0–100, tool 100–300, llm 300–400 (400 ms, 200 ms of tool wait).
        // Task 2: llm 0–200, tool 200–300, llm 300–600 (600 ms, 100 ms of tool wait).
        let t1 = TaskRecord {
            task: 1,
            start: ms(0),
            end: ms(400),
            steps: vec![step("llm", 0, 100), step("tool", 100, 300), step("llm", 300, 400)],
            ok: true,
        };
        let t2 = TaskRecord {
            task: 2,
            start: ms(0),
            end: ms(600),
            steps: vec![step("llm", 0, 200), step("tool", 200, 300), step("llm", 300, 600)],
            ok: true,
        };
        let s = summarize_tasks(&[t1, t2]);
        assert_eq!((s.tasks, s.completed), (2, 2));
        assert_eq!(s.amplification, 2.0);
        assert_eq!(s.tool_calls_per_task, 1.0);
        // (200 + 100) / (400 + 600) = 0.3
        assert!((s.tool_wait_share - 0.3).abs() < 1e-12);
        assert!((s.task_e2e.as_ref().unwrap().p50 - 0.5).abs() < 1e-12);
        assert_eq!(s.steps.len(), 3);
        assert_eq!(s.steps[1].kind, StepKind::Tool);
        assert!((s.steps[1].duration.as_ref().unwrap().mean - 0.15).abs() < 1e-12);
    }

    #[test]
    fn parallel_tools_count_once_and_not_while_a_model_call_runs() {
        // llm 0–2, tools 2–5 and 3–6 in parallel, llm 6–10: tool-only 2–6 = 4 of 10.
        let t = TaskRecord {
            task: 1,
            start: ms(0),
            end: ms(10),
            steps: vec![step("llm", 0, 2), step("tool", 2, 5), step("retrieve", 3, 6), step("llm", 6, 10)],
            ok: true,
        };
        assert!((tool_only_time(&t) - 0.004).abs() < 1e-12);
        assert!((summarize_tasks(std::slice::from_ref(&t)).tool_wait_share - 0.4).abs() < 1e-12);
        // A model call 4–8 alongside: tool-only is 2–4 only.
        let mut u = t;
        u.steps[3] = step("llm", 4, 8);
        assert!((tool_only_time(&u) - 0.002).abs() < 1e-12);
    }

    /// A RAG query: its retrieval is its one call out (the embed, rerank and assemble stages
    /// are its own work), so 1 call per task and 2 of its 10 ms waiting on it; not 4.
    #[test]
    fn a_rag_query_counts_its_retrieval_alone_as_a_call() {
        let stages = [("embed", 0, 1), ("retrieve", 1, 3), ("rerank", 3, 4), ("assemble", 4, 5), ("llm", 5, 10)];
        let t = TaskRecord {
            task: 1,
            start: ms(0),
            end: ms(10),
            steps: stages.iter().map(|&(k, a, b)| step(k, a, b)).collect(),
            ok: true,
        };
        let s = summarize_tasks(&[t]);
        assert_eq!((s.amplification, s.tool_calls_per_task), (1.0, 1.0));
        assert!((s.tool_wait_share - 0.2).abs() < 1e-12, "{}", s.tool_wait_share);
        let kinds: Vec<StepKind> = s.steps.iter().map(|x| x.kind).collect();
        assert_eq!(kinds, [StepKind::Embed, StepKind::Retrieve, StepKind::Rerank, StepKind::Assemble, StepKind::Llm]);
    }
}
