//! The task layer on the console: multi-turn by turn, agent tasks by step, the RAG stage
//! timeline.

use super::new;
use crate::text::{f, ms, num};
use goodput_metrics::agent::TaskSummary;
use goodput_metrics::level::LevelSummary;
use goodput_metrics::turns::TurnSummary;
use goodput_metrics::Summary;
use goodput_results::LoadUnit;

/// Multi-turn: one row per turn index of a level.
pub fn turns(turns: &[TurnSummary], load: f64, unit: LoadUnit) -> String {
    let mut t = new(&["turn", "n", "prompt tokens", "cached", "new prefill", "TTFT p50", "TTFT p95", "prefill p50"]);
    for x in turns {
        t.add_row(vec![
            x.turn.to_string(),
            x.n.to_string(),
            f(x.prompt_tokens, 0),
            f(x.cached_tokens, 0),
            f(x.new_prefill_tokens, 0),
            num(ms(&x.ttft, |s| s.p50), 1),
            num(ms(&x.ttft, |s| s.p95), 1),
            num(ms(&x.prefill_time, |s| s.p50), 1),
        ]);
    }
    format!("By turn at {load} {unit} (times in ms; cached = prompt tokens served by the prefix cache)\n{t}")
}

/// Sessions: what they re-sent, what the prefix cache served, and which turns found their
/// session's context (the test of a router's session affinity).
pub fn sessions(s: &goodput_metrics::sessions::SessionSummary) -> String {
    let pct = |a: usize, b: usize| if b == 0 { "-".into() } else { format!("{:.0} %", 100.0 * a as f64 / b as f64) };
    format!(
        "Sessions: {} ({} turns), which sent {:.2}× their last turns' prompts in all; turns after the first found {:.0} % of their \
         prompt tokens cached; {} of {} ({}) found the turn before's prompt cached (all but {} tokens at most: sent where \
         their session's context was), and {} of {} sessions of several turns did so throughout.",
        s.sessions,
        s.turns,
        s.amplification,
        100.0 * s.later_cached_share,
        s.continued,
        s.later_turns,
        pct(s.continued, s.later_turns),
        goodput_metrics::sessions::CONTINUED_SLACK,
        s.sessions_kept,
        s.multi_turn_sessions
    ) + &session_times(s)
}

/// First and later turns' TTFT and a session's span, where measured.
fn session_times(s: &goodput_metrics::sessions::SessionSummary) -> String {
    let p = |x: &Option<goodput_metrics::stats::Summary>, unit: f64| {
        x.as_ref().map_or("-".into(), |x| format!("{:.1}/{:.1}", x.p50 * unit, x.p95 * unit))
    };
    format!(
        " TTFT P50/P95: first turns {} ms, later turns {} ms; a session lasts {} s (P50/P95).",
        p(&s.first_ttft, 1e3),
        p(&s.later_ttft, 1e3),
        p(&s.session_e2e, 1.0)
    )
}

/// Agent: the task-level numbers and one row per step of the plan.
pub fn agent(a: &TaskSummary, load: f64, unit: LoadUnit) -> String {
    let mut t = new(&["step", "kind", "n", "mean ms", "p50 ms", "p95 ms"]);
    for s in &a.steps {
        t.add_row(vec![
            s.index.to_string(),
            s.kind.to_string(),
            s.duration.as_ref().map_or("0".into(), |d| d.n.to_string()),
            num(ms(&s.duration, |d| d.mean), 1),
            num(ms(&s.duration, |d| d.p50), 1),
            num(ms(&s.duration, |d| d.p95), 1),
        ]);
    }
    format!(
        "Agent tasks at {load} {unit}: {} tasks ({} completed), task E2E p50 {} ms, p95 {} ms; amplification {:.2} model calls/task, {:.2} tool calls/task, tool-wait share {:.0} %\n{t}",
        a.tasks,
        a.completed,
        num(ms(&a.task_e2e, |d| d.p50), 1),
        num(ms(&a.task_e2e, |d| d.p95), 1),
        a.amplification,
        a.tool_calls_per_task,
        a.tool_wait_share * 100.0
    )
}

/// RAG: the stage timeline of a level (the seeds' embed / retrieve / rerank / assemble /
/// queue / prefill / decode), median and P95 per stage.
pub fn rag(r: &TaskSummary, s: &LevelSummary, unit: LoadUnit) -> String {
    let mut t = new(&["stage", "n", "p50 ms", "p95 ms", "mean ms"]);
    for st in r.steps.iter().filter(|x| x.kind != goodput_core::StepKind::Llm) {
        // Retrieval, reranking and assembly take microseconds here: three decimals.
        let us = |f: fn(&Summary) -> f64| num(ms(&st.duration, f), 3);
        t.add_row(vec![
            st.kind.to_string(),
            st.duration.as_ref().map_or("0".into(), |d| d.n.to_string()),
            us(|d| d.p50),
            us(|d| d.p95),
            us(|d| d.mean),
        ]);
    }
    for (name, x) in [("queue", &s.queue_time), ("prefill", &s.prefill_time), ("decode", &s.decode_time)] {
        t.add_row(vec![
            name.to_string(),
            x.as_ref().map_or("0".into(), |d| d.n.to_string()),
            num(ms(x, |d| d.p50), 1),
            num(ms(x, |d| d.p95), 1),
            num(ms(x, |d| d.mean), 1),
        ]);
    }
    format!(
        "RAG stage timeline at {} {unit}: query E2E p50 {} ms, p95 {} ms\n{t}",
        s.load,
        num(ms(&r.task_e2e, |d| d.p50), 1),
        num(ms(&r.task_e2e, |d| d.p95), 1)
    )
}
