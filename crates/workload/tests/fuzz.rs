//! Property-based fuzzing of scenario files, `goodput_workload::load_scenario(path)`: any
//! text, and valid scenarios of every kind (single, multi-turn, agent as a sequence and as a
//! graph, rag) mutated structurally (fields deleted, renamed or added, values replaced by
//! other types, integers at every type's edge up to `i64::MAX` and down to `i64::MIN`, zero,
//! nan/inf, integers beyond i64, deep nesting) and at the byte level. Each case's text is
//! written to one temporary file per test (in `std::env::temp_dir()`, named with the process
//! id and the test) and loaded from there. Every property is "no panic, bounded in time":
//! loading returns Ok or Err; what loads names and describes itself; validation against
//! several context lengths returns Ok or Err; and every length distribution of a validated
//! scenario samples values within its bounds. The validation inputs also include seeds whose
//! integers are each replaced, with probability 0.35, by an edge value.
//!
//! Cases: 256 for each loading property (2), 1,024 for the validation property, about 1,500 in
//! all (`PROPTEST_CASES=N` for more); failures are not persisted (no `proptest-regressions`).
//!
//! Findings, fixed: `MultiTurn::validate` and `Agent::validate` overflowed usize on huge
//! lengths (now saturating; the minimal inputs are tests below), and `LengthDist::sample`
//! clamped in f64, so a `min` beyond 2^53 could be undershot (now clamped in integers).

use goodput_workload::agent::AgentStep;
use goodput_workload::{load_scenario, LengthDist, ScenarioFile, Workload, WorkloadError};
use proptest::prelude::*;
use proptest::sample::Index;
use rand::SeedableRng;
use std::path::PathBuf;

fn config() -> ProptestConfig {
    // `PROPTEST_CASES=N` for a deeper run than CI's 256 cases per property.
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(256);
    ProptestConfig { cases, failure_persistence: None, ..ProptestConfig::default() }
}

/// The scenario file of test `tag` (one per test, so tests running in parallel never share).
fn scenario_path(tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!("goodput-fuzz-{}-{tag}.toml", std::process::id()))
}

/// Writes `text` to the test's file and loads it.
fn load(text: &str, tag: &str) -> Result<ScenarioFile, WorkloadError> {
    let path = scenario_path(tag);
    std::fs::write(&path, text).unwrap();
    let out = load_scenario(&path);
    let _ = std::fs::remove_file(&path);
    out
}

// ---------------------------------------------------------------------------------------------
// Structured TOML mutation (the same scheme as the core crate's fuzz tests).

/// One step of a path into a TOML value.
#[derive(Clone, Debug)]
enum Seg {
    Key(String),
    Index(usize),
}

fn paths(v: &toml::Value, here: &mut Vec<Seg>, out: &mut Vec<Vec<Seg>>) {
    out.push(here.clone());
    match v {
        toml::Value::Table(t) => {
            for (k, c) in t {
                here.push(Seg::Key(k.clone()));
                paths(c, here, out);
                here.pop();
            }
        }
        toml::Value::Array(a) => {
            for (i, c) in a.iter().enumerate() {
                here.push(Seg::Index(i));
                paths(c, here, out);
                here.pop();
            }
        }
        _ => {}
    }
}

fn node_mut<'a>(v: &'a mut toml::Value, path: &[Seg]) -> Option<&'a mut toml::Value> {
    path.iter().try_fold(v, |v, s| match s {
        Seg::Key(k) => v.get_mut(k.as_str()),
        Seg::Index(i) => v.get_mut(*i),
    })
}

/// A structural edit at one node of a TOML document.
#[derive(Clone, Debug)]
enum Edit {
    /// Remove the node from its table or array.
    Delete,
    /// Put another value (of any type) in its place.
    Replace(toml::Value),
    /// Put raw text in its place: integers beyond i64, nan/inf, other bases, datetimes,
    /// deep nesting, garbage.
    Raw(String),
    /// Give the node another key in its table.
    Rename(String),
    /// Add a key to a table, or an element to an array.
    Insert(String, toml::Value),
    /// Replace an integer of the document (chosen among the integers only) by another.
    Integer(i64),
}

/// `doc` with `edits` applied, as TOML text (edits at the root only insert).
fn mutate_toml(doc: toml::Table, edits: &[(Index, Edit)]) -> String {
    let mut v = toml::Value::Table(doc);
    let mut raws: Vec<String> = Vec::new();
    for (at, edit) in edits {
        let mut all = Vec::new();
        paths(&v, &mut Vec::new(), &mut all);
        if let Edit::Integer(_) = edit {
            all.retain(|p| matches!(node_mut(&mut v, p), Some(toml::Value::Integer(_))));
            if all.is_empty() {
                continue;
            }
        }
        let path = all[at.index(all.len())].clone();
        match edit {
            Edit::Delete | Edit::Rename(_) => {
                let Some((last, parent)) = path.split_last() else { continue };
                let Some(p) = node_mut(&mut v, parent) else { continue };
                match (p, last) {
                    (toml::Value::Table(t), Seg::Key(k)) => {
                        let old = t.remove(k);
                        if let (Edit::Rename(new), Some(old)) = (edit, old) {
                            t.insert(new.clone(), old);
                        }
                    }
                    (toml::Value::Array(a), Seg::Index(i)) if matches!(edit, Edit::Delete) => {
                        a.remove(*i);
                    }
                    _ => {}
                }
            }
            Edit::Replace(_) | Edit::Raw(_) | Edit::Integer(_) if path.is_empty() => {}
            Edit::Integer(i) => {
                if let Some(n) = node_mut(&mut v, &path) {
                    *n = toml::Value::Integer(*i);
                }
            }
            Edit::Replace(new) => {
                if let Some(n) = node_mut(&mut v, &path) {
                    *n = new.clone();
                }
            }
            Edit::Raw(text) => {
                if let Some(n) = node_mut(&mut v, &path) {
                    *n = toml::Value::String(format!("@@raw{}@@", raws.len()));
                    raws.push(text.clone());
                }
            }
            Edit::Insert(k, new) => match node_mut(&mut v, &path) {
                Some(toml::Value::Table(t)) => {
                    t.insert(k.clone(), new.clone());
                }
                Some(toml::Value::Array(a)) => a.push(new.clone()),
                _ => {}
            },
        }
    }
    let mut s = toml::to_string(&v).unwrap_or_default();
    for (i, r) in raws.iter().enumerate().rev() {
        s = s.replace(&format!("\"@@raw{i}@@\""), r).replace(&format!("'@@raw{i}@@'"), r);
    }
    s
}

/// A byte-level edit of the serialised document.
#[derive(Clone, Debug)]
enum ByteEdit {
    Flip(Index, u8),
    Insert(Index, u8),
    Remove(Index),
    Truncate(Index),
}

fn mutate_bytes(mut b: Vec<u8>, edits: &[ByteEdit]) -> Vec<u8> {
    for e in edits {
        match e {
            ByteEdit::Flip(at, x) if !b.is_empty() => {
                let i = at.index(b.len());
                b[i] ^= x | 1;
            }
            ByteEdit::Insert(at, x) => b.insert(at.index(b.len() + 1), *x),
            ByteEdit::Remove(at) if !b.is_empty() => {
                b.remove(at.index(b.len()));
            }
            ByteEdit::Truncate(at) => b.truncate(at.index(b.len() + 1)),
            _ => {}
        }
    }
    b
}

fn byte_edits() -> impl Strategy<Value = Vec<ByteEdit>> {
    let one = prop_oneof![
        (any::<Index>(), any::<u8>()).prop_map(|(i, x)| ByteEdit::Flip(i, x)),
        (any::<Index>(), any::<u8>()).prop_map(|(i, x)| ByteEdit::Insert(i, x)),
        any::<Index>().prop_map(ByteEdit::Remove),
        any::<Index>().prop_map(ByteEdit::Truncate),
    ];
    prop_oneof![3 => Just(Vec::new()), 1 => prop::collection::vec(one, 1..4)]
}

/// Integers at the edges of every integer type a field might have (TOML stops at i64):
/// huge ones (sums and products of a few overflow u64), small ones, negative ones, any.
fn edge_int() -> impl Strategy<Value = i64> {
    prop_oneof![
        2 => prop::sample::select(vec![
            i64::MAX,
            i64::MAX - 1,
            i64::MAX / 2 + 1,
            i64::MAX / 3 + 1,
            1 << 62,
            1 << 50,
            1 << 32,
            u32::MAX as i64 + 1,
            u32::MAX as i64,
            (1 << 31) + 1,
            1 << 31,
        ]),
        2 => prop::sample::select(vec![0, 1, -1, 2, 3, 7, 64, 256]),
        1 => prop::sample::select(vec![i64::MIN, i64::MIN + 1, -(1 << 31)]),
        1 => any::<i64>(),
    ]
}

/// A TOML value of any type, at most three levels deep; keys are often ones the parser knows.
fn any_toml(keys: &'static [&'static str]) -> impl Strategy<Value = toml::Value> {
    let leaf = prop_oneof![
        1 => any::<bool>().prop_map(toml::Value::Boolean),
        3 => edge_int().prop_map(toml::Value::Integer),
        1 => any::<f64>().prop_map(toml::Value::Float),
        1 => prop::sample::select(vec![0.0f64, -0.0, 0.5, 1e-300, 1e300, f64::NAN, f64::INFINITY, f64::NEG_INFINITY])
            .prop_map(toml::Value::Float),
        1 => "\\PC{0,24}".prop_map(toml::Value::String),
        1 => prop::sample::select(keys.to_vec()).prop_map(|k| toml::Value::String(k.into())),
    ];
    leaf.prop_recursive(3, 24, 4, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(toml::Value::Array),
            prop::collection::vec((key(keys), inner), 0..4).prop_map(|kv| toml::Value::Table(kv.into_iter().collect())),
        ]
    })
}

fn key(keys: &'static [&'static str]) -> impl Strategy<Value = String> {
    prop_oneof![3 => prop::sample::select(keys.to_vec()).prop_map(String::from), 1 => "\\PC{0,12}"]
}

/// Raw TOML value text no `toml::Value` of the right type holds.
fn raw_toml() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "9223372036854775808",
            "-9223372036854775809",
            "18446744073709551615",
            "340282366920938463463374607431768211456",
            "nan",
            "+nan",
            "-nan",
            "inf",
            "-inf",
            "1e400",
            "-1e400",
            "1e-400",
            "0x7fffffffffffffff",
            "0xffffffffffffffff",
            "0o777",
            "0b101",
            "1_000",
            "1__0",
            "01",
            "+0",
            "-0",
            "0.0",
            "1979-05-27T07:32:00Z",
            "1979-05-27",
            "07:32:00",
            "\"\\u0000\"",
            "\"\\uD800\"",
            "'''multi\nline'''",
            "[]",
            "{}",
            "",
            "=",
        ])
        .prop_map(String::from),
        (1usize..300).prop_map(|d| "[".repeat(d) + &"]".repeat(d)),
        (1usize..300).prop_map(|d| "{ a = ".repeat(d) + "1" + &" }".repeat(d)),
        (1usize..200).prop_map(|d| "[".repeat(d)),
        (0usize..20_000).prop_map(|n| format!("\"{}\"", "x".repeat(n))),
        "\\PC{0,40}",
    ]
}

fn edit(keys: &'static [&'static str]) -> impl Strategy<Value = Edit> {
    prop_oneof![
        3 => Just(Edit::Delete),
        5 => any_toml(keys).prop_map(Edit::Replace),
        2 => raw_toml().prop_map(Edit::Raw),
        1 => key(keys).prop_map(Edit::Rename),
        2 => (key(keys), any_toml(keys)).prop_map(|(k, v)| Edit::Insert(k, v)),
        3 => edge_int().prop_map(Edit::Integer),
    ]
}

/// One of `seeds` (TOML texts), mutated: structural edits, then byte edits.
fn mutated(seeds: Vec<&'static str>, keys: &'static [&'static str]) -> impl Strategy<Value = String> {
    (prop::sample::select(seeds), prop::collection::vec((any::<Index>(), edit(keys)), 0..5), byte_edits()).prop_map(
        |(seed, edits, bytes)| {
            let doc: toml::Table = toml::from_str(seed).expect("seeds are valid TOML");
            String::from_utf8_lossy(&mutate_bytes(mutate_toml(doc, &edits).into_bytes(), &bytes)).into_owned()
        },
    )
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
    fn any_text_is_loaded_as_a_scenario_or_refused(text in prop_oneof![
        "\\PC{0,512}",
        prop::collection::vec(any::<u8>(), 0..512).prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
    ]) {
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
