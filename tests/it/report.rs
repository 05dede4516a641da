//! `goodput report` and `run --report`: the page's structure, each chart's data against the
//! run's own numbers, and the page opened in a real browser (headless Chromium, installed by
//! scripts/install-chromium.sh) — it renders its charts and logs no console error.

use crate::common::{chart, chart_data, check_schema, goodput, run_ok, summary_of, temp};
use serde_json::Value;
use std::process::Command;

#[test]
fn a_sweep_s_report_has_every_chart_with_the_run_s_numbers_and_renders_in_chromium() {
    let dir = temp("sweep");
    let (ok, _, err) = goodput(&[
        "run",
        "--concurrency",
        "1,3",
        "--requests",
        "6",
        "--refine",
        "0",
        "--out",
        dir.to_str().unwrap(),
        "--report",
    ]);
    assert!(ok, "{err}");
    let page = std::fs::read_to_string(dir.join("report.html")).unwrap();
    // Self-contained: no scripts to run, nothing fetched.
    assert!(
        !page.contains("<script src") && !page.contains("<link") && !page.contains("src=\"http"),
        "external resource"
    );
    // The answer first: conclusion, charts (capacity, TTFT decomposition, percentiles), then
    // the folded level tables and the setup.
    let at = |section: &str| page.find(&format!("<h2 id=\"{section}\"")).unwrap_or_else(|| panic!("{section} missing"));
    assert!(at("conclusion") < at("charts") && at("charts") < at("levels") && at("levels") < at("setup"));
    assert!(page.contains("<th class=\"l\">engine settings</th><td class=\"l\">block size 16,"), "a readable setup");
    assert!(page.contains("usable capacity is") || page.contains("No level held the SLOs"));
    // The three-layer table of each level.
    assert_eq!(page.matches("<details><summary>Level ").count(), 2);
    assert!(page.contains("<td class=\"l\">engine</td><td class=\"l\">queue (ms)</td>"));
    assert!(page.contains("<td class=\"l\">engine</td><td class=\"l\">engine wait (ms)</td>"));
    let charts = chart_data(&page);
    let ids: Vec<&str> = charts.iter().map(|c| c["id"].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        [
            "throughput",
            "ttft-decomposition",
            "percentiles-ttft",
            "percentiles-tpot",
            "percentiles-e2e",
            "engine-timeline",
            "ttft-cdf"
        ]
    );
    assert_eq!(page.matches("<svg").count(), charts.len(), "one inline SVG per chart");
    assert_eq!(page.matches("<figcaption>").count(), charts.len());
    for c in &charts {
        assert!(c["caption"].as_str().unwrap().starts_with("tiny, short-qa"), "{}", c["caption"]);
        assert!(!c["x_label"].as_str().unwrap().is_empty());
    }
    let summary = summary_of(&dir);
    schema_holds_the_summary(&summary);
    charts_hold_the_run_s_numbers(&charts, &summary);
    renders_in_chromium(&dir, charts.len());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn multi_turn_and_agent_reports_draw_their_own_charts() {
    for (scenario, id) in [("multi-turn", "multi-turn"), ("agent", "agent-timeline")] {
        let dir = temp(scenario);
        run_ok(
            &dir,
            &["--scenario", scenario, "--concurrency", "2", "--requests", "2", "--warmup", "0", "--refine", "0"],
        );
        let out = dir.join("page.html");
        let (ok, _, err) = goodput(&["report", dir.to_str().unwrap(), "-o", out.to_str().unwrap()]);
        assert!(ok, "{err}");
        let page = std::fs::read_to_string(&out).unwrap();
        let charts = chart_data(&page);
        let c = chart(&charts, id);
        if id == "multi-turn" {
            // Cached and new prompt tokens by turn (stacked) and TTFT by turn.
            let names: Vec<&str> =
                c["series"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
            assert_eq!(names, ["cached tokens", "new prefill tokens", "TTFT p50 (ms)"]);
            assert_eq!(c["series"][0]["points"].as_array().unwrap().len(), 4, "4 turns");
        } else {
            // The built-in agent: llm → tool → llm → retrieve → llm, laid end to end.
            let bars = c["series"].as_array().unwrap();
            assert_eq!(bars.len(), 5);
            assert!(bars[1]["name"].as_str().unwrap().contains("tool"));
            let (s0, d0) = (bars[0]["points"][0][0].as_f64().unwrap(), bars[0]["points"][0][1].as_f64().unwrap());
            assert_eq!(s0, 0.0);
            assert!(
                (bars[1]["points"][0][0].as_f64().unwrap() - d0).abs() < 1e-9,
                "each step starts where the last ended"
            );
        }
        assert_eq!(page.matches("<svg").count(), charts.len());
        check_schema(&summary_of(&dir));
        let _ = std::fs::remove_dir_all(&dir);
    }
    let (ok, _, err) = goodput(&["report", "/nonexistent/run"]);
    assert!(!ok && err.contains("not a goodput results directory"), "{err}");
    let (ok, _, err) = goodput(&["run", "--report"]);
    assert!(!ok && err.contains("--out"), "{err}");
}

/// The report of a checked-in run: its chart data and page outline against snapshots
/// (`GOODPUT_UPDATE_SNAPSHOTS=1` rewrites them after a deliberate change).
#[test]
fn a_fixture_run_renders_to_its_snapshots() {
    let fixture = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/run-small"));
    let dir = temp("fixture");
    std::fs::create_dir_all(&dir).unwrap();
    let page_path = dir.join("report.html");
    let (ok, _, err) = goodput(&["report", fixture.to_str().unwrap(), "-o", page_path.to_str().unwrap()]);
    assert!(ok, "{err}");
    let page = std::fs::read_to_string(&page_path).unwrap();
    let data = Value::Array(chart_data(&page));
    // The outline: headings and figures in order.
    let outline: Vec<String> = page
        .lines()
        .filter_map(|l| {
            let id = l.split("id=\"").nth(1)?.split('"').next()?;
            (l.starts_with("<h2") || l.starts_with("<figure")).then(|| id.to_string())
        })
        .collect();
    let snapshot = serde_json::json!({ "outline": outline, "charts": data });
    let path = fixture.join("report.snapshot.json");
    if std::env::var_os("GOODPUT_UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, serde_json::to_string_pretty(&snapshot).unwrap()).unwrap();
    }
    let want: Value =
        serde_json::from_slice(&std::fs::read(&path).expect("snapshot (GOODPUT_UPDATE_SNAPSHOTS=1)")).unwrap();
    assert_eq!(snapshot["outline"], want["outline"]);
    let (got, want) = (snapshot["charts"].as_array().unwrap(), want["charts"].as_array().unwrap());
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert_eq!(g, w, "chart {} differs from its snapshot", w["id"]);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The results file against its checked-in JSON Schema (and the schema is not vacuous).
fn schema_holds_the_summary(summary: &Value) {
    // The results file against its checked-in JSON Schema (and the schema is not vacuous).
    check_schema(summary);
    let schema: Value = serde_json::from_slice(
        &std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/summary.schema.json")).unwrap(),
    )
    .unwrap();
    let validator = jsonschema::validator_for(&schema).expect("a valid schema");
    let mut broken = summary.clone();
    broken["levels"][0]["summary"]["error_rate"] = Value::from(3.0);
    broken.as_object_mut().unwrap().remove("load_unit");
    assert_eq!(validator.iter_errors(&broken).count(), 2);
}

/// Each chart's data is the run's own numbers.
fn charts_hold_the_run_s_numbers(charts: &[Value], summary: &Value) {
    // Each chart's data is the run's own numbers.
    let levels = summary["levels"].as_array().unwrap();
    // The capacity chart marks usable and limit capacity where the stored verdict puts them.
    let capacity = chart(charts, "throughput");
    let marks: Vec<String> =
        capacity["marks"].as_array().unwrap().iter().map(|m| m[1].as_str().unwrap().to_string()).collect();
    let limit = summary["capacity"]["limit"].as_f64().unwrap();
    assert!(marks.contains(&format!("limit {limit}")), "{marks:?}");
    let tput = &capacity["series"][0]["points"];
    for (p, l) in tput.as_array().unwrap().iter().zip(levels) {
        assert_eq!(p[0], l["summary"]["load"]);
        assert_eq!(p[1], l["summary"]["output_throughput"]);
    }
    let p95 = &chart(charts, "percentiles-ttft")["series"][1];
    assert_eq!(p95["name"], "p95");
    for (p, l) in p95["points"].as_array().unwrap().iter().zip(levels) {
        assert!((p[1].as_f64().unwrap() - l["summary"]["ttft"]["p95"].as_f64().unwrap() * 1e3).abs() < 1e-9);
    }
    let limits = chart(charts, "percentiles-ttft")["limits"].as_array().unwrap().clone();
    assert_eq!(limits[0][0].as_f64(), Some(1000.0), "the default ttft_p95 SLO of 1 s, drawn at 1000 ms");
    let cdf = &chart(charts, "ttft-cdf")["series"];
    assert_eq!(cdf.as_array().unwrap().len(), 2);
    for s in cdf.as_array().unwrap() {
        let pts = s["points"].as_array().unwrap();
        assert_eq!(pts.len(), 6, "6 measured requests per level");
        assert_eq!(pts.last().unwrap()[1].as_f64(), Some(1.0));
        assert!(pts.windows(2).all(|w| w[0][0].as_f64() <= w[1][0].as_f64()));
    }
    let stacked = &chart(charts, "ttft-decomposition");
    assert_eq!(stacked["kind"], "Stacked");
}

/// The real browser: render, screenshot, no console errors.
fn renders_in_chromium(dir: &std::path::Path, charts: usize) {
    // The real browser: render, screenshot, no console errors.
    let installed =
        Command::new("bash").arg(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/install-chromium.sh")).output().unwrap();
    assert!(installed.status.success(), "install-chromium.sh: {}", String::from_utf8_lossy(&installed.stderr));
    let chromium = String::from_utf8(installed.stdout).unwrap().trim().to_string();
    let shot = dir.join("shot.png");
    let url = format!("file://{}", dir.join("report.html").display());
    let browse = |extra: &[&str]| {
        let mut args = vec![
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
        ];
        args.extend(extra);
        args.push(&url);
        Command::new(&chromium).args(&args).env("HOME", dir).output().expect("run chromium")
    };
    let shot_arg = format!("--screenshot={}", shot.display());
    let out = browse(&[&shot_arg, "--window-size=1200,3000"]);
    let png =
        std::fs::read(&shot).unwrap_or_else(|_| panic!("no screenshot: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    assert!(png.len() > 20_000, "a blank page would be tiny: {} bytes", png.len());
    let out = browse(&["--dump-dom"]);
    let dom = String::from_utf8_lossy(&out.stdout);
    assert_eq!(dom.matches("<svg").count(), charts, "the browser's DOM holds every chart");
    assert!(dom.matches("<polyline").count() + dom.matches("<path").count() + dom.matches("<polygon").count() > 5);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        !log.lines().any(|l| l.contains("CONSOLE") && l.to_lowercase().contains("error")),
        "console errors:\n{log}"
    );
}

/// The screenshots under `docs/screenshots/`, taken here in headless Chromium: a sweep's report
/// (the checked-in fixture), a trace replay's (one level: its time charts lead) and a plan's
/// page. `GOODPUT_UPDATE_SCREENSHOTS=1` writes them into `docs/`; every run checks they render.
#[test]
fn screenshots_of_the_report_and_the_plan_page() {
    let installed =
        Command::new("bash").arg(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/install-chromium.sh")).output().unwrap();
    assert!(installed.status.success(), "install-chromium.sh: {}", String::from_utf8_lossy(&installed.stderr));
    let chromium = String::from_utf8(installed.stdout).unwrap().trim().to_string();
    let dir = temp("screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    let root = env!("CARGO_MANIFEST_DIR");
    let (sweep, trace, plan) = (dir.join("sweep.html"), dir.join("trace"), dir.join("plan.html"));
    let (ok, _, err) = goodput(&["report", &format!("{root}/tests/fixtures/run-small"), "-o", sweep.to_str().unwrap()]);
    assert!(ok, "{err}");
    let trace_file = format!("{root}/examples/traces/mooncake-sample.jsonl");
    run_ok(&trace, &["--trace", &trace_file, "--trace-window", "..12", "--report"]);
    let (ok, _, err) = goodput(&[
        "plan",
        "-m",
        "llama-3.1-8b",
        "--rate",
        "10",
        "--gpus",
        "h100-sxm,h200",
        "--html",
        plan.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let pages = [("report-sweep", sweep), ("report-trace", trace.join("report.html")), ("plan", plan)];
    for (name, page) in pages {
        let shot = dir.join(format!("{name}.png"));
        let out = Command::new(&chromium)
            .args(["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1400,2200"])
            .arg(format!("--screenshot={}", shot.display()))
            .arg(format!("file://{}", page.display()))
            .env("HOME", &dir)
            .output()
            .expect("run chromium");
        let png =
            std::fs::read(&shot).unwrap_or_else(|_| panic!("no {name}.png: {}", String::from_utf8_lossy(&out.stderr)));
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        assert!(png.len() > 20_000, "{name}: a blank page would be tiny: {} bytes", png.len());
        if std::env::var_os("GOODPUT_UPDATE_SCREENSHOTS").is_some() {
            let docs = std::path::Path::new(root).join("docs/screenshots");
            std::fs::create_dir_all(&docs).unwrap();
            std::fs::copy(&shot, docs.join(format!("{name}.png"))).unwrap();
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
