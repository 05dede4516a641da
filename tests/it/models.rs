//! Models named by their files, with no catalog entry: a directory with config.json,
//! safetensors and tokenizer.json runs on its own weights, or as dummy weights behind its own
//! tokenizer (vLLM's `--load-format dummy`); driving a server by text, the model's tokenizer
//! gives prompts of exactly the scenario's lengths.

use crate::common::{goodput, records, serve, summary_of, temp, Recorder};
use candle_core::{DType, Device};
use goodput_core::ModelSpec;
use goodput_engine::weights::DummySource;
use goodput_engine::Llama;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};

/// transformers' config of a small Llama; `rms_norm_eps` as a GGUF conversion writes it.
const CONFIG: &str = r#"{"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":64,
  "num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"intermediate_size":128,
  "vocab_size":320,"max_position_embeddings":512,"rope_theta":10000.0,"rms_norm_eps":9.999999747378752e-06,
  "tie_word_embeddings":true,"bos_token_id":1,"eos_token_id":2}"#;

/// A word-level tokenizer: `[UNK]`, `<s>`, `</s>`, then `w3` … `w319`, split on whitespace.
fn tokenizer_json() -> String {
    let vocab: serde_json::Map<String, serde_json::Value> = ["[UNK]", "<s>", "</s>"]
        .iter()
        .map(|s| s.to_string())
        .chain((3..320).map(|i| format!("w{i}")))
        .enumerate()
        .map(|(i, w)| (w, i.into()))
        .collect();
    let special = |id: u32, content: &str| {
        serde_json::json!({"id": id, "content": content, "single_word": false, "lstrip": false, "rstrip": false,
                           "normalized": false, "special": true})
    };
    serde_json::json!({
        "version": "1.0", "truncation": null, "padding": null,
        "added_tokens": [special(0, "[UNK]"), special(1, "<s>"), special(2, "</s>")],
        "normalizer": null, "pre_tokenizer": {"type": "WhitespaceSplit"}, "post_processor": null,
        "decoder": null, "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"}
    })
    .to_string()
}

/// `DIR/my-llama` with config.json, model.safetensors and tokenizer.json.
fn model_dir(dir: &Path) -> PathBuf {
    let m = dir.join("my-llama");
    std::fs::create_dir_all(&m).unwrap();
    let spec = ModelSpec::from_hf_config("my-llama", CONFIG).unwrap();
    let mut keep = Recorder(DummySource { seed: 3, dtype: DType::F32, device: Device::Cpu }, HashMap::new());
    Llama::load(&spec, &mut keep, 512, &Device::Cpu, DType::F32).unwrap();
    candle_core::safetensors::save(&keep.1, m.join("model.safetensors")).unwrap();
    std::fs::write(m.join("config.json"), CONFIG).unwrap();
    std::fs::write(m.join("tokenizer.json"), tokenizer_json()).unwrap();
    m
}

/// POSTs `body` to `path`; the response's JSON body.
fn post(addr: &str, path: &str, body: &str) -> serde_json::Value {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "POST {path} HTTP/1.0\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    serde_json::from_str(text.split_once("\r\n\r\n").unwrap().1).unwrap()
}

#[test]
fn a_model_directory_runs_without_a_catalog_entry_on_its_weights_or_as_dummy() {
    let dir = temp("model-dir");
    let m = model_dir(&dir);
    let model = m.to_str().unwrap();
    let out = dir.join("run");
    let (ok, _, err) = goodput(&[
        "run",
        "--model",
        model,
        "--concurrency",
        "1",
        "--requests",
        "3",
        "--warmup",
        "0",
        "--refine",
        "0",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let s = summary_of(&out);
    assert_eq!(s["model"], "my-llama");
    assert!(s["weights"].as_str().unwrap().starts_with("safetensors"), "{}", s["weights"]);

    // Dummy weights behind the directory's tokenizer: 100 words are 100 prompt tokens, not the
    // ~500 bytes the byte-level scheme would make of them.
    let (_server, addr) = serve(&["--model", model, "--weights", "dummy"]);
    let words: Vec<String> = (0..100).map(|i| format!("w{}", 3 + i % 300)).collect();
    let body = serde_json::json!({"model": "my-llama", "prompt": words.join(" "), "max_tokens": 2}).to_string();
    let v = post(&addr, "/v1/completions", &body);
    assert_eq!(v["usage"]["prompt_tokens"], 100, "{v}");

    // A server driven by text with the model's tokenizer: every prompt has the scenario's 40.
    let qa = dir.join("fixed.toml");
    std::fs::write(&qa, "input = { kind = \"fixed\", n = 40 }\noutput = { kind = \"fixed\", n = 6 }\n").unwrap();
    let text_out = dir.join("text");
    let url = format!("http://{addr}");
    let (ok, _, err) = goodput(&[
        "run",
        "--target",
        &url,
        "--model",
        model,
        "--api",
        "completions-text",
        "--scenario",
        qa.to_str().unwrap(),
        "--concurrency",
        "2",
        "--requests",
        "4",
        "--warmup",
        "0",
        "--refine",
        "0",
        "--out",
        text_out.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert!(!err.contains("approximate"), "{err}");
    let recs = records(&text_out);
    assert!(
        recs.iter().all(|r| r["input_tokens"] == 40),
        "{:?}",
        recs.iter().map(|r| &r["input_tokens"]).collect::<Vec<_>>()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_model_that_is_nowhere_is_named_and_a_tokenizer_too_large_is_refused() {
    let (ok, _, err) = goodput(&["run", "--model", "nobody/nothing-7b", "-q"]);
    assert!(!ok && err.contains("unknown model `nobody/nothing-7b`") && err.contains("Hugging Face cache"), "{err}");
    let dir = temp("big-tokenizer");
    let m = model_dir(&dir);
    // tiny's vocabulary is 32 000: a 320-word tokenizer fits; the reverse does not.
    let (ok, _, err) = goodput(&[
        "run",
        "--model",
        "tiny",
        "--tokenizer",
        m.to_str().unwrap(),
        "--requests",
        "2",
        "--concurrency",
        "1",
        "--refine",
        "0",
        "-q",
    ]);
    assert!(ok, "{err}");
    let big = dir.join("big.json");
    let words: serde_json::Map<String, serde_json::Value> = (0..400).map(|i| (format!("x{i}"), i.into())).collect();
    let tok = serde_json::json!({"version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
        "normalizer": null, "pre_tokenizer": {"type": "WhitespaceSplit"}, "post_processor": null, "decoder": null,
        "model": {"type": "WordLevel", "vocab": words, "unk_token": "x0"}});
    std::fs::write(&big, tok.to_string()).unwrap();
    let (ok, _, err) = goodput(&["run", "--model", m.to_str().unwrap(), "--tokenizer", big.to_str().unwrap(), "-q"]);
    assert!(!ok && err.contains("more than model `my-llama`'s vocabulary of 320"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Words `w{from}` … of the model directory's tokenizer: one token each.
fn words(from: usize, n: usize) -> String {
    (0..n).map(|i| format!("w{}", 3 + (from + i) % 300)).collect::<Vec<_>>().join(" ")
}

#[test]
fn datasets_of_sharegpt_and_jsonl_replay_their_lengths_and_their_conversations() {
    let dir = temp("datasets");
    let m = model_dir(&dir);
    let model = m.to_str().unwrap();
    // Three conversations: prompts of 20, 30 and 2 tokens (the last under the minimum of 4).
    let conv = |p: usize, r: usize, second: Option<(usize, usize)>| {
        let mut c = vec![
            serde_json::json!({"from": "human", "value": words(p, p)}),
            serde_json::json!({"from": "gpt", "value": words(r, r)}),
        ];
        if let Some((p2, r2)) = second {
            c.push(serde_json::json!({"from": "human", "value": words(p2, p2)}));
            c.push(serde_json::json!({"from": "gpt", "value": words(r2, r2)}));
        }
        serde_json::json!({"conversations": c})
    };
    let sharegpt = dir.join("sharegpt.json");
    let data = serde_json::json!([conv(20, 5, Some((10, 3))), conv(30, 7, Some((12, 4))), conv(2, 3, None)]);
    std::fs::write(&sharegpt, data.to_string()).unwrap();
    let run = |name: &str, extra: &[&str]| {
        let out = dir.join(name);
        let mut args = vec!["run", "--model", model, "--weights", "dummy", "--concurrency", "1", "--warmup", "0"];
        args.extend(["--refine", "0", "--out", out.to_str().unwrap()]);
        args.extend_from_slice(extra);
        let (ok, _, err) = goodput(&args);
        assert!(ok, "{err}");
        (records(&out), summary_of(&out), err)
    };
    let (recs, s, err) = run("first-turns", &["--dataset", sharegpt.to_str().unwrap(), "--requests", "4"]);
    assert!(err.contains("2 conversations (1 of 3 read left out by length)"), "{err}");
    // The measured ones (the user's first request is warm-up).
    let measured = recs.iter().filter(|r| r["phase"] == "measured");
    let mut lens: Vec<(u64, u64)> =
        measured.map(|r| (r["input_tokens"].as_u64().unwrap(), r["output_tokens"].as_u64().unwrap())).collect();
    lens.sort_unstable();
    assert_eq!(lens, [(20, 5), (20, 5), (30, 7), (30, 7)], "first turns, the replies' lengths, cycled");
    assert_eq!(s["workload"]["name"], "sharegpt.json");
    // As sessions: the second turn carries the first, the answer and its own words.
    let (recs, _, _) =
        run("sessions", &["--dataset", sharegpt.to_str().unwrap(), "--dataset-sessions", "--requests", "2"]);
    let measured = recs.iter().filter(|r| r["phase"] == "measured");
    let mut turns: Vec<(u64, u64)> =
        measured.map(|r| (r["turn"].as_u64().unwrap(), r["input_tokens"].as_u64().unwrap())).collect();
    turns.sort_unstable();
    assert_eq!(turns, [(1, 20), (1, 30), (2, 20 + 5 + 10), (2, 30 + 7 + 12)]);
    // JSONL with a fixed output override.
    let jsonl = dir.join("prompts.jsonl");
    std::fs::write(&jsonl, format!("{{\"prompt\": \"{}\", \"output_tokens\": 9}}\n", words(0, 16))).unwrap();
    let (recs, _, _) =
        run("jsonl", &["--dataset", jsonl.to_str().unwrap(), "--dataset-output-tokens", "3", "--requests", "2"]);
    assert!(recs.iter().all(|r| r["input_tokens"] == 16 && r["output_tokens"] == 3));
    let (ok, _, err) = goodput(&["run", "--dataset", jsonl.to_str().unwrap(), "--scenario", "long-gen", "-q"]);
    assert!(!ok && err.contains("--scenario"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
