//! What every chart of a run shares: [`Ctx`] (its levels, unit, title words, axis) and the
//! helpers that turn levels into series. The chart builders (`charts`, `timelines`,
//! `predicted`) take these from here, never from each other: this module imports none of them.

use super::svg::{Chart, Kind, Series};
use goodput_metrics::Summary;
use goodput_results::{LevelReport, LoadUnit, RunSummary};

pub fn series(name: &str, points: Vec<(f64, f64)>) -> Series {
    Series { name: name.into(), points, right: false, emphasis: false }
}

pub fn right(name: &str, points: Vec<(f64, f64)>) -> Series {
    Series { right: true, ..series(name, points) }
}

/// `(load, value × scale)` of every level where `get` has a value.
pub fn by_load(levels: &[LevelReport], scale: f64, get: impl Fn(&LevelReport) -> Option<f64>) -> Vec<(f64, f64)> {
    levels.iter().filter_map(|l| Some((l.summary.load, get(l)? * scale))).collect()
}

pub fn stat(s: &Option<Summary>, f: fn(&Summary) -> f64) -> Option<f64> {
    s.as_ref().map(f)
}

/// What every chart of a run shares: its levels, unit, title words and capacity marks.
pub struct Ctx<'a> {
    pub levels: &'a [LevelReport],
    x_label: String,
    workload: String,
    pub unit: String,
    log2: bool,
}

impl<'a> Ctx<'a> {
    /// The context of a run's charts: x in its load unit, on a log2 axis for a doubling sweep.
    pub fn of(s: &'a RunSummary) -> Self {
        let loads: Vec<f64> = s.levels.iter().map(|l| l.summary.load).collect();
        Ctx {
            levels: &s.levels,
            x_label: format!("load ({})", s.load_unit),
            workload: format!("{}, {}", s.model, s.workload.name),
            unit: s.load_unit.to_string(),
            log2: LoadUnit::doubling(&loads),
        }
    }

    pub fn chart(
        &self,
        id: &str,
        title: &str,
        caption: String,
        y_label: &str,
        kind: Kind,
        series: Vec<Series>,
    ) -> Chart {
        Chart {
            id: id.into(),
            title: title.into(),
            caption: format!("{}: {caption}", self.workload),
            x_label: self.x_label.clone(),
            x_log2: self.log2,
            y_label: y_label.into(),
            y2_label: None,
            kind,
            series,
            marks: Vec::new(),
            limits: Vec::new(),
        }
    }
}
