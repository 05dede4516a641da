//! A plan's table and page (`goodput_sizing::plan::answer` writes its answer): every
//! configuration's row, then the answer and its assumptions, on the console or as one
//! self-contained HTML page; the page's frame and tables serve the curve's and the fleet's
//! pages too.

use crate::console as table;
use crate::html::escape;
use goodput_sizing::plan::answer::{best, best_per_gpu, dtype_text, fmt_cap, load_text, unit};
use goodput_sizing::plan::search::Load;
use goodput_sizing::plan::{Plan, Row};

fn cells(r: &Row, load: Load) -> Vec<String> {
    let opt = |x: Option<f64>, d: usize| x.map_or("-".into(), |x| table::f(x, d));
    vec![
        r.gpu.clone(),
        dtype_text(r),
        r.layout_label.clone(),
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
        opt(r.cost_per_million_tokens, 3),
    ]
}

const HEADER: [&str; 12] = [
    "GPU",
    "weights",
    "layout",
    "weights GB/GPU",
    "KV tokens",
    "usable / replica",
    "bound (or why not)",
    "replicas",
    "GPUs",
    "$/hour",
    "$/M out tok",
    "$/M all tok",
];

/// A row never simulated: the model does not fit it, or its GPU cannot run its dtype.
fn never_ran(r: &Row) -> bool {
    r.unfit.is_some() && r.kv_tokens == 0
}

/// The plan on the console: the answer first — the best layout of each GPU (★ the pick) and
/// the answer in words — then the table of the configurations simulated (`all`: every one,
/// those that do not fit too), and the assumptions.
pub fn text(p: &Plan, all: bool) -> String {
    let weights = if p.try_dtypes {
        "as each GPU serves them best (see the assumptions)".to_string()
    } else {
        p.dtype.to_string()
    };
    let mut out = format!(
        "Plan: {} for {} of {} ({:.0} tokens in, {:.0} out on average)\nSLOs {}; weights {weights}\n",
        p.model,
        load_text(p.load),
        p.scenario,
        p.mean_input_tokens,
        p.mean_output_tokens,
        p.slos.join(", ")
    );
    out += &format!("Best layout per GPU, picked by {}:\n", p.criterion);
    let pick = best(&p.rows);
    for (gpu, b) in best_per_gpu(&p.rows) {
        let star = if b.is_some() && b.map(|b| (&b.gpu, b.dtype, b.layout)) == pick.map(|b| (&b.gpu, b.dtype, b.layout))
        {
            "★"
        } else {
            " "
        };
        out += &format!("  {star} {gpu:<10} {}\n", best_line(p, gpu, b));
    }
    out += &p.answer;
    let shown: Vec<&Row> = p.rows.iter().filter(|r| all || !never_ran(r)).collect();
    let mut t = table::new(&HEADER);
    for r in &shown {
        t.add_row(cells(r, p.load));
    }
    out += &format!("\n{t}");
    let left_out = p.rows.len() - shown.len();
    if left_out > 0 {
        out += &format!(
            "\n{left_out} of {} configurations do not fit and are left out (--all lists them, with why).",
            p.rows.len()
        );
    }
    if p.skipped > 0 {
        out += &format!(
            "\n{} larger layouts were not simulated: a replica of them alone holds more GPUs than a smaller layout of the same GPU needs in all (--all simulates them).",
            p.skipped
        );
    }
    for a in &p.assumptions {
        out += &format!("\n  - {a}");
    }
    out
}

/// One GPU's best configuration in a line: dtype, layout × replicas, GPUs, capacity, what
/// binds it and the two largest shares of a step's time; or why none of its rows serves the
/// load.
fn best_line(p: &Plan, gpu: &str, b: Option<&Row>) -> String {
    let Some(r) = b else {
        // The last row tried (the largest layout of the last dtype) is the nearest to serving.
        let why = p.rows.iter().rev().find(|r| r.gpu == gpu).and_then(|r| r.unfit.clone()).unwrap_or_default();
        return format!("none serves it: {why}");
    };
    // Where a step's time goes, its two largest shares.
    let step = r.step.as_ref().map_or(String::new(), |s| format!("; {}", s.largest_shares(2)));
    let w = p.rows.iter().map(|r| dtype_text(r).len()).max().unwrap_or(4);
    let gpus = r.gpus.unwrap_or(0);
    format!(
        "{:<w$} {} ×{} = {gpus} GPU{}, {} {} each, bound by {}{step}",
        dtype_text(r),
        r.layout_label,
        r.replicas.unwrap_or(0),
        if gpus == 1 { "" } else { "s" },
        fmt_cap(r.capacity),
        unit(p.load),
        without_parentheses(&r.bound)
    )
}

/// `throughput (at 12.8 req/s offered, 10.8 completed)` as `throughput`: what binds, its
/// figures left to the answer and the table.
fn without_parentheses(s: &str) -> String {
    let mut depth = 0usize;
    let kept: String = s
        .chars()
        .filter(|&c| {
            let keep = depth == 0 && c != '(';
            depth = match c {
                '(' => depth + 1,
                ')' => depth.saturating_sub(1),
                _ => depth,
            };
            keep && c != ')'
        })
        .collect();
    kept.split(',').map(str::trim).filter(|p| !p.is_empty()).collect::<Vec<_>>().join(", ")
}

/// One of the plan's self-contained pages (no scripts): the title, the heading and the answer
/// (plain text, escaped here), then `body` (HTML), then the SLOs and goodput's version.
/// `css` adds rules of the page's own.
pub fn page(title: &str, heading: &str, answer: &str, css: &str, body: &str, slos: &[String]) -> String {
    format!(
        r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 1100px; margin: 2em auto; color: #222; }}
.answer {{ font-size: 1.1em; background: #f3f7fb; border-left: 4px solid #2b6cb0; padding: 0.8em 1em; }}
table {{ border-collapse: collapse; width: 100%; font-size: 0.9em; }}
th, td {{ border-bottom: 1px solid #ddd; padding: 0.3em 0.5em; text-align: right; }}
{css}
</style></head><body>
<h1>{heading}</h1>
<p class="answer">{answer}</p>
{body}
<p>SLOs: {slos}. Generated by goodput {version}.</p>
</body></html>
"#,
        title = escape(title),
        heading = escape(heading),
        answer = escape(answer),
        slos = escape(&slos.join(", ")),
        version = env!("CARGO_PKG_VERSION"),
    )
}

/// A table of plain-text cells (escaped here); each row with its `<tr>` attributes.
pub fn table_html(head: &[&str], rows: impl Iterator<Item = (String, Vec<String>)>) -> String {
    let th: String = head.iter().map(|h| format!("<th>{}</th>", escape(h))).collect();
    let trs: String = rows
        .map(|(attrs, cells)| {
            let tds: String = cells.iter().map(|c| format!("<td>{}</td>", escape(c))).collect();
            format!("<tr{attrs}>{tds}</tr>\n")
        })
        .collect();
    format!("<table><thead><tr>{th}</tr></thead><tbody>\n{trs}</tbody></table>")
}

/// Assumptions as a list under their heading.
pub fn assumptions_html(items: &[String]) -> String {
    let li: String = items.iter().map(|a| format!("<li>{}</li>", escape(a))).collect();
    format!("<h2>Assumptions</h2><ul>{li}</ul>")
}

/// The plan as one self-contained page: the answer first, then the table, then the
/// assumptions.
pub fn html(p: &Plan) -> String {
    let rows = p.rows.iter().map(|r| {
        let class = if r.gpus.is_some() { "" } else { " class=\"unfit\"" };
        (class.to_string(), cells(r, p.load))
    });
    let pick = best(&p.rows).map(|b| (b.gpu.clone(), b.dtype, b.layout));
    let per_gpu = best_per_gpu(&p.rows).into_iter().map(|(gpu, b)| {
        let star = if b.map(|b| (b.gpu.clone(), b.dtype, b.layout)) == pick && pick.is_some() { "★ " } else { "" };
        (String::new(), vec![format!("{star}{gpu}"), best_line(p, gpu, b)])
    });
    let body = format!(
        "<h2 id=\"best\">Best layout per GPU</h2>\n<p>Picked by {}.</p>\n{}\n<h2>Every configuration</h2>\n{}\n{}",
        escape(&p.criterion),
        table_html(
            &["GPU", "best layout: weights, layout × replicas, capacity, what binds it, where a step's time goes"],
            per_gpu
        ),
        table_html(&HEADER, rows),
        assumptions_html(&p.assumptions)
    );
    page(
        &format!("goodput plan: {}", p.model),
        &format!("{}: {} of {}", p.model, load_text(p.load), p.scenario),
        &p.answer,
        "th:first-child, td:first-child, td:nth-child(6) { text-align: left; }\ntr.unfit td { color: #999; }",
        &body,
        &p.slos,
    )
}
