//! The fleet plan's table and page (`goodput_sizing::plan::fleet` simulates it): each
//! router's run of the trace, the trace hour by hour, and on the page the hourly share within
//! the SLOs and the replicas through the trace where an autoscaler moved them.

use super::answer::{page, table_html};
use crate::console as table;
use crate::html::svg::{self, Chart, Kind, Series};
use goodput_sizing::plan::fleet::FleetPlan;
use goodput_sizing::plan::replay::PolicyRun;

/// The fleet plan on the console: each router's run, the trace by hour behind the first,
/// the simulation's speed and the answer.
pub fn text(p: &FleetPlan) -> String {
    let mut t = table::new(&[
        "router",
        "requests",
        "met SLOs",
        "GPU-hours",
        "peak GPUs",
        "prefix hits",
        "TTFT P95 s",
        "E2E P95 s",
        "replica shares",
    ]);
    for r in &p.runs {
        let (lo, hi) = r.replica_shares.iter().fold((1.0f64, 0.0f64), |(l, h), &s| (l.min(s), h.max(s)));
        t.add_row(vec![
            r.router.clone(),
            r.requests.to_string(),
            format!("{:.1} %", r.good as f64 / r.requests.max(1) as f64 * 100.0),
            table::f(r.gpu_hours, 2),
            r.peak_gpus.to_string(),
            r.prefix_hit_rate.map_or("-".into(), |h| format!("{:.1} %", h * 100.0)),
            r.ttft_p95_s.map_or("-".into(), |x| table::f(x, 2)),
            r.e2e_p95_s.map_or("-".into(), |x| table::f(x, 2)),
            format!("{:.1}–{:.1} %", lo * 100.0, hi * 100.0),
        ]);
    }
    let mut out = format!(
        "Fleet plan: {} on {} {}, trace {}, SLOs {}\n{t}\n",
        p.model,
        p.gpu,
        p.layout,
        p.trace,
        p.slos.join(", ")
    );
    if let Some(first) = p.runs.first().filter(|r| r.hours.len() > 1) {
        let mut h = table::new(&["hour", "requests", "met SLOs"]);
        for (i, (n, good)) in first.hours.iter().enumerate() {
            h.add_row(vec![
                i.to_string(),
                n.to_string(),
                format!("{:.1} %", *good as f64 / (*n).max(1) as f64 * 100.0),
            ]);
        }
        out += &format!("By hour, behind {}:\n{h}\n", first.router);
    }
    let speed = |r: &PolicyRun| {
        let rate = r.requests as f64 / r.wall_s.max(1e-9);
        format!("{} in {:.1} s ({rate:.0} requests/s)", r.router, r.wall_s)
    };
    out += &format!("Simulated on this machine: {}.\n", p.runs.iter().map(speed).collect::<Vec<_>>().join("; "));
    out + &p.answer
}

/// The hour-by-hour chart: requests within the SLOs (percent) behind each router, and the
/// requests of each hour.
fn hourly_chart(p: &FleetPlan) -> Chart {
    let mut series: Vec<Series> = p
        .runs
        .iter()
        .map(|r| Series {
            name: format!("{}: met SLOs (%)", r.router),
            points: r
                .hours
                .iter()
                .enumerate()
                .map(|(h, (n, g))| (h as f64, *g as f64 / (*n).max(1) as f64 * 100.0))
                .collect(),
            right: false,
            emphasis: false,
        })
        .collect();
    if let Some(r) = p.runs.first() {
        let points = r.hours.iter().enumerate().map(|(h, (n, _))| (h as f64, *n as f64)).collect();
        series.push(Series { name: "requests in the hour".into(), points, right: true, emphasis: false });
    }
    Chart {
        id: "hourly".into(),
        title: "Requests within the SLOs, hour by hour".into(),
        caption:
            "Each router's share of the hour's requests that met every SLO (left), and the hour's requests (right)."
                .into(),
        x_label: "hour of the trace".into(),
        x_log2: false,
        y_label: "met SLOs (%)".into(),
        y2_label: Some("requests".into()),
        kind: Kind::Lines,
        series,
        marks: Vec::new(),
        limits: Vec::new(),
    }
}

/// The fleet's size through the trace behind each autoscaled router: a step at each of the
/// autoscaler's changes. `None` when nothing scaled.
fn replicas_chart(p: &FleetPlan) -> Option<Chart> {
    let series: Vec<Series> = p
        .runs
        .iter()
        .filter(|r| !r.scale_events.is_empty())
        .map(|r| {
            let mut points = vec![(0.0, p.replicas as f64)];
            let mut now = p.replicas as f64;
            for e in &r.scale_events {
                let h = e.at_s / 3600.0;
                points.extend([(h, now), (h, e.replicas as f64)]);
                now = e.replicas as f64;
            }
            let end = (r.hours.len() as f64).max(points.last().map_or(0.0, |p| p.0));
            points.push((end, now));
            Series { name: format!("{}: replicas", r.router), points, right: false, emphasis: false }
        })
        .collect();
    (!series.is_empty()).then(|| Chart {
        id: "replicas".into(),
        title: "Replicas through the trace".into(),
        caption: "Replicas serving or starting after each of the autoscaler's changes (its scale events), behind each router."
            .into(),
        x_label: "hour of the trace".into(),
        x_log2: false,
        y_label: "replicas".into(),
        y2_label: None,
        kind: Kind::Lines,
        series,
        marks: Vec::new(),
        limits: Vec::new(),
    })
}

/// The fleet plan as one self-contained page: the answer, the routers' table, the hourly
/// chart, and the replicas through the trace when an autoscaler changed them.
/// The fleet plan as one self-contained page.
pub fn html(p: &FleetPlan) -> Result<String, crate::ReportError> {
    let mut chart = svg::svg(&hourly_chart(p))?;
    if let Some(replicas) = replicas_chart(p) {
        chart = format!("{chart}\n{}", svg::svg(&replicas)?);
    }
    let head = ["router", "requests", "met SLOs", "GPU-hours", "peak GPUs", "prefix hits"];
    let rows = p.runs.iter().map(|r| {
        let cells = vec![
            r.router.clone(),
            r.requests.to_string(),
            format!("{:.1} %", r.good as f64 / r.requests.max(1) as f64 * 100.0),
            format!("{:.2}", r.gpu_hours),
            r.peak_gpus.to_string(),
            r.prefix_hit_rate.map_or("-".into(), |h| format!("{:.1} %", h * 100.0)),
        ];
        (String::new(), cells)
    });
    let body = format!("{}\n{chart}", table_html(&head, rows));
    Ok(page(
        &format!("goodput fleet plan: {}", p.model),
        &format!("{} on {} {}: {}", p.model, p.gpu, p.layout, p.trace),
        &p.answer,
        "",
        &body,
        &p.slos,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use goodput_sizing::fleet::autoscale::ScaleEvent;

    #[test]
    fn the_page_steps_the_replicas_at_each_scale_event() {
        let events = vec![
            ScaleEvent { at_s: 1800.0, replicas: 6, value: 20.0 },
            ScaleEvent { at_s: 5400.0, replicas: 3, value: 5.0 },
        ];
        let scaled = PolicyRun {
            router: "round-robin".into(),
            hours: vec![(10, 10); 2],
            scale_events: events,
            ..PolicyRun::default()
        };
        let fixed = PolicyRun { router: "least-loaded".into(), hours: vec![(10, 10); 2], ..PolicyRun::default() };
        let mut plan = FleetPlan {
            model: "m".into(),
            gpu: "g".into(),
            layout: "TP1".into(),
            trace: "t".into(),
            replicas: 4,
            autoscale: None,
            slos: Vec::new(),
            runs: vec![scaled, fixed],
            answer: String::new(),
        };
        let chart = replicas_chart(&plan).unwrap();
        assert_eq!(chart.series.len(), 1, "only the run that scaled");
        assert_eq!(chart.series[0].points, [(0.0, 4.0), (0.5, 4.0), (0.5, 6.0), (1.5, 6.0), (1.5, 3.0), (2.0, 3.0)]);
        let page = html(&plan).unwrap();
        assert!(page.contains("Replicas through the trace"), "{page}");
        plan.runs.remove(0);
        assert!(replicas_chart(&plan).is_none());
        assert!(!html(&plan).unwrap().contains("Replicas through the trace"));
    }
}
