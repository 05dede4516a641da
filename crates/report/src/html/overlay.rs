//! Many runs on one page (`goodput report A B C … -o page.html`, or a config matrix's
//! directory): each run one series on shared axes — output throughput against load (the
//! capacity curves), TTFT and TPOT P95 against load, and the Pareto chart the field reads
//! since InferenceMAX: output tokens per second per GPU against tokens per second per user,
//! each run's levels as its line and the frontier across all of them marked; then a table of
//! the runs with their capacity verdicts. Runs are told apart by their labels (a matrix run's
//! values, else its directory).

use super::context::{by_load, series, stat};
use super::svg::{Chart, Series};
use super::{escape, STYLE};
use crate::text::num;
use crate::ReportError;
use goodput_metrics::Summary;
use goodput_results::outcome::{most_text, RunOutcome};
use goodput_results::{LevelReport, RunSummary};

/// One run of the page: how it is named there, and its summary.
pub struct Labeled<'a> {
    pub label: String,
    pub summary: &'a RunSummary,
}

/// The overlay's charts: capacity, TTFT P95 and TPOT P95 against load, and the Pareto chart
/// with `gpus` GPUs behind each run (throughput per GPU = output tok/s ÷ `gpus`).
pub fn charts(runs: &[Labeled], gpus: f64) -> Vec<Chart> {
    let units: Vec<String> = runs.iter().map(|r| r.summary.load_unit.to_string()).collect();
    let x_label = if units.windows(2).all(|w| w[0] == w[1]) {
        format!("load ({})", units.first().map_or("", String::as_str))
    } else {
        "load (each run's own unit)".into()
    };
    let chart = |id: &str, title: &str, caption: String, y: &str, series: Vec<Series>| {
        Chart::lines(id, title, caption, (&x_label, y), series)
    };
    let per_run = |get: &dyn Fn(&LevelReport) -> Option<f64>, scale: f64| -> Vec<Series> {
        runs.iter().map(|r| series(&r.label, by_load(&r.summary.levels, scale, get))).collect()
    };
    let p95 = |get: fn(&LevelReport) -> &Option<Summary>| move |l: &LevelReport| stat(get(l), |x: &Summary| x.p95);
    let mut out = vec![
        chart(
            "overlay-capacity",
            "Output throughput vs load, per run",
            "output tokens per second over each level's measured window, one line per run.".into(),
            "tok/s",
            per_run(&|l| Some(l.summary.output_throughput), 1.0),
        ),
        chart(
            "overlay-ttft",
            "TTFT P95 vs load, per run",
            "TTFT P95 in ms over each level's measured requests, one line per run.".into(),
            "ms",
            per_run(&p95(|l| &l.summary.ttft), 1e3),
        ),
        chart(
            "overlay-tpot",
            "TPOT P95 vs load, per run",
            "TPOT P95 in ms over each level's measured requests, one line per run.".into(),
            "ms",
            per_run(&p95(|l| &l.summary.tpot), 1e3),
        ),
    ];
    out.push(pareto(runs, gpus));
    out
}

/// Output tok/s per GPU (y) against each level's median tok/s per user (x), one line per run
/// through its levels, and the frontier across every run's levels.
fn pareto(runs: &[Labeled], gpus: f64) -> Chart {
    let point = |l: &LevelReport| {
        let user = l.summary.per_user_tps.as_ref().map(|x| x.p50)?;
        Some((user, l.summary.output_throughput / gpus))
    };
    let mut series: Vec<Series> = runs
        .iter()
        .map(|r| super::context::series(&r.label, r.summary.levels.iter().filter_map(point).collect()))
        .collect();
    let all: Vec<(f64, f64)> = series.iter().flat_map(|s| s.points.iter().copied()).collect();
    let frontier = super::context::series("Pareto frontier", goodput_metrics::pareto::frontier(&all));
    series.push(Series { emphasis: true, ..frontier });
    let per = if gpus == 1.0 {
        "per GPU (one GPU a run; --gpus N divides)".to_string()
    } else {
        format!("per GPU ({gpus} a run)")
    };
    Chart::lines(
        "overlay-pareto",
        "Throughput per GPU vs tokens per second per user",
        format!(
            "each run's levels as a line (one point a level): output tok/s {per} against the median of each request's \
             output tok/s; the last line is the Pareto frontier across every run: no other point gives both more \
             throughput per GPU and more speed per user."
        ),
        ("output tok/s per user (P50)", "output tok/s per GPU"),
        series,
    )
}

/// The runs' table: label, model, scenario, target, levels, usable capacity ("at least" where
/// nothing broke) and what bound it, limit capacity, and the highest output throughput
/// measured; then the run that serves the most within its SLOs.
fn table(runs: &[Labeled]) -> String {
    let mut t = String::from(
        "<table id=\"runs\"><tr><th class=\"l\">run</th><th class=\"l\">model</th><th class=\"l\">scenario</th><th class=\"l\">target</th><th>levels</th><th>usable</th><th class=\"l\">bound by</th><th>limit</th><th>best out tok/s</th></tr>\n",
    );
    let outcomes: Vec<RunOutcome> = runs.iter().map(|r| RunOutcome::of(r.summary)).collect();
    for (r, o) in runs.iter().zip(&outcomes) {
        let s = r.summary;
        let limit = s.verdict().limit.map_or("none".to_string(), |x| format!("{x} {}", s.load_unit));
        let best = s.levels.iter().map(|l| l.summary.output_throughput).fold(f64::NAN, f64::max);
        t.push_str(&format!(
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td></tr>\n",
            escape(&r.label),
            escape(&s.model),
            escape(&s.workload.name),
            escape(&s.target),
            s.levels.len(),
            escape(&o.usable_text()),
            escape(&if o.bound.is_empty() { "-".to_string() } else { o.bound.join(", ") }),
            limit,
            num(Some(best), 0)
        ));
    }
    let line = most_text(runs.iter().map(|r| r.label.as_str()).zip(&outcomes));
    t + "</table>\n<p id=\"most\">" + &escape(&line) + "</p>\n"
}

/// The page of many runs.
pub fn page(runs: &[Labeled], gpus: f64) -> Result<String, ReportError> {
    let charts = charts(runs, gpus);
    let mut page = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>goodput report: {} runs</title><style>{STYLE}</style></head><body>\n<h1>goodput report: {} runs</h1>\n",
        runs.len(),
        runs.len()
    );
    page.push_str("<h2 id=\"runs-table\">Runs</h2>\n");
    page.push_str(&table(runs));
    page.push_str("<h2 id=\"charts\">Charts</h2>\n");
    for c in &charts {
        page.push_str(&format!(
            "<figure id=\"{}\">\n{}\n<figcaption>{}</figcaption>\n</figure>\n",
            c.id,
            super::svg::svg(c)?,
            escape(&c.caption)
        ));
    }
    let data = serde_json::to_string(&charts)?.replace("</", "<\\/");
    page.push_str(&format!("<script type=\"application/json\" id=\"chart-data\">{data}</script>\n</body></html>\n"));
    Ok(page)
}

#[cfg(test)]
mod tests {
    use super::*;
    use goodput_results::testing::two_levels;

    #[test]
    fn each_run_is_a_series_and_the_frontier_spans_them() {
        let (a, _) = two_levels();
        let mut b = a.clone();
        for l in &mut b.levels {
            l.summary.output_throughput *= 2.0;
        }
        let runs = [Labeled { label: "a".into(), summary: &a }, Labeled { label: "b, x=1".into(), summary: &b }];
        let charts = charts(&runs, 2.0);
        let ids: Vec<&str> = charts.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["overlay-capacity", "overlay-ttft", "overlay-tpot", "overlay-pareto"]);
        let cap = &charts[0];
        assert_eq!(cap.series.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["a", "b, x=1"]);
        assert_eq!(cap.series[1].points[0].1, 2.0 * cap.series[0].points[0].1);
        // Run b doubles a's throughput at every level: the frontier is b's points alone,
        // per GPU (÷ 2), by speed per user.
        let pareto = &charts[3];
        let frontier = &pareto.series[2];
        assert_eq!(frontier.name, "Pareto frontier");
        let mut b_points: Vec<(f64, f64)> = pareto.series[1].points.clone();
        b_points.sort_by(|x, y| x.0.total_cmp(&y.0));
        let b_front: Vec<(f64, f64)> = b_points
            .iter()
            .copied()
            .filter(|p| !b_points.iter().any(|q| goodput_metrics::pareto::dominates(*q, *p)))
            .collect();
        assert_eq!(frontier.points, b_front);
        for (l, p) in b.levels.iter().zip(&pareto.series[1].points) {
            assert_eq!(p.1, l.summary.output_throughput / 2.0);
        }
        let page = page(&runs, 2.0).unwrap();
        assert!(page.contains("<td class=\"l\">b, x=1</td>") && page.matches("<svg").count() == 4, "{page}");
        // The run that serves the most is named under the table, by the same outcome as a matrix's summary.
        let usable = RunOutcome::of(&a).usable_text();
        assert!(
            page.contains("<p id=\"most\">Most usable capacity: ") || page.contains("none is shown usable"),
            "{page}"
        );
        assert!(page.contains(&format!("<td>{}</td>", escape(&usable))), "{page}");
    }
}
