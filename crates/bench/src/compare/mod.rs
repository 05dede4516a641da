//! Two runs of the same workload compared (`goodput compare A B`: their `--out` directories),
//! level by level and metric by metric — values, ratio, and whether the change is beyond the
//! noise each run's own requests show (95 % bootstrap intervals that do not overlap). A
//! Markdown table for pull requests; with a gate (`ttft_p95=+10%`), the metrics that got worse
//! by more than that and beyond the noise, so an engine's CI can fail on them. Runs are read
//! through `goodput_results`' typed reader.
//!
//! Criterion baselines compare the same way ([`criterion`]): when A and B are criterion output
//! trees (`target/criterion`), each benchmark's mean time and its 95 % confidence interval
//! (`--baseline-a`, `--baseline-b`; criterion's own `base` and `new` by default, so
//! `goodput compare target/criterion target/criterion` is the last two runs), with
//! `--fail-on time=+10%` (every benchmark) or `--fail-on decode_step=+10%` (the benchmarks
//! whose id contains that).

mod criterion;

use crate::runs::{load_run, Loaded, RunsError};
use goodput_core::ClientRecord;
use goodput_metrics::compare::{breaks, compare_repeats, parse_thresholds, Key, Row, Threshold, DEFAULT_KEYS};
use goodput_report::cross_check;
use goodput_report::text::key_value as fmt;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Why two sides could not be compared.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    #[error(transparent)]
    Runs(#[from] RunsError),
    #[error("--metrics")]
    Metrics(#[source] goodput_metrics::slo::KeyError),
    #[error("--fail-on")]
    FailOn(#[source] goodput_metrics::compare::ThresholdError),
    /// A criterion gate that is not `time=+N%` or `PATTERN=+N%`.
    #[error("--fail-on `{part}`: {why}")]
    CriterionGate { part: String, why: &'static str },
    /// Nothing in common to compare: no level both sides ran, no criterion estimates.
    #[error("{0}")]
    Nothing(String),
    #[error("{path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("{path}: not criterion's estimates")]
    Estimates { path: String, source: serde_json::Error },
    #[error("writing {path}")]
    Write { path: String, source: std::io::Error },
    #[error("CSV export")]
    Csv(#[from] csv::Error),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

type Result<T, E = CompareError> = std::result::Result<T, E>;

/// What to compare: two sides (a run, its repeats, or a `--repeats` directory; or two criterion
/// trees with their baselines), the metrics, the gate, and the noise.
#[derive(Clone, Debug)]
pub struct CompareSpec {
    /// The baseline, or its repeats.
    pub a: Vec<PathBuf>,
    /// The side to judge, or its repeats.
    pub b: Vec<PathBuf>,
    /// Metrics to compare (`None`: [`DEFAULT_KEYS`]).
    pub metrics: Option<Vec<String>>,
    /// The gate: `ttft_p95=+10%,output_throughput=-5%`.
    pub fail_on: Option<String>,
    /// Bootstrap resamples per metric and run.
    pub bootstrap: usize,
    /// Single runs on both sides: a change counts only beyond this share of A's value.
    pub noise_floor: f64,
    /// Criterion trees: the baselines of A and B.
    pub baseline_a: String,
    pub baseline_b: String,
}

impl CompareSpec {
    /// A CI gate (`run --baseline A --fail-on …`): run `b` against `a` on the default metrics,
    /// 400 resamples, a 10 % noise floor, as `goodput compare A B --fail-on …` judges.
    pub fn gate(a: PathBuf, b: PathBuf, fail_on: String) -> CompareSpec {
        CompareSpec {
            a: vec![a],
            b: vec![b],
            metrics: None,
            fail_on: Some(fail_on),
            bootstrap: 400,
            noise_floor: 0.1,
            baseline_a: "base".into(),
            baseline_b: "new".into(),
        }
    }
}

/// How B compares with A on one metric.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Worse beyond the noise and beyond a `--fail-on` limit.
    Regressed,
    Worse,
    Better,
    WithinNoise,
}

impl Verdict {
    /// The Markdown cell; criterion rows say slower/faster.
    fn text(self, time: bool) -> &'static str {
        match (self, time) {
            (Verdict::Regressed, _) => "**regressed**",
            (Verdict::Worse, false) => "worse (beyond noise)",
            (Verdict::Better, false) => "better (beyond noise)",
            (Verdict::Worse, true) => "slower (beyond noise)",
            (Verdict::Better, true) => "faster (beyond noise)",
            (Verdict::WithinNoise, _) => "within noise",
        }
    }
}

/// One row of `--export-json` / `--export-csv`.
#[derive(Clone, Debug, Serialize)]
pub struct ExportRow {
    /// The level's load (none for a criterion benchmark).
    pub load: Option<f64>,
    /// The metric key, or the benchmark id.
    pub metric: String,
    pub a: f64,
    pub b: f64,
    /// B / A − 1.
    pub change: f64,
    /// The 95 % intervals of A and B.
    pub a_low: f64,
    pub a_high: f64,
    pub b_low: f64,
    pub b_high: f64,
    pub verdict: Verdict,
}

/// A finished comparison: its table, its rows and the regressions beyond `--fail-on`.
#[derive(Debug)]
pub struct Outcome {
    /// The Markdown table, ending with the verdict's line.
    pub markdown: String,
    pub rows: Vec<ExportRow>,
    /// The gated metrics that regressed or could not be judged, a line each.
    pub failures: Vec<String>,
}

impl Outcome {
    fn new(markdown: String) -> Self {
        Outcome { markdown, rows: Vec::new(), failures: Vec::new() }
    }
}

/// Compares `a`'s sides: criterion trees benchmark by benchmark, runs level by level. A run
/// that did not finish is said through `warn` as soon as it is read.
pub fn compare(a: &CompareSpec, warn: &mut dyn FnMut(&str)) -> Result<Outcome> {
    let outcome = if a.a.len() == 1 && a.b.len() == 1 && criterion::is_tree(&a.a[0]) && criterion::is_tree(&a.b[0]) {
        criterion::compare(&a.a[0], &a.baseline_a, &a.b[0], &a.baseline_b, a.fail_on.as_deref())?
    } else {
        runs(a, warn)?
    };
    let mut outcome = outcome;
    // The table ends with its verdict, on the console and in the exported Markdown alike.
    let last = last_line(&outcome, a.fail_on.is_some());
    outcome.markdown = format!("{}\n{last}", outcome.markdown.trim_end());
    Ok(outcome)
}

/// The comparison's last line: with `--fail-on`, `PASS` or `FAIL` and why; without, how many
/// metrics moved beyond the noise.
fn last_line(o: &Outcome, gated: bool) -> String {
    let count = |v: Verdict| o.rows.iter().filter(|r| r.verdict == v).count();
    let (worse, better) = (count(Verdict::Worse) + count(Verdict::Regressed), count(Verdict::Better));
    if !gated {
        return format!(
            "no gate (--fail-on not given): {worse} worse and {better} better beyond the noise, of {} compared",
            o.rows.len()
        );
    }
    match o.failures.len() {
        0 => format!(
            "PASS: no gated metric got worse beyond its --fail-on limit and the noise ({} compared; {worse} worse, {better} better beyond the noise)",
            o.rows.len()
        ),
        n => format!("FAIL: {n} of the gated metrics regressed or could not be judged (listed above)"),
    }
}

impl Outcome {
    /// Writes the comparison where asked: its Markdown, its rows as JSON and as CSV.
    pub fn export(&self, markdown: Option<&Path>, json: Option<&Path>, csv: Option<&Path>) -> Result<()> {
        export(self, markdown, json, csv)
    }
}

fn export(o: &Outcome, markdown: Option<&Path>, json: Option<&Path>, csv: Option<&Path>) -> Result<()> {
    let write = |p: &Path, bytes: Vec<u8>| {
        std::fs::write(p, bytes).map_err(|source| CompareError::Write { path: p.display().to_string(), source })
    };
    if let Some(p) = markdown {
        write(p, o.markdown.clone().into_bytes())?;
    }
    if let Some(p) = json {
        write(p, serde_json::to_vec_pretty(&o.rows)?)?;
    }
    if let Some(p) = csv {
        let mut w = csv::Writer::from_writer(Vec::new());
        for r in &o.rows {
            w.serialize(r)?;
        }
        write(p, w.into_inner().map_err(|e| CompareError::Csv(e.into_error().into()))?)?;
    }
    Ok(())
}

fn path_list(paths: &[PathBuf]) -> String {
    paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join("`, `")
}

/// The keys to compare and the `--fail-on` thresholds (their keys compared too).
fn keys(a: &CompareSpec) -> Result<(Vec<Key>, Vec<Threshold>)> {
    let names: Vec<String> = a.metrics.clone().unwrap_or_else(|| DEFAULT_KEYS.iter().map(|s| s.to_string()).collect());
    let mut keys: Vec<Key> =
        names.iter().map(|n| Key::parse(n)).collect::<Result<_, _>>().map_err(CompareError::Metrics)?;
    let thresholds = match &a.fail_on {
        Some(s) => parse_thresholds(s).map_err(CompareError::FailOn)?,
        None => Vec::new(),
    };
    for t in &thresholds {
        if !keys.contains(&t.key) {
            keys.push(t.key);
        }
    }
    Ok((keys, thresholds))
}

fn runs(a: &CompareSpec, warn: &mut dyn FnMut(&str)) -> Result<Outcome> {
    let (keys, thresholds) = keys(a)?;
    let (dirs_a, dirs_b) = (crate::runs::side(&a.a)?, crate::runs::side(&a.b)?);
    let (ra, notes_a): (Vec<_>, Vec<_>) =
        dirs_a.iter().map(|p| load_run(p)).collect::<Result<Vec<Loaded>, _>>()?.into_iter().unzip();
    let (rb, notes_b): (Vec<_>, Vec<_>) =
        dirs_b.iter().map(|p| load_run(p)).collect::<Result<Vec<Loaded>, _>>()?.into_iter().unzip();
    let notes: Vec<String> = notes_a.into_iter().chain(notes_b).flatten().collect();
    // Each side's summaries, read once for what is said beside the table (a run killed
    // before its first level has none).
    let summaries = |dirs: &[PathBuf]| -> Vec<(PathBuf, goodput_results::RunSummary)> {
        dirs.iter().filter_map(|d| Some((d.clone(), goodput_results::read_summary(d).ok()?))).collect()
    };
    let (sa, sb) = (summaries(&dirs_a), summaries(&dirs_b));
    for n in &notes {
        warn(&format!("warning: incomplete run: {n}"));
    }
    // Levels every repeat of both sides ran, by load ascending.
    let mut shared: Vec<&String> = ra[0].keys().filter(|l| ra.iter().chain(&rb).all(|r| r.contains_key(*l))).collect();
    if shared.is_empty() {
        return Err(CompareError::Nothing(format!(
            "the runs share no load level (A has {:?}, B has {:?}); compare runs of the same sweep",
            ra[0].keys().collect::<Vec<_>>(),
            rb[0].keys().collect::<Vec<_>>()
        )));
    }
    shared.sort_by(|x, y| x.parse::<f64>().unwrap_or(0.0).total_cmp(&y.parse::<f64>().unwrap_or(0.0)));
    let unshared = unshared_levels(&ra, &rb);
    let warnings: String = notes
        .iter()
        .map(|n| format!("> **Incomplete run:** {n}\n\n"))
        .chain(unshared.iter().map(|u| format!("> **Not compared:** {u}\n\n")))
        .chain(cross_check::contradiction(&sa, &sb))
        .chain(cross_check::busy("A", &sa))
        .chain(cross_check::busy("B", &sb))
        .collect();
    let noise = if ra.len() > 1 || rb.len() > 1 {
        "noise: the spread of the repeats ((max − min) ÷ median)".to_string()
    } else {
        format!(
            "noise: single runs, so a change counts beyond a noise floor of {:.0} % (--noise-floor; the run-to-run drift one run cannot show — give repeats to measure it)",
            a.noise_floor * 100.0
        )
    };
    let mut out = Outcome::new(format!(
        "### goodput compare\n\n{warnings}A: `{}` · B: `{}` · 95 % bootstrap intervals: latencies over each run's measured requests, throughputs over time blocks of its window · {noise}; times within {} ms are equal\n\n| load | metric | A | B | B − A | B / A | A 95 % | B 95 % | verdict |\n|---:|---|---:|---:|---:|---:|---:|---:|---|\n",
        path_list(&dirs_a),
        path_list(&dirs_b),
        goodput_metrics::compare::TIME_RESOLUTION_S * 1e3
    ));
    if !thresholds.is_empty() {
        // A gate fails closed: a level it cannot see is a level it cannot pass.
        out.failures.extend(unshared.iter().map(|u| format!("{u}: --fail-on cannot judge it")));
    }
    for level in shared {
        let xa: Vec<Vec<&ClientRecord>> = ra.iter().map(|r| r[level].iter().collect()).collect();
        let xb: Vec<Vec<&ClientRecord>> = rb.iter().map(|r| r[level].iter().collect()).collect();
        let rows = compare_repeats(&xa, &xb, &keys, a.bootstrap, a.noise_floor);
        for r in &rows {
            add_row(&mut out, level, r, &thresholds);
        }
        for t in thresholds.iter().filter(|t| !rows.iter().any(|r| r.key == t.key.name())) {
            out.failures.push(unjudged(level, t.key, &xa, &xb));
        }
    }
    Ok(out)
}

/// Levels one side ran and another did not, in words.
fn unshared_levels(
    ra: &[BTreeMap<String, Vec<ClientRecord>>],
    rb: &[BTreeMap<String, Vec<ClientRecord>>],
) -> Vec<String> {
    let all: std::collections::BTreeSet<&String> = ra.iter().chain(rb).flat_map(|r| r.keys()).collect();
    let mut out = Vec::new();
    for level in all {
        let side = |runs: &[BTreeMap<String, Vec<ClientRecord>>]| runs.iter().all(|r| r.contains_key(level));
        match (side(ra), side(rb)) {
            (true, true) => {}
            (true, false) => out.push(format!("load {level} has measured requests in A but not in B")),
            (false, true) => out.push(format!("load {level} has measured requests in B but not in A")),
            (false, false) => out.push(format!("load {level} is missing from some repeats of both sides")),
        }
    }
    out
}

/// Why a gated key has no row at `level`: which side has no value for it.
fn unjudged(level: &str, key: Key, xa: &[Vec<&ClientRecord>], xb: &[Vec<&ClientRecord>]) -> String {
    let missing = |x: &[Vec<&ClientRecord>]| x.iter().any(|r| key.value(r).is_none_or(|v| !v.is_finite()));
    let side = match (missing(xa), missing(xb)) {
        (true, true) => "A and B have",
        (true, false) => "A has",
        _ => "B has",
    };
    format!(
        "{} at load {level}: {side} no value (no measured request of the level has it: every one failed, or too few \
         tokens); --fail-on cannot judge it",
        key.name()
    )
}

fn add_row(out: &mut Outcome, level: &str, r: &Row, thresholds: &[Threshold]) {
    let broken: Vec<&Threshold> = thresholds.iter().filter(|t| breaks(r, t)).collect();
    let verdict = match (broken.is_empty(), r.beyond_noise, r.worse) {
        (false, _, _) => Verdict::Regressed,
        (true, true, true) => Verdict::Worse,
        (true, true, false) => Verdict::Better,
        _ => Verdict::WithinNoise,
    };
    for t in broken {
        let change = if r.ratio.is_finite() { format!("{:+.1} %", r.change() * 100.0) } else { "from 0".into() };
        out.failures.push(format!(
            "{} at load {level}: {} → {} ({change}, limit {}{:.0} %)",
            r.key,
            fmt(&r.key, r.a),
            fmt(&r.key, r.b),
            if t.key.higher_is_better() { "-" } else { "+" },
            t.worse_by * 100.0
        ));
    }
    let ratio = if r.ratio.is_finite() {
        format!("{:.3} ({:+.1} %)", r.ratio, r.change() * 100.0)
    } else {
        "— (from 0)".to_string()
    };
    out.markdown.push_str(&format!(
        "| {level} | {} | {} | {} | {}{} | {ratio} | {}–{} | {}–{} | {} |\n",
        r.key,
        fmt(&r.key, r.a),
        fmt(&r.key, r.b),
        if r.b >= r.a { "+" } else { "" },
        fmt(&r.key, r.b - r.a),
        fmt(&r.key, r.a_interval.0),
        fmt(&r.key, r.a_interval.1),
        fmt(&r.key, r.b_interval.0),
        fmt(&r.key, r.b_interval.1),
        verdict.text(false),
    ));
    out.rows.push(ExportRow {
        load: level.parse().ok(),
        metric: r.key.clone(),
        a: r.a,
        b: r.b,
        change: r.change(),
        a_low: r.a_interval.0,
        a_high: r.a_interval.1,
        b_low: r.b_interval.0,
        b_high: r.b_interval.1,
        verdict,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What failed is the error's variant: a caller (a CI gate) tells a missing run from a bad
    /// flag.
    #[test]
    fn refusals_are_typed_by_what_failed() {
        let dir = std::env::temp_dir().join(format!("goodput-compare-typed-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // Two repeats on side A: runs, not criterion trees.
        let spec = |metrics: Option<Vec<String>>, fail_on: Option<&str>| CompareSpec {
            a: vec![dir.clone(), dir.clone()],
            b: vec![dir.clone()],
            metrics,
            fail_on: fail_on.map(String::from),
            bootstrap: 10,
            noise_floor: 0.0,
            baseline_a: "base".into(),
            baseline_b: "new".into(),
        };
        let e = compare(&spec(Some(vec!["ttft_p42x".into()]), None), &mut |_| {}).unwrap_err();
        assert!(matches!(e, CompareError::Metrics(_)), "{e}");
        let e = compare(&spec(None, Some("ttft_p95=10")), &mut |_| {}).unwrap_err();
        assert!(matches!(e, CompareError::FailOn(_)), "{e}");
        let e = compare(&spec(None, None), &mut |_| {}).unwrap_err();
        assert!(matches!(e, CompareError::Runs(RunsError::NotARun(_))), "an empty directory is no run: {e}");
        // One empty directory a side reads as two criterion trees with no estimates.
        let trees = CompareSpec { a: vec![dir.clone()], ..spec(None, None) };
        let e = compare(&trees, &mut |_| {}).unwrap_err();
        assert!(matches!(e, CompareError::Nothing(_)), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
