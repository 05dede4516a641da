use crate::{Catalog, HfConfigError, LayerKind, ModelSpec};

/// Llama 3.1 8B's config.json as transformers writes it.
const LLAMA31_8B: &str = r#"{
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "hidden_act": "silu",
  "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
  "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
  "pretraining_tp": 1, "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "transformers_version": "4.43.0.dev0", "use_cache": true, "vocab_size": 128256
}"#;

#[test]
fn llama_3_1_8b_from_its_config_is_the_catalog_s_shape() {
    let from_config = ModelSpec::from_hf_config("meta-llama/Llama-3.1-8B-Instruct", LLAMA31_8B).unwrap();
    let catalog = Catalog::builtin().get("llama-3.1-8b").unwrap().clone();
    let shape = |s: &ModelSpec| (s.param_count(), s.kv_bytes_per_token(2), s.head_dim(), s.rope_scaling.clone());
    assert_eq!(shape(&from_config), shape(&catalog));
    assert_eq!((from_config.bos_token_id, from_config.eos_token_id), (Some(128000), Some(128001)));
    assert_eq!(from_config.name, "meta-llama/Llama-3.1-8B-Instruct");
}

#[test]
fn rope_theta_inside_rope_parameters_and_refusals_by_name() {
    let nested = r#"{"model_type":"llama","hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4,
        "intermediate_size":128,"vocab_size":300,"max_position_embeddings":512,"rms_norm_eps":1e-5,
        "rope_parameters":{"rope_theta":100000.0,"rope_type":"default"},"tie_word_embeddings":true}"#;
    let s = ModelSpec::from_hf_config("t", nested).unwrap();
    assert_eq!((s.rope_theta, s.tie_word_embeddings, s.num_kv_heads), (100000.0, true, 4));
    let no_theta = nested.replace(r#""rope_theta":100000.0,"#, "");
    let e = ModelSpec::from_hf_config("t", &no_theta).unwrap_err();
    assert!(matches!(&e, HfConfigError::Field(f) if f.field == "rope_theta"), "{e:?}");
    assert!(e.to_string().contains("refusing to guess"), "{e}");
    let e = ModelSpec::from_hf_config("t", "{").unwrap_err();
    assert!(matches!(e, HfConfigError::Json(_)), "{e:?}");
    let gpt2 = nested.replace(r#""model_type":"llama""#, r#""model_type":"gpt2""#);
    assert!(ModelSpec::from_hf_config("t", &gpt2).unwrap_err().to_string().contains("`gpt2`"));
    let dynamic = nested.replace(r#""rope_type":"default""#, r#""rope_type":"dynamic""#);
    assert!(ModelSpec::from_hf_config("t", &dynamic).unwrap_err().to_string().contains("`dynamic`"));
    let missing = nested.replace(r#""hidden_size":64,"#, "");
    assert!(ModelSpec::from_hf_config("t", &missing).unwrap_err().to_string().contains("hidden_size"));
    let bad_heads = nested.replace(r#""num_attention_heads":4"#, r#""num_attention_heads":3"#);
    assert!(ModelSpec::from_hf_config("t", &bad_heads).unwrap_err().to_string().contains("config.json"));
}

/// A config of `tests/fixtures/configs/`.
fn fixture(name: &str) -> String {
    let path = format!("{}/../../tests/fixtures/configs/{name}.json", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Every 2026 catalog entry is what its published config.json says, field for field.
#[test]
fn the_2026_catalog_entries_are_their_configs() {
    let catalog = Catalog::builtin();
    for name in ["qwen3-8b", "qwen3-30b-a3b", "mixtral-8x7b", "deepseek-v3", "kimi-k2", "gpt-oss-20b", "gpt-oss-120b"] {
        let from_config = ModelSpec::from_hf_config(name, &fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        let entry = ModelSpec { hf_repo: None, ..catalog.get(name).unwrap().clone() };
        let normal = |s: &ModelSpec| ModelSpec {
            qkv_bias: s.has_qkv_bias(),
            attention_bias: s.has_attention_bias(),
            qk_norm: s.has_qk_norm(),
            attention_sinks: s.has_sinks(),
            head_dim: s.mla.is_none().then(|| s.head_dim()),
            ..s.clone()
        };
        assert_eq!(normal(&from_config), normal(&entry), "{name}");
    }
}

/// Total and active parameters against the published figures (model cards), which are rounded
/// (or cut) to the digits they show: within one unit of the last digit.
#[test]
fn parameters_and_kv_of_the_2026_models() {
    let c = Catalog::builtin();
    let near = |name: &str, got: u64, published: f64, unit: f64| {
        assert!((got as f64 - published).abs() <= unit, "{name}: {got} against {published:e} ± {unit:e}");
    };
    for (name, total, active, unit) in [
        ("qwen3-8b", 8.2e9, 8.2e9, 0.1e9),
        ("qwen3-32b", 32.8e9, 32.8e9, 0.1e9),
        ("qwen3-30b-a3b", 30.5e9, 3.3e9, 0.1e9),
        ("qwen3-235b-a22b", 235e9, 22e9, 1e9),
        ("mixtral-8x7b", 46.7e9, 12.9e9, 0.1e9),
        ("deepseek-v3", 671e9, 37e9, 1e9),
        ("kimi-k2", 1.03e12, 32e9, 1e10),
    ] {
        let m = c.get(name).unwrap();
        near(name, m.param_count(), total, unit);
        near(name, m.active_param_count(), active, unit);
    }
    // OpenAI counts gpt-oss's active parameters without the embedding table.
    for (name, total, active) in [("gpt-oss-20b", 20.91e9, 3.61e9), ("gpt-oss-120b", 116.83e9, 5.13e9)] {
        let m = c.get(name).unwrap();
        near(name, m.param_count(), total, 0.01e9);
        near(name, m.active_param_count() - m.params().embedding, active, 0.01e9);
    }
    // DeepSeek-V3: 61 layers × (512 latent + 64 RoPE key) × 2 bytes, not the 2 × 128 × 192 × …
    // a decompressed cache would take.
    let ds = c.get("deepseek-v3").unwrap();
    assert_eq!(ds.kv_bytes_per_token(2), 70_272);
    assert_eq!(ds.kv_per_token(2).latent, 70_272);
    // gpt-oss-20b: 12 sliding and 12 full layers of 2 × 8 × 64 × 2 bytes; a 4096-token sequence
    // holds 128 positions in the sliding ones.
    let oss = c.get("gpt-oss-20b").unwrap();
    let per_layer = 2 * 8 * 64 * 2;
    assert_eq!((oss.kv_per_token(2).full, oss.kv_per_token(2).sliding), (12 * per_layer, 12 * per_layer));
    assert_eq!(oss.kv_bytes_for_context(4096, 2), 12 * per_layer * 4096 + 12 * per_layer * 128);
    assert_eq!(oss.kv_bytes_for_context(100, 2), 24 * per_layer * 100);
    // Its pool: a sliding group (even layers) and a full one (odd), a block of 16 slots holding
    // 12 layers' K/V for 16 tokens; a uniform model is one group of all its layers.
    let groups = oss.kv_groups();
    assert_eq!(groups.len(), 2);
    assert_eq!((groups[0].window, groups[0].layers[..3].to_vec()), (Some(128), vec![0, 2, 4]));
    assert_eq!((groups[1].window, groups[1].layers.len()), (None, 12));
    assert_eq!(oss.kv_block_bytes(16, 2), 12 * per_layer * 16);
    assert_eq!(ds.kv_groups().len(), 1);
    assert_eq!(ds.kv_block_bytes(16, 2), 70_272 * 16);
    // Unequal kinds: 2 full and 4 sliding layers, cut by their gcd into groups of 2.
    let mut odd = oss.clone();
    odd.num_layers = 6;
    odd.layer_types = Some(
        [LayerKind::Full, LayerKind::Sliding, LayerKind::Sliding, LayerKind::Full]
            .into_iter()
            .chain([LayerKind::Sliding; 2])
            .collect(),
    );
    let g = odd.kv_groups();
    assert_eq!(
        g.iter().map(|g| (g.window, g.layers.clone())).collect::<Vec<_>>(),
        vec![(None, vec![0, 3]), (Some(128), vec![1, 2]), (Some(128), vec![4, 5]),]
    );
    // Qwen3-30B-A3B: 48 × 2 × 4 × 128 × 2.
    assert_eq!(c.get("qwen3-30b-a3b").unwrap().kv_bytes_per_token(2), 48 * 2 * 4 * 128 * 2);
    // Mixtral: one expert is 3 × 4096 × 14336.
    assert_eq!(c.get("mixtral-8x7b").unwrap().expert_params(), 3 * 4096 * 14336);
    assert_eq!(ds.sparse_layers(), 58);
    // Counted, not iterated: the listed dense layer is not counted.
    let q = c.get("tiny-qwen3-moe").unwrap();
    assert_eq!(q.sparse_layers(), (0..q.num_layers).filter(|&i| q.is_sparse(i)).count());
    assert_eq!(q.sparse_layers(), 3);
}

/// What the families' configs may not say, refused by the key's name.
#[test]
fn unsupported_values_of_the_2026_configs_are_refused_by_name() {
    let refused = |name: &str, from: &str, to: &str, needle: &str| {
        let text = fixture(name);
        assert!(text.contains(from), "{name} has no {from}");
        let e = ModelSpec::from_hf_config(name, &text.replacen(from, to, 1)).unwrap_err();
        assert!(e.to_string().contains(needle), "{name}: {e}");
    };
    refused("deepseek-v3", r#""scoring_func": "sigmoid""#, r#""scoring_func": "softmax""#, "`softmax`");
    refused("deepseek-v3", r#""topk_method": "noaux_tc""#, r#""topk_method": "greedy""#, "`greedy`");
    refused("deepseek-v3", r#""type": "yarn""#, r#""type": "longrope""#, "`longrope`");
    refused("deepseek-v3", r#""kv_lora_rank": 512,"#, "", "kv_lora_rank");
    refused("deepseek-v3", r#""n_group": 8"#, r#""n_group": 7"#, "n_group");
    refused("deepseek-v3", r#""moe_layer_freq": 1"#, r#""moe_layer_freq": 2"#, "moe_layer_freq");
    refused("qwen3-30b-a3b", r#""num_experts": 128,"#, "", "num_experts");
    refused("qwen3-30b-a3b", r#""num_experts_per_tok": 8"#, r#""num_experts_per_tok": 129"#, "experts_per_token");
    refused("qwen3-8b", r#""use_sliding_window": false"#, r#""use_sliding_window": true"#, "use_sliding_window");
    refused("qwen3-8b", r#""hidden_act": "silu""#, r#""hidden_act": "gelu""#, "`gelu`");
    refused("gpt-oss-20b", r#""sliding_attention","#, r#""chunked_attention","#, "`chunked_attention`");
    refused("gpt-oss-20b", r#""quant_method": "mxfp4""#, r#""quant_method": "awq""#, "`awq`");
    refused("gpt-oss-20b", r#""sliding_window": 128,"#, "", "sliding_window");
    refused("mixtral-8x7b", r#""model_type": "mixtral""#, r#""model_type": "dbrx""#, "`dbrx`");
}
