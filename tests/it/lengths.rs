//! The workload's lengths as flags (`--input-len`, `--output-len`, vLLM's `--random-*`
//! names) on `run` and `plan`, and `--request-rate inf` as vLLM means it: one command, no
//! scenario file.

use crate::common::{goodput, temp};
use goodput_results::{LoadUnit, Results};

#[test]
fn lengths_given_as_flags_are_the_lengths_sent() {
    let dir = temp("lengths");
    let d = dir.to_str().unwrap();
    let args = ["run", "--input-len", "48", "--output-len", "6", "--concurrency", "1", "--requests", "4", "--out", d];
    let (ok, out, err) = goodput(&args);
    assert!(ok, "{err}");
    let run = Results::read(&dir).unwrap();
    assert_eq!(run.summary.workload.name, "random");
    for r in run.measured(1.0) {
        assert_eq!((r.input_tokens, r.output_tokens), (48, 6), "{r:?}");
    }
    assert!(out.contains("In the random scenario (input 48, output 6 tokens"), "{out}");

    // vLLM's names: a range ratio spreads the lengths, a prefix comes before the input.
    let dir = temp("lengths-vllm");
    let d = dir.to_str().unwrap();
    let args = [
        "run",
        "--random-input-len",
        "40",
        "--random-output-len",
        "4",
        "--random-range-ratio",
        "0.5",
        "--random-prefix-len",
        "16",
        "--concurrency",
        "2",
        "--requests",
        "12",
        "--out",
        d,
    ];
    let (ok, _, err) = goodput(&args);
    assert!(ok, "{err}");
    let run = Results::read(&dir).unwrap();
    let inputs: Vec<usize> = run.measured(2.0).map(|r| r.input_tokens).collect();
    assert!(inputs.iter().all(|n| (16 + 20..=16 + 60).contains(n)), "{inputs:?}");
    assert!(inputs.iter().any(|&n| n != inputs[0]), "the ratio spreads them: {inputs:?}");
}

#[test]
fn bad_lengths_are_refused_by_name() {
    let (ok, _, err) = goodput(&["run", "--input-len", "0", "--output-len", "5"]);
    assert!(!ok && err.contains("--input-len") && err.contains("`0`"), "{err}");
    let (ok, _, err) = goodput(&["run", "--input-len", "10"]);
    assert!(!ok && err.contains("--output-len"), "{err}");
    let (ok, _, err) = goodput(&["run", "--input-len", "10", "--output-len", "5", "--scenario", "long-gen"]);
    assert!(!ok && err.contains("--scenario"), "{err}");
    let (ok, _, err) = goodput(&["run", "--input-len", "1000000", "--output-len", "600"]);
    assert!(!ok && err.contains("exceeds the model's context"), "{err}");
}

#[test]
fn an_infinite_request_rate_sends_every_request_at_once() {
    let dir = temp("rate-inf");
    let d = dir.to_str().unwrap();
    let (ok, _, err) = goodput(&["run", "--request-rate", "inf", "--num-prompts", "5", "--out", d]);
    assert!(ok, "{err}");
    let s = Results::read(&dir).unwrap().summary;
    assert_eq!(s.load_unit, LoadUnit::Burst);
    assert_eq!(s.levels.iter().map(|l| (l.summary.load, l.summary.requests)).collect::<Vec<_>>(), [(5.0, 5)]);
    // With --max-concurrency: that many users, each sending its next request at once.
    let dir = temp("rate-inf-capped");
    let d = dir.to_str().unwrap();
    let args = ["run", "--request-rate", "inf", "--max-concurrency", "2", "--num-prompts", "6", "--refine", "0"];
    let (ok, _, err) = goodput(&[&args[..], &["--out", d]].concat());
    assert!(ok, "{err}");
    let s = Results::read(&dir).unwrap().summary;
    assert_eq!(s.load_unit, LoadUnit::Users);
    assert_eq!(s.levels.iter().map(|l| (l.summary.load, l.summary.requests)).collect::<Vec<_>>(), [(2.0, 6)]);
    let (ok, _, err) = goodput(&["run", "--request-rate", "inf,4"]);
    assert!(!ok && err.contains("--request-rate inf"), "{err}");
}

#[test]
fn a_plan_takes_its_lengths_as_flags() {
    let args = ["plan", "-m", "llama-3.1-8b", "--gpus", "h100-sxm", "--tp", "1", "--rate", "5"];
    let (ok, out, err) = goodput(&[&args[..], &["--input-len", "1500", "--output-len", "300"]].concat());
    assert!(ok, "{err}");
    assert!(out.contains("of random (1500 tokens in, 300 out on average)"), "{out}");
}

/// Every scenario file `docs/scenarios.md` shows parses, and fits a model of 4096 positions.
#[test]
fn the_scenario_page_s_examples_are_scenarios() {
    let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/scenarios.md")).unwrap();
    let blocks: Vec<&str> = page.split("```toml\n").skip(1).filter_map(|b| b.split("```").next()).collect();
    let files: Vec<&str> = blocks.into_iter().filter(|b| b.contains("name =") || b.contains("kind = \"")).collect();
    let files: Vec<&str> = files.into_iter().filter(|b| !b.trim_start().starts_with('{')).collect();
    assert_eq!(files.len(), 4, "single, multi-turn, agent, rag");
    for text in files {
        let file = goodput_workload::parse_scenario(text, "example").unwrap_or_else(|e| panic!("{e}\n{text}"));
        let checked = match &file {
            goodput_workload::ScenarioFile::Single(s) => s.validate(4096),
            goodput_workload::ScenarioFile::MultiTurn(m) => m.validate(4096),
            goodput_workload::ScenarioFile::Agent(a) => a.validate(4096),
            goodput_workload::ScenarioFile::Rag(r) => r.validate(),
        };
        checked.unwrap_or_else(|e| panic!("{e}\n{text}"));
    }
}
