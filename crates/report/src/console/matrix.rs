//! A matrix's runs side by side on the console: each combination's usable capacity, the output
//! throughput and P95 latencies there, the SLOs that broke above it, and the combination that
//! serves the most within its SLOs named.

use super::new;
use goodput_results::matrix::MatrixIndex;
use goodput_results::outcome::most_text;

/// The summary table of a matrix's runs, then the one that serves the most.
pub fn matrix(index: &MatrixIndex) -> String {
    let mut t = new(&["run", "usable", "out tok/s", "TTFT p95", "TPOT p95", "bound by"]);
    let ms = |x: Option<f64>| x.map_or("-".into(), |v| format!("{:.1} ms", v * 1e3));
    for r in &index.runs {
        let row = match &r.outcome {
            Some(o) => vec![
                r.name.clone(),
                o.usable_text(),
                o.output_throughput.map_or("-".into(), |x| format!("{x:.0}")),
                ms(o.ttft_p95_s),
                ms(o.tpot_p95_s),
                match (o.bound.is_empty(), o.unsure.is_empty()) {
                    (false, _) => o.bound.join(", "),
                    (true, false) => format!("{} (not shown)", o.unsure.join(", ")),
                    (true, true) => "-".into(),
                },
            ],
            None => vec![
                r.name.clone(),
                format!("failed (exit {})", r.exit),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
            ],
        };
        t.add_row(row);
    }
    let most = most_text(index.runs.iter().filter_map(|r| Some((r.name.as_str(), r.outcome.as_ref()?))));
    let errors: String = index
        .runs
        .iter()
        .filter_map(|r| Some(format!("\n{}: {}", r.name, r.error.as_deref()?.lines().next()?)))
        .collect();
    format!("Matrix: {} runs\n{t}{errors}\n{most}", index.runs.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use goodput_results::matrix::{MatrixRun, INDEX_FORMAT};
    use goodput_results::outcome::RunOutcome;
    use goodput_results::testing::two_levels;

    #[test]
    fn the_summary_names_the_run_that_serves_the_most() {
        let (s, _) = two_levels();
        let o = RunOutcome::of(&s);
        let run = |name: &str, usable: Option<f64>| MatrixRun {
            name: name.into(),
            dir: name.into(),
            values: Vec::new(),
            exit: 0,
            error: None,
            outcome: Some(RunOutcome { usable, ..o.clone() }),
        };
        let error = Some("the server exited (exit status: 2) before it was healthy; the end of its log:\nbad".into());
        let failed = MatrixRun { outcome: None, exit: 1, error, ..run("c", None) };
        let index = MatrixIndex {
            format: INDEX_FORMAT,
            config: None,
            axes: Vec::new(),
            runs: vec![run("a", Some(4.0)), run("b", Some(16.0)), failed],
        };
        let t = matrix(&index);
        assert!(t.ends_with(&format!("Most usable capacity: b (16 {}).", s.load_unit)), "{t}");
        assert!(t.contains("failed (exit 1)") && t.starts_with("Matrix: 3 runs"), "{t}");
        assert!(
            t.contains("\nc: the server exited (exit status: 2) before it was healthy; the end of its log:\n"),
            "{t}"
        );
        let none = MatrixIndex { runs: vec![run("a", None)], ..index };
        assert!(matrix(&none).ends_with("none is shown usable."));
    }
}
