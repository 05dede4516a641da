//! Criterion baselines compared as runs are: each benchmark's mean time and its 95 %
//! confidence interval from `<bench>/<baseline>/estimates.json` (criterion's own file, read
//! through a typed struct of the part we use).

use super::{CompareError, Outcome, Result, Verdict};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

/// The part of criterion's `estimates.json` compared: the mean and its interval, in ns.
#[derive(Deserialize)]
struct Estimates {
    mean: Estimate,
}

#[derive(Clone, Copy, Deserialize)]
struct Estimate {
    point_estimate: f64,
    confidence_interval: Interval,
}

#[derive(Clone, Copy, Deserialize)]
struct Interval {
    lower_bound: f64,
    upper_bound: f64,
}

/// Whether `dir` is a criterion tree rather than a results directory.
pub fn is_tree(dir: &Path) -> bool {
    dir.is_dir()
        && !dir.join("records.jsonl").exists()
        && !dir.join("summary.json").exists()
        && !dir.join(goodput_results::matrix::INDEX).exists()
}

/// Every `<id>/<baseline>/estimates.json` under `root`, by benchmark id.
fn tree(root: &Path, baseline: &str) -> Result<BTreeMap<String, Estimate>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for p in entries.flatten().map(|e| e.path()).filter(|p| p.is_dir()) {
            let est = p.join(baseline).join("estimates.json");
            if est.is_file() {
                let path = || est.display().to_string();
                let bytes = goodput_core::input::read_bytes(&est)
                    .map_err(|source| CompareError::Read { path: path(), source })?;
                let e: Estimates = serde_json::from_slice(&bytes)
                    .map_err(|source| CompareError::Estimates { path: path(), source })?;
                out.insert(p.strip_prefix(root).unwrap_or(&p).display().to_string(), e.mean);
            }
            if p.file_name().is_some_and(|n| n != "report") {
                stack.push(p);
            }
        }
    }
    Ok(out)
}

/// `--fail-on time=+10%` (every benchmark) or `PATTERN=+N%` (those whose id contains it).
fn limits(fail_on: Option<&str>) -> Result<Vec<(String, f64)>> {
    let mut out = Vec::new();
    for part in fail_on.iter().flat_map(|s| s.split(',')).map(str::trim).filter(|p| !p.is_empty()) {
        let gate = |why| CompareError::CriterionGate { part: part.to_string(), why };
        let (k, v) = part.split_once('=').ok_or_else(|| gate("expected time=+10%"))?;
        let pct: f64 = v
            .trim()
            .strip_prefix('+')
            .and_then(|x| x.strip_suffix('%'))
            .and_then(|x| x.trim().parse().ok())
            .filter(|x: &f64| *x > 0.0)
            .ok_or_else(|| gate("a benchmark's time gets worse as it rises; write +N%"))?;
        out.push((if k.trim() == "time" { String::new() } else { k.trim().to_string() }, pct / 100.0));
    }
    Ok(out)
}

fn t(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{:.3} ms", ns / 1e6)
    } else {
        format!("{:.3} µs", ns / 1e3)
    }
}

/// Compares the benchmarks of two criterion trees.
pub fn compare(a: &Path, baseline_a: &str, b: &Path, baseline_b: &str, fail_on: Option<&str>) -> Result<Outcome> {
    let (ta, tb) = (tree(a, baseline_a)?, tree(b, baseline_b)?);
    if ta.is_empty() || tb.is_empty() {
        return Err(CompareError::Nothing(format!(
            "no criterion estimates: {} has {} `{baseline_a}` benchmarks, {} has {} `{baseline_b}` ones (a `goodput run --out` directory has records.jsonl; a criterion tree has <bench>/<baseline>/estimates.json)",
            a.display(),
            ta.len(),
            b.display(),
            tb.len(),
        )));
    }
    let limits = limits(fail_on)?;
    let mut out = Outcome::new(format!(
        "### goodput compare (criterion)\n\nA: `{}` ({baseline_a}) · B: `{}` ({baseline_b}) · mean time per iteration with criterion's 95 % confidence interval\n\n| benchmark | A | B | change | A 95 % | B 95 % | verdict |\n|---|---:|---:|---:|---:|---:|---|\n",
        a.display(),
        b.display(),
    ));
    for (id, ea) in &ta {
        let Some(eb) = tb.get(id) else { continue };
        let (ma, mb) = (ea.point_estimate, eb.point_estimate);
        let (ia, ib) = (ea.confidence_interval, eb.confidence_interval);
        let change = mb / ma - 1.0;
        let beyond = ia.upper_bound < ib.lower_bound || ib.upper_bound < ia.lower_bound;
        let broken = limits.iter().find(|(pat, lim)| id.contains(pat.as_str()) && beyond && change > *lim);
        let verdict = match (broken, beyond, change > 0.0) {
            (Some(_), _, _) => Verdict::Regressed,
            (None, true, true) => Verdict::Worse,
            (None, true, false) => Verdict::Better,
            _ => Verdict::WithinNoise,
        };
        if let Some((_, lim)) = broken {
            out.failures.push(format!(
                "{id}: {} → {} ({:+.1} %, limit +{:.0} %)",
                t(ma),
                t(mb),
                change * 100.0,
                lim * 100.0
            ));
        }
        out.markdown.push_str(&format!(
            "| {id} | {} | {} | {:+.1} % | {}–{} | {}–{} | {} |\n",
            t(ma),
            t(mb),
            change * 100.0,
            t(ia.lower_bound),
            t(ia.upper_bound),
            t(ib.lower_bound),
            t(ib.upper_bound),
            verdict.text(true)
        ));
        out.rows.push(super::ExportRow {
            load: None,
            metric: id.clone(),
            a: ma,
            b: mb,
            change,
            a_low: ia.lower_bound,
            a_high: ia.upper_bound,
            b_low: ib.lower_bound,
            b_high: ib.upper_bound,
            verdict,
        });
    }
    Ok(out)
}
