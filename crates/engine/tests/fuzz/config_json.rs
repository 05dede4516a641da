//! `config.json` checked against a catalog entry (`weights::check_hf_config`).

use crate::{bounded, tiny};
use goodput_core::{Catalog, ModelSpec};
use goodput_engine::weights::check_hf_config;
use goodput_fuzzing::json::mutated;
use goodput_fuzzing::{any_text, config, temp_path};
use proptest::prelude::*;
use serde_json::{json, Value};

// config.json.

pub(crate) const HF_KEYS: &[&str] = &[
    "architectures",
    "model_type",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "intermediate_size",
    "vocab_size",
    "rope_theta",
    "rope_parameters",
    "rope_scaling",
    "rope_type",
    "rms_norm_eps",
    "max_position_embeddings",
    "tie_word_embeddings",
    "torch_dtype",
    "bos_token_id",
    "eos_token_id",
];

/// The `config.json` a real checkpoint of `spec` ships (the newer SmolLM2 form keeps
/// `rope_theta` inside `rope_parameters`).
pub(crate) fn hf_config(spec: &ModelSpec, nested_theta: bool) -> Value {
    let mut v = json!({
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": spec.hidden_size,
        "num_hidden_layers": spec.num_layers,
        "num_attention_heads": spec.num_heads,
        "num_key_value_heads": spec.num_kv_heads,
        "intermediate_size": spec.intermediate_size,
        "vocab_size": spec.vocab_size,
        "rms_norm_eps": spec.rms_norm_eps,
        "max_position_embeddings": spec.max_position_embeddings,
        "tie_word_embeddings": spec.tie_word_embeddings,
        "torch_dtype": "bfloat16",
        "bos_token_id": 1,
        "eos_token_id": [2, 3],
        "rope_scaling": null,
    });
    if nested_theta {
        v["rope_parameters"] = json!({"rope_type": "default", "rope_theta": spec.rope_theta});
    } else {
        v["rope_theta"] = json!(spec.rope_theta);
    }
    v
}

pub(crate) fn catalog_specs() -> Vec<ModelSpec> {
    Catalog::builtin().models.into_values().collect()
}

pub(crate) fn hf_seeds() -> Vec<Value> {
    catalog_specs().iter().flat_map(|s| [hf_config(s, false), hf_config(s, true)]).collect()
}

/// Checks `text` as the config.json of `spec`; a config it accepts names `rope_theta`.
pub(crate) fn check_config(spec: &ModelSpec, text: &[u8]) -> Result<(), TestCaseError> {
    let path = temp_path(&format!("config-{}", spec.name), "json");
    std::fs::write(&path, text).unwrap();
    let mut out = None;
    bounded(text.len(), || out = Some(check_hf_config(spec, &path)))?;
    let _ = std::fs::remove_file(&path);
    if let Some(Ok(())) = out {
        let v: Value = serde_json::from_slice(text).expect("an accepted config is JSON");
        let theta = v
            .get("rope_theta")
            .and_then(Value::as_f64)
            .or_else(|| v.get("rope_parameters").and_then(|r| r.get("rope_theta")).and_then(Value::as_f64));
        prop_assert!(theta.is_some(), "accepted without a numeric rope_theta");
    }
    Ok(())
}

#[test]
pub(crate) fn every_catalog_entry_accepts_its_own_config_json() {
    for spec in catalog_specs() {
        for nested in [false, true] {
            let text = hf_config(&spec, nested).to_string();
            let path = temp_path(&format!("seed-{}", spec.name), "json");
            std::fs::write(&path, &text).unwrap();
            check_hf_config(&spec, &path).unwrap_or_else(|e| panic!("{}: {e}", spec.name));
            let _ = std::fs::remove_file(&path);
        }
    }
}

// ---------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_text_is_a_config_json_that_matches_or_is_refused(text in any_text(256)) {
        check_config(&tiny(), text.as_bytes())?;
    }

    #[test]
    fn a_config_json_of_any_shape_matches_or_is_refused(
        body in mutated(hf_seeds(), HF_KEYS),
        spec in prop::sample::select(catalog_specs()),
    ) {
        check_config(&spec, &body)?;
    }
}

/// Found by `a_config_json_of_any_shape_matches_or_is_refused`: a field present with a value
/// that is not a number was taken as absent, and the file accepted.
#[test]
fn a_config_json_field_that_is_not_a_number_is_refused() {
    let path = temp_path("string-field", "json");
    std::fs::write(&path, r#"{"hidden_size": "2048", "rope_theta": 10000.0}"#).unwrap();
    let e = check_hf_config(&tiny(), &path).err().unwrap().to_string();
    assert!(e.contains("`hidden_size` is \"2048\", not a number"), "{e}");
    let _ = std::fs::remove_file(&path);
}
