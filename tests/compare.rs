//! `goodput compare`: two runs of the same workload are within noise; a run of a deliberately
//! slowed engine (a test-only delay before every step) is a regression, with a non-zero exit.

use std::process::Command;

fn goodput(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_goodput")).args(args).output().expect("run goodput");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

#[test]
fn same_workload_is_within_noise_and_a_slowed_engine_regresses() {
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
    let (a, a2) = (run("a", &[]), run("a2", &[]));
    let slow = run("slow", &["--test-step-delay", "6ms"]);
    let md = dir.join("cmp.md");
    let (ok, out, err) = goodput(&[
        "compare",
        a.to_str().unwrap(),
        a2.to_str().unwrap(),
        "--fail-on",
        "tpot_p50=+25%,output_throughput=-25%",
        "--markdown",
        md.to_str().unwrap(),
    ]);
    assert!(ok, "a repeat of the same workload regressed:\n{out}\n{err}");
    assert!(out.contains("| load | metric | A | B | change |") && !out.contains("**regressed**"), "{out}");
    assert_eq!(std::fs::read_to_string(&md).unwrap().trim(), out.trim());
    let (ok, out, err) =
        goodput(&["compare", a.to_str().unwrap(), slow.to_str().unwrap(), "--fail-on", "tpot_p50=+25%"]);
    assert!(!ok, "the slowed engine passed:\n{out}");
    assert!(out.contains("| tpot_p50 |") && out.contains("**regressed**"), "{out}");
    assert!(err.contains("regression beyond --fail-on") && err.contains("tpot_p50 at load 2"), "{err}");
    // Bad input: clear errors.
    let (ok, _, err) = goodput(&["compare", a.to_str().unwrap(), "/nonexistent"]);
    assert!(!ok && err.contains("not a goodput run directory"), "{err}");
    let (ok, _, err) = goodput(&["compare", a.to_str().unwrap(), a2.to_str().unwrap(), "--fail-on", "ttft_p95=-10%"]);
    assert!(!ok && err.contains("+10%"), "{err}");
    let (ok, _, err) = goodput(&["compare", a.to_str().unwrap(), a2.to_str().unwrap(), "--metrics", "speed"]);
    assert!(!ok && err.contains("unknown metric"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
