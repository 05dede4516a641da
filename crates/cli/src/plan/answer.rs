//! A plan's answer: the table, the written recommendation in the seeds' form, its assumptions,
//! and the same as a self-contained HTML page.

use super::search::Load;
use super::{Plan, PlanArgs, Row};
use goodput_core::ModelSpec;
use goodput_metrics::slo::Slo;
use goodput_report::console as table;
use goodput_report::html::escape;
use goodput_sizing::roofline::Efficiencies;

fn load_text(load: Load) -> String {
    match load {
        Load::Rate(r) => format!("{r} req/s"),
        Load::Users(u) => format!("{u} concurrent users"),
    }
}

fn unit(load: Load) -> &'static str {
    match load {
        Load::Rate(_) => "req/s",
        Load::Users(_) => "users",
    }
}

/// The cheapest row that serves the load: fewest GPUs, then lowest cost, then most capacity.
fn best(rows: &[Row]) -> Option<&Row> {
    rows.iter().filter(|r| r.gpus.is_some()).min_by(|a, b| {
        let key = |r: &Row| (r.cost_per_hour.unwrap_or(f64::INFINITY), r.gpus.unwrap_or(usize::MAX));
        let (ka, kb) = (key(a), key(b));
        let by_cost =
            if ka.0.is_finite() || kb.0.is_finite() { ka.0.total_cmp(&kb.0) } else { std::cmp::Ordering::Equal };
        by_cost.then(ka.1.cmp(&kb.1)).then(b.capacity.unwrap_or(0.0).total_cmp(&a.capacity.unwrap_or(0.0)))
    })
}

#[allow(clippy::too_many_arguments)]
pub fn assemble(
    a: &PlanArgs,
    spec: &ModelSpec,
    load: Load,
    slos: &[Slo],
    eff: &Efficiencies,
    (mean_in, mean_out): (f64, f64),
    rows: Vec<Row>,
    error_bar: &str,
) -> Plan {
    let slo_text: Vec<String> = slos.iter().map(|s| s.to_string()).collect();
    let answer = match best(&rows) {
        Some(r) => format!(
            "To serve {} of {} ({:.0} tokens in, {:.0} out on average) within {} you need {}× {} (TP{}, {} replica{}); the binding limit is {} above {} {} per replica ({:.0} output tok/s there), sized with {:.0} % headroom{}. Error bar: {}.",
            load_text(load),
            a.scenario,
            mean_in,
            mean_out,
            slo_text.join(", "),
            r.gpus.unwrap_or(0),
            r.gpu,
            r.tp,
            r.replicas.unwrap_or(0),
            if r.replicas == Some(1) { "" } else { "s" },
            r.bound,
            fmt_cap(r.capacity),
            unit(load),
            r.capacity_output_tps.unwrap_or(0.0),
            a.headroom * 100.0,
            r.cost_per_hour.map_or(String::new(), |c| format!(", at ${c:.2}/hour")),
            error_bar,
        ),
        None => format!(
            "No configuration tried serves {} of {} with {} within {}: see why per row.",
            load_text(load),
            a.scenario,
            spec.name,
            slo_text.join(", ")
        ),
    };
    let assumptions = vec![
        format!(
            "Step time = max(weights + KV read ÷ (bandwidth × {:.2}), FLOPs ÷ (dense peak × {:.2}; attention × {:.2})) + all-reduces (ring, link × {:.2}, {:.0} µs each) + {:.0} µs per step ({}).",
            eff.memory, eff.compute, eff.attention, eff.link, eff.allreduce_latency_s * 1e6, eff.step_overhead_s * 1e6, eff.source
        ),
        format!(
            "Memory: {:.0} % of the GPU for the engine; weights in {}; activations of one {}-token step reserved; the rest is KV.",
            a.memory_utilization * 100.0,
            a.dtype,
            a.max_num_batched_tokens
        ),
        format!(
            "Each replica runs continuous batching with {} batched tokens, {} sequences, blocks of {} and prefix caching (goodput's scheduler, simulated with {} measured requests per level).",
            a.max_num_batched_tokens, a.max_num_seqs, a.block_size, a.requests
        ),
        "Datasheet figures from hardware.toml (dense, no sparsity); load balanced evenly over replicas.".into(),
    ];
    Plan {
        model: spec.name.clone(),
        scenario: a.scenario.clone(),
        load,
        slos: slo_text,
        dtype: a.dtype,
        headroom: a.headroom,
        efficiencies: eff.clone(),
        mean_input_tokens: mean_in,
        mean_output_tokens: mean_out,
        rows,
        answer,
        assumptions,
    }
}

fn fmt_cap(c: Option<f64>) -> String {
    c.map_or("-".into(), |c| if c >= 10.0 { format!("{c:.0}") } else { format!("{c:.2}") })
}

fn cells(r: &Row, load: Load) -> Vec<String> {
    let opt = |x: Option<f64>, d: usize| x.map_or("-".into(), |x| table::f(x, d));
    vec![
        r.gpu.clone(),
        r.tp.to_string(),
        table::f(r.weight_gb_per_gpu, 1),
        if r.kv_tokens > 0 { format!("{} ({:.0} seqs)", r.kv_tokens, r.kv_sequences) } else { "-".into() },
        match (r.capacity_other, load) {
            (Some(o), Load::Rate(_)) => format!("{} {} (≈{o:.0} in flight)", fmt_cap(r.capacity), unit(load)),
            (Some(o), Load::Users(_)) => format!("{} {} ({o:.2} req/s)", fmt_cap(r.capacity), unit(load)),
            (None, _) => format!("{} {}", fmt_cap(r.capacity), unit(load)),
        },
        r.unfit.clone().unwrap_or_else(|| r.bound.clone()),
        r.replicas.map_or("-".into(), |x| x.to_string()),
        r.gpus.map_or("-".into(), |x| x.to_string()),
        opt(r.cost_per_hour, 2),
        opt(r.cost_per_million_output_tokens, 3),
    ]
}

const HEADER: [&str; 10] = [
    "GPU",
    "TP",
    "weights GB/GPU",
    "KV tokens",
    "usable / replica",
    "bound (or why not)",
    "replicas",
    "GPUs",
    "$/hour",
    "$/M out tok",
];

pub fn print(p: &Plan) {
    let mut t = table::new(&HEADER);
    for r in &p.rows {
        t.add_row(cells(r, p.load));
    }
    println!(
        "Plan: {} for {} of {} ({}), SLOs {}\n{t}",
        p.model,
        load_text(p.load),
        p.scenario,
        p.dtype,
        p.slos.join(", ")
    );
    println!("{}", p.answer);
    for a in &p.assumptions {
        println!("  - {a}");
    }
}

/// The plan as one self-contained page (no scripts), in the report's manner: the answer
/// first, then the table, then the assumptions.
pub fn html(p: &Plan) -> String {
    let head: String = HEADER.iter().map(|h| format!("<th>{}</th>", escape(h))).collect();
    let rows: String = p
        .rows
        .iter()
        .map(|r| {
            let class = if r.gpus.is_some() { "" } else { " class=\"unfit\"" };
            let tds: String = cells(r, p.load).iter().map(|c| format!("<td>{}</td>", escape(c))).collect();
            format!("<tr{class}>{tds}</tr>\n")
        })
        .collect();
    let assumptions: String = p.assumptions.iter().map(|a| format!("<li>{}</li>", escape(a))).collect();
    format!(
        r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>goodput plan: {model}</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 1100px; margin: 2em auto; color: #222; }}
.answer {{ font-size: 1.1em; background: #f3f7fb; border-left: 4px solid #2b6cb0; padding: 0.8em 1em; }}
table {{ border-collapse: collapse; width: 100%; font-size: 0.9em; }}
th, td {{ border-bottom: 1px solid #ddd; padding: 0.3em 0.5em; text-align: right; }}
th:first-child, td:first-child, td:nth-child(6) {{ text-align: left; }}
tr.unfit td {{ color: #999; }}
</style></head><body>
<h1>{model}: {load} of {scenario}</h1>
<p class="answer">{answer}</p>
<h2>Every configuration</h2>
<table><thead><tr>{head}</tr></thead><tbody>
{rows}</tbody></table>
<h2>Assumptions</h2><ul>{assumptions}</ul>
<p>SLOs: {slos}. Generated by goodput {version}.</p>
</body></html>
"#,
        model = escape(&p.model),
        load = escape(&load_text(p.load)),
        scenario = escape(&p.scenario),
        answer = escape(&p.answer),
        slos = escape(&p.slos.join(", ")),
        version = env!("CARGO_PKG_VERSION"),
    )
}
