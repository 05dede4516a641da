//! A run's results read back through `goodput-results` as `report` and `compare` read them:
//! the stored capacity verdict is the one the records give when recomputed, the exports hold
//! the same levels, and `compare` tells an error from a regression by its exit status.

use crate::common::{check_schema, goodput_code, run_ok, summary_of, temp};
use goodput_core::ClientRecord;
use goodput_metrics::capacity::{LevelOutcome, QueueSource, RetryShare, Verdict};
use goodput_metrics::windowed::{self, Sending};
use goodput_report::export::LevelRow;
use goodput_results::files::read_csv;
use goodput_results::{Results, RunSummary};

#[test]
fn the_stored_verdict_is_the_one_the_records_give_and_the_exports_hold_the_levels() {
    let dir = temp("verdict");
    let (json, csv, md) = (dir.with_extension("json"), dir.with_extension("csv"), dir.with_extension("md"));
    run_ok(
        &dir,
        &[
            "--concurrency",
            "1,8",
            "--requests",
            "8",
            "--refine",
            "0",
            "--slo",
            "ttft_p95=60ms,error_rate=1%",
            "--export-json",
            json.to_str().unwrap(),
            "--export-csv",
            csv.to_str().unwrap(),
            "--export-markdown",
            md.to_str().unwrap(),
        ],
    );
    let r = Results::read(&dir).expect("the run's results");
    let s = &r.summary;
    assert_eq!(s.format, goodput_results::FORMAT);
    check_schema(&summary_of(&dir));
    // Recompute every level from its measured records alone, then the verdict from those.
    let mut outcomes = Vec::new();
    for l in &s.levels {
        let measured: Vec<&ClientRecord> = r.measured(l.summary.load).collect();
        assert_eq!(measured.len(), 8);
        // Over the level's steady window: every record of the level, the measured ones sampled.
        let all: Vec<&ClientRecord> =
            r.records.iter().filter(|x| x.level == l.summary.load).map(|x| &x.record).collect();
        let (again, steady) = windowed::summarize(l.summary.load, &all, &measured, &s.slos, Sending::Closed);
        assert_eq!(steady, l.steady, "the steady window is the records' window");
        assert_eq!(again, l.summary, "the summary is the records' summary");
        outcomes.push(LevelOutcome {
            load: again.load,
            slos_hold: again.slos_hold(),
            surely_holds: again.slos_surely_hold(),
            slo_used: again.most_used(),
            output_throughput: again.output_throughput,
            queue_time: again.engine_wait.as_ref().map(|w| w.p50),
        });
    }
    let shares: Vec<RetryShare> = s.levels.iter().map(|l| RetryShare { load: l.summary.load, share: 0.0 }).collect();
    let recomputed = Verdict::of(&outcomes, &[QueueSource::EngineStamps; 2], &shares);
    assert_eq!(s.capacity.as_ref(), Some(&recomputed));
    assert_eq!(recomputed, RunSummary::verdict_of(&s.levels));
    // The exports: the summary itself, and one row per level.
    let exported: RunSummary = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(&exported, s);
    let rows: Vec<LevelRow> = read_csv(&csv).unwrap();
    assert_eq!(rows, s.levels.iter().map(LevelRow::of).collect::<Vec<_>>());
    let table = std::fs::read_to_string(&md).unwrap();
    assert!(table.starts_with("| load (users) |") && table.lines().count() == 4, "{table}");
    for p in [&json, &csv, &md] {
        let _ = std::fs::remove_file(p);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn compare_exits_2_on_an_error_and_results_of_a_newer_goodput_are_refused() {
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/run-v0.1");
    let (code, _, err) = goodput_code(&["compare", fixture, "/nonexistent/run"]);
    assert!(code == 2 && err.contains("not a goodput run directory"), "{code}: {err}");
    let (code, _, err) = goodput_code(&["compare", fixture, fixture, "--fail-on", "ttft_p95=-10%"]);
    assert!(code == 2 && err.contains("+10%"), "{code}: {err}");
    // The same run against itself: nothing regressed.
    // An export into a directory that does not exist is refused before anything runs.
    let (code, _, err) = goodput_code(&["run", "--export-csv", "/nonexistent/levels.csv"]);
    assert!(code == 1 && err.contains("--export-csv") && err.contains("no directory /nonexistent"), "{code}: {err}");
    let (code, out, err) = goodput_code(&["compare", fixture, fixture, "--fail-on", "ttft_p95=+10%"]);
    assert!(code == 0 && out.contains("within noise"), "{code}: {out}{err}");
    // A results file from a future format is refused by name, not misread.
    let dir = temp("newer");
    std::fs::create_dir_all(&dir).unwrap();
    let mut s: serde_json::Value =
        serde_json::from_slice(&std::fs::read(format!("{fixture}/summary.json")).unwrap()).unwrap();
    s["format"] = 99.into();
    std::fs::write(dir.join("summary.json"), serde_json::to_vec(&s).unwrap()).unwrap();
    let (code, _, err) = goodput_code(&["report", dir.to_str().unwrap()]);
    assert!(code == 1 && err.contains("written by a newer goodput"), "{code}: {err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_previous_release_s_results_render_with_the_verdict_computed_on_reading() {
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/run-v0.1");
    let out = temp("v01").with_extension("html");
    let (code, _, err) = goodput_code(&["report", fixture, "-o", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let page = std::fs::read_to_string(&out).unwrap();
    let r = Results::read(std::path::Path::new(fixture)).unwrap();
    let v = r.summary.verdict();
    if let Some(u) = v.usable {
        assert!(page.contains(&format!("usable {u}")), "the capacity chart marks usable capacity");
    }
    // Its own conclusion.txt (the page escapes `<`, so compare the text before the first one).
    let text = r.conclusion.split('<').next().unwrap().trim();
    assert!(text.len() > 40 && page.contains(text), "its own conclusion: {text}");
    let _ = std::fs::remove_file(&out);
}

/// Two runs of one setup whose capacities cannot both be right (`run` held up to 4 users
/// where the other broke at 2) are flagged by `compare`; a run against itself is not.
#[test]
fn compare_flags_capacities_that_contradict_each_other() {
    let fixture = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/run-v0.1"));
    let broke = temp("contradicting");
    std::fs::create_dir_all(&broke).unwrap();
    for f in std::fs::read_dir(fixture).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, broke.join(f.file_name().unwrap())).unwrap();
    }
    let mut s: RunSummary = goodput_results::read_summary(&broke).unwrap();
    s.levels[1].summary.slos[0].holds = false;
    std::fs::write(broke.join("summary.json"), serde_json::to_vec_pretty(&s).unwrap()).unwrap();
    let (a, b) = (fixture.to_str().unwrap(), broke.to_str().unwrap());
    let (code, out, err) = goodput_code(&["compare", a, b]);
    assert_eq!(code, 0, "{err}");
    let want = format!(
        "**Capacities contradict:** A (`{a}`) held every SLO as counted (results without intervals) up to 4 users (its usable capacity), where B (`{b}`) broke at 2 users."
    );
    assert!(out.contains(&want), "{out}");
    let (_, out, _) = goodput_code(&["compare", a, a]);
    assert!(!out.contains("contradict"), "{out}");
    let _ = std::fs::remove_dir_all(&broke);
}

/// A CI gate in one command: `run --baseline BASE --fail-on …` runs, then judges the run
/// against BASE as `goodput compare` does: the same run passes (exit 0), a run throttled to
/// one sequence at a time regresses its TTFT P95 many times over (exit 1), both saying so.
#[test]
fn a_run_with_a_baseline_is_a_ci_gate() {
    let (base, same, slow) = (temp("gate-base"), temp("gate-same"), temp("gate-slow"));
    let run = ["--seed", "1", "--concurrency", "4", "--requests", "80", "--quiet"];
    run_ok(&base, &run);
    // A wide limit: the same run on this shared machine has drifted by 45 % at P95 (and its
    // throughput by 24 %); one sequence at a time queues the other three users, ten times over.
    let gate = ["--baseline", base.to_str().unwrap(), "--fail-on", "ttft_p95=+300%"];
    let (code, out, err) = goodput_code(&[&["run"], &run[..], &gate[..], &["--out", same.to_str().unwrap()]].concat());
    assert_eq!(code, 0, "{out}{err}");
    assert!(err.contains("gate against the baseline: PASS") && out.contains("PASS"), "{out}{err}");
    let throttled = ["--max-num-seqs", "1", "--out", slow.to_str().unwrap()];
    let (code, out, err) = goodput_code(&[&["run"], &run[..], &gate[..], &throttled[..]].concat());
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("gate against the baseline: FAIL") && err.contains("ttft_p95 at load 4"), "{err}");
    let (code, _, err) = goodput_code(&["run", "--baseline", base.to_str().unwrap(), "--requests", "4"]);
    assert!(code == 2 || code == 1, "--baseline needs --out and --fail-on: {err}");
    assert!(err.contains("--out") || err.contains("--fail-on"), "{err}");
    for d in [base, same, slow] {
        let _ = std::fs::remove_dir_all(d);
    }
}
