//! `goodput engine-check` and the roofline of `engine-bench`, on the CPU (the same code checks
//! a GPU against the CPU when built with `--features cuda`; scripts/gpu-check.sh runs it there).

use crate::common::goodput;

fn json_path(tag: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("goodput-engine-check-{}-{tag}.json", std::process::id()))
}

#[test]
fn engine_check_compares_every_scenario_and_writes_its_json() {
    let path = json_path("pass");
    let p = path.to_str().unwrap();
    let (ok, out, err) = goodput(&[
        "engine-check",
        "--model",
        "tiny",
        "--dtype",
        "f32",
        "--max-tokens",
        "6",
        "--sequences",
        "1",
        "--json",
        p,
    ]);
    assert!(ok, "{out}\n{err}");
    for scenario in ["alone", "batched", "prefix-cache hits", "preemption"] {
        assert!(out.contains(scenario), "{scenario} missing:\n{out}");
    }
    assert!(out.contains("top-1 agreement 100.00 %") && out.contains("engine-check: passed"), "{out}");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(v["passed"], true);
    let greedy = v["greedy"].as_array().unwrap();
    assert_eq!(greedy.len(), 4);
    assert!(greedy.iter().all(|g| g["equal"] == g["requests"]), "{greedy:?}");
    // The scenarios do what they are named for.
    assert!(greedy[2]["prefix_hit_tokens"].as_u64().unwrap() > 0, "no prefix hit: {greedy:?}");
    assert!(greedy[3]["preemptions"].as_u64().unwrap() > 0, "no preemption: {greedy:?}");
    // 128 random tokens, then six text prompts × 32 continued positions.
    assert_eq!(v["logits"][0]["positions"], 128);
    assert_eq!(v["logits"][1]["positions"], 6 * 32);
    assert_eq!(v["logits"][1]["top1_agreement"], 1.0);
    assert_eq!(v["logits"][1]["max_logprob_diff"], 0.0, "f32 against f32 on the CPU is exact");
    let _ = std::fs::remove_file(&path);
}

/// bf16 against f32 on dummy weights: close, but not 100 % top-1 — the check sees it and
/// fails at a bar above what it measured.
#[test]
fn engine_check_fails_below_its_top1_bar() {
    let (ok, out, err) = goodput(&[
        "engine-check",
        "--model",
        "tiny",
        "--dtype",
        "bf16",
        "--max-tokens",
        "4",
        "--sequences",
        "1",
        "--min-top1",
        "0.999",
    ]);
    assert!(!ok, "{out}");
    assert!(out.contains("logits at BF16 vs CPU f32") && out.contains("engine-check: FAILED"), "{out}");
    assert!(err.contains("engine-check failed") && !err.contains("panicked"), "{err}");
    let (ok, _, err) = goodput(&["engine-check", "--max-tokens", "0"]);
    assert!(!ok && err.contains("--max-tokens and --sequences must be at least 1"), "{err}");
}

#[test]
fn engine_bench_holds_each_row_against_the_roofline() {
    let path = json_path("bench");
    let p = path.to_str().unwrap();
    let (ok, out, err) = goodput(&[
        "engine-bench",
        "--model",
        "tiny",
        "--prompt-lens",
        "16",
        "--batch-sizes",
        "1,2,40",
        "--repeats",
        "1",
        "--decode-steps",
        "2",
        "--json",
        p,
    ]);
    assert!(ok, "{out}\n{err}");
    // 40 prompts are more prefill tokens than the CPU's default cap on a step's prefill: the
    // bench still builds its batch whole.
    assert!(out.contains("of floor") && out.contains("roofline: cpu"), "{out}");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let roof = &v["roofline"];
    let bw = roof["bandwidth_gbytes_per_s"].as_f64().unwrap();
    assert_eq!(v["decode"].as_array().unwrap().len(), 3, "{v}");
    for d in v["decode"].as_array().unwrap() {
        // floor = bytes / bandwidth, of_floor = floor / p50.
        let floor = d["floor_s"].as_f64().unwrap();
        assert!((floor - d["bytes_per_step"].as_f64().unwrap() / (bw * 1e9)).abs() < 1e-12, "{d}");
        let of = d["of_floor"].as_f64().unwrap();
        assert!((of - floor / d["step_s"]["p50"].as_f64().unwrap()).abs() < 1e-9, "{d}");
    }
    // A prefill floor only where a bf16 peak was measured (bf16 on a CPU with AVX-512 BF16
    // or AMX): the longer of FLOPs / peak and weights / bandwidth, of_floor = floor / p50.
    let pre = &v["prefill"][0];
    match roof["peak_tflops"].as_f64() {
        Some(peak) => {
            assert!(!roof["cpu_bf16_peak"].is_null(), "{roof}");
            assert!(out.contains("bf16 peak per core") && out.contains("of the vdpbf16ps peak"), "{out}");
            let floor = pre["floor_s"].as_f64().unwrap();
            let weights = v["weight_bytes_per_step"].as_f64().unwrap() / (bw * 1e9);
            assert!(floor > 0.0 && floor >= weights - 1e-15 && peak > 0.0, "{pre}");
            let of = pre["of_floor"].as_f64().unwrap();
            assert!((of - floor / pre["latency_s"]["p50"].as_f64().unwrap()).abs() < 1e-9, "{pre}");
        }
        None => assert!(pre["floor_s"].is_null(), "{pre}"),
    }
    let _ = std::fs::remove_file(&path);
}
