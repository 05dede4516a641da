//! Property-based fuzzing of the model catalog reader, `Catalog::parse(text, origin)`: any
//! text, the repository's `models.toml` mutated structurally (entries and fields deleted,
//! renamed or added, values replaced by other types, integers at every type's edge up to
//! `i64::MAX` and down to `i64::MIN`, zero, nan/inf, integers beyond i64, deep nesting) and
//! at the byte level, and single entries whose every field is drawn from valid, edge and
//! wrong-typed values. Every property is "no panic, bounded in time": `parse` returns Ok or
//! Err, and for every entry it accepts, `param_count`, `weight_bytes(2)`, `weight_bytes(4)`
//! and `kv_bytes_per_token(2)` do not panic, `weight_bytes(2) <= weight_bytes(4)`, and the
//! sizes are exact (the entry is within the 2^50-byte bound `validate` promises). A last
//! property gives `ModelSpec` arbitrary dimensions directly: its sizes saturate, never panic.
//!
//! Cases: 256 per property (4 properties, about 1,000 cases in all); failures are not
//! persisted (no `proptest-regressions` files).

use goodput_core::{Catalog, ModelSpec};
use proptest::prelude::*;
use proptest::sample::Index;

const MODELS_TOML: &str = include_str!("../../../models.toml");

fn config() -> ProptestConfig {
    // `PROPTEST_CASES=N` for a deeper run than CI's 256 cases per property.
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(256);
    ProptestConfig { cases, failure_persistence: None, ..ProptestConfig::default() }
}

// ---------------------------------------------------------------------------------------------
// Structured TOML mutation (the same scheme as the workload's fuzz tests).

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
// Catalog entries.

const KEYS: &[&str] = &[
    "models",
    "architecture",
    "llama",
    "mistral",
    "qwen2",
    "hidden_size",
    "num_layers",
    "num_heads",
    "num_kv_heads",
    "head_dim",
    "intermediate_size",
    "vocab_size",
    "max_position_embeddings",
    "rope_theta",
    "rms_norm_eps",
    "tie_word_embeddings",
    "qkv_bias",
    "rope_scaling",
    "rope_type",
    "type",
    "llama3",
    "factor",
    "low_freq_factor",
    "high_freq_factor",
    "original_max_position_embeddings",
    "bos_token_id",
    "eos_token_id",
    "hf_repo",
    "gguf_file",
];

/// A small valid entry with every optional field, as a second seed beside `models.toml`.
const FULL_ENTRY: &str = r#"
[models.full]
architecture = "llama"
hidden_size = 64
num_layers = 2
num_heads = 4
num_kv_heads = 2
head_dim = 16
intermediate_size = 128
vocab_size = 300
max_position_embeddings = 128
rope_theta = 500000.0
rms_norm_eps = 1e-5
tie_word_embeddings = true
qkv_bias = true
bos_token_id = 1
eos_token_id = 2
hf_repo = "x/y"
gguf_file = "y.gguf"

[models.full.rope_scaling]
rope_type = "llama3"
factor = 8.0
low_freq_factor = 1.0
high_freq_factor = 4.0
original_max_position_embeddings = 64
"#;

/// Every accepted entry: its sizes do not panic, grow with the dtype and are exact.
fn check(c: &Catalog) -> Result<(), TestCaseError> {
    prop_assert!(!c.models.is_empty());
    for (name, m) in &c.models {
        prop_assert_eq!(&m.name, name);
        prop_assert!(m.validate().is_ok());
        prop_assert!(c.get(name).is_ok());
        let params = m.param_count();
        let (w2, w4) = (m.weight_bytes(2), m.weight_bytes(4));
        prop_assert!(w2 <= w4, "{}: weight_bytes(2) {} > weight_bytes(4) {}", name, w2, w4);
        prop_assert!(w4 <= 1 << 50, "{}: {} bytes in f32 passed validate", name, w4);
        prop_assert_eq!(w4, params * 4);
        prop_assert_eq!(w2, params * 2);
        let (kv2, kv4) = (m.kv_bytes_per_token(2), m.kv_bytes_per_token(4));
        prop_assert!(kv2 <= kv4);
        prop_assert!(m.head_dim() > 0 && m.head_dim() % 2 == 0);
        let _ = (m.has_qkv_bias(), format!("{m:?}"));
    }
    Ok(())
}

#[test]
fn the_seeds_are_valid_catalogs() {
    for seed in [MODELS_TOML, FULL_ENTRY] {
        let c = Catalog::parse(seed, "seed").unwrap();
        check(&c).unwrap();
    }
}

/// A field's TOML text: usually one of `valid`, sometimes (8%) an edge integer, a wrong
/// type, raw text or absent (`None`).
fn field(valid: &'static [&'static str]) -> impl Strategy<Value = Option<String>> {
    let wild = prop_oneof![
        3 => edge_int().prop_map(|i| Some(i.to_string())),
        2 => raw_toml().prop_map(Some),
        1 => any::<f64>().prop_map(|f| Some(format!("{f:?}"))),
        2 => Just(None),
        1 => prop::sample::select(vec!["true", "\"64\"", "[64]", "{ n = 64 }", "-64", "0"]).prop_map(|s| Some(s.to_string())),
    ];
    (prop::bool::weighted(0.08), prop::sample::select(valid.to_vec()), wild).prop_map(|(is_wild, valid, wild)| {
        if is_wild {
            wild
        } else {
            Some(valid.to_string())
        }
    })
}

/// `[models.<name>]` with each field drawn by `field`.
fn entry() -> impl Strategy<Value = String> {
    let dims = (
        field(&["\"llama\"", "\"mistral\"", "\"qwen2\"", "\"llama\"", "\"gpt2\""]),
        field(&["256", "256", "512", "4096"]),
        field(&["1", "2", "4", "30"]),
        field(&["4", "8", "4", "32", "9"]),
        field(&["1", "2", "4", "3"]),
        field(&["64", "32", "6", "0"]),
        field(&["128", "1024", "11008"]),
    );
    let rest = (
        field(&["300", "32000", "151936", "258"]),
        field(&["128", "2048", "131072"]),
        field(&["10000.0", "500000.0", "1e6", "0.0", "-1.0"]),
        field(&["1e-5", "1e-6", "0.0", "1e-300"]),
        field(&["true", "false"]),
        field(&["true", "false"]),
        field(&["1", "2", "0", "299", "300", "4294967295"]),
        field(&["{ rope_type = \"llama3\", factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0, original_max_position_embeddings = 8192 }",
                "{ type = \"llama3\", factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0, original_max_position_embeddings = 8192 }",
                "{ rope_type = \"linear\", factor = 2.0, low_freq_factor = 1.0, high_freq_factor = 4.0, original_max_position_embeddings = 8192 }",
                "{ rope_type = \"llama3\", factor = 8.0, low_freq_factor = 4.0, high_freq_factor = 1.0, original_max_position_embeddings = 8192 }",
                "{ rope_type = \"llama3\", factor = nan, low_freq_factor = 1.0, high_freq_factor = inf, original_max_position_embeddings = -1 }"]),
    );
    let name = prop_oneof![4 => "[a-z][a-z0-9-]{0,11}", 1 => "\"[a-z0-9. ]{0,8}\"", 1 => "[a-z0-9.\"-]{1,12}"];
    (name, dims, rest, any::<bool>()).prop_map(
        |(name, (arch, h, l, nh, kv, hd, i), (v, mp, theta, eps, tie, qkv, bos, scaling), with_head_dim)| {
            let mut s = format!("[models.{name}]\n");
            for (k, val) in [
                ("architecture", arch),
                ("hidden_size", h),
                ("num_layers", l),
                ("num_heads", nh),
                ("num_kv_heads", kv),
                ("head_dim", hd.filter(|_| with_head_dim)),
                ("intermediate_size", i),
                ("vocab_size", v),
                ("max_position_embeddings", mp),
                ("rope_theta", theta),
                ("rms_norm_eps", eps),
                ("tie_word_embeddings", tie),
                ("qkv_bias", qkv),
                ("bos_token_id", bos.clone()),
                ("eos_token_id", bos),
                ("rope_scaling", scaling),
            ] {
                if let Some(val) = val {
                    s.push_str(&format!("{k} = {val}\n"));
                }
            }
            s
        },
    )
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_text_is_a_catalog_or_refused(text in prop_oneof![
        "\\PC{0,512}",
        prop::collection::vec(any::<u8>(), 0..512).prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
    ]) {
        if let Ok(c) = Catalog::parse(&text, "fuzz") {
            check(&c)?;
        }
    }

    #[test]
    fn a_catalog_of_any_shape_is_parsed_or_refused(text in mutated(vec![MODELS_TOML, FULL_ENTRY], KEYS)) {
        if let Ok(c) = Catalog::parse(&text, "fuzz") {
            check(&c)?;
        }
    }

    #[test]
    fn an_entry_with_any_field_values_is_parsed_or_refused(text in entry()) {
        if let Ok(c) = Catalog::parse(&text, "fuzz") {
            check(&c)?;
        }
    }

    #[test]
    fn the_sizes_of_a_shape_with_any_dimensions_saturate_instead_of_panicking(
        dims in prop::collection::vec(prop_oneof![
            Just(0usize), Just(1), Just(2), Just(usize::MAX), Just(1 << 31), Just(1 << 32), any::<usize>()
        ], 7),
        head_dim in prop::option::of(any::<usize>()),
        tie in any::<bool>(),
        qkv in any::<bool>(),
    ) {
        let base = Catalog::builtin().get("tiny").unwrap().clone();
        let m = ModelSpec {
            hidden_size: dims[0],
            num_layers: dims[1],
            num_heads: dims[2],
            num_kv_heads: dims[3],
            intermediate_size: dims[4],
            vocab_size: dims[5],
            max_position_embeddings: dims[6],
            head_dim,
            tie_word_embeddings: tie,
            qkv_bias: qkv,
            ..base
        };
        let params = m.param_count();
        let (w2, w4) = (m.weight_bytes(2), m.weight_bytes(4));
        prop_assert!(w2 <= w4);
        prop_assert!(m.weight_bytes(1) == params);
        prop_assert!(m.kv_bytes_per_token(2) <= m.kv_bytes_per_token(4));
        if m.validate().is_ok() {
            prop_assert!(w4 <= 1 << 50);
        }
    }
}
