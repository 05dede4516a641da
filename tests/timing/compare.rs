//! `goodput compare`: two runs of the same workload are within noise; a run of a deliberately
//! slowed engine (a test-only delay before every step) is a regression, with a non-zero exit.

use crate::common::{goodput, goodput_code};

#[test]
fn same_workload_is_within_noise_and_a_slowed_engine_regresses() {
    let _serial = crate::serial();
    let dir = std::env::temp_dir().join(format!("goodput-compare-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let run = |name: &str, extra: &[&str]| {
        let out = dir.join(name);
        let mut args = vec!["run", "--concurrency", "2", "--requests", "16", "--refine", "0", "--seed", "4", "-q"];
        args.extend(extra);
        args.extend(["--out", out.to_str().unwrap()]);
        let (ok, _, err) = goodput(&args);
        assert!(ok, "{err}");
        out
    };
    // Two single runs of the same workload drift apart by up to ~30 % in TPOT on this 2-core
    // machine (60 % seen once); the 6 ms step delay makes TPOT about 2.5× as long. The
    // thresholds sit between.
    let (a, a2) = (run("a", &[]), run("a2", &[]));
    let slow = run("slow", &["--test-step-delay", "6ms"]);
    let md = dir.join("cmp.md");
    let (ok, out, err) = goodput(&[
        "compare",
        a.to_str().unwrap(),
        a2.to_str().unwrap(),
        "--fail-on",
        "tpot_p50=+80%,output_throughput=-35%",
        "--markdown",
        md.to_str().unwrap(),
    ]);
    assert!(ok, "a repeat of the same workload regressed:\n{out}\n{err}");
    assert!(out.contains("| load | metric | A | B | B − A | B / A |") && !out.contains("**regressed**"), "{out}");
    assert_eq!(std::fs::read_to_string(&md).unwrap().trim(), out.trim());
    let (ok, out, err) =
        goodput(&["compare", a.to_str().unwrap(), slow.to_str().unwrap(), "--fail-on", "tpot_p50=+50%"]);
    assert!(!ok, "the slowed engine passed:\n{out}");
    assert!(out.contains("| tpot_p50 |") && out.contains("**regressed**"), "{out}");
    assert!(err.contains("regression beyond --fail-on") && err.contains("tpot_p50 at load 2"), "{err}");
    // Repeats on the baseline side widen its noise to the run-to-run drift; a slowed engine
    // is still beyond it.
    let repeats = format!("{},{}", a.display(), a2.display());
    let (ok, out, _) = goodput(&["compare", &repeats, slow.to_str().unwrap(), "--fail-on", "tpot_p50=+50%"]);
    assert!(!ok && out.contains("**regressed**"), "{out}");
    let (ok, out, err) = goodput(&["compare", &repeats, a2.to_str().unwrap(), "--fail-on", "tpot_p50=+50%"]);
    assert!(ok, "{out}{err}");
    // Bad input: clear errors.
    let (ok, _, err) = goodput(&["compare", a.to_str().unwrap(), "/nonexistent"]);
    assert!(!ok && err.contains("not a goodput run directory"), "{err}");
    let (ok, _, err) = goodput(&["compare", a.to_str().unwrap(), a2.to_str().unwrap(), "--fail-on", "ttft_p95=-10%"]);
    assert!(!ok && err.contains("+10%"), "{err}");
    let (ok, _, err) = goodput(&["compare", a.to_str().unwrap(), a2.to_str().unwrap(), "--metrics", "speed"]);
    assert!(!ok && err.contains("unknown metric"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `estimates.json` as criterion writes it (mean with its 95 % interval, in ns).
fn estimates(mean: f64, half: f64) -> String {
    let e = |p: f64| {
        format!(
            "{{\"confidence_interval\":{{\"confidence_level\":0.95,\"lower_bound\":{},\"upper_bound\":{}}},\"point_estimate\":{p},\"standard_error\":{}}}",
            p - half,
            p + half,
            half / 2.0
        )
    };
    format!(
        "{{\"mean\":{},\"median\":{},\"median_abs_dev\":{},\"slope\":null,\"std_dev\":{}}}",
        e(mean),
        e(mean),
        e(half),
        e(half)
    )
}

#[test]
fn criterion_baselines_compare_by_benchmark() {
    let root = std::env::temp_dir().join(format!("goodput-criterion-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let put = |tree: &str, bench: &str, baseline: &str, mean: f64| {
        let d = root.join(tree).join(bench).join(baseline);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("estimates.json"), estimates(mean, 0.05 * mean)).unwrap();
    };
    // decode slowed by 30 %, prefill unchanged.
    put("a", "decode_step_tiny/16", "main", 10e6);
    put("a", "prefill_step_tiny/128", "main", 40e6);
    put("b", "decode_step_tiny/16", "pr", 13e6);
    put("b", "prefill_step_tiny/128", "pr", 40.4e6);
    let (a, b) = (root.join("a"), root.join("b"));
    let base = ["compare", a.to_str().unwrap(), b.to_str().unwrap(), "--baseline-a", "main", "--baseline-b", "pr"];
    let (json, csv) = (root.join("cmp.json"), root.join("cmp.csv"));
    let exports = ["--export-json", json.to_str().unwrap(), "--export-csv", csv.to_str().unwrap()];
    let (code, out, err) = goodput_code(&[&base[..], &["--fail-on", "time=+10%"], &exports[..]].concat());
    assert_eq!(code, 1, "a regression exits 1: {out}{err}");
    assert!(
        out.contains("| decode_step_tiny/16 | 10.000 ms | 13.000 ms | +30.0 %") && out.contains("**regressed**"),
        "{out}"
    );
    assert!(out.contains("| prefill_step_tiny/128 |") && out.contains("within noise"), "{out}");
    assert!(err.contains("decode_step_tiny/16: 10.000 ms → 13.000 ms"), "{err}");
    // The exports hold the same rows: the benchmark, both means, the change and the verdict.
    let rows: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let decode = rows.as_array().unwrap().iter().find(|r| r["metric"] == "decode_step_tiny/16").unwrap();
    assert_eq!(
        (decode["a"].as_f64(), decode["b"].as_f64(), &decode["verdict"]),
        (Some(10e6), Some(13e6), &"regressed".into())
    );
    assert!((decode["change"].as_f64().unwrap() - 0.3).abs() < 1e-9);
    let csv = std::fs::read_to_string(&csv).unwrap();
    assert!(csv.starts_with("load,metric,a,b,change,a_low,a_high,b_low,b_high,verdict"), "{csv}");
    assert_eq!(csv.lines().count(), 3, "{csv}");
    // Only prefill gated: passes, exit 0.
    let (code, _, err) = goodput_code(&[&base[..], &["--fail-on", "prefill=+10%"]].concat());
    assert_eq!(code, 0, "{err}");
    // A baseline that is not there: a clear error, exit 2 (not a regression).
    let (code, _, err) = goodput_code(&["compare", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert!(code == 2 && err.contains("no criterion estimates") && err.contains("`base`"), "{code} {err}");
    let _ = std::fs::remove_dir_all(&root);
}
