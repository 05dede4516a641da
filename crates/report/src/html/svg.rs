//! A chart of the report: its data (kept as JSON beside the drawing) and its SVG, drawn with
//! plotters' SVG backend — lines with optional right axis, stacked bands, or a timeline of
//! bars — with vertical marks (knee, capacities) and horizontal limits (SLOs). Knows nothing
//! of runs (what a chart shows is decided by the `charts` module) and imports none of its
//! siblings.

use crate::ReportError;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde::Serialize;

type Result<T> = std::result::Result<T, ReportError>;

/// One line (or band) of a chart.
#[derive(Clone, Debug, Serialize)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    /// Drawn against the right-hand axis.
    pub right: bool,
    /// Drawn over the others in black, thicker (a frontier across the other series).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub emphasis: bool,
}

/// What a chart shows, kept beside its SVG.
#[derive(Clone, Debug, Serialize)]
pub struct Chart {
    pub id: String,
    pub title: String,
    pub caption: String,
    pub x_label: String,
    /// The x axis in powers of two (a doubling sweep: 1, 2, 4, … users), so each level gets
    /// the same width.
    #[serde(default)]
    pub x_log2: bool,
    pub y_label: String,
    pub y2_label: Option<String>,
    pub kind: Kind,
    pub series: Vec<Series>,
    /// Vertical markers `(x, label)`: the knee, usable and limit capacity, level boundaries.
    pub marks: Vec<(f64, String)>,
    /// Horizontal lines `(y, label)`: SLO bounds.
    pub limits: Vec<(f64, String)>,
}

impl Chart {
    /// Lines on a linear x axis, with no markers or limits (set them after).
    pub fn lines(id: &str, title: &str, caption: String, axes: (&str, &str), series: Vec<Series>) -> Chart {
        Chart {
            id: id.into(),
            title: title.into(),
            caption,
            x_label: axes.0.into(),
            x_log2: false,
            y_label: axes.1.into(),
            y2_label: None,
            kind: Kind::Lines,
            series,
            marks: Vec::new(),
            limits: Vec::new(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub enum Kind {
    Lines,
    /// Series stacked on each other (each point's y is its own part).
    Stacked,
    /// Horizontal bars: each series is one bar `(start, length)` in `points[0]`.
    Timeline,
}

/// How the `i`-th line is drawn: a colour of [`COLORS`], then, once they are used up, the
/// same colours dashed, then dotted, so up to 24 lines stay apart; an emphasized one black.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Stroke {
    color: RGBColor,
    /// `(dash, gap)` in pixels; `None` for a solid line.
    dash: Option<(u32, u32)>,
    width: u32,
}

impl Stroke {
    fn nth(i: usize, s: &Series) -> Stroke {
        if s.emphasis {
            return Stroke { color: BLACK, dash: None, width: 3 };
        }
        let dash = match (i / COLORS.len()) % 3 {
            0 => None,
            1 => Some((8, 4)),
            _ => Some((2, 3)),
        };
        Stroke { color: COLORS[i % COLORS.len()], dash, width: 2 }
    }
}

const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

fn range(vals: impl Iterator<Item = f64>) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in vals.filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    if hi <= lo {
        hi = lo + 1.0;
    }
    (lo, hi)
}

/// Room above the highest point, as a factor of it: the marks' labels sit there, not on the
/// data.
const HEADROOM: f64 = 1.3;

/// A load for an axis label: whole numbers without decimals.
fn format_load(x: f64) -> String {
    if (x - x.round()).abs() < 1e-6 {
        format!("{}", x.round())
    } else {
        format!("{x:.2}").trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// `c` with every x (points and marks) replaced by its log2.
fn log2_x(c: &Chart) -> Chart {
    let mut out = c.clone();
    for s in &mut out.series {
        for p in &mut s.points {
            p.0 = p.0.log2();
        }
    }
    for m in &mut out.marks {
        m.0 = m.0.log2();
    }
    out
}

/// The largest magnitude drawn: no measured quantity of a run comes near it (10^15 tok/s or
/// ms), and beyond it plotters' axis arithmetic overflows (an axis to 1.4e308 × 1.3 is
/// infinite, and its tick search never ends).
const MAX_PLOTTED: f64 = 1e15;

/// `c` without the points, marks and limits no axis can hold (not finite, or beyond
/// [`MAX_PLOTTED`]), its title saying how many were left out.
fn plottable(c: &Chart) -> Chart {
    let ok = |v: f64| v.is_finite() && v.abs() <= MAX_PLOTTED;
    let mut out = c.clone();
    let mut dropped = 0;
    for s in &mut out.series {
        let n = s.points.len();
        s.points.retain(|p| ok(p.0) && ok(p.1) && ok(p.0 + p.1));
        dropped += n - s.points.len();
    }
    if c.kind == Kind::Timeline {
        out.series.retain(|s| !s.points.is_empty());
    }
    let n = out.marks.len() + out.limits.len();
    out.marks.retain(|m| ok(m.0));
    out.limits.retain(|l| ok(l.0));
    dropped += n - out.marks.len() - out.limits.len();
    if dropped > 0 {
        out.title = format!("{} ({dropped} values beyond the plottable range left out)", c.title);
    }
    out
}

/// The chart as SVG; values no axis can hold are left out (and counted in the title).
pub fn svg(c: &Chart) -> Result<String> {
    let log = if c.x_log2 { Some(log2_x(c)) } else { None };
    let c = &plottable(log.as_ref().unwrap_or(c));
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, (WIDTH as u32, 400)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| ReportError::Draw(format!("{e}")))?;
        match c.kind {
            Kind::Timeline => timeline(&root, c)?,
            Kind::Lines | Kind::Stacked => {
                // Title and legend in a band of their own: the legend never covers data.
                let items = legend_items(c);
                let (head, body) = root.split_vertically(legend_height(&items));
                head_band(&head, &c.title, &items)?;
                lines(&body, c)?
            }
        }
        root.present().map_err(|e| ReportError::Draw(format!("{e}")))?;
    }
    Ok(buf)
}

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

/// Horizontal bars, one row per series, laid along x.
fn timeline(root: &Area, c: &Chart) -> Result<()> {
    let e = |e: DrawingAreaErrorKind<_>| ReportError::Draw(format!("drawing {}: {e:?}", c.id));
    let end = c.series.iter().map(|s| s.points[0].0 + s.points[0].1).fold(0.0, f64::max).max(1e-9);
    let n = c.series.len().max(1);
    let mut ch = ChartBuilder::on(root)
        .caption(&c.title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(110)
        .build_cartesian_2d(0.0..end * 1.05, 0.0..n as f64)
        .map_err(e)?;
    ch.configure_mesh()
        .x_desc(&c.x_label)
        .y_labels(n)
        .y_label_formatter(&|y| {
            let i = (*y - 0.5).round() as usize;
            c.series.get(n.saturating_sub(1).saturating_sub(i)).map_or(String::new(), |s| s.name.clone())
        })
        .disable_y_mesh()
        .draw()
        .map_err(e)?;
    for (i, s) in c.series.iter().enumerate() {
        let (start, len) = s.points[0];
        let row = (n - 1 - i) as f64;
        ch.draw_series(std::iter::once(Rectangle::new(
            [(start, row + 0.15), (start + len, row + 0.85)],
            COLORS[i % COLORS.len()].filled(),
        )))
        .map_err(e)?;
    }
    Ok(())
}

/// Lines (with an optional right axis) or stacked bands, marks and limits.
fn lines(root: &Area, c: &Chart) -> Result<()> {
    let e = |e: DrawingAreaErrorKind<_>| ReportError::Draw(format!("drawing {}: {e:?}", c.id));
    let left: Vec<&Series> = c.series.iter().filter(|s| !s.right).collect();
    let right: Vec<&Series> = c.series.iter().filter(|s| s.right).collect();
    let xs = c.series.iter().flat_map(|s| s.points.iter().map(|p| p.0)).chain(c.marks.iter().map(|m| m.0));
    let (x0, x1) = range(xs);
    let y_hi = if c.kind == Kind::Stacked {
        let mut xs: Vec<f64> = left.iter().flat_map(|s| s.points.iter().map(|p| p.0)).collect();
        xs.dedup();
        xs.iter()
            .map(|x| left.iter().filter_map(|s| s.points.iter().find(|p| p.0 == *x)).map(|p| p.1.max(0.0)).sum::<f64>())
            .fold(0.0, f64::max)
    } else {
        range(left.iter().flat_map(|s| s.points.iter().map(|p| p.1)).chain(c.limits.iter().map(|l| l.0))).1
    };
    // Headroom above the data for the legend and the marks' labels.
    let y_hi = if y_hi > 0.0 { y_hi * HEADROOM } else { 1.0 };
    let y2_hi = range(right.iter().flat_map(|s| s.points.iter().map(|p| p.1))).1 * HEADROOM;
    let mut ch = ChartBuilder::on(root)
        .margin(12)
        .margin_top(4)
        .x_label_area_size(36)
        .y_label_area_size(60)
        .right_y_label_area_size(if right.is_empty() { 0 } else { 60 })
        .build_cartesian_2d(x0..x1, 0.0..y_hi)
        .map_err(e)?
        .set_secondary_coord(x0..x1, 0.0..y2_hi.max(1e-9));
    let x_fmt = |x: &f64| if c.x_log2 { format_load(x.exp2()) } else { format_load(*x) };
    let mut mesh = ch.configure_mesh();
    mesh.x_desc(&c.x_label).y_desc(&c.y_label).x_label_formatter(&x_fmt);
    if c.x_log2 {
        // One label per power of two.
        mesh.x_labels((x1 - x0).round() as usize + 1);
    }
    mesh.draw().map_err(e)?;
    if let Some(l) = &c.y2_label {
        ch.configure_secondary_axes().y_desc(l).draw().map_err(e)?;
    }
    if c.kind == Kind::Stacked {
        // Cumulative bands, drawn top first so each lower band covers its part.
        let mut xs: Vec<f64> = left.iter().flat_map(|s| s.points.iter().map(|p| p.0)).collect();
        xs.sort_by(f64::total_cmp);
        xs.dedup();
        let at = |s: &Series, x: f64| s.points.iter().find(|p| p.0 == x).map_or(0.0, |p| p.1.max(0.0));
        for k in (0..left.len()).rev() {
            let top: Vec<(f64, f64)> = xs.iter().map(|&x| (x, left[..=k].iter().map(|s| at(s, x)).sum())).collect();
            let color = Stroke::nth(k, left[k]).color;
            ch.draw_series(AreaSeries::new(top, 0.0, color).border_style(BLACK.mix(0.4))).map_err(e)?;
        }
    } else {
        for (i, s) in left.iter().enumerate() {
            let st = Stroke::nth(i, s);
            let style = st.color.stroke_width(st.width);
            match st.dash {
                None => ch.draw_series(LineSeries::new(s.points.clone(), style)),
                Some((d, g)) => ch.draw_series(DashedLineSeries::new(s.points.clone(), d, g, style)),
            }
            .map_err(e)?;
            ch.draw_series(s.points.iter().map(|&p| Circle::new(p, 3, st.color.filled()))).map_err(e)?;
        }
    }
    for (j, s) in right.iter().enumerate() {
        let st = Stroke::nth(left.len() + j, s);
        let style = st.color.stroke_width(st.width);
        match st.dash {
            None => ch.draw_secondary_series(LineSeries::new(s.points.clone(), style)),
            Some((d, g)) => ch.draw_secondary_series(DashedLineSeries::new(s.points.clone(), d, g, style)),
        }
        .map_err(e)?;
    }
    let red = RGBColor(200, 0, 0);
    for (y, label) in &c.limits {
        ch.draw_series(DashedLineSeries::new(vec![(x0, *y), (x1, *y)], 6, 4, red.stroke_width(1))).map_err(e)?;
        // Right-aligned at the right end, just above the line: inside the plot.
        let style = ("sans-serif", 12).into_font().color(&red).pos(Pos::new(HPos::Right, VPos::Bottom));
        ch.draw_series(std::iter::once(Text::new(label.clone(), (x1, *y), style))).map_err(e)?;
    }
    let grey = RGBColor(80, 80, 80);
    for (i, &(x, ref label)) in c.marks.iter().enumerate() {
        ch.draw_series(DashedLineSeries::new(vec![(x, 0.0), (x, y_hi)], 4, 4, grey.stroke_width(1))).map_err(e)?;
        // Labels on the inner side of their line (a mark at the right edge reads
        // leftwards), stacked downwards so marks at one load do not overwrite.
        let h = if x > (x0 + x1) / 2.0 { HPos::Right } else { HPos::Left };
        let y = y_hi * (0.99 - 0.06 * (i % 4) as f64);
        let style = ("sans-serif", 12).into_font().color(&grey).pos(Pos::new(h, VPos::Top));
        ch.draw_series(std::iter::once(Text::new(format!(" {label} "), (x, y), style))).map_err(e)?;
    }
    Ok(())
}

/// A legend entry: name, stroke, and whether it is a band (else a line).
type Item = (String, Stroke, bool);

/// The legend in the order the series are drawn: left axis, then right, with their strokes.
fn legend_items(c: &Chart) -> Vec<Item> {
    let left = c.series.iter().filter(|s| !s.right);
    let n_left = left.clone().count();
    let band = c.kind == Kind::Stacked;
    let mut items: Vec<Item> = left.enumerate().map(|(k, s)| (s.name.clone(), Stroke::nth(k, s), band)).collect();
    for (j, s) in c.series.iter().filter(|s| s.right).enumerate() {
        items.push((s.name.clone(), Stroke::nth(n_left + j, s), false));
    }
    items
}

const WIDTH: i32 = 760;
const ITEM_H: i32 = 18;

/// Where each legend item goes, row by row, left to right: `(x, row)`.
fn legend_layout(items: &[Item]) -> Vec<(i32, i32)> {
    let (mut x, mut row) = (70, 0);
    items
        .iter()
        .map(|(name, _, _)| {
            // About 6.5 px per character of a 12 px sans-serif.
            let w = 22 + (name.chars().count() as f64 * 6.5) as i32 + 18;
            if x + w > WIDTH - 20 && x > 70 {
                (x, row) = (70, row + 1);
            }
            let at = (x, row);
            x += w;
            at
        })
        .collect()
}

fn legend_height(items: &[Item]) -> i32 {
    let rows = legend_layout(items).last().map_or(0, |p| p.1 + 1);
    30 + rows * ITEM_H + 4
}

/// The chart's title and, under it, its legend.
fn head_band(area: &Area, title: &str, items: &[Item]) -> Result<()> {
    let e = |e: DrawingAreaErrorKind<_>| ReportError::Draw(format!("drawing the legend of {title}: {e:?}"));
    let centre = ("sans-serif", 18).into_font().color(&BLACK).pos(Pos::new(HPos::Center, VPos::Top));
    area.draw(&Text::new(title.to_string(), (WIDTH / 2, 6), centre)).map_err(e)?;
    for ((name, st, band), (x, row)) in items.iter().zip(legend_layout(items)) {
        let y = 30 + row * ITEM_H + ITEM_H / 2;
        let style = st.color.stroke_width(st.width);
        match (*band, st.dash) {
            (true, _) => area.draw(&Rectangle::new([(x, y - 5), (x + 14, y + 5)], st.color.filled())),
            (false, None) => area.draw(&PathElement::new(vec![(x, y), (x + 16, y)], style)),
            (false, Some((d, g))) => area.draw(&DashedPathElement::new(vec![(x, y), (x + 16, y)], d, g, style)),
        }
        .map_err(e)?;
        let style = ("sans-serif", 12).into_font().color(&BLACK).pos(Pos::new(HPos::Left, VPos::Center));
        area.draw(&Text::new(name.clone(), (x + 22, y), style)).map_err(e)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart(points: Vec<(f64, f64)>, limits: Vec<(f64, String)>) -> Chart {
        Chart {
            id: "t".into(),
            title: "throughput".into(),
            caption: String::new(),
            x_label: "users".into(),
            x_log2: true,
            y_label: "tok/s".into(),
            y2_label: None,
            kind: Kind::Lines,
            series: vec![Series { name: "out".into(), points, right: false, emphasis: false }],
            marks: vec![(f64::INFINITY, "knee".into())],
            limits,
        }
    }

    #[test]
    fn values_beyond_any_axis_are_left_out_and_counted() {
        // 1.5e308 × the headroom is infinite: before, the axis's tick search never ended.
        let c = chart(vec![(1.0, 10.0), (2.0, 1.5e308), (4.0, f64::NAN), (0.0, 3.0)], vec![(f64::MAX, "SLO".into())]);
        let p = plottable(&log2_x(&c));
        // x = 0 has no log2; 1.5e308 and NaN are beyond; the mark at ∞ and the limit too.
        assert_eq!(p.series[0].points, [(0.0, 10.0)]);
        assert!(p.title.ends_with("(5 values beyond the plottable range left out)"), "{}", p.title);
        let svg = svg(&c).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("5 values beyond"));
        let fine = chart(vec![(1.0, 10.0), (2.0, 20.0)], Vec::new());
        assert_eq!(plottable(&Chart { marks: Vec::new(), ..fine.clone() }).title, "throughput");
    }

    #[test]
    fn lines_past_the_palette_are_dashed_and_an_emphasized_one_is_black() {
        let s = |emphasis| Series { name: "x".into(), points: Vec::new(), right: false, emphasis };
        let strokes: Vec<Stroke> = (0..24).map(|i| Stroke::nth(i, &s(false))).collect();
        for (i, a) in strokes.iter().enumerate() {
            for b in &strokes[i + 1..] {
                assert!(a != b, "24 lines, 24 strokes: {a:?}");
            }
        }
        assert_eq!((strokes[8].color, strokes[8].dash.is_some()), (strokes[0].color, true));
        let frontier = Stroke::nth(9, &s(true));
        assert_eq!((frontier.color, frontier.width), (BLACK, 3));
        assert!(strokes.iter().all(|st| st.color != BLACK));
    }
}
