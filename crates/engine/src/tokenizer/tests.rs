use super::*;

/// A fresh, empty directory under the system temp dir.
fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("goodput-tokenizer-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn strings(v: &[&str]) -> Value {
    Value::Array(v.iter().map(|s| Value::String(s.to_string())).collect())
}

// ---- byte scheme ----

#[test]
fn byte_level_round_trip() {
    let t = Tokenizer::byte_level(300);
    assert_eq!(t.kind(), "bytes");
    assert_eq!(t.vocab_size(), 300);
    let s = "héllo, wörld\n";
    let ids = t.encode(s).unwrap();
    assert_eq!(ids.len(), s.len(), "one id per UTF-8 byte");
    assert_eq!(t.decode(&ids).unwrap(), s);
}

#[test]
fn byte_level_id_mapping_by_hand() {
    let t = Tokenizer::byte_level(259);
    // 'A' = 0x41 = 65 → 68; 'é' = C3 A9 → 198, 172; '\n' = 10 → 13.
    assert_eq!(t.encode("Aé\n").unwrap(), vec![68, 198, 172, 13]);
    assert_eq!(t.encode("").unwrap(), Vec::<u32>::new());
    // Specials are skipped; 3 is byte 0; ids ≥ 259 wrap: 259 + 65 = 324 → 'A', 68 + 256 → 'A'.
    assert_eq!(t.decode(&[1, 68, 0, 2]).unwrap(), "A");
    assert_eq!(t.decode(&[3]).unwrap(), "\0");
    assert_eq!(t.decode(&[324, 68 + 256, 258]).unwrap(), "AA\u{FFFD}");
    assert_eq!(t.token_to_id("<unk>"), Some(0));
    assert_eq!(t.token_to_id("<s>"), Some(1));
    assert_eq!(t.token_to_id("</s>"), Some(2));
    assert_eq!(t.token_to_id("A"), Some(68));
    assert_eq!(t.token_to_id("<0xFF>"), Some(258));
    assert_eq!(t.token_to_id("é"), None);
    assert_eq!(t.token_to_id("<|im_start|>"), None);
}

#[test]
fn byte_level_rejects_tiny_vocab() {
    let err = Tokenizer::try_byte_level(258).unwrap_err();
    assert!(matches!(err, TokenizerError::VocabTooSmall(258)));
    assert!(err.to_string().contains(">= 259"), "{err}");
    assert!(Tokenizer::try_byte_level(259).is_ok());
    let panic = std::panic::catch_unwind(|| Tokenizer::byte_level(10)).unwrap_err();
    let msg = panic.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("vocab_size >= 259") && msg.contains("got 10"), "{msg}");
}

#[test]
fn byte_level_decode_stream_holds_back_partial_chars() {
    let t = Tokenizer::byte_level(259);
    let mut st = t.decode_stream();
    let ids = t.encode("aé").unwrap(); // 'a', 0xC3, 0xA9
    assert_eq!(st.step(ids[0]).unwrap().as_deref(), Some("a"));
    assert_eq!(st.step(ids[1]).unwrap(), None, "half of 'é'");
    assert_eq!(st.step(ids[2]).unwrap().as_deref(), Some("é"));
    assert_eq!(st.step(2).unwrap(), None, "special yields nothing");
    assert_eq!(st.step(ids[0]).unwrap().as_deref(), Some("a"));
}

// ---- GGUF-style metadata and tokenizer.json ----

/// A tiny byte-level BPE in GGUF metadata form: the 256 byte symbols, a few merges, and the
/// control tokens `<|endoftext|>` (0) and `<|im_start|>` (1) and a user-defined `<tool>`.
fn tiny_gguf_md() -> HashMap<String, Value> {
    let mut tokens = vec!["<|endoftext|>".to_string(), "<|im_start|>".to_string(), "<tool>".to_string()];
    let mut types = vec![3, 3, 4];
    let alphabet = {
        // GPT-2's bytes_to_unicode order is irrelevant here: any id assignment works.
        let mut a: Vec<char> = ByteLevel::alphabet().into_iter().collect();
        a.sort_unstable();
        a
    };
    assert_eq!(alphabet.len(), 256);
    tokens.extend(alphabet.iter().map(|c| c.to_string()));
    types.extend(std::iter::repeat_n(1, 256));
    let merges = ["h e", "l l", "he ll", "hell o", "Ġ w", "Ġw o"];
    for m in merges {
        let (a, b) = m.split_once(' ').unwrap();
        tokens.push(format!("{a}{b}"));
        types.push(1);
    }
    let mut md = HashMap::new();
    md.insert(keys::MODEL.to_string(), Value::String("gpt2".into()));
    md.insert(keys::PRE.to_string(), Value::String("smollm".into()));
    md.insert(keys::TOKENS.to_string(), Value::Array(tokens.into_iter().map(Value::String).collect()));
    md.insert(keys::TOKEN_TYPE.to_string(), Value::Array(types.into_iter().map(Value::I32).collect()));
    md.insert(keys::MERGES.to_string(), strings(&merges));
    md.insert(keys::EOS_ID.to_string(), Value::U32(0));
    md.insert(keys::CHAT_TEMPLATE.to_string(), Value::String("{{ x }}".into()));
    md
}

#[test]
fn gguf_tiny_bpe_specials_and_round_trip() {
    let md = tiny_gguf_md();
    let t = Tokenizer::from_gguf(&md).unwrap();
    assert_eq!(t.kind(), "hf");
    assert_eq!(t.vocab_size(), 3 + 256 + 6);
    let hello = t.token_to_id("hello").unwrap();
    let wo = t.token_to_id("Ġwo").unwrap();
    let ids = t.encode("<|im_start|>hello wo<tool><|endoftext|>").unwrap();
    assert_eq!(ids, vec![1, hello, wo, 2, 0]);
    // Specials (type 3) are skipped on decode, user-defined (type 4) are kept.
    assert_eq!(t.decode(&ids).unwrap(), "hello wo<tool>");
    for s in ["hello world, 42 times!\n\tok?", "héllo  wörld\n\n", " leading space", "日本語"] {
        assert_eq!(t.decode(&t.encode(s).unwrap()).unwrap(), s);
    }
    // Digits are split one by one (the "smollm" pre-tokenizer) – byte symbols here anyway.
    assert_eq!(t.encode("12").unwrap().len(), 2);
    assert_eq!(gguf_special_ids(&md), (Some(0), None));
    assert_eq!(gguf_chat_template(&md).as_deref(), Some("{{ x }}"));
}

#[test]
fn gguf_metadata_errors_are_clear() {
    let mut md = tiny_gguf_md();
    md.insert(keys::MODEL.to_string(), Value::String("llama".into()));
    let e = Tokenizer::from_gguf(&md).unwrap_err().to_string();
    assert!(e.contains("unsupported") && e.contains("\"llama\"") && e.contains(keys::MODEL), "{e}");

    let mut md = tiny_gguf_md();
    md.remove(keys::MERGES);
    let e = Tokenizer::from_gguf(&md).unwrap_err().to_string();
    assert!(e.contains("tokenizer.ggml.merges"), "{e}");

    let mut md = tiny_gguf_md();
    md.insert(keys::MERGES.to_string(), strings(&["he"]));
    let e = Tokenizer::from_gguf(&md).unwrap_err().to_string();
    assert!(e.contains("tokenizer.ggml.merges") && e.contains("\"he\""), "{e}");

    let mut md = tiny_gguf_md();
    md.insert(keys::TOKENS.to_string(), Value::U32(3));
    let e = Tokenizer::from_gguf(&md).unwrap_err().to_string();
    assert!(e.contains("tokenizer.ggml.tokens") && e.contains("array"), "{e}");

    let e = Tokenizer::from_gguf(&HashMap::new()).unwrap_err().to_string();
    assert!(e.contains("tokenizer.ggml.model"), "{e}");
    assert_eq!(gguf_special_ids(&HashMap::new()), (None, None));
    assert_eq!(gguf_chat_template(&HashMap::new()), None);
}

#[test]
fn tokenizer_json_round_trip() {
    let dir = temp_dir("json");
    let path = dir.join("tokenizer.json");
    let Tokenizer::Hf(built) = Tokenizer::from_gguf(&tiny_gguf_md()).unwrap() else { unreachable!() };
    built.save(&path, true).unwrap();

    let t = Tokenizer::from_file(&path).unwrap();
    assert_eq!(t.kind(), "hf");
    assert_eq!(t.vocab_size(), 3 + 256 + 6);
    let s = "<|im_start|>hello world\nsay \"hi\", 3 times.<|endoftext|>";
    let ids = t.encode(s).unwrap();
    assert_eq!(ids, built.encode_fast(s, false).unwrap().get_ids());
    assert_eq!(ids[0], 1);
    assert_eq!(*ids.last().unwrap(), 0);
    assert_eq!(t.decode(&ids).unwrap(), "hello world\nsay \"hi\", 3 times.");
    assert_eq!(t.token_to_id("<|im_start|>"), Some(1));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn tokenizer_json_hand_written_word_level() {
    let dir = temp_dir("wordlevel");
    let path = dir.join("tokenizer.json");
    let json = r#"{
        "version": "1.0",
        "added_tokens": [{"id": 0, "content": "[UNK]", "single_word": false, "lstrip": false,
                          "rstrip": false, "normalized": false, "special": true}],
        "pre_tokenizer": {"type": "Whitespace"},
        "model": {"type": "WordLevel", "vocab": {"[UNK]": 0, "hello": 1, "world": 2, "!": 3},
                  "unk_token": "[UNK]"}
    }"#;
    std::fs::write(&path, json).unwrap();
    let t = Tokenizer::from_file(&path).unwrap();
    assert_eq!(t.encode("hello world !").unwrap(), vec![1, 2, 3]);
    assert_eq!(t.encode("hello there").unwrap(), vec![1, 0]);
    assert_eq!(t.decode(&[1, 2, 3]).unwrap(), "hello world !");
    assert_eq!(t.vocab_size(), 4);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn tokenizer_json_missing_and_malformed_files() {
    let dir = temp_dir("bad");
    let missing = dir.join("nope.json");
    let e = Tokenizer::from_file(&missing).unwrap_err();
    assert!(matches!(e, TokenizerError::Io { .. }));
    let msg = e.to_string();
    assert!(msg.contains("cannot read tokenizer file") && msg.contains("nope.json"), "{msg}");

    let bad = dir.join("bad.json");
    std::fs::write(&bad, "{ \"model\": 42 ").unwrap();
    let e = Tokenizer::from_file(&bad).unwrap_err();
    assert!(matches!(e, TokenizerError::Parse { .. }));
    let msg = e.to_string();
    assert!(msg.contains("cannot parse tokenizer file") && msg.contains("bad.json"), "{msg}");
    let _ = std::fs::remove_dir_all(&dir);
}

// ---- the real SmolLM2 GGUF ----

/// Runs `scripts/fetch-smollm2.sh` (downloads once into the cache) and returns the path.
fn smollm2_gguf() -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/fetch-smollm2.sh");
    let out = std::process::Command::new("bash")
        .arg(&script)
        .stderr(std::process::Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    assert!(
        out.status.success(),
        "{} failed ({}); it needs PyPI access the first time (see its stderr above)",
        script.display(),
        out.status
    );
    let path = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
    assert!(path.is_file(), "fetch script printed {path:?}, which is not a file");
    path
}

fn smollm2_metadata() -> HashMap<String, Value> {
    let path = smollm2_gguf();
    let mut f = std::fs::File::open(&path).unwrap();
    candle_core::quantized::gguf_file::Content::read(&mut f)
        .unwrap_or_else(|e| panic!("reading GGUF {}: {e}", path.display()))
        .metadata
}

/// Expected ids established independently with Python on the same file: transformers' own
/// GGUF tokenizer conversion (`transformers.integrations.gguf.gguf_tokenizer_mapping::
/// convert_gguf_tokenizer`, transformers 5.24, tokenizers 0.23.3),
/// `encode(s, add_special_tokens=False)`; the digit case with Python `tokenizers` and
/// SmolLM2's HF pre-tokenizer (Digits(individual) + ByteLevel) over the GGUF vocab/merges.
#[test]
fn smollm2_gguf_tokenizer() {
    let md = smollm2_metadata();
    let t = Tokenizer::from_gguf(&md).unwrap();
    assert_eq!(t.kind(), "hf");
    assert_eq!(t.vocab_size(), 49152);
    assert_eq!(t.token_to_id("<|im_start|>"), Some(1));
    assert_eq!(t.token_to_id("<|im_end|>"), Some(2));
    assert_eq!(t.encode("<|im_start|>").unwrap(), vec![1]);
    assert_eq!(t.encode("<|im_end|>").unwrap(), vec![2]);
    assert_eq!(gguf_special_ids(&md), (Some(2), Some(1)));
    let template = gguf_chat_template(&md).expect("SmolLM2 GGUF has a chat template");
    assert!(template.contains("<|im_start|>"), "{template}");

    assert_eq!(t.encode("Hello world").unwrap(), vec![19556, 905]);
    assert_eq!(
        t.encode("The quick brown fox jumps over the lazy dog.").unwrap(),
        vec![504, 2365, 6354, 16438, 27003, 690, 260, 23790, 2767, 30]
    );
    assert_eq!(
        t.encode("In 2024, 12345 apples.").unwrap(),
        vec![788, 216, 34, 32, 34, 36, 28, 216, 33, 34, 35, 36, 37, 13855, 30]
    );
    // Whitespace before a digit: SmolLM2's pre-tokenizer isolates every digit first
    // (llama.cpp's "smollm" = [\p{N}, gpt2 regex]; HF's Digits + ByteLevel), so "  2" is
    // "ĠĠ" + "2". (transformers' GGUF converter lacks the Digits step and gives
    // "Ġ" + "Ġ" + "2": [12654, 216, 216, 34, ...] here.)
    assert_eq!(
        t.encode("Dec  2, 1999:\n    42 items").unwrap(),
        vec![12654, 256, 34, 28, 216, 33, 41, 41, 41, 42, 2367, 36, 34, 3723]
    );
    let chat = "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n";
    let ids = t.encode(chat).unwrap();
    assert_eq!(ids, vec![1, 4093, 198, 1780, 314, 260, 3575, 282, 4649, 47, 2, 198, 1, 520, 9531, 198]);
    assert_eq!(t.decode(&ids).unwrap(), "user\nWhat is the capital of France?\nassistant\n");

    for s in [
        "The quick brown fox jumps over the lazy dog.",
        "Hello, world!  Two  spaces,\ttabs;\nnew lines\n\n  and: punctuation (yes) — “quotes” & 3.14!",
        "héllo wörld, 日本語 😀",
    ] {
        assert_eq!(t.decode(&t.encode(s).unwrap()).unwrap(), s);
    }

    // Streaming decode reproduces the text piece by piece.
    let s = "Hello world, 😀 ok.";
    let mut st = t.decode_stream();
    let mut out = String::new();
    for id in t.encode(s).unwrap() {
        if let Some(piece) = st.step(id).unwrap() {
            out.push_str(&piece);
        }
    }
    assert_eq!(out, s);
}
