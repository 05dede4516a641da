//! Property-based fuzzing of the model catalog reader, `Catalog::parse(text, origin)`: any
//! text, the repository's `models.toml` mutated structurally (entries and fields deleted,
//! renamed or added, values replaced by other types, integers at every type's edge up to
//! `i64::MAX` and down to `i64::MIN`, zero, nan/inf, integers beyond i64, deep nesting) and
//! at the byte level (`goodput-fuzzing`'s `toml::mutated`), and single entries whose every
//! field is drawn from valid, edge and wrong-typed values. Every property is "no panic,
//! bounded in time": `parse` returns Ok or Err, and for every entry it accepts,
//! `param_count`, `weight_bytes(2)`, `weight_bytes(4)` and `kv_bytes_per_token(2)` do not
//! panic, `weight_bytes(2) <= weight_bytes(4)`, and the sizes are exact (the entry is within
//! the 2^50-byte bound `validate` promises). A last property gives `ModelSpec` arbitrary
//! dimensions directly: its sizes saturate, never panic.
//!
//! Cases: 256 per property (4 properties, about 1,000 cases in all); failures are not
//! persisted (no `proptest-regressions` files).

use goodput_core::{Catalog, ModelSpec};
use goodput_fuzzing::toml::{edge_int, mutated, raw_toml};
use goodput_fuzzing::{any_text, config};
use proptest::prelude::*;

const MODELS_TOML: &str = include_str!("../models.toml");

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
    fn any_text_is_a_catalog_or_refused(text in any_text(512)) {
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
