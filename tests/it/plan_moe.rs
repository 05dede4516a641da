//! `goodput plan` on the models of 2026: a mixture of experts with latent attention sized by
//! hand on 8 × H200 in FP8, the layouts and dtypes it refuses, the interactivity curve, and a
//! GPU this machine does not have exported as a profile and run end to end.

use crate::common::{goodput, summary_of, temp};
use std::process::Command;

fn json(path: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn deepseek_v3_on_eight_h200_in_fp8_by_hand() {
    let dir = temp("plan-dsv3");
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("plan.json");
    let args = [
        "plan",
        "-m",
        "deepseek-v3",
        "--rate",
        "10",
        "--gpus",
        "h200",
        "--tp",
        "8",
        "--ep",
        "8",
        "--dtype",
        "fp8",
        "--requests",
        "100",
        "--json",
        out.to_str().unwrap(),
    ];
    let (ok, text, err) = goodput(&args);
    assert!(ok, "{err}");
    assert!(text.contains("TP8·EP8") && text.contains("Experts: the distinct experts"), "{text}");
    let plan = json(&out);
    let row = &plan["rows"][0];
    // Per GPU, FP8 linear layers and bf16 embedding, LM head, norms and routers:
    // - attention of a layer 187 107 328 parameters, of which the q_a/kv_a down-projections
    //   (7168·576 + 512 + 7169·1536 = 15 140 864) replicated and the rest split 8 ways:
    //   36 636 058 a GPU, × 61 layers;
    // - 3 dense MLPs of 3·7168·18432 and 58 shared experts of 3·7168·2048, split 8 ways;
    // - 58 routers of 256·7168 + 256 and 123 norms of 7168, bf16, whole;
    // - the LM head and the embedding, 129280·7168 ÷ 8 each, bf16;
    // - 32 of the 256 experts of each of the 58 sparse layers, 3·7168·2048 FP8 bytes each.
    // In all 85 119 353 856 bytes.
    assert!((row["weight_gb_per_gpu"].as_f64().unwrap() - 85.119_353_856).abs() < 1e-9, "{row}");
    // KV: 141 GB × 0.9 − weights − activations of an 8192-token step (8192 · (4·7168 +
    // 2·18432/8) · 2 + 256 · 129280/8 · 4 = 561 807 360 B) = 41 218 838 784 B, at 61 · 576
    // FP8 bytes a token (the latent, whole on every GPU): 1 173 122 tokens.
    assert_eq!(row["kv_tokens"], 1_173_122, "{row}");
    assert_eq!((row["layout_label"].as_str(), row["gpus_per_replica"].as_u64()), (Some("TP8·EP8"), Some(8)));
    assert!(row["capacity"].as_f64().unwrap() > 10.0, "{row}");
    assert_eq!(plan["kv_dtype"], "fp8");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn layouts_and_dtypes_that_cannot_be_are_refused_by_name() {
    let plan = |extra: &[&str]| {
        let mut args = vec!["plan", "--rate", "1", "--requests", "40"];
        args.extend_from_slice(extra);
        goodput(&args)
    };
    // EP that does not divide the experts: Mixtral's 8 over 6 ranks.
    let (ok, out, err) =
        plan(&["-m", "mixtral-8x7b", "--gpus", "h200", "--tp", "1", "--dp-attention", "6", "--ep", "6"]);
    assert!(ok && out.contains("EP 6 does not divide mixtral-8x7b's 8 routed experts"), "{out}{err}");
    // FP4 before Blackwell: refused, or run on bf16 math when asked.
    let oss = ["-m", "gpt-oss-120b", "--gpus", "h100-sxm", "--tp", "1", "--ep", "1", "--dtype", "mxfp4"];
    let (ok, out, err) = plan(&oss);
    assert!(ok && out.contains("h100-sxm has no mxfp4 tensor cores (Blackwell has)"), "{out}{err}");
    let (ok, out, err) = plan(&[&oss[..], &["--emulate"]].concat());
    assert!(ok && out.contains("you need") && out.contains("emulate"), "{out}{err}");
    // A layout that does not fit: DeepSeek-V3 in bf16 on 8 × H100.
    let (ok, out, err) = plan(&["-m", "deepseek-v3", "--gpus", "h100-sxm", "--tp", "8", "--ep", "8"]);
    assert!(ok && out.contains("does not fit") && out.contains("No configuration tried"), "{out}{err}");
    // Two nodes need a network: the L40S has none in the catalog.
    let (ok, out, err) =
        plan(&["-m", "qwen3-30b-a3b", "--gpus", "l40s", "--tp", "4", "--dp-attention", "4", "--nodes", "2"]);
    assert!(ok && out.contains("no network between nodes"), "{out}{err}");
    // A replica beyond --nodes is named, not dropped; a dense model takes any --ep as 1.
    let (ok, out, err) =
        plan(&["-m", "deepseek-v3", "--gpus", "h100-sxm", "--tp", "8", "--dp-attention", "2", "--ep", "all"]);
    assert!(ok && out.contains("needs 2 nodes of 8 GPUs, beyond --nodes 1"), "{out}{err}");
    let (ok, out, err) = plan(&["-m", "llama-3.1-8b", "--gpus", "h200", "--tp", "1", "--ep", "all"]);
    assert!(ok && out.contains("you need 1× h200 (") && out.contains(", TP1, 1 replica"), "{out}{err}");
    // Flags out of range.
    let (ok, _, err) = plan(&["--ep", "x"]);
    assert!(!ok && err.contains("expert-parallel degree"), "{err}");
    let (ok, _, err) = plan(&["--kv-dtype", "nvfp4"]);
    assert!(!ok && err.contains("a KV cache is bf16, fp16 or fp8"), "{err}");
    let (ok, _, err) = plan(&["--expert-skew=-1"]);
    assert!(!ok && err.contains("--expert-skew"), "{err}");
}

#[test]
fn the_interactivity_curve_marks_its_frontier_and_answers_from_it() {
    let dir = temp("plan-curve");
    std::fs::create_dir_all(&dir).unwrap();
    let (out, page) = (dir.join("curve.json"), dir.join("curve.html"));
    let args = [
        "plan",
        "--curve",
        "-m",
        "gpt-oss-120b",
        "--gpus",
        "b200",
        "--tp",
        "1,2",
        "--ep",
        "1",
        "--dtype",
        "mxfp4",
        "--max-num-seqs",
        "16",
        "--requests",
        "48",
        "--price",
        "b200=6",
        "--json",
        out.to_str().unwrap(),
        "--html",
        page.to_str().unwrap(),
    ];
    let (ok, text, err) = goodput(&args);
    assert!(ok, "{err}");
    assert!(text.contains("Interactivity curve") && text.contains("at the least cost per output token"), "{text}");
    // Priced: never "unpriced", and its $/M says what it assumes.
    assert!(!text.contains("no prices given") && text.contains("with every GPU used at this point"), "{text}");
    let c = json(&out);
    let points = c["points"].as_array().unwrap();
    // Two layouts × 1, 2, 4, 8, 16 users per engine.
    assert_eq!(points.len(), 10, "{points:?}");
    let frontier: Vec<&serde_json::Value> = points.iter().filter(|p| p["frontier"] == true).collect();
    assert!(!frontier.is_empty());
    // No point beats a frontier point on both axes.
    let f = |p: &serde_json::Value, k: &str| p[k].as_f64().unwrap();
    for p in &frontier {
        let beaten = points.iter().any(|q| {
            f(q, "output_tps_per_gpu") > f(p, "output_tps_per_gpu") && f(q, "tps_per_user") > f(p, "tps_per_user")
        });
        assert!(!beaten, "{p}");
    }
    // Along one configuration, more users: more throughput per GPU, less speed per user.
    let tp1: Vec<&serde_json::Value> = points.iter().filter(|p| p["layout"] == "TP1").collect();
    assert!(f(tp1[4], "output_tps_per_gpu") > f(tp1[0], "output_tps_per_gpu"));
    assert!(f(tp1[4], "tps_per_user") < f(tp1[0], "tps_per_user"));
    assert!(f(tp1[0], "total_tps_per_gpu") > f(tp1[0], "output_tps_per_gpu"));
    assert!(points.iter().any(|p| p["ttft_frontier"] == true));
    // Priced: the answer is the cheapest point that holds, on the cost frontier of those.
    assert!(points.iter().any(|p| p["cost_frontier"] == true));
    let holding = points.iter().filter(|p| p["slos_hold"] == true);
    let best = holding.map(|p| f(p, "cost_per_million_output_tokens")).fold(f64::INFINITY, f64::min);
    assert!(c["answer"].as_str().unwrap().contains(&format!("${best:.3} per million")), "{}", c["answer"]);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("<svg") && html.contains("Pareto frontier") && html.contains("tok/s per user"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_gpu_this_machine_lacks_runs_any_scenario_as_a_projection() {
    let dir = temp("plan-export");
    std::fs::create_dir_all(&dir).unwrap();
    let profile = dir.join("h200.json");
    let p = profile.to_str().unwrap();
    let args = [
        "plan",
        "--export-profile",
        "h200",
        "-m",
        "deepseek-v3",
        "--tp",
        "8",
        "--ep",
        "8",
        "--dtype",
        "fp8",
        "--out",
        p,
    ];
    let (ok, text, err) = goodput(&args);
    assert!(ok, "{err}");
    assert!(text.contains("1173122 KV tokens") && text.contains("(KV full)") && text.contains("prefill"), "{text}");
    // One layout at a time.
    let (ok, _, err) = goodput(&["plan", "--export-profile", "h200", "-m", "deepseek-v3", "--tp", "4,8", "--out", p]);
    assert!(!ok && err.contains("writes one layout"), "{err}");
    let run = dir.join("run");
    let args = [
        "run",
        "-m",
        "deepseek-v3",
        "--simulate",
        p,
        "--scenario",
        "multi-turn",
        "--concurrency",
        "1,16",
        "--requests",
        "32",
        "--out",
        run.to_str().unwrap(),
    ];
    let (ok, text, err) = goodput(&args);
    assert!(ok, "{err}");
    assert!(err.contains("is a projection") && text.contains("Conclusion"), "{text}{err}");
    let s = summary_of(&run);
    assert!(s["device"].as_str().unwrap().contains("a roofline projection, not a measurement"), "{}", s["device"]);
    let levels = s["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 2);
    // The three layers: client latencies, and the engine's own prefill, decode and KV.
    let l = &levels[1];
    assert!(l["summary"]["ttft"]["p50"].as_f64().unwrap() > 0.0, "{l}");
    assert!(l["engine"]["steps"].as_u64().unwrap() > 0, "{l}");
    // A decode step of DeepSeek-V3 on an H200 takes milliseconds, not a CPU's seconds.
    let tpot = l["summary"]["tpot"]["p50"].as_f64().unwrap();
    assert!(tpot > 5e-3 && tpot < 0.1, "{tpot}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_mixture_of_experts_is_profiled_and_predicted_on_this_machine() {
    use goodput_results::files::{read_jsonl, STEPS};
    use goodput_results::StepRow;
    use goodput_sizing::cost::ExpertShape;
    use goodput_sizing::profile::Profile;
    let dir = temp("plan-moe-profile");
    std::fs::create_dir_all(&dir).unwrap();
    let profile = dir.join("moe.json");
    let p = profile.to_str().unwrap();
    let (ok, out, err) =
        goodput(&["profile", "-m", "tiny-qwen3-moe", "--time", "5s", "--bootstrap", "10", "--out", p, "-q"]);
    assert!(ok, "{err}");
    assert!(out.contains("experts_touched"), "{out}");
    let prof = Profile::read(&profile).unwrap();
    let shape = prof.experts.expect("a MoE profile carries its experts' shape");
    assert_eq!((shape.routing.experts, shape.routing.top_k, shape.sparse_layers), (16, 4, 3));
    let term = prof.fit.term(goodput_sizing::cost::Term::ExpertsTouched).unwrap();
    assert!(term.measured, "{term:?}");
    // Measured with its simulated twin.
    let run = dir.join("run");
    let args =
        ["run", "-m", "tiny-qwen3-moe", "--predict", p, "--concurrency", "1,8", "--requests", "16", "--warmup", "2"];
    let (ok, out, err) = goodput(&[&args[..], &["--out", run.to_str().unwrap()]].concat());
    assert!(ok, "{err}");
    assert!(out.contains("Predicted against measured"), "{out}");
    assert_eq!(summary_of(&run)["prediction"]["levels"].as_array().unwrap().len(), 2);
    // What the simulated steps expect is what the engine's steps recorded: 8 tokens reach
    // 3 · 16 · (1 − (12/16)^8) = 43.19 experts (dummy weights route about uniformly).
    let steps: Vec<StepRow> = read_jsonl(&run.join(STEPS)).unwrap();
    let at8: Vec<f64> = steps
        .iter()
        .filter(|s| s.step.prefill_tokens + s.step.decode_seqs == 8)
        .filter_map(|s| s.step.experts.as_ref().map(|e| e.touched as f64))
        .collect();
    assert!(at8.len() >= 20, "{} steps of 8 tokens", at8.len());
    let mean = at8.iter().sum::<f64>() / at8.len() as f64;
    let expected = ExpertShape::of(&goodput_core::Catalog::builtin().get("tiny-qwen3-moe").unwrap().clone())
        .unwrap()
        .expected_touched(8.0);
    assert!((expected - 43.19).abs() < 0.01 && (mean / expected - 1.0).abs() < 0.05, "{mean} vs {expected}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `plan --emit`: the launch commands carry the chosen row's layout and dtypes, and the
/// Kubernetes manifests validate against Kubernetes' own schema, offline (PyPI's
/// `kubernetes-validate`, strict): a Deployment for a replica on one node, and the pods of a
/// LeaderWorkerSet for one across two nodes (a CRD: its pod templates are what the schema
/// holds). `scripts/emit-check.sh` starts vLLM's CPU build with an emitted command.
#[test]
fn plan_emits_launch_commands_and_manifests_kubernetes_accepts() {
    let dir = temp("emit");
    std::fs::create_dir_all(&dir).unwrap();
    let dense = ["plan", "-m", "llama-3.1-70b", "--rate", "30", "--gpus", "h200", "--requests", "100"];
    let (ok, out, err) = goodput(&[&dense[..], &["--emit", "vllm,sglang,k8s"]].concat());
    assert!(ok, "{err}");
    assert!(err.contains("Best layout per GPU"), "the plan on stderr: {err}");
    assert!(out.contains("vllm serve meta-llama/Llama-3.1-70B-Instruct \\\n  --tensor-parallel-size "), "{out}");
    assert!(out.contains("python3 -m sglang.launch_server --model-path meta-llama/Llama-3.1-70B-Instruct"), "{out}");
    let manifest = &out[out.find("\n{").expect("the manifest") + 1..];
    std::fs::write(dir.join("deployment.json"), manifest).unwrap();
    let m: serde_json::Value = serde_json::from_str(manifest).unwrap();
    assert_eq!(m["kind"], "Deployment");
    let moe = ["plan", "-m", "deepseek-v3", "--rate", "10", "--gpus", "h100-sxm", "--tp", "8", "--ep", "1"];
    let (ok, out, err) =
        goodput(&[&moe[..], &["--pp", "2", "--nodes", "2", "--requests", "100", "--emit", "k8s"]].concat());
    assert!(ok, "{err}");
    let lws: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (lws["kind"].as_str(), lws["spec"]["leaderWorkerTemplate"]["size"].as_u64()),
        (Some("LeaderWorkerSet"), Some(2))
    );
    let mut files = vec![dir.join("deployment.json")];
    for t in ["leaderTemplate", "workerTemplate"] {
        let spec = &lws["spec"]["leaderWorkerTemplate"][t]["spec"];
        let gpus = &spec["containers"][0]["resources"]["limits"]["nvidia.com/gpu"];
        assert_eq!(gpus.as_u64(), Some(8), "a node's GPUs per pod");
        let pod = serde_json::json!({ "apiVersion": "v1", "kind": "Pod", "metadata": { "name": t.to_lowercase() }, "spec": spec });
        files.push(dir.join(format!("{t}.json")));
        std::fs::write(files.last().unwrap(), pod.to_string()).unwrap();
    }
    let (ok, _, err) = goodput(&[&dense[..], &["--emit", "vllm", "--emit-row", "h200/fp8/TP3"]].concat());
    assert!(!ok && err.contains("GPU/DTYPE/LAYOUT") && err.contains("h200/"), "{err}");
    // Kubernetes' schema, from PyPI into a virtual environment.
    let venv = dir.join("venv");
    let run = |cmd: &mut Command| {
        let o = cmd.output().expect("run");
        (o.status.success(), String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr))
    };
    let (ok, log) = run(Command::new("python3").args(["-m", "venv"]).arg(&venv));
    assert!(ok, "python3 -m venv: {log}");
    let (ok, log) = run(Command::new(venv.join("bin/pip")).args(["install", "-q", "kubernetes-validate==1.37.0"]));
    assert!(ok, "pip install kubernetes-validate: {log}");
    let (ok, log) = run(Command::new(venv.join("bin/kubernetes-validate")).arg("--strict").args(&files));
    assert!(ok && log.matches("passed for resource").count() == 3, "{log}");
    let _ = std::fs::remove_dir_all(&dir);
}
