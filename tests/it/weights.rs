//! Real-weight loading paths against dummy weights of the same values: a safetensors
//! directory and the local Hugging Face cache layout must give the very same logits and greedy
//! tokens as the in-memory tensors they were saved from.

use crate::common::Recorder;
use candle_core::{DType, Device, Tensor};
use goodput_core::{Catalog, ModelSpec, WeightsSource};
use goodput_engine::check::reference::ReferenceRunner;
use goodput_engine::loader;
use goodput_engine::weights::DummySource;
use goodput_engine::Llama;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

fn spec() -> ModelSpec {
    let text =
        "[models.t]\narchitecture = \"qwen2\"\nhidden_size = 64\nnum_layers = 2\nnum_heads = 4\nnum_kv_heads = 2\n\
                intermediate_size = 96\nvocab_size = 300\nmax_position_embeddings = 256\nrope_theta = 10000.0\n\
                rms_norm_eps = 1e-6\ntie_word_embeddings = false\nhf_repo = \"goodput-test/t\"\n";
    Catalog::parse(text, "test").unwrap().get("t").unwrap().clone()
}

fn temp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("goodput-weights-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn config_json(s: &ModelSpec) -> String {
    serde_json::json!({
        "architectures": ["Qwen2ForCausalLM"], "hidden_size": s.hidden_size, "num_hidden_layers": s.num_layers,
        "num_attention_heads": s.num_heads, "num_key_value_heads": s.num_kv_heads,
        "intermediate_size": s.intermediate_size, "vocab_size": s.vocab_size, "rope_theta": s.rope_theta,
        "rms_norm_eps": s.rms_norm_eps, "max_position_embeddings": s.max_position_embeddings,
        "tie_word_embeddings": false
    })
    .to_string()
}

/// Saves the dummy model's tensors (split over two shards) and config.json into `dir`.
fn save(dir: &Path, tensors: &HashMap<String, Tensor>, s: &ModelSpec) {
    let (a, b): (HashMap<_, _>, HashMap<_, _>) =
        tensors.iter().map(|(k, v)| (k.clone(), v.clone())).partition(|(k, _)| k.contains("layers.0"));
    candle_core::safetensors::save(&a, dir.join("model-00001-of-00002.safetensors")).unwrap();
    candle_core::safetensors::save(&b, dir.join("model-00002-of-00002.safetensors")).unwrap();
    std::fs::write(dir.join("config.json"), config_json(s)).unwrap();
}

fn greedy(m: &Llama) -> (Vec<u32>, Vec<Vec<f32>>) {
    ReferenceRunner::new(m).generate(&[5, 17, 42, 99, 7, 3, 250], 8).unwrap()
}

#[test]
fn safetensors_dir_and_hf_cache_load_the_same_model() {
    let s = spec();
    let mut rec = Recorder(DummySource { seed: 11, dtype: DType::F32, device: Device::Cpu }, HashMap::new());
    let dummy = Llama::load(&s, &mut rec, 256, &Device::Cpu, DType::F32).unwrap();
    assert!(rec.1.contains_key("model.layers.1.self_attn.q_proj.bias"), "qwen2 has qkv biases");
    let want = greedy(&dummy);

    let dir = temp("dir");
    save(&dir, &rec.1, &s);
    let loaded = loader::load(&s, &WeightsSource::Dir(dir.clone()), &Device::Cpu, DType::F32, 256).unwrap();
    assert_eq!(loaded.weights_kind, "safetensors");
    assert_eq!(greedy(&loaded.model), want);

    // The Hugging Face cache layout: hub/models--org--name/{refs/main, snapshots/<rev>/…}.
    let home = temp("hf-home");
    let repo = home.join("hub").join("models--goodput-test--t");
    let snap = repo.join("snapshots").join("0123abcd");
    std::fs::create_dir_all(&snap).unwrap();
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::write(repo.join("refs").join("main"), "0123abcd").unwrap();
    save(&snap, &rec.1, &s);
    // Only this test in this binary reads HF_HOME.
    std::env::set_var("HF_HOME", &home);
    let loaded = loader::load(&s, &WeightsSource::HfCache, &Device::Cpu, DType::F32, 256).unwrap();
    assert_eq!(greedy(&loaded.model), want);
    // `--model goodput-test/t`: no catalog entry, the spec from the cached config.json.
    let named = goodput_engine::model_files::resolve("goodput-test/t", &Catalog::builtin()).unwrap();
    assert_eq!(
        (named.spec.param_count(), named.spec.kv_bytes_per_token(4)),
        (s.param_count(), s.kv_bytes_per_token(4))
    );
    assert_eq!((named.spec.hf_repo.as_deref(), &named.weights), (Some("goodput-test/t"), &WeightsSource::HfCache));
    let loaded = loader::load(&named.spec, &named.weights, &Device::Cpu, DType::F32, 256).unwrap();
    assert_eq!(greedy(&loaded.model), want);
    // A repository that is not in the cache is a clear error, never a download.
    let mut other = s.clone();
    other.hf_repo = Some("goodput-test/absent".into());
    let err = loader::load(&other, &WeightsSource::HfCache, &Device::Cpu, DType::F32, 256).err().unwrap().to_string();
    assert!(err.contains("goodput-test/absent") && err.contains("never downloads"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&home);
}
