//! The interactivity curve's table and page (`goodput_sizing::plan::curve` computes it):
//! every simulated level, then the answer and assumptions; on the page, throughput per GPU
//! against tokens per second per user and against TTFT P95, with their frontiers.

use super::answer::{assumptions_html, page, table_html};
use crate::console as table;
use crate::html::svg::{self, Chart, Series};
use goodput_sizing::plan::curve::{Curve, Point};

const HEADER: [&str; 11] = [
    "GPU",
    "layout",
    "users",
    "out tok/s/GPU",
    "total tok/s/GPU",
    "tok/s/user",
    "TTFT P95 s",
    "$/M out tok",
    "SLOs",
    "frontier",
    "cost frontier",
];

fn cells(p: &Point) -> Vec<String> {
    vec![
        p.gpu.clone(),
        p.layout.clone(),
        p.users.to_string(),
        table::f(p.output_tps_per_gpu, 0),
        table::f(p.total_tps_per_gpu, 0),
        table::f(p.tps_per_user, 1),
        table::f(p.ttft_p95_s, 2),
        p.cost_per_million_output_tokens.map_or("-".into(), |c| table::f(c, 3)),
        if p.slos_hold { "hold" } else { "miss" }.into(),
        if p.frontier { "◆" } else { "" }.into(),
        if p.cost_frontier { "◆" } else { "" }.into(),
    ]
}

/// The curve on the console: its table, the configurations that cannot run, the answer and
/// the assumptions.
pub fn text(c: &Curve) -> String {
    let mut t = table::new(&HEADER);
    for p in &c.points {
        t.add_row(cells(p));
    }
    let mut out = format!("Interactivity curve: {} on {}, SLOs {}\n{t}\n", c.model, c.scenario, c.slos.join(", "));
    for (g, l, why) in &c.unfit {
        out += &format!("  {g} {l}: {why}\n");
    }
    out += &c.answer;
    for a in &c.assumptions {
        out += &format!("\n  - {a}");
    }
    out
}

/// One line per configuration, and the frontier.
fn chart(c: &Curve, id: &str, x_label: &str, x_log2: bool, x: fn(&Point) -> f64, on: fn(&Point) -> bool) -> Chart {
    let mut series: Vec<Series> = Vec::new();
    for p in &c.points {
        let name = format!("{} {}", p.gpu, p.layout);
        match series.iter_mut().find(|s| s.name == name) {
            Some(s) => s.points.push((x(p), p.output_tps_per_gpu)),
            None => {
                series.push(Series { name, points: vec![(x(p), p.output_tps_per_gpu)], right: false, emphasis: false })
            }
        }
    }
    let mut frontier: Vec<(f64, f64)> =
        c.points.iter().filter(|p| on(p)).map(|p| (x(p), p.output_tps_per_gpu)).collect();
    frontier.sort_by(|a, b| a.0.total_cmp(&b.0));
    series.push(Series { name: "Pareto frontier".into(), points: frontier, right: false, emphasis: true });
    Chart {
        x_log2,
        ..Chart::lines(
            id,
            &format!("Output tok/s per GPU against {x_label}"),
            "Each line one configuration, concurrency doubling along it; the frontier joins the points no other beats on both axes.".into(),
            (x_label, "output tok/s per GPU"),
            series,
        )
    }
}

/// The curve as one self-contained page.
pub fn html(c: &Curve) -> Result<String, crate::ReportError> {
    let interactivity =
        svg::svg(&chart(c, "interactivity", "tok/s per user", false, |p| p.tps_per_user, |p| p.frontier))?;
    // TTFT spans milliseconds to the minutes of an overloaded level: a log axis.
    let ttft = svg::svg(&chart(c, "ttft", "TTFT P95 (s, log scale)", true, |p| p.ttft_p95_s, |p| p.ttft_frontier))?;
    let rows = c.points.iter().map(|p| (String::new(), cells(p)));
    let body = format!(
        "{interactivity}\n{ttft}\n<h2>Every level</h2>\n{}\n{}",
        table_html(&HEADER, rows),
        assumptions_html(&c.assumptions)
    );
    Ok(page(
        &format!("goodput plan --curve: {}", c.model),
        &format!("{}: throughput per GPU against interactivity ({})", c.model, c.scenario),
        &c.answer,
        "",
        &body,
        &c.slos,
    ))
}
