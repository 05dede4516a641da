//! Bad input, end to end: the real `goodput` binary given a broken catalog, an unknown model,
//! broken weights, impossible context or KV sizes and bad flags must exit non-zero without a
//! panic, with a message on stderr that names the problem (the field, the file, the model, the
//! number). One positive case checks that the hand-built safetensors directory really loads.

use crate::common::goodput;
use candle_core::{Device, Tensor};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Runs `goodput ARGS`, which must fail cleanly with every one of `needles` on stderr; returns stderr.
#[track_caller]
fn fails(args: &[&str], needles: &[&str]) -> String {
    let (ok, _out, err) = goodput(args);
    let shown = args.iter().map(|a| if a.len() > 60 { "<long>" } else { a }).collect::<Vec<_>>().join(" ");
    assert!(!ok, "`goodput {shown}` succeeded; stderr:\n{err}");
    assert!(!err.contains("panicked") && !err.contains("RUST_BACKTRACE"), "`goodput {shown}` panicked:\n{err}");
    for n in needles {
        assert!(err.contains(n), "`goodput {shown}`: stderr lacks `{n}`:\n{err}");
    }
    err
}

/// A fresh, empty directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let p = std::env::temp_dir().join(format!("goodput-bad-input-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Self(p)
    }
    fn path(&self) -> &Path {
        &self.0
    }
    fn join(&self, f: &str) -> PathBuf {
        self.0.join(f)
    }
    fn write(&self, f: &str, contents: impl AsRef<[u8]>) -> String {
        let p = self.join(f);
        std::fs::write(&p, contents).unwrap();
        s(&p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn s(p: &Path) -> String {
    p.to_str().unwrap().to_string()
}

/// A small, valid catalog entry `m` (hidden 64, 2 layers, 4 heads / 2 kv heads, untied).
const ENTRY: &str = "architecture = \"llama\"\nhidden_size = 64\nnum_layers = 2\nnum_heads = 4\nnum_kv_heads = 2\n\
                     intermediate_size = 96\nvocab_size = 300\nmax_position_embeddings = 256\n\
                     rope_theta = 10000.0\nrms_norm_eps = 1e-5\ntie_word_embeddings = false\n";

/// The catalog `[models.m]` with the lines starting with `drop` left out and `extra` appended.
fn catalog(drop: &str, extra: &str) -> String {
    let body: String =
        ENTRY.lines().filter(|l| drop.is_empty() || !l.starts_with(drop)).map(|l| format!("{l}\n")).collect();
    format!("[models.m]\n{body}{extra}")
}

/// Checks a broken catalog both through `models --catalog` and `generate --catalog`.
#[track_caller]
fn bad_catalog(name: &str, text: &str, needles: &[&str]) {
    let dir = TempDir::new(name);
    let f = dir.write("models.toml", text);
    fails(&["models", "--catalog", &f], needles);
    fails(&["generate", "--catalog", &f, "--model", "m", "--prompt-ids", "1,2,3", "--max-tokens", "2"], needles);
}

// 1. Malformed catalogs.

#[test]
fn catalog_that_is_not_toml() {
    bad_catalog("not-toml", "[models.m\nhidden_size = 64\n", &["models.toml", "not valid TOML", "line 1"]);
}

#[test]
fn catalog_heads_not_dividing_hidden() {
    bad_catalog(
        "heads",
        &catalog("num_heads", "num_heads = 5\n"),
        &["model `m`", "num_heads", "5 heads", "hidden_size 64"],
    );
}

#[test]
fn catalog_kv_heads_not_dividing_heads() {
    bad_catalog("kv-heads", &catalog("num_kv_heads", "num_kv_heads = 3\n"), &["model `m`", "num_kv_heads", "3"]);
}

#[test]
fn catalog_unknown_architecture() {
    bad_catalog("arch", &catalog("architecture", "architecture = \"gpt2\"\n"), &["model `m`", "gpt2", "llama"]);
}

#[test]
fn catalog_missing_field() {
    bad_catalog("missing", &catalog("vocab_size", ""), &["model `m`", "missing field", "vocab_size"]);
}

#[test]
fn catalog_unknown_field() {
    bad_catalog("unknown-field", &catalog("", "colour = \"blue\"\n"), &["model `m`", "unknown field", "colour"]);
}

#[test]
fn catalog_zero_field() {
    bad_catalog("zero", &catalog("num_layers", "num_layers = 0\n"), &["model `m`", "num_layers", "positive"]);
}

#[test]
fn catalog_without_models() {
    bad_catalog("no-models", "title = \"x\"\n", &["models.toml", "[models.<name>]"]);
}

#[test]
fn catalog_file_that_does_not_exist() {
    fails(&["models", "--catalog", "/nonexistent/models.toml"], &["/nonexistent/models.toml", "No such file"]);
}

// 2. Unknown model.

#[test]
fn unknown_model_lists_the_available_ones() {
    let listed = ["gpt-5", "tiny", "smollm2-135m", "llama-3.1-8b"];
    fails(&["generate", "--model", "gpt-5", "--prompt-ids", "1,2"], &listed);
    fails(&["engine-bench", "--model", "gpt-5"], &listed);
    let dir = TempDir::new("unknown-model");
    let f = dir.write("models.toml", catalog("", ""));
    fails(
        &["generate", "--catalog", &f, "--model", "tiny", "--prompt-ids", "1,2"],
        &["unknown model `tiny`", "the catalog has: m"],
    );
}

// 3. Safetensors directories.

/// The Hugging Face tensors of catalog entry `m`, seeded and small.
fn tensors() -> HashMap<String, Tensor> {
    let (h, layers, q, kv, inter, vocab) = (64, 2, 64, 32, 96, 300);
    let dev = Device::Cpu;
    let mut seed = 0u32;
    let mut t = |shape: &[usize]| {
        seed += 1;
        let n: usize = shape.iter().product();
        // Deterministic, small, varied values (no RNG dependency).
        let v: Vec<f32> = (0..n)
            .map(|i| ((i as u32).wrapping_mul(2654435761).wrapping_add(seed * 97) % 1000) as f32 / 1000.0 - 0.5)
            .map(|x| x * 0.2)
            .collect();
        Tensor::from_vec(v, shape, &dev).unwrap()
    };
    let mut m = HashMap::new();
    m.insert("model.embed_tokens.weight".to_string(), t(&[vocab, h]));
    for i in 0..layers {
        let p = format!("model.layers.{i}");
        for (name, shape) in [
            ("self_attn.q_proj", [q, h]),
            ("self_attn.k_proj", [kv, h]),
            ("self_attn.v_proj", [kv, h]),
            ("self_attn.o_proj", [h, q]),
            ("mlp.gate_proj", [inter, h]),
            ("mlp.up_proj", [inter, h]),
            ("mlp.down_proj", [h, inter]),
        ] {
            m.insert(format!("{p}.{name}.weight"), t(&shape));
        }
        m.insert(format!("{p}.input_layernorm.weight"), Tensor::ones(h, candle_core::DType::F32, &dev).unwrap());
        m.insert(
            format!("{p}.post_attention_layernorm.weight"),
            Tensor::ones(h, candle_core::DType::F32, &dev).unwrap(),
        );
    }
    m.insert("model.norm.weight".to_string(), Tensor::ones(h, candle_core::DType::F32, &dev).unwrap());
    m.insert("lm_head.weight".to_string(), t(&[vocab, h]));
    m
}

/// A config.json agreeing with entry `m`, with `edit` applied.
fn config_json(edit: impl FnOnce(&mut serde_json::Map<String, serde_json::Value>)) -> String {
    let mut v = serde_json::json!({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "intermediate_size": 96, "vocab_size": 300, "max_position_embeddings": 256,
        "rope_theta": 10000.0, "rms_norm_eps": 1e-5, "tie_word_embeddings": false,
    });
    edit(v.as_object_mut().unwrap());
    serde_json::to_string_pretty(&v).unwrap()
}

/// A directory with the catalog (`models.toml`) and a `weights/` folder holding `tensors`
/// (none when `None`) and `config` (none when `None`). Returns (dir, catalog path, weights path).
fn weights_dir(
    name: &str,
    tensors: Option<HashMap<String, Tensor>>,
    config: Option<String>,
) -> (TempDir, String, String) {
    let dir = TempDir::new(name);
    let cat = dir.write("models.toml", catalog("", ""));
    let w = dir.join("weights");
    std::fs::create_dir(&w).unwrap();
    if let Some(t) = tensors {
        candle_core::safetensors::save(&t, w.join("model.safetensors")).unwrap();
    }
    if let Some(c) = config {
        std::fs::write(w.join("config.json"), c).unwrap();
    }
    let w = s(&w);
    (dir, cat, w)
}

fn generate_args<'a>(cat: &'a str, weights: &'a str) -> Vec<&'a str> {
    vec![
        "generate",
        "--catalog",
        cat,
        "--model",
        "m",
        "--weights",
        weights,
        "--prompt-ids",
        "5,6,7",
        "--max-tokens",
        "4",
    ]
}

/// Parses `--ids` output: whitespace-separated token ids.
fn ids(stdout: &str) -> Vec<u32> {
    stdout
        .split_whitespace()
        .map(|t| t.parse().unwrap_or_else(|_| panic!("`{t}` is not a token id in {stdout:?}")))
        .collect()
}

#[test]
fn complete_safetensors_dir_generates() {
    let (_d, cat, w) = weights_dir("good", Some(tensors()), Some(config_json(|_| {})));
    let mut args = generate_args(&cat, &w);
    args.push("--ids");
    let (ok, out, err) = goodput(&args);
    assert!(ok, "stderr:\n{err}");
    let got = ids(&out);
    assert_eq!(got.len(), 4, "stdout {out:?}; stderr:\n{err}");
    assert!(got.iter().all(|&t| t < 300), "{got:?}");
    assert!(err.contains("safetensors weights"), "{err}");
    // A config.json with rope_theta only inside rope_parameters (newer configs) loads too when it agrees.
    let (_d, cat, w) = weights_dir(
        "good-rope-parameters",
        Some(tensors()),
        Some(config_json(|m| {
            m.remove("rope_theta");
            m.insert("rope_parameters".into(), serde_json::json!({"rope_type": "default", "rope_theta": 10000.0}));
        })),
    );
    let mut args = generate_args(&cat, &w);
    args.push("--ids");
    let (ok, out, err) = goodput(&args);
    assert!(ok, "stderr:\n{err}");
    assert_eq!(ids(&out).len(), 4, "stdout {out:?}; stderr:\n{err}");
}

#[test]
fn dummy_weights_generate() {
    let dir = TempDir::new("dummy");
    let cat = dir.write("models.toml", catalog("", ""));
    let mut args = generate_args(&cat, "dummy");
    args.push("--ids");
    let (ok, out, err) = goodput(&args);
    assert!(ok, "stderr:\n{err}");
    assert_eq!(ids(&out).len(), 4, "stdout {out:?}; stderr:\n{err}");
    let (ok, out, err) = goodput(&[
        "generate",
        "--weights",
        "dummy:7",
        "--prompt-ids",
        "5,6,7",
        "--max-tokens",
        "4",
        "--ids",
        "--ignore-eos",
    ]);
    assert!(ok, "stderr:\n{err}");
    assert_eq!(ids(&out).len(), 4, "stdout {out:?}; stderr:\n{err}");
}

#[test]
fn safetensors_tensor_of_the_wrong_shape() {
    let mut t = tensors();
    t.insert(
        "model.layers.1.mlp.up_proj.weight".into(),
        Tensor::zeros((97, 64), candle_core::DType::F32, &Device::Cpu).unwrap(),
    );
    let (_d, cat, w) = weights_dir("wrong-shape", Some(t), None);
    fails(&generate_args(&cat, &w), &["model.layers.1.mlp.up_proj.weight", "[97, 64]", "[96, 64]", "model `m`"]);
}

#[test]
fn safetensors_missing_tensor() {
    let mut t = tensors();
    t.remove("model.layers.0.self_attn.k_proj.weight");
    let (_d, cat, w) = weights_dir("missing-tensor", Some(t), None);
    fails(&generate_args(&cat, &w), &["model.layers.0.self_attn.k_proj.weight", "missing", &w]);
}

#[test]
fn safetensors_untied_model_without_lm_head() {
    let mut t = tensors();
    t.remove("lm_head.weight");
    let (_d, cat, w) = weights_dir("no-lm-head", Some(t), None);
    fails(&generate_args(&cat, &w), &["lm_head.weight", "missing"]);
}

#[test]
fn safetensors_dir_without_safetensors_files() {
    let (_d, cat, w) = weights_dir("no-files", None, Some(config_json(|_| {})));
    fails(&generate_args(&cat, &w), &["no .safetensors files", &w]);
}

#[test]
fn safetensors_file_that_is_not_safetensors() {
    let (_d, cat, w) = weights_dir("garbage-st", None, None);
    std::fs::write(Path::new(&w).join("model.safetensors"), b"definitely not safetensors").unwrap();
    fails(&generate_args(&cat, &w), &["model.safetensors", "weights file"]);
}

#[test]
fn config_json_hidden_size_disagrees_with_the_catalog() {
    let (_d, cat, w) = weights_dir(
        "config-hidden",
        Some(tensors()),
        Some(config_json(|m| drop(m.insert("hidden_size".into(), 128.into())))),
    );
    fails(&generate_args(&cat, &w), &["config.json", "hidden_size", "128", "64", "catalog entry `m`"]);
}

#[test]
fn config_json_rope_theta_only_in_rope_parameters_disagrees() {
    let (_d, cat, w) = weights_dir(
        "config-rope",
        Some(tensors()),
        Some(config_json(|m| {
            m.remove("rope_theta");
            m.insert("rope_parameters".into(), serde_json::json!({"rope_type": "default", "rope_theta": 100000.0}));
        })),
    );
    fails(&generate_args(&cat, &w), &["config.json", "rope_theta", "100000", "10000", "catalog entry `m`"]);
}

#[test]
fn config_json_without_rope_theta() {
    let (_d, cat, w) =
        weights_dir("config-no-rope", Some(tensors()), Some(config_json(|m| drop(m.remove("rope_theta")))));
    fails(&generate_args(&cat, &w), &["config.json", "rope_theta", "refusing to guess"]);
}

#[test]
fn config_json_that_is_not_json() {
    let (_d, cat, w) = weights_dir("config-garbage", Some(tensors()), Some("{ hidden_size: ".into()));
    fails(&generate_args(&cat, &w), &["config.json", "not JSON"]);
}

// 4. Context limits.

#[test]
fn prompt_longer_than_the_context() {
    let long: String = (0..2100).map(|i| (3 + i % 1000).to_string()).collect::<Vec<_>>().join(",");
    fails(&["generate", "--model", "tiny", "--prompt-ids", &long, "--max-tokens", "4"], &["2100 tokens", "2048"]);
    let p20: String = (3..23).map(|i| i.to_string()).collect::<Vec<_>>().join(",");
    fails(&["generate", "--max-model-len", "16", "--prompt-ids", &p20, "--max-tokens", "4"], &["20 tokens", "16"]);
}

#[test]
fn max_tokens_zero() {
    fails(&["generate", "--prompt-ids", "5,6,7", "--max-tokens", "0"], &["max_tokens", "at least 1"]);
}

#[test]
fn prompt_plus_max_tokens_over_the_context() {
    let p20: String = (3..23).map(|i| i.to_string()).collect::<Vec<_>>().join(",");
    fails(&["generate", "--prompt-ids", &p20, "--max-tokens", "2040"], &["20 tokens", "max_tokens (2040)", "2048"]);
    fails(
        &["generate", "--prompt-ids", &p20, "--max-tokens", "10", "--max-model-len", "24"],
        &["max_tokens (10)", "24"],
    );
}

#[test]
fn max_model_len_beyond_the_model() {
    fails(&["generate", "--prompt-ids", "5,6,7", "--max-model-len", "100000"], &["100000", "2048 positions"]);
    fails(&["generate", "--prompt-ids", "5,6,7", "--max-model-len", "0"], &["max model length 0"]);
}

#[test]
fn prompt_token_outside_the_vocabulary() {
    fails(&["generate", "--prompt-ids", "5,40000", "--max-tokens", "2"], &["40000", "vocabulary", "32000"]);
}

#[test]
fn prompt_ids_that_are_not_token_ids() {
    fails(&["generate", "--prompt-ids", "5,x,7"], &["--prompt-ids", "`x`: not a token id"]);
    // 2^32 + 5 must not wrap around to token 5.
    fails(&["generate", "--prompt-ids", "4294967301,6", "--max-tokens", "2"], &["--prompt-ids", "4294967301"]);
    fails(&["generate"], &["--prompt", "--prompt-ids"]);
}

// 5. Impossible KV sizes.

#[test]
fn kv_pool_of_one_block() {
    fails(
        &["generate", "--prompt-ids", "5,6,7", "--max-tokens", "2", "--kv-blocks", "1"],
        &["1 blocks", "at least 2", "--kv-blocks"],
    );
}

#[test]
fn kv_memory_of_one_kib() {
    fails(
        // f32 named: the default dtype on CPU is bf16 where the CPU has AVX-512 bf16.
        &["generate", "--prompt-ids", "5,6,7", "--max-tokens", "2", "--kv-memory", "1KiB", "--dtype", "f32"],
        &["0 blocks", "--kv-memory", "131072 bytes"],
    );
}

#[test]
fn kv_pool_too_small_for_the_request() {
    let p20: String = (3..23).map(|i| i.to_string()).collect::<Vec<_>>().join(",");
    fails(
        &["generate", "--prompt-ids", &p20, "--max-tokens", "4", "--kv-blocks", "3", "--block-size", "4"],
        &["needs 6 KV blocks", "prompt 20", "max_tokens 4", "has 2", "--kv-blocks"],
    );
}

#[test]
fn block_size_zero() {
    fails(&["generate", "--prompt-ids", "5,6,7", "--block-size", "0"], &["--block-size", "at least 1"]);
}

// 6. Bad flags.

#[test]
fn kv_memory_that_is_not_a_size() {
    fails(&["generate", "--prompt-ids", "5,6,7", "--kv-memory", "lots"], &["--kv-memory", "lots", "not a size"]);
}

#[test]
fn engine_bench_bad_lists() {
    fails(&["engine-bench", "--prompt-lens", "0"], &["--prompt-lens", "positive"]);
    fails(&["engine-bench", "--batch-sizes", "0", "--prompt-lens", "16"], &["--batch-sizes", "positive"]);
    fails(&["engine-bench", "--batch-sizes", "x"], &["--batch-sizes", "'x'"]);
    fails(&["engine-bench", "--repeats", "0"], &["--repeats", "at least 1"]);
}

#[test]
fn unknown_device() {
    fails(&["generate", "--prompt-ids", "5,6,7", "--device", "tpu"], &["device `tpu`", "cpu", "cuda"]);
    fails(&["generate", "--prompt-ids", "5,6,7", "--device", "cuda:x"], &["device `cuda:x`", "cuda:N"]);
    fails(&["engine-bench", "--device", "tpu", "--no-bandwidth"], &["device `tpu`"]);
}

#[test]
fn unknown_dtype() {
    fails(&["generate", "--prompt-ids", "5,6,7", "--dtype", "f8"], &["dtype `f8`", "f32", "bf16"]);
}

#[test]
fn gguf_file_that_does_not_exist() {
    fails(
        &["generate", "--prompt-ids", "5,6,7", "--weights", "/nonexistent/x.gguf"],
        &["/nonexistent/x.gguf", "no such GGUF file"],
    );
}

#[test]
fn weights_that_name_nothing() {
    fails(&["generate", "--prompt-ids", "5,6,7", "--weights", "nonsense"], &["weights `nonsense`", "dummy", ".gguf"]);
    fails(&["generate", "--prompt-ids", "5,6,7", "--weights", "dummy:x"], &["dummy:x", "whole number"]);
}

#[test]
fn gguf_file_that_is_not_gguf() {
    let dir = TempDir::new("garbage-gguf");
    let garbage: Vec<u8> = (0..4096u32).map(|i| (i.wrapping_mul(2654435761) >> 24) as u8).collect();
    let f = dir.write("model.gguf", &garbage);
    fails(
        &["generate", "--prompt-ids", "5,6,7", "--weights", &f],
        &["model.gguf", "GGUF file", "not readable", "model `tiny`"],
    );
    // A file that starts like GGUF but is cut short.
    let f = dir.write("short.gguf", b"GGUF\x03\x00\x00\x00");
    fails(&["generate", "--prompt-ids", "5,6,7", "--weights", &f], &["short.gguf", "GGUF file", "not readable"]);
    let f = dir.write("empty.gguf", b"");
    fails(&["generate", "--prompt-ids", "5,6,7", "--weights", &f, "--dtype", "f32"], &["empty.gguf", "GGUF"]);
    assert!(dir.path().is_dir());
}

#[test]
fn max_tokens_that_overflows_is_refused() {
    fails(
        &["generate", "--prompt-ids", "1,2", "--max-tokens", "18446744073709551615"],
        &["max_tokens (18446744073709551615)", "exceeds the model's context"],
    );
}

#[test]
fn half_precision_runs_on_cpu() {
    for dtype in ["bf16", "f16"] {
        let (ok, out, err) =
            goodput(&["generate", "--dtype", dtype, "--prompt-ids", "5,6,7,8", "--max-tokens", "6", "--ids"]);
        assert!(ok, "{dtype}: {err}");
        assert_eq!(ids(&out).len(), 6, "{dtype}: {out}");
    }
    // A step of prefill chunks only (budget 3 < prompt 7) samples nothing and must not fail.
    let (ok, out, err) = goodput(&[
        "generate",
        "--prompt-ids",
        "5,6,7,8,9,10,11",
        "--max-num-batched-tokens",
        "3",
        "--max-tokens",
        "4",
        "--ids",
    ]);
    assert!(ok, "{err}");
    assert_eq!(ids(&out).len(), 4);
}
