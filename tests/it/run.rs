//! `goodput run` end to end on the tiny model: the table, the conclusion, the files, the
//! agreement of client and engine numbers, and queueing when the engine is the bottleneck.

use crate::common::{goodput, goodput_code, goodput_env, records, run_ok, summary_of, temp};
use serde_json::Value;

#[test]
fn a_small_sweep_prints_the_table_and_conclusion_and_writes_its_files() {
    let dir = temp("small");
    let (ok, out, err) =
        goodput(&["run", "--concurrency", "1,4", "--requests", "6", "--warmup", "2", "--out", dir.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(out.contains("TTFT p95") && out.contains("Conclusion"), "{out}");
    // Six requests cannot bound a P95 from above: no level is shown to hold, and the run says
    // before it starts that its levels are too small for their percentiles.
    assert!(out.contains("No level held the SLOs") && out.contains("not shown to hold"), "{out}");
    assert!(err.contains("--requests 6: the SLOs' percentiles need 72"), "{err}");
    let summary: Value = summary_of(&dir);
    let levels = summary["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 2);
    for l in levels {
        assert_eq!(l["summary"]["requests"], 6);
        // goodput's engine honours ignore_eos: every output has its required length.
        assert_eq!(l["summary"]["short_outputs"], 0, "{l}");
        assert_eq!(l["occupancy"]["from_server"], false, "{l}");
        for key in ["mean_ttft_ms", "p99_tpot_ms", "median_e2el_ms", "output_throughput", "request_throughput"] {
            assert!(l[key].is_number(), "vLLM key {key} missing: {l}");
        }
    }
    // The harness reports its own cost and schedule keeping.
    for l in levels {
        let h = &l["harness"];
        assert!(h["cpu"]["harness_s"].as_f64().unwrap() > 0.0, "{h}");
        assert!(h["cpu"]["process_s"].as_f64().unwrap() >= h["cpu"]["harness_s"].as_f64().unwrap() * 0.5);
        assert!(h["send_lag_p99_s"].as_f64().unwrap() < 0.05);
    }
    // Concurrency 1 has ~zero queue time.
    let q1 = levels[0]["summary"]["queue_time"]["p95"].as_f64().unwrap();
    assert!(q1 < 0.005, "queue p95 at 1 user: {q1}");
    let recs = records(&dir);
    // 6 measured a level; the warm-up: 2 at 1 user, at 4 users each user's first request and
    // any sent before the last user started (4 or more).
    let warm: Vec<u64> = levels.iter().map(|l| l["warmup_requests"].as_u64().unwrap()).collect();
    assert!(warm[0] == 2 && warm[1] >= 4, "{warm:?}");
    assert_eq!(recs.len() as u64, 12 + warm[0] + warm[1]);
    assert_eq!(recs.iter().filter(|r| r["phase"] == "measured").count(), 12);
    for r in recs.iter().filter(|r| r["outcome"]["kind"] == "ok") {
        let e = &r["engine"];
        // Engine-counted and client-counted tokens agree.
        assert_eq!(e["generated_tokens"], r["output_tokens"]);
        assert_eq!(e["prompt_tokens"], r["input_tokens"]);
        assert_eq!(r["chunks"].as_array().unwrap().len() as u64, r["output_tokens"].as_u64().unwrap());
        // Client TTFT ≥ engine queue + prefill time (same clock, in ns).
        let ttft = r["chunks"][0]["at"].as_u64().unwrap() - r["intended"].as_u64().unwrap();
        let queue_plus_prefill = e["first_token"].as_u64().unwrap() - e["queued"].as_u64().unwrap();
        assert!(ttft >= queue_plus_prefill, "ttft {ttft} < queue + prefill {queue_plus_prefill}");
    }
    let csv = std::fs::read_to_string(dir.join("requests.csv")).unwrap();
    assert_eq!(csv.lines().count(), recs.len() + 1);
    assert!(std::fs::read_to_string(dir.join("steps.jsonl")).unwrap().lines().count() > 10);
    assert!(std::fs::read_to_string(dir.join("conclusion.txt")).unwrap().contains("short-qa"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn beyond_the_engine_s_batch_capacity_queue_time_dominates_ttft() {
    // Two sequences at a time but 12 users: most of each request's wait is queueing.
    let dir = temp("queue");
    let out = run_ok(
        &dir,
        &[
            "--concurrency",
            "1,12",
            "--requests",
            "12",
            "--warmup",
            "2",
            "--max-num-seqs",
            "2",
            "--refine",
            "0",
            "--slo",
            // A maximum is judged as counted: 12 requests decide it (a P95 of them could not).
            "ttft_max=500ms,error_rate=1%",
        ],
    );
    let summary: Value = summary_of(&dir);
    let hi = &summary["levels"][1]["summary"];
    let queue = hi["queue_time"]["p50"].as_f64().unwrap();
    let prefill = hi["prefill_time"]["p50"].as_f64().unwrap();
    let ttft = hi["ttft"]["p50"].as_f64().unwrap();
    assert!(queue > prefill && queue > 0.5 * ttft, "queue {queue} prefill {prefill} ttft {ttft}");
    assert!(summary["levels"][1]["engine"]["waiting_max"].as_u64().unwrap() >= 8);
    assert!(out.contains("the usable capacity is 1 users: every SLO holds there and at every level below (percentiles and means with 95 % confidence, maxima and rates as counted)"), "{out}");
    assert!(out.contains("At 12 users the SLOs break: ttft_max"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_run_values_fail_before_anything_runs() {
    let cases: &[(&[&str], &str)] = &[
        (&["run", "--rate", "-1"], "positive"),
        (&["run", "--rate", "0"], "positive"),
        (&["run", "--concurrency", "0,2"], "at least 1 user"),
        (&["run", "--slo", "latency_p95=2s"], "unknown metric"),
        (&["run", "--slo", "ttft_p95=fast"], "not a duration"),
        (&["run", "--scenario", "long-gen", "--max-model-len", "1024"], "exceeds the model's context"),
        (&["run", "--scenario", "long-context"], "8K"),
        (&["run", "--scenario", "chat"], "unknown scenario"),
        (&["run", "--timeout", "0s"], "not a duration"),
        (&["run", "--stages", "2x"], "not a duration"),
        (&["run", "--rate", "4", "--burstiness", "0"], "--burstiness must be a positive"),
        (&["run", "--burstiness", "0.5"], "--rate"),
        (&["run", "--stages", "0x1s"], "not a positive number of users"),
        (&["run", "--stages", "4"], "USERSxDURATION"),
        (&["run", "--scenario", "agent", "--duration", "2s"], "use --requests for agent"),
        (&["run", "--burst", "0,4"], "at least 1 request"),
        (&["run", "--burst", "4", "--warmup", "2"], "cold start"),
        (&["run", "--burst", "4", "--rate", "2"], "cannot be used with"),
        (&["run", "--duration", "2s", "--cooldown", "3"], "give the cool-down as a duration"),
        (&["run", "--scenario", "agent", "--warmup", "2s"], "give a count"),
        (&["run", "--warmup", "soon"], "neither a count nor a duration"),
        (&["run", "--engine-cpus", "4096"], "CPU 4096 is not available"),
        (&["run", "--harness-cpus", "1-0"], "backwards"),
        (&["run", "--retry-backoff", "0s"], "not a duration"),
        (&["run", "--retries", "-1"], "'-1'"),
        (&["run", "--think=-1s"], "not a duration"),
        (&["run", "--think", "1s", "--rate", "2"], "cannot be used with"),
    ];
    for (args, needle) in cases {
        let (ok, _, err) = goodput(args);
        assert!(!ok, "{args:?} succeeded");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

#[test]
fn multi_turn_prompts_grow_by_turn_and_hit_the_prefix_cache() {
    let dir = temp("multi");
    let out = run_ok(&dir, &["--scenario", "multi-turn", "--concurrency", "2", "--requests", "3", "--warmup", "1"]);
    assert!(out.contains("By turn at 2 users") && out.contains("prefix cache serves"), "{out}");
    let summary: Value = summary_of(&dir);
    let turns = summary["levels"][0]["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 4);
    let prompt: Vec<f64> = turns.iter().map(|t| t["prompt_tokens"].as_f64().unwrap()).collect();
    let cached: Vec<f64> = turns.iter().map(|t| t["cached_tokens"].as_f64().unwrap()).collect();
    assert!(prompt.windows(2).all(|w| w[1] > w[0]), "prompt tokens grow by turn: {prompt:?}");
    assert!(cached.windows(2).all(|w| w[1] > w[0]), "cached tokens grow by turn: {cached:?}");
    // The shared 64-token system prompt is 4 full blocks: cached from the second session on.
    assert!(cached[0] > 0.0 && cached[3] > 0.5 * prompt[3], "{cached:?} of {prompt:?}");
    assert_eq!(turns[0]["n"], 3, "3 measured sessions");
    let recs = records(&dir);
    // 3 measured sessions of 4 turns; both users' first sessions are warm-up, and any taken
    // before the second of them ended (user 1 joins once user 0's first session ended).
    let warm = summary["levels"][0]["warmup_requests"].as_u64().unwrap();
    assert!(warm >= 8 && warm.is_multiple_of(4), "{warm}");
    assert_eq!(recs.len() as u64, 12 + warm);
    assert!(recs.iter().all(|r| r["session"].is_u64() && r["turn"].is_u64()));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn agent_amplification_is_model_calls_per_task() {
    let dir = temp("agent");
    let out = run_ok(&dir, &["--scenario", "agent", "--concurrency", "2", "--requests", "3", "--warmup", "1"]);
    assert!(out.contains("each task triggers 3.0 model calls"), "{out}");
    let summary: Value = summary_of(&dir);
    let ag = &summary["levels"][0]["agent"];
    assert_eq!(ag["tasks"], 3);
    // Measured model calls / measured tasks, from the raw records.
    let recs = records(&dir);
    let measured_calls = recs.iter().filter(|r| r["phase"] == "measured").count() as f64;
    assert_eq!(ag["amplification"].as_f64().unwrap(), measured_calls / 3.0);
    assert_eq!(ag["amplification"].as_f64().unwrap(), 3.0);
    assert_eq!(ag["tool_calls_per_task"].as_f64().unwrap(), 2.0);
    let share = ag["tool_wait_share"].as_f64().unwrap();
    assert!(share > 0.0 && share < 1.0, "{share}");
    let steps = ag["steps"].as_array().unwrap();
    let kinds: Vec<&str> = steps.iter().map(|s| s["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["llm", "tool", "llm", "retrieve", "llm"]);
    assert!(ag["task_e2e"]["p95"].as_f64().unwrap() > 0.0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn rag_times_every_stage_with_a_real_encoder() {
    let encoder = crate::common::minilm();
    let dir = temp("rag");
    let out = run_ok(
        &dir,
        &["--scenario", "rag", "--encoder", &encoder, "--concurrency", "2", "--requests", "4", "--warmup", "1"],
    );
    assert!(out.contains("RAG stage timeline") && out.contains("median timeline: embed"), "{out}");
    let summary: Value = summary_of(&dir);
    let level = &summary["levels"][0];
    assert_eq!(level["summary"]["completed"], 4, "{level}");
    let steps = level["rag"]["steps"].as_array().unwrap();
    let kinds: Vec<&str> = steps.iter().map(|s| s["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["embed", "retrieve", "rerank", "assemble", "llm"]);
    for s in steps {
        assert_eq!(s["duration"]["n"], 4, "{s}");
    }
    assert!(steps[0]["duration"]["p50"].as_f64().unwrap() > 0.0, "embedding takes time");
    for k in ["queue_time", "prefill_time", "decode_time"] {
        assert_eq!(level["summary"][k]["n"], 4, "{k}");
    }
    // A named encoder that is not there: a clear error, before anything runs.
    let (ok, _, err) = goodput(&["run", "--scenario", "rag", "--encoder", "/nonexistent/encoder"]);
    assert!(!ok && err.contains("fetch-minilm.sh") && err.contains("/nonexistent/encoder"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn rag_without_an_encoder_says_so_and_embeds_with_the_engine_s_prefill() {
    let dir = temp("rag-prefill");
    let cache = dir.join("empty-cache");
    std::fs::create_dir_all(&cache).unwrap();
    let out_dir = dir.join("out");
    let (ok, out, err) = goodput_env(
        &[
            "run",
            "--scenario",
            "rag",
            "--concurrency",
            "2",
            "--requests",
            "4",
            "--warmup",
            "1",
            "--out",
            out_dir.to_str().unwrap(),
            "--report",
        ],
        &[("GOODPUT_CACHE", cache.to_str().unwrap())],
    );
    assert!(ok, "{err}");
    assert!(err.contains("no sentence encoder") && err.contains("prefill-only pass"), "{err}");
    assert!(out.contains("RAG stage timeline"), "{out}");
    let summary: Value = summary_of(&out_dir);
    assert!(summary["scenario"]["encoder"].as_str().unwrap().contains("prefill-only"));
    let level = &summary["levels"][0];
    assert_eq!(level["summary"]["completed"], 4, "{level}");
    let embed = &level["rag"]["steps"][0];
    assert_eq!(embed["kind"], "embed");
    assert_eq!(embed["duration"]["n"], 4);
    // A forward pass of the query through the engine: at least the engine's step time.
    let step_p50 = level["engine"]["step_time"]["p50"].as_f64().unwrap();
    assert!(embed["duration"]["p50"].as_f64().unwrap() >= 0.5 * step_p50, "{embed} vs step {step_p50}");
    // The embedding passes ran through the engine but are not generation records.
    let steps = std::fs::read_to_string(out_dir.join("steps.jsonl")).unwrap();
    assert!(steps.lines().count() > 5);
    // 4 measured generation calls and the warm-up: each user's first query (2) and any taken
    // before the last user started.
    let warm = level["warmup_requests"].as_u64().unwrap();
    assert!(warm >= 2, "{warm}");
    assert_eq!(records(&out_dir).len() as u64, 4 + warm);
    // The report draws the stage timeline, the model call split into queue, prefill, decode.
    let page = std::fs::read_to_string(out_dir.join("report.html")).unwrap();
    assert!(page.contains("id=\"rag-timeline\"") && page.contains("RAG query timeline"), "no RAG chart");
    for stage in ["embed", "retrieve", "rerank", "assemble", "queue", "prefill", "decode"] {
        assert!(page.contains(&format!("\"{stage}\"")) || page.contains(&format!("{stage}\"")), "{stage}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_burst_sends_a_level_at_once_with_nothing_left_out() {
    let dir = temp("burst");
    let (ok, out, err) = goodput(&["run", "--burst", "3,6", "--refine", "0", "--out", dir.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(out.contains("load (requests at once)"), "{out}");
    let summary: Value = summary_of(&dir);
    let levels = summary["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 2);
    for (l, n) in levels.iter().zip([3, 6]) {
        assert_eq!(l["summary"]["requests"], n);
        assert_eq!((l["warmup_requests"].as_u64(), l["cooldown_requests"].as_u64()), (Some(0), Some(0)));
    }
    let recs = records(&dir);
    assert_eq!(recs.len(), 9);
    assert!(recs.iter().all(|r| r["phase"] == "measured"));
    for load in [3.0, 6.0] {
        let intended: Vec<u64> =
            recs.iter().filter(|r| r["level"] == load).map(|r| r["intended"].as_u64().unwrap()).collect();
        assert!(intended.iter().all(|&t| t == intended[0]), "one due time per burst: {intended:?}");
    }
    // At 6 at once, the last served waited for the others: queueing shows in the engine.
    assert!(levels[1]["summary"]["queue_time"]["max"].as_f64().unwrap() > 0.0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn warmup_and_cooldown_are_run_but_left_out_and_the_engine_series_is_written() {
    let dir = temp("phases");
    let cpus = goodput_engine::affinity::allowed();
    let mut args =
        vec!["run", "--concurrency", "2", "--requests", "4", "--warmup", "1", "--cooldown", "2", "--explain"];
    let (e, h) = (cpus[0].to_string(), cpus.last().unwrap().to_string());
    if cpus.len() >= 2 {
        args.extend(["--engine-cpus", &e, "--harness-cpus", &h]);
    }
    args.extend(["--series-interval", "50ms", "--out", dir.to_str().unwrap()]);
    let (ok, _, err) = goodput(&args);
    assert!(ok, "{err}");
    // The level's three layers, printed as it finished (--explain).
    assert!(err.contains("Level 2 users") && err.contains("queue (ms)") && err.contains("per-user tok/s"), "{err}");
    // --warmup 1 is below the 2 users: both first requests are warm-up, and any sent before
    // the second of them ended (the users join one per ended request: user 0 sends as many
    // more as fit while user 1's first runs, which a loaded machine stretches).
    assert!(err.contains("note: --warmup 1 is fewer than the 2 users"), "{err}");
    let summary: Value = summary_of(&dir);
    let l = &summary["levels"][0];
    assert_eq!(l["summary"]["requests"], 4);
    let warm = l["warmup_requests"].as_u64().unwrap() as usize;
    assert!(warm >= 2, "{l}");
    assert_eq!(l["cooldown_requests"].as_u64(), Some(2));
    assert!(err.contains(&format!("{warm} warm-up and 2 cool-down requests left out")), "{err}");
    let recs = records(&dir);
    let count = |p: &str| recs.iter().filter(|r| r["phase"] == p).count();
    assert_eq!((count("warmup"), count("measured"), count("cooldown")), (warm, 4, 2));
    crate::common::two_users_warmup_is_exact(&recs);
    if cpus.len() >= 2 {
        assert_eq!(summary["cpus"]["engine"], e.as_str());
        assert_eq!(summary["cpus"]["harness"], h.as_str());
    }
    let rows: Vec<goodput_results::SeriesRow> =
        goodput_results::files::read_csv(&dir.join("timeseries.csv")).expect("timeseries.csv");
    assert!(rows.len() >= 2, "{rows:?}");
    // Two users: the engine ran two requests at a time at some point, never more.
    assert_eq!(rows.iter().map(|r| r.running_max).max(), Some(2), "{rows:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn time_trims_and_retries_are_applied_and_counted() {
    let dir = temp("trims");
    // 20 req/s evenly, 20 requests: intended at 0, 50, …, 950 ms. 175 ms of warm-up leaves out
    // 0–150 (4); 175 ms of cool-down leaves out 800–950 (4).
    run_ok(
        &dir,
        &[
            "--rate",
            "20",
            "--constant-rate",
            "--requests",
            "20",
            "--warmup",
            "175ms",
            "--cooldown",
            "175ms",
            "--refine",
            "0",
        ],
    );
    let l = &summary_of(&dir)["levels"][0];
    assert_eq!((l["warmup_requests"].as_u64(), l["cooldown_requests"].as_u64()), (Some(4), Some(4)), "{l}");
    assert_eq!(l["summary"]["requests"], 12);
    // 1,000 output tokens take seconds: with a 100 ms timeout every attempt times out, and
    // two retries each are made and counted.
    let slow = dir.join("slow.toml");
    std::fs::write(&slow, "input = { kind = \"fixed\", n = 40 }\noutput = { kind = \"fixed\", n = 1000 }\n").unwrap();
    let (code, _, err) = goodput_code(&[
        "run",
        "--scenario",
        slow.to_str().unwrap(),
        "--concurrency",
        "1",
        "--requests",
        "2",
        "--warmup",
        "0",
        "--timeout",
        "100ms",
        "--retries",
        "2",
        "--retry-backoff",
        "10ms",
        "--refine",
        "0",
        "--out",
        dir.join("out").to_str().unwrap(),
    ]);
    // Every request timed out: the level measured nothing that completed, which is exit 3,
    // with the reason on the console and in the summary.
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("at 1 users no measured request completed: 2 timeout"), "{err}");
    let s = &summary_of(&dir.join("out"))["levels"][0]["summary"];
    assert_eq!(s["failures"][0]["kind"], "timeout");
    assert_eq!(s["failures"][0]["count"], 2);
    assert_eq!(s["output_throughput"], 0.0);
    assert_eq!(
        (s["timeouts"].as_u64(), s["retries"].as_u64(), s["retried_requests"].as_u64()),
        (Some(2), Some(4), Some(2))
    );
    assert!((s["retry_share"].as_f64().unwrap() - 4.0 / 6.0).abs() < 1e-9);
    // Latency runs from the first attempt: 3 attempts of 100 ms and 30 ms of back-off.
    assert!(s["e2e"].is_null() || s["e2e"]["p50"].as_f64().unwrap() >= 0.33);
    for r in records(&dir.join("out")) {
        assert_eq!(r["retries"], 2);
        assert!(r["end"].as_u64().unwrap() - r["intended"].as_u64().unwrap() >= 330_000_000);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_agent_graph_runs_its_branches_side_by_side() {
    let dir = temp("graph");
    std::fs::create_dir_all(&dir).unwrap();
    let graph = dir.join("fan-out.toml");
    std::fs::write(
        &graph,
        "kind = \"agent\"\nsystem = 16\nquestion = { kind = \"fixed\", n = 8 }\n\
         [[steps]]\nkind = \"llm\"\noutput = { kind = \"fixed\", n = 4 }\n\
         [[steps]]\nkind = \"tool\"\nafter = [1]\nlatency_ms = { kind = \"fixed\", n = 1000 }\nresult_tokens = { kind = \"fixed\", n = 6 }\n\
         [[steps]]\nkind = \"tool\"\nafter = [1]\nlatency_ms = { kind = \"fixed\", n = 1000 }\nresult_tokens = { kind = \"fixed\", n = 6 }\n\
         [[steps]]\nkind = \"llm\"\nafter = [2, 3]\noutput = { kind = \"fixed\", n = 4 }\n",
    )
    .unwrap();
    let out_dir = dir.join("out");
    let out = run_ok(
        &out_dir,
        &["--scenario", graph.to_str().unwrap(), "--concurrency", "1", "--requests", "2", "--warmup", "0"],
    );
    assert!(out.contains("4 llm (after 2,3)") && out.contains("each task triggers 2.0 model calls"), "{out}");
    let ag = &summary_of(&out_dir)["levels"][0]["agent"];
    // Two 1 s tools side by side: the task waits 1 s on tools, not 2 (the model calls take
    // well under 0.8 s even while other tests load the machine).
    let e2e = ag["task_e2e"]["p50"].as_f64().unwrap();
    assert!((1.0..1.8).contains(&e2e), "task E2E {e2e}: the tools ran one after the other");
    let share = ag["tool_wait_share"].as_f64().unwrap();
    assert!((0.5..1.0).contains(&share) && 1.0 / e2e - share < 0.05, "{share} of {e2e}");
    // The join's prompt is system + question + first output + both tool results.
    // The user's first task is warm-up: 3 tasks in all.
    let joins: Vec<u64> =
        records(&out_dir).iter().filter(|r| r["turn"] == 2).map(|r| r["input_tokens"].as_u64().unwrap()).collect();
    assert_eq!(joins, [16 + 8 + 4 + 12; 3]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn stages_run_each_level_for_its_duration() {
    let dir = temp("stages");
    // Users all at once: a ramp would leave a 2 s stage little room past its warm-up.
    let args = ["run", "--stages", "1x2s,3x3s", "--warmup", "1", "--ramp", "0", "--out", dir.to_str().unwrap()];
    let (ok, _, err) = goodput(&args);
    assert!(ok, "{err}");
    let summary: Value = summary_of(&dir);
    let levels = summary["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 2);
    assert_eq!((levels[0]["summary"]["load"].as_f64(), levels[1]["summary"]["load"].as_f64()), (Some(1.0), Some(3.0)));
    for (l, (users, stage)) in levels.iter().zip([(1.0, 2.0), (3.0, 3.0)]) {
        let s = &l["summary"];
        let n = s["requests"].as_u64().unwrap() as f64;
        let window = s["window_s"].as_f64().unwrap();
        let e2e = s["e2e"]["mean"].as_f64().unwrap();
        // The stage's duration bounds its window: it starts after the first wave's warm-up
        // (one request, under 1.2 s even on a loaded machine) and ends with the last request
        // sent before the stage's end (under 1 s later).
        assert!((stage - 1.2..stage + 1.0).contains(&window), "window {window} of a {stage} s stage");
        // Every user ran the whole window: by Little's law the requests in flight,
        // completions per second × mean E2E, are the users (less the drain's tail).
        let in_flight = n / window * e2e;
        assert!((0.6 * users..=1.05 * users).contains(&in_flight), "{in_flight} in flight of {users} users: {s}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn capacity_search_stops_at_the_first_failure_and_bisects() {
    let dir = temp("capacity");
    let (ok, out, err) = goodput(&[
        "capacity",
        "--max-users",
        "16",
        "--max-num-seqs",
        "2",
        "--slo",
        "ttft_max=150ms,error_rate=1%",
        "--requests",
        "6",
        "--warmup",
        "1",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let summary: Value = summary_of(&dir);
    let levels: Vec<(f64, bool)> = summary["levels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["summary"]["load"].as_f64().unwrap(),
                l["summary"]["slos"].as_array().unwrap().iter().all(|s| s["holds"] == true),
            )
        })
        .collect();
    // How much of its bound each level's TTFT max used.
    let used: Vec<f64> = summary["levels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["summary"]["slos"][0]["value"].as_f64().unwrap_or(f64::INFINITY) / 0.150)
        .collect();
    assert!(levels.windows(2).all(|w| w[0].0 < w[1].0), "sorted by load: {levels:?}");
    let first_fail = levels.iter().position(|l| !l.1).expect("two sequences at a time cannot serve 16 users in 150 ms");
    // Doubling stopped at the first failing power of two: nothing beyond it was run.
    assert!(levels[first_fail..].iter().all(|l| !l.1), "{levels:?}");
    let last_pass = levels[..first_fail].last().map_or(0.0, |l| l.0);
    // Then refinement: a level between two powers of two, unless they were already adjacent
    // or the last passing one used 95 % of its bound (the limit is there).
    let refined = levels.iter().any(|l| !(l.0 as u64).is_power_of_two());
    let near = first_fail > 0 && used[first_fail - 1] >= 0.95;
    assert!(
        levels[first_fail].0 - last_pass <= 1.0 || refined || near,
        "refinement narrowed the gap: {levels:?} {used:?}"
    );
    assert!(out.contains(&format!("the usable capacity is {last_pass} users")) || last_pass == 0.0, "{out}");
    let (ok, _, err) = goodput(&["capacity", "--rate", "1"]);
    assert!(!ok && err.contains("searches over users"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn scenario_files_run_like_the_built_in_ones() {
    let dir = temp("files");
    std::fs::create_dir_all(&dir).unwrap();
    let qa = dir.join("tiny-qa.toml");
    std::fs::write(&qa, "input = { kind = \"fixed\", n = 40 }\noutput = { kind = \"fixed\", n = 12 }\n").unwrap();
    let out_dir = dir.join("out");
    let out = run_ok(&out_dir, &["--scenario", qa.to_str().unwrap(), "--concurrency", "2", "--requests", "4"]);
    assert!(out.contains("tiny-qa"), "{out}");
    let recs = records(&out_dir);
    assert!(recs.iter().all(|r| r["input_tokens"] == 40 && r["output_tokens"] == 12));
    let agent = dir.join("agent.toml");
    std::fs::write(
        &agent,
        "kind = \"agent\"\nsystem = 16\nquestion = { kind = \"fixed\", n = 8 }\n\
         [[steps]]\nkind = \"llm\"\noutput = { kind = \"fixed\", n = 4 }\n\
         [[steps]]\nkind = \"tool\"\nlatency_ms = { kind = \"fixed\", n = 5 }\nresult_tokens = { kind = \"fixed\", n = 6 }\n\
         [[steps]]\nkind = \"llm\"\noutput = { kind = \"fixed\", n = 4 }\n",
    )
    .unwrap();
    let (ok, out, err) =
        goodput(&["run", "--scenario", agent.to_str().unwrap(), "--concurrency", "1", "--requests", "2"]);
    assert!(ok, "{err}");
    assert!(out.contains("each task triggers 2.0 model calls"), "{out}");
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "input = { kind = \"uniform\", min = 10 }\noutput = { kind = \"fixed\", n = 5 }\n").unwrap();
    let (ok, _, err) = goodput(&["run", "--scenario", bad.to_str().unwrap()]);
    assert!(!ok && err.contains("bad.toml") && err.contains("max"), "{err}");
    let long = dir.join("long.toml");
    std::fs::write(&long, "input = { kind = \"fixed\", n = 2000 }\noutput = { kind = \"fixed\", n = 100 }\n").unwrap();
    let (ok, _, err) = goodput(&["run", "--scenario", long.to_str().unwrap()]);
    assert!(!ok && err.contains("exceeds the model's context"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The `reasoning` scenario on dummy weights, in-process and over HTTP (goodput's server
/// splits the asked-for reasoning prefix into `delta.reasoning`, chat by default): TTFO after
/// TTFT by the reasoning time, three quarters of the output reasoning, AIPerf's keys written,
/// the conclusion's sentence.
#[test]
fn the_reasoning_scenario_measures_ttfo_in_process_and_over_http() {
    for target in ["in-process", "http-local"] {
        let dir = temp(&format!("reasoning-{target}"));
        let args =
            ["run", "--target", target, "--scenario", "reasoning", "--max-model-len", "480", "--concurrency", "2"];
        let (ok, out, err) =
            goodput(&[&args[..], &["--requests", "4", "--warmup", "2", "--out", dir.to_str().unwrap()]].concat());
        assert!(ok, "{target}: {err}");
        assert!(out.contains("TTFO p95") && out.contains("for the answer to start, of which"), "{target}: {out}");
        let summary: Value = summary_of(&dir);
        let l = &summary["levels"][0];
        let s = &l["summary"];
        assert_eq!(s["completed"], 4, "{target}: {s}");
        // 480 − 128 positions at 1:8: 39 in, 312 out, 234 of them reasoning (75 %).
        assert!((s["reasoning_share"].as_f64().unwrap() - 0.75).abs() < 1e-9, "{target}: {s}");
        assert_eq!(s["reasoning_tokens"]["p50"], 234.0, "{target}");
        let (ttft, ttfo, think) = (
            s["ttft"]["p50"].as_f64().unwrap(),
            s["ttfo"]["p50"].as_f64().unwrap(),
            s["reasoning_time"]["p50"].as_f64().unwrap(),
        );
        assert!(ttfo > ttft + 0.5 * think && think > 0.0, "{target}: ttft {ttft} ttfo {ttfo} think {think}");
        assert_eq!(l["aiperf"]["time_to_first_output_token"]["unit"], "ms", "{target}: {l}");
        assert_eq!(l["aiperf"]["reasoning_token_count"]["avg"], 234.0, "{target}");
        for r in records(&dir).iter().filter(|r| r["outcome"]["kind"] == "ok") {
            assert_eq!(r["reasoning"]["chunks"].as_u64().map(|c| c <= 234), Some(true), "{target}: {r}");
            assert_eq!(r["reasoning"]["tokens"], 234, "{target}: {r}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
