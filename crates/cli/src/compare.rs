//! `goodput compare A B`: two runs of the same workload (their `--out` directories), level by
//! level and metric by metric — values, ratio, and whether the change is beyond the noise each
//! run's own requests show (95 % bootstrap intervals that do not overlap). A Markdown table for
//! pull requests; with `--fail-on ttft_p95=+10%`, a non-zero exit when a metric gets worse by
//! more than that and beyond the noise, so an engine's CI can gate on it.
//!
//! Criterion baselines compare the same way: when A and B are criterion output trees
//! (`target/criterion`), each benchmark's mean time and its 95 % confidence interval from
//! `<bench>/<baseline>/estimates.json` (`--baseline-a`, `--baseline-b`; criterion's own `base`
//! and `new` by default, so `goodput compare target/criterion target/criterion` is the last two
//! runs), with `--fail-on time=+10%` (every benchmark) or `--fail-on decode_step=+10%` (the
//! benchmarks whose id contains that).

use anyhow::{bail, Context, Result};
use clap::Args;
use goodput_core::ClientRecord;
use goodput_metrics::compare::{breaks, compare_repeats, parse_thresholds, Key, Row, DEFAULT_KEYS};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// The baseline run (a `goodput run --out` directory), or its repeats separated by commas
    /// (A1,A2,A3: the noise then includes the run-to-run drift).
    #[arg(value_delimiter = ',', num_args = 1, required = true)]
    pub a: Vec<PathBuf>,
    /// The run to judge, or its repeats.
    #[arg(value_delimiter = ',', num_args = 1, required = true)]
    pub b: Vec<PathBuf>,
    /// Metrics to compare (default: TTFT p50/p95/p99, TPOT p50/p95, ITL p95, E2E p95, queue
    /// and prefill p95, output and request throughput).
    #[arg(long, value_delimiter = ',')]
    pub metrics: Option<Vec<String>>,
    /// Exit non-zero when a metric gets worse by more than this, beyond the noise:
    /// `ttft_p95=+10%,output_throughput=-5%`.
    #[arg(long)]
    pub fail_on: Option<String>,
    /// Also write the Markdown table here.
    #[arg(long)]
    pub markdown: Option<PathBuf>,
    /// Bootstrap resamples per metric and run.
    #[arg(long, default_value_t = 400)]
    pub bootstrap: usize,
    /// Criterion trees: the baseline of A.
    #[arg(long, default_value = "base")]
    pub baseline_a: String,
    /// Criterion trees: the baseline of B.
    #[arg(long, default_value = "new")]
    pub baseline_b: String,
}

/// A benchmark's mean time (ns) and its 95 % confidence interval, from criterion.
#[derive(Clone, Copy, Debug)]
struct Estimate {
    mean: f64,
    lo: f64,
    hi: f64,
}

/// Every `<id>/<baseline>/estimates.json` under `root`, by benchmark id.
/// Prints the Markdown table, writes it to `markdown` if asked, and fails on any regression
/// beyond `--fail-on`.
fn report(md: &str, markdown: Option<&Path>, failures: &[String]) -> Result<()> {
    println!("{md}");
    if let Some(p) = markdown {
        std::fs::write(p, md).with_context(|| format!("writing {}", p.display()))?;
    }
    if !failures.is_empty() {
        bail!("regression beyond --fail-on:\n  {}", failures.join("\n  "));
    }
    Ok(())
}

fn criterion_tree(root: &Path, baseline: &str) -> Result<BTreeMap<String, Estimate>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for e in entries.flatten() {
            let p = e.path();
            if !p.is_dir() {
                continue;
            }
            let est = p.join(baseline).join("estimates.json");
            if est.is_file() {
                let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&est)?)
                    .with_context(|| format!("{} is not JSON", est.display()))?;
                let m = &v["mean"];
                let num =
                    |x: &serde_json::Value| x.as_f64().with_context(|| format!("{}: no mean estimate", est.display()));
                let id = p.strip_prefix(root).unwrap_or(&p).display().to_string();
                out.insert(
                    id,
                    Estimate {
                        mean: num(&m["point_estimate"])?,
                        lo: num(&m["confidence_interval"]["lower_bound"])?,
                        hi: num(&m["confidence_interval"]["upper_bound"])?,
                    },
                );
            }
            if p.file_name().is_some_and(|n| n != "report") {
                stack.push(p);
            }
        }
    }
    Ok(out)
}

fn is_criterion(dir: &Path) -> bool {
    !dir.join("records.jsonl").exists() && dir.is_dir() && !dir.join("summary.json").exists()
}

fn run_criterion(a: &CompareArgs) -> Result<()> {
    let (ta, tb) = (criterion_tree(&a.a[0], &a.baseline_a)?, criterion_tree(&a.b[0], &a.baseline_b)?);
    if ta.is_empty() || tb.is_empty() {
        bail!(
            "no criterion estimates: {} has {} `{}` benchmarks, {} has {} `{}` ones (a `goodput run --out` directory has records.jsonl; a criterion tree has <bench>/<baseline>/estimates.json)",
            a.a[0].display(),
            ta.len(),
            a.baseline_a,
            a.b[0].display(),
            tb.len(),
            a.baseline_b
        );
    }
    // `--fail-on time=+10%` or `PATTERN=+N%`.
    let mut limits: Vec<(String, f64)> = Vec::new();
    for part in a.fail_on.iter().flat_map(|s| s.split(',')).map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = part.split_once('=').with_context(|| format!("--fail-on `{part}`: expected time=+10%"))?;
        let pct: f64 = v
            .trim()
            .strip_prefix('+')
            .and_then(|x| x.strip_suffix('%'))
            .and_then(|x| x.trim().parse().ok())
            .filter(|x: &f64| *x > 0.0)
            .with_context(|| format!("--fail-on `{part}`: a benchmark's time gets worse as it rises; write +N%"))?;
        limits.push((if k.trim() == "time" { String::new() } else { k.trim().to_string() }, pct / 100.0));
    }
    let mut md = format!(
        "### goodput compare (criterion)\n\nA: `{}` ({}) · B: `{}` ({}) · mean time per iteration with criterion's 95 % confidence interval\n\n| benchmark | A | B | change | A 95 % | B 95 % | verdict |\n|---|---:|---:|---:|---:|---:|---|\n",
        a.a[0].display(),
        a.baseline_a,
        a.b[0].display(),
        a.baseline_b
    );
    let t = |ns: f64| {
        if ns >= 1e6 {
            format!("{:.3} ms", ns / 1e6)
        } else {
            format!("{:.3} µs", ns / 1e3)
        }
    };
    let mut failures = Vec::new();
    for (id, ea) in &ta {
        let Some(eb) = tb.get(id) else { continue };
        let change = eb.mean / ea.mean - 1.0;
        let beyond = ea.hi < eb.lo || eb.hi < ea.lo;
        let broken = limits.iter().find(|(pat, lim)| id.contains(pat.as_str()) && beyond && change > *lim);
        let verdict = match (broken, beyond, change > 0.0) {
            (Some(_), _, _) => "**regressed**",
            (None, true, true) => "slower (beyond noise)",
            (None, true, false) => "faster (beyond noise)",
            _ => "within noise",
        };
        if let Some((_, lim)) = broken {
            failures.push(format!(
                "{id}: {} → {} ({:+.1} %, limit +{:.0} %)",
                t(ea.mean),
                t(eb.mean),
                change * 100.0,
                lim * 100.0
            ));
        }
        md.push_str(&format!(
            "| {id} | {} | {} | {:+.1} % | {}–{} | {}–{} | {verdict} |\n",
            t(ea.mean),
            t(eb.mean),
            change * 100.0,
            t(ea.lo),
            t(ea.hi),
            t(eb.lo),
            t(eb.hi)
        ));
    }
    report(&md, a.markdown.as_deref(), &failures)
}

/// The measured records of a run, by level load.
fn load_run(dir: &Path) -> Result<BTreeMap<String, Vec<ClientRecord>>> {
    let path = dir.join("records.jsonl");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("{}: not a goodput run directory (no records.jsonl)", dir.display()))?;
    let mut levels: BTreeMap<String, Vec<ClientRecord>> = BTreeMap::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let v: serde_json::Value =
            serde_json::from_str(line).with_context(|| format!("{}: line {} is not JSON", path.display(), i + 1))?;
        // Older runs wrote `warmup: true`; newer ones a phase.
        let measured = match v.get("phase").and_then(|p| p.as_str()) {
            Some(p) => p == "measured",
            None => v.get("warmup") != Some(&serde_json::Value::Bool(true)),
        };
        if !measured {
            continue;
        }
        let level = v.get("level").map(|l| l.to_string()).unwrap_or_default();
        let rec: ClientRecord = serde_json::from_value(v)
            .with_context(|| format!("{}: line {} is not a request record", path.display(), i + 1))?;
        levels.entry(level).or_default().push(rec);
    }
    if levels.is_empty() {
        bail!("{}: no measured requests", path.display());
    }
    Ok(levels)
}

fn fmt(key: &str, x: f64) -> String {
    if key.contains("throughput") || key == "goodput" || key.starts_with("per_user_tps") {
        format!("{x:.2}")
    } else if key.starts_with("error_rate") || key.starts_with("timeout_rate") {
        format!("{:.2} %", x * 100.0)
    } else {
        format!("{:.2} ms", x * 1e3)
    }
}

fn path_list(paths: &[PathBuf]) -> String {
    paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join("`, `")
}

pub fn run(a: CompareArgs) -> Result<()> {
    if a.a.len() == 1 && a.b.len() == 1 && is_criterion(&a.a[0]) && is_criterion(&a.b[0]) {
        return run_criterion(&a);
    }
    let names: Vec<String> = a.metrics.clone().unwrap_or_else(|| DEFAULT_KEYS.iter().map(|s| s.to_string()).collect());
    let keys: Vec<Key> =
        names.iter().map(|n| Key::parse(n).map_err(anyhow::Error::msg)).collect::<Result<_>>().context("--metrics")?;
    let thresholds = match &a.fail_on {
        Some(s) => parse_thresholds(s).map_err(anyhow::Error::msg).context("--fail-on")?,
        None => Vec::new(),
    };
    let mut keys = keys;
    for t in &thresholds {
        if !keys.contains(&t.key) {
            keys.push(t.key);
        }
    }
    let ra: Vec<BTreeMap<String, Vec<ClientRecord>>> = a.a.iter().map(|p| load_run(p)).collect::<Result<_>>()?;
    let rb: Vec<BTreeMap<String, Vec<ClientRecord>>> = a.b.iter().map(|p| load_run(p)).collect::<Result<_>>()?;
    // Levels every repeat of both sides ran.
    let shared: Vec<&String> = ra[0].keys().filter(|l| ra.iter().chain(&rb).all(|r| r.contains_key(*l))).collect();
    if shared.is_empty() {
        bail!(
            "the runs share no load level (A has {:?}, B has {:?}); compare runs of the same sweep",
            ra[0].keys().collect::<Vec<_>>(),
            rb[0].keys().collect::<Vec<_>>()
        );
    }
    let mut md = format!(
        "### goodput compare\n\nA: `{}` · B: `{}` · 95 % bootstrap intervals over each run's measured requests\n\n| load | metric | A | B | B − A | B / A | A 95 % | B 95 % | verdict |\n|---:|---|---:|---:|---:|---:|---:|---:|---|\n",
        path_list(&a.a),
        path_list(&a.b)
    );
    let mut failures: Vec<String> = Vec::new();
    let mut sorted = shared.clone();
    sorted.sort_by(|x, y| x.parse::<f64>().unwrap_or(0.0).total_cmp(&y.parse::<f64>().unwrap_or(0.0)));
    for level in sorted {
        let xa: Vec<Vec<&ClientRecord>> = ra.iter().map(|r| r[level].iter().collect()).collect();
        let xb: Vec<Vec<&ClientRecord>> = rb.iter().map(|r| r[level].iter().collect()).collect();
        let rows: Vec<Row> = compare_repeats(&xa, &xb, &keys, a.bootstrap);
        for r in &rows {
            let broken: Vec<&goodput_metrics::compare::Threshold> =
                thresholds.iter().filter(|t| breaks(r, t)).collect();
            let verdict = if !broken.is_empty() {
                "**regressed**"
            } else if r.beyond_noise && r.worse {
                "worse (beyond noise)"
            } else if r.beyond_noise {
                "better (beyond noise)"
            } else {
                "within noise"
            };
            for t in broken {
                failures.push(format!(
                    "{} at load {level}: {} → {} ({:+.1} %, limit {}{:.0} %)",
                    r.key,
                    fmt(&r.key, r.a),
                    fmt(&r.key, r.b),
                    r.change() * 100.0,
                    if t.key.higher_is_better() { "-" } else { "+" },
                    t.worse_by * 100.0
                ));
            }
            let diff = fmt(&r.key, r.b - r.a);
            md.push_str(&format!(
                "| {level} | {} | {} | {} | {}{diff} | {:.3} ({:+.1} %) | {}–{} | {}–{} | {verdict} |\n",
                r.key,
                fmt(&r.key, r.a),
                fmt(&r.key, r.b),
                if r.b >= r.a { "+" } else { "" },
                r.ratio,
                r.change() * 100.0,
                fmt(&r.key, r.a_interval.0),
                fmt(&r.key, r.a_interval.1),
                fmt(&r.key, r.b_interval.0),
                fmt(&r.key, r.b_interval.1),
            ));
        }
    }
    report(&md, a.markdown.as_deref(), &failures)
}
