//! The twin of work the harness does itself: a RAG query's stages before its model call run
//! on the harness's CPU in a measured run, and a simulation spends their time, timed on this
//! machine, on the harness's virtual cores (one here) that the queries share.

use crate::common::{goodput, summary_of, temp};
use crate::sizing::constant_profile;
use serde_json::Value;

/// Statistic `stat` of RAG stage `kind`'s duration at level `i`, in ms.
fn stage_ms(summary: &Value, i: usize, kind: &str, stat: &str) -> f64 {
    let steps = summary["levels"][i]["rag"]["steps"].as_array().unwrap();
    let s = steps.iter().find(|s| s["kind"] == kind).unwrap();
    s["duration"][stat].as_f64().unwrap() * 1e3
}

#[test]
fn a_simulated_rag_query_spends_its_timed_harness_stages_on_one_shared_core() {
    let encoder = crate::common::minilm();
    let dir = temp("twin-rag");
    std::fs::create_dir_all(&dir).unwrap();
    let profile = dir.join("constant.json");
    constant_profile(&profile, 0.01);
    let sim = dir.join("sim");
    let args = [
        "run",
        "--simulate",
        profile.to_str().unwrap(),
        "--scenario",
        "rag",
        "--encoder",
        &encoder,
        "--concurrency",
        "1,8",
        "--requests",
        "16",
        "--refine",
        "0",
        "--out",
        sim.to_str().unwrap(),
    ];
    let (ok, out, err) = goodput(&args);
    assert!(ok, "{err}");
    let said = format!("{out}{err}");
    let line = said.lines().find(|l| l.contains("the twin spends each query's harness time on 1 core")).unwrap();
    let embed_ms: f64 = line.split("embed ").nth(1).unwrap().split(" ms").next().unwrap().parse().unwrap();
    assert!(embed_ms > 0.5, "{line}");
    let s = summary_of(&sim);
    // One user: the query has the core to itself; its embed stage lasts the timed time, up to
    // the runtime's next millisecond tick.
    let alone = stage_ms(&s, 0, "embed", "p50");
    assert!(alone > embed_ms - 0.01 && alone < embed_ms + 1.0, "{alone} ms against {line}");
    // Eight users: every query still spends at least its timed time (the core's sharing,
    // checked by hand in `goodput_workload::harness`, only slows a query down).
    let shared = stage_ms(&s, 1, "embed", "min");
    assert!(shared > embed_ms - 0.01, "{shared} ms against {embed_ms} ms alone");
    // The stages after the embed are timed too, and take far less than it.
    assert!(stage_ms(&s, 0, "retrieve", "p50") < embed_ms, "{line}");
    std::fs::remove_dir_all(&dir).unwrap();
}
