//! Property-based fuzzing of scenario files, `goodput_workload::load_scenario(path)`: any
//! text, and valid scenarios of every kind (single, multi-turn, agent as a sequence and as a
//! graph, rag) mutated structurally (fields deleted, renamed or added, values replaced by
//! other types, integers at every type's edge up to `i64::MAX` and down to `i64::MIN`, zero,
//! nan/inf, integers beyond i64, deep nesting) and at the byte level (`goodput-fuzzing`'s
//! `toml::mutated`). Each case's text is written to one temporary file per test (in
//! `std::env::temp_dir()`, named with the process id and the test) and loaded from there.
//! Every property is "no panic, bounded in time": loading returns Ok or Err; what loads names
//! and describes itself; validation against several context lengths returns Ok or Err; and
//! every length distribution of a validated scenario samples values within its bounds. The
//! validation inputs also include seeds whose integers are each replaced, with probability
//! 0.35, by an edge value.
//!
//! Cases: 256 for each loading property (2), 1,024 for the validation property, about 1,500 in
//! all (`PROPTEST_CASES=N` for more); failures are not persisted (no `proptest-regressions`).
//!
//! Findings, fixed: `MultiTurn::validate` and `Agent::validate` overflowed usize on huge
//! lengths (now saturating; the minimal inputs are tests below), and `LengthDist::sample`
//! clamped in f64, so a `min` beyond 2^53 could be undershot (now clamped in integers).

use goodput_fuzzing::toml::{edge_int, mutated};
use goodput_fuzzing::{any_text, config, temp_path};
use goodput_workload::agent::AgentStep;
use goodput_workload::{load_scenario, LengthDist, ScenarioFile, Workload, WorkloadError};
use proptest::prelude::*;
use rand::SeedableRng;

/// Writes `text` to the file of test `tag` (one per test, so tests running in parallel never
/// share) and loads it.
fn load(text: &str, tag: &str) -> Result<ScenarioFile, WorkloadError> {
    let path = temp_path(tag, "toml");
    std::fs::write(&path, text).unwrap();
    let out = load_scenario(&path);
    let _ = std::fs::remove_file(&path);
    out
}

// ---------------------------------------------------------------------------------------------
// Scenarios.

const KEYS: &[&str] = &[
    "kind",
    "name",
    "single",
    "input",
    "output",
    "shared_prefix",
    "fixed",
    "uniform",
    "normal",
    "log_normal",
    "n",
    "min",
    "max",
    "mean",
    "std",
    "median",
    "sigma",
    "multi-turn",
    "turns",
    "system",
    "user",
    "think_ms",
    "agent",
    "question",
    "steps",
    "llm",
    "tool",
    "retrieve",
    "latency_ms",
    "result_tokens",
    "tokens",
    "after",
    "rag",
    "corpus_chunks",
    "chunk_words",
    "query_words",
    "top_k",
    "keep",
];

const SEEDS: &[&str] = &[
    "name = \"qa\"\ninput = { kind = \"uniform\", min = 10, max = 50 }\noutput = { kind = \"fixed\", n = 20 }\n",
    "kind = \"single\"\nname = \"long\"\nshared_prefix = 8\n\
     input = { kind = \"log_normal\", median = 300, sigma = 0.6, min = 50, max = 1500 }\n\
     output = { kind = \"normal\", mean = 200.0, std = 20.0, min = 100, max = 300 }\n",
    "kind = \"multi-turn\"\nturns = 3\nsystem = 32\nthink_ms = 10\n\
     user = { kind = \"fixed\", n = 10 }\noutput = { kind = \"uniform\", min = 5, max = 9 }\n",
    "kind = \"agent\"\nsystem = 16\nquestion = { kind = \"fixed\", n = 8 }\n\
     [[steps]]\nkind = \"llm\"\noutput = { kind = \"fixed\", n = 4 }\n\
     [[steps]]\nkind = \"tool\"\nlatency_ms = { kind = \"log_normal\", median = 150, sigma = 0.5, min = 20, max = 1000 }\n\
     result_tokens = { kind = \"fixed\", n = 6 }\n\
     [[steps]]\nkind = \"llm\"\noutput = { kind = \"uniform\", min = 2, max = 4 }\n",
    "kind = \"agent\"\nsystem = 16\nquestion = { kind = \"fixed\", n = 8 }\n\
     [[steps]]\nkind = \"llm\"\noutput = { kind = \"fixed\", n = 4 }\n\
     [[steps]]\nkind = \"tool\"\nafter = [1]\nlatency_ms = { kind = \"fixed\", n = 5 }\nresult_tokens = { kind = \"fixed\", n = 6 }\n\
     [[steps]]\nkind = \"retrieve\"\nafter = [1]\nlatency_ms = { kind = \"fixed\", n = 5 }\ntokens = { kind = \"fixed\", n = 6 }\n\
     [[steps]]\nkind = \"llm\"\nafter = [2, 3]\noutput = { kind = \"fixed\", n = 4 }\n",
    "kind = \"rag\"\ncorpus_chunks = 20\nchunk_words = 10\nquery_words = 4\ntop_k = 4\nkeep = 2\n\
     output = { kind = \"fixed\", n = 8 }\n",
];

/// Context lengths to validate against: none, tiny, a real model's, and unbounded.
const MAX_MODEL_LENS: [usize; 5] = [0, 1, 2048, 131_072, usize::MAX];

/// What loaded names and describes itself (none of this may panic).
fn inspect(s: &ScenarioFile) {
    let _ = s.name();
    match s {
        ScenarioFile::Single(sc) => {
            let _ = (sc.describe(), sc.describe_lengths());
        }
        ScenarioFile::MultiTurn(mt) => {
            let _ = mt.describe();
        }
        ScenarioFile::Agent(a) => {
            let _ = (a.describe(), a.model_calls());
            for i in 0..a.steps.len() {
                let deps = a.deps(i);
                assert!(deps.iter().all(|&d| d < i), "step {i} waits for a later step: {deps:?}");
                let _ = a.ancestors(i);
            }
        }
        ScenarioFile::Rag(r) => {
            let _ = r.describe();
        }
    }
    if let Ok(w) = Workload::from_file(s.clone(), |_| Err::<_, ()>(())) {
        let _ = (w.name(), w.describe(), w.describe_lengths(), w.to_json(), w.is_sessions());
    }
}

fn dist_min(d: &LengthDist) -> usize {
    match *d {
        LengthDist::Fixed { n } => n,
        LengthDist::Uniform { min, .. } | LengthDist::Normal { min, .. } | LengthDist::LogNormal { min, .. } => min,
    }
}

/// Every length distribution of a scenario.
fn dists(s: &ScenarioFile) -> Vec<&LengthDist> {
    match s {
        ScenarioFile::Single(sc) => vec![&sc.input, &sc.output],
        ScenarioFile::MultiTurn(mt) => vec![&mt.user, &mt.output],
        ScenarioFile::Agent(a) => std::iter::once(&a.question)
            .chain(a.steps.iter().flat_map(|s| match &s.step {
                AgentStep::Llm { output } => vec![output],
                AgentStep::Tool { latency_ms, result_tokens } => vec![latency_ms, result_tokens],
                AgentStep::Retrieve { latency_ms, tokens } => vec![latency_ms, tokens],
            }))
            .collect(),
        ScenarioFile::Rag(r) => vec![&r.output],
    }
}

/// Validates `s` against every context length; when it passes, samples each of its length
/// distributions a few times and checks the values stay within bounds.
fn validate_and_sample(s: &ScenarioFile, seed: u64) -> Result<(), TestCaseError> {
    for max_model_len in MAX_MODEL_LENS {
        let ok = match s {
            ScenarioFile::Single(sc) => sc.validate(max_model_len).is_ok(),
            ScenarioFile::MultiTurn(mt) => mt.validate(max_model_len).is_ok(),
            ScenarioFile::Agent(a) => a.validate(max_model_len).is_ok(),
            ScenarioFile::Rag(r) => r.validate().is_ok(),
        };
        if !ok {
            continue;
        }
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
        for d in dists(s) {
            for _ in 0..4 {
                let x = d.sample(&mut rng);
                prop_assert!(dist_min(d) <= x && x <= d.max(), "{:?} sampled {}", d, x);
            }
        }
    }
    Ok(())
}

/// A seed scenario whose integers are each, with probability 0.35, replaced by an edge value
/// (huge, small, negative): several huge lengths at once, which the general mutations
/// rarely give.
fn edge_integers() -> impl Strategy<Value = String> {
    (prop::sample::select(SEEDS.to_vec()), prop::collection::vec((prop::bool::weighted(0.35), edge_int()), 16))
        .prop_map(|(seed, swaps)| {
            fn walk(v: &mut toml::Value, swaps: &[(bool, i64)], at: &mut usize) {
                match v {
                    toml::Value::Integer(i) => {
                        let (swap, to) = swaps[*at % swaps.len()];
                        if swap {
                            *i = to;
                        }
                        *at += 1;
                    }
                    toml::Value::Table(t) => t.iter_mut().for_each(|(_, c)| walk(c, swaps, at)),
                    toml::Value::Array(a) => a.iter_mut().for_each(|c| walk(c, swaps, at)),
                    _ => {}
                }
            }
            let mut v = toml::Value::Table(toml::from_str(seed).expect("seeds are valid TOML"));
            walk(&mut v, &swaps, &mut 0);
            toml::to_string(&v).unwrap_or_default()
        })
}

/// Scenario texts for the validation properties: general mutations or edge integers.
fn validation_input() -> impl Strategy<Value = String> {
    prop_oneof![mutated(SEEDS.to_vec(), KEYS), edge_integers()]
}

#[test]
fn the_seeds_load_and_validate() {
    for (i, seed) in SEEDS.iter().enumerate() {
        let s = load(seed, &format!("seed{i}")).unwrap_or_else(|e| panic!("seed {i}: {e}"));
        inspect(&s);
        validate_and_sample(&s, 1).unwrap();
        let ok = match &s {
            ScenarioFile::Single(sc) => sc.validate(2048).is_ok(),
            ScenarioFile::MultiTurn(mt) => mt.validate(2048).is_ok(),
            ScenarioFile::Agent(a) => a.validate(2048).is_ok(),
            ScenarioFile::Rag(r) => r.validate().is_ok(),
        };
        assert!(ok, "seed {i} fits a 2048-token model");
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_text_is_loaded_as_a_scenario_or_refused(text in any_text(512)) {
        if let Ok(s) = load(&text, "any-text") {
            inspect(&s);
            validate_and_sample(&s, 7)?;
        }
    }

    #[test]
    fn a_scenario_file_of_any_shape_is_loaded_or_refused(text in mutated(SEEDS.to_vec(), KEYS)) {
        if let Ok(s) = load(&text, "any-shape") {
            inspect(&s);
        }
    }

}

/// Found by `a_loaded_scenario_of_any_shape_validates_or_is_refused`: `MultiTurn::max_context`
/// (`system + turns * (user.max() + output.max())`) overflowed usize (a panic in debug builds,
/// a wrap in release, where a huge scenario could pass validation); it saturates now.
#[test]
fn multi_turn_lengths_whose_history_overflows_usize_are_refused() {
    let text = "kind = \"multi-turn\"\nturns = 2\nsystem = 0\n\
                user = { kind = \"fixed\", n = 9223372036854775807 }\noutput = { kind = \"fixed\", n = 1 }\n";
    let ScenarioFile::MultiTurn(mt) = load(text, "mt-overflow").unwrap() else { panic!("not multi-turn") };
    assert!(mt.validate(1 << 20).is_err());
}

/// Found by `a_loaded_scenario_of_any_shape_validates_or_is_refused`: `Agent::max_context`
/// (`system + question.max() + …`) overflowed usize; it saturates now.
#[test]
fn agent_lengths_whose_context_overflows_usize_are_refused() {
    let text =
        "kind = \"agent\"\nsystem = 9223372036854775807\nquestion = { kind = \"fixed\", n = 9223372036854775807 }\n\
                [[steps]]\nkind = \"llm\"\noutput = { kind = \"fixed\", n = 2 }\n";
    let ScenarioFile::Agent(a) = load(text, "agent-overflow").unwrap() else { panic!("not an agent") };
    assert!(a.validate(1 << 20).is_err());
}

// 1,024 cases: validation adds and multiplies lengths, and the edges that overflow them are
// rare among general mutations (the edge-integer inputs find them at once).
proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..config() })]

    #[test]
    fn a_loaded_scenario_of_any_shape_validates_or_is_refused(text in validation_input(), seed in any::<u64>()) {
        if let Ok(s) = load(&text, "validate") {
            validate_and_sample(&s, seed)?;
        }
    }
}
