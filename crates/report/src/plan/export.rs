//! A projection's text (`goodput_sizing::plan::export` writes it): what one engine of the
//! layout holds, each phase alone on one GPU, and how to run a scenario on it.

use crate::console as table;
use goodput_sizing::plan::export::{PhaseRow, Projection};

/// The projection on the console.
pub fn text(p: &Projection) -> String {
    format!(
        "Projection of {} on {}: {:.1} GB of weights and {} KV tokens per engine, {} engine{} per replica.\n{}\nWritten to {} — run any scenario on it with `goodput run -m {} --simulate {}` (each run says it is a projection).",
        p.model,
        p.device,
        p.weight_gb_per_gpu,
        p.kv_tokens,
        p.engines,
        if p.engines == 1 { "" } else { "s" },
        phase_table(&p.phases),
        p.out.display(),
        p.model,
        p.out.display()
    )
}

fn phase_table(rows: &[PhaseRow]) -> String {
    let mut t = table::new(&["phase", "batch", "context", "step (ms)", "tok/s per GPU"]);
    for r in rows {
        let batch = match (r.phase, r.kv_full) {
            ("prefill", _) => format!("{} × {}", r.batch, r.prompt_tokens),
            (_, true) => format!("{} (KV full)", r.batch),
            _ => r.batch.to_string(),
        };
        t.add_row(vec![
            r.phase.into(),
            batch,
            r.context.to_string(),
            format!("{:.2}", r.step_s * 1e3),
            format!("{:.0}", r.tokens_per_s_per_gpu),
        ]);
    }
    format!("Each phase alone (one engine's steps; tok/s per GPU = the engine's ÷ its TP; no SLOs):\n{t}")
}
