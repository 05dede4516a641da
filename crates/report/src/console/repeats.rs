//! The repeats table of `goodput run --repeats N`: per combination, the capacity verdict and
//! each level's metrics as their median over the repeats, min–max and relative spread, with
//! each repeat's own value while there are few enough to read.

use crate::text::key_value;
use goodput_metrics::spread::Spread;
use goodput_results::repeats::{GroupSpread, RepeatsFile};

/// Repeats shown one column each up to this many; past it, the median and spread alone.
const REPEAT_COLUMNS: usize = 5;

/// The whole file: one block per combination.
pub fn repeats(file: &RepeatsFile) -> String {
    file.groups.iter().map(group).collect::<Vec<_>>().join("\n")
}

fn group(g: &GroupSpread) -> String {
    let n = g.runs.len();
    let of = if g.values.is_empty() {
        String::new()
    } else {
        format!(" of {}", g.values.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(", "))
    };
    let mut out = format!(
        "Repeats{of}: {n} runs, seed {} — the median over the repeats, their min–max, and that range over the median\n",
        g.seed
    );
    for (name, values, spread) in
        [("usable capacity", &g.usable, &g.usable_spread), ("limit capacity", &g.limit, &g.limit_spread)]
    {
        out.push_str(&format!("  {name}: {}\n", capacity(values, spread.as_ref(), &g.unit.to_string())));
    }
    let shown = n <= REPEAT_COLUMNS;
    let load = format!("load ({})", g.unit);
    let mut header = vec![load.as_str(), "metric", "median", "min–max", "spread"];
    let names: Vec<String> = (1..=n).map(|k| format!("#{k}")).collect();
    if shown {
        header.extend(names.iter().map(String::as_str));
    }
    let mut t = super::new(&header);
    if let Some(c) = t.column_mut(1) {
        c.set_cell_alignment(comfy_table::CellAlignment::Left);
    }
    for level in &g.levels {
        for m in &level.metrics {
            let v = |x: f64| key_value(&m.key, x);
            let mut row = vec![
                level.load.to_string(),
                m.key.clone(),
                v(m.spread.median),
                format!("{}–{}", v(m.spread.min), v(m.spread.max)),
                relative(&m.spread),
            ];
            if shown {
                row.extend(m.values.iter().map(|x| x.map_or("—".into(), v)));
            }
            t.add_row(row);
        }
    }
    out.push_str(&t.to_string());
    out.push('\n');
    for u in &g.unfinished {
        out.push_str(&format!("  not finished, left out: {}\n", u.display()));
    }
    for s in &g.not_shared {
        out.push_str(&format!("  not summarized: {s}\n"));
    }
    out
}

/// `3.80 req/s (3.60–4.10, spread 13.2 %; 3 of 3 repeats)`, or why there is none.
fn capacity(values: &[Option<f64>], spread: Option<&Spread>, unit: &str) -> String {
    let Some(s) = spread else { return format!("none in any of the {} repeats", values.len()) };
    format!(
        "{} {unit} ({}–{}, spread {}; {} of {} repeats have one)",
        crate::text::f(s.median, 2),
        crate::text::f(s.min, 2),
        crate::text::f(s.max, 2),
        relative(s),
        s.n,
        values.len()
    )
}

fn relative(s: &Spread) -> String {
    if s.relative.is_finite() {
        format!("{:.1} %", s.relative * 100.0)
    } else {
        "from 0".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use goodput_results::repeats::{LevelSpread, MetricSpread, REPEATS_FORMAT};
    use goodput_results::LoadUnit;

    #[test]
    fn the_table_shows_median_range_spread_and_each_repeat() {
        let values = [Some(0.100), Some(0.120), Some(0.110)];
        let spread = Spread::of(&[0.100, 0.120, 0.110]).unwrap();
        let file = RepeatsFile {
            format: REPEATS_FORMAT,
            keys: vec!["ttft_p95".into()],
            groups: vec![GroupSpread {
                values: vec![("max-num-seqs".into(), "8".into())],
                runs: vec!["a".into(), "b".into(), "c".into()],
                unfinished: Vec::new(),
                seed: 42,
                unit: LoadUnit::Rate,
                levels: vec![LevelSpread {
                    load: 2.0,
                    metrics: vec![MetricSpread { key: "ttft_p95".into(), values: values.to_vec(), spread }],
                }],
                usable: vec![Some(4.0), Some(3.0), None],
                usable_spread: Spread::of(&[4.0, 3.0]),
                limit: vec![None, None, None],
                limit_spread: None,
                not_shared: vec!["load 3 ran in repeats 1 and 2 only".into()],
            }],
        };
        let text = repeats(&file);
        assert!(text.contains("Repeats of max-num-seqs=8: 3 runs, seed 42"), "{text}");
        // Median 110 ms; range 20 ms over 110 ms is 18.2 %.
        assert!(
            text.contains("110.00 ms") && text.contains("100.00 ms–120.00 ms") && text.contains("18.2 %"),
            "{text}"
        );
        // Usable capacity: median of 3 and 4 is 3.5, range 1 over 3.5 is 28.6 %, 2 of 3 repeats.
        assert!(
            text.contains("usable capacity: 3.50 req/s (3.00–4.00, spread 28.6 %; 2 of 3 repeats have one)"),
            "{text}"
        );
        assert!(text.contains("limit capacity: none in any of the 3 repeats"), "{text}");
        assert!(text.contains("not summarized: load 3"), "{text}");
        assert!(text.contains("#3"), "{text}");
    }
}
