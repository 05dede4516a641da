//! Property-based fuzzing of what the server reads from clients: request bodies through
//! `openai::parse::<CompletionRequest>` and `openai::parse::<ChatRequest>`, the messages of
//! chat bodies rendered by `chat::ChatTemplate` (the ChatML fallback and Jinja templates), and
//! chat template texts themselves through `ChatTemplate::new`. Every property is "no panic,
//! bounded in time": each call returns Ok or Err.
//!
//! Inputs are arbitrary bytes and valid OpenAI bodies mutated structurally (fields deleted,
//! renamed or duplicated, values replaced by other types, huge or non-finite numbers, deep
//! nesting, lone surrogates) and then at the byte level (flips, insertions, truncation).
//!
//! Cases: 256 per property (6 properties, about 1,500 cases in all); failures are not
//! persisted (no `proptest-regressions` files).

use goodput_server::chat::ChatTemplate;
use goodput_server::openai::{parse, ChatRequest, CompletionRequest, Content, Message};
use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::{json, Value};

fn config() -> ProptestConfig {
    // `PROPTEST_CASES=N` for a deeper run than CI's 256 cases per property.
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(256);
    ProptestConfig { cases, failure_persistence: None, ..ProptestConfig::default() }
}

// ---------------------------------------------------------------------------------------------
// Structured JSON mutation (the same scheme as the client's and engine's fuzz tests).

/// One step of a path into a JSON value.
#[derive(Clone, Debug)]
enum Seg {
    Key(String),
    Index(usize),
}

fn paths(v: &Value, here: &mut Vec<Seg>, out: &mut Vec<Vec<Seg>>) {
    out.push(here.clone());
    match v {
        Value::Object(m) => {
            for (k, c) in m {
                here.push(Seg::Key(k.clone()));
                paths(c, here, out);
                here.pop();
            }
        }
        Value::Array(a) => {
            for (i, c) in a.iter().enumerate() {
                here.push(Seg::Index(i));
                paths(c, here, out);
                here.pop();
            }
        }
        _ => {}
    }
}

fn node_mut<'a>(v: &'a mut Value, path: &[Seg]) -> Option<&'a mut Value> {
    path.iter().try_fold(v, |v, s| match s {
        Seg::Key(k) => v.get_mut(k.as_str()),
        Seg::Index(i) => v.get_mut(*i),
    })
}

/// A structural edit at one node of a JSON document.
#[derive(Clone, Debug)]
enum Edit {
    /// Remove the node from its object or array.
    Delete,
    /// Put another value (of any type) in its place.
    Replace(Value),
    /// Put raw text in its place: numbers JSON allows but Rust types do not, deep nesting,
    /// lone surrogates, garbage.
    Raw(String),
    /// Give the node another key in its object.
    Rename(String),
    /// Add a key to an object, or an element to an array.
    Insert(String, Value),
    /// Write the object with its first key twice.
    DuplicateKey,
}

/// `v` with `edits` applied, as JSON text.
fn mutate_json(mut v: Value, edits: &[(Index, Edit)]) -> String {
    let mut raws: Vec<String> = Vec::new();
    for (at, edit) in edits {
        let mut all = Vec::new();
        paths(&v, &mut Vec::new(), &mut all);
        let path = all[at.index(all.len())].clone();
        let raw = |text: String, raws: &mut Vec<String>| {
            let tag = format!("@@raw{}@@", raws.len());
            raws.push(text);
            Value::String(tag)
        };
        match edit {
            Edit::Delete | Edit::Rename(_) => {
                let Some((last, parent)) = path.split_last() else { continue };
                let Some(p) = node_mut(&mut v, parent) else { continue };
                match (p, last) {
                    (Value::Object(m), Seg::Key(k)) => {
                        let old = m.remove(k);
                        if let (Edit::Rename(new), Some(old)) = (edit, old) {
                            m.insert(new.clone(), old);
                        }
                    }
                    (Value::Array(a), Seg::Index(i)) if matches!(edit, Edit::Delete) => {
                        a.remove(*i);
                    }
                    _ => {}
                }
            }
            Edit::Replace(new) => {
                if let Some(n) = node_mut(&mut v, &path) {
                    *n = new.clone();
                }
            }
            Edit::Raw(text) => {
                if let Some(n) = node_mut(&mut v, &path) {
                    *n = raw(text.clone(), &mut raws);
                }
            }
            Edit::Insert(k, new) => match node_mut(&mut v, &path) {
                Some(Value::Object(m)) => {
                    m.insert(k.clone(), new.clone());
                }
                Some(Value::Array(a)) => a.push(new.clone()),
                _ => {}
            },
            Edit::DuplicateKey => {
                if let Some(n) = node_mut(&mut v, &path) {
                    if let Value::Object(m) = &*n {
                        if let Some((k, first)) = m.iter().next() {
                            let mut parts: Vec<String> = m.iter().map(|(k, v)| format!("{}:{v}", json!(k))).collect();
                            parts.push(format!("{}:{first}", json!(k)));
                            let text = format!("{{{}}}", parts.join(","));
                            *n = raw(text, &mut raws);
                        }
                    }
                }
            }
        }
    }
    let mut s = v.to_string();
    // Later placeholders may sit inside earlier raw texts: substitute from the last.
    for (i, r) in raws.iter().enumerate().rev() {
        s = s.replace(&format!("\"@@raw{i}@@\""), r);
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

/// Integers at the edges of every Rust integer type a field might have.
fn edge_int() -> impl Strategy<Value = Value> {
    prop_oneof![
        prop::sample::select(vec![
            json!(0),
            json!(1),
            json!(-1),
            json!(2),
            json!(i64::MIN),
            json!(i64::MAX),
            json!(u64::MAX),
            json!(u32::MAX),
            json!(u32::MAX as u64 + 1),
            json!(i32::MIN),
            json!(usize::MAX),
        ]),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
    ]
}

/// A JSON value of any type, at most three levels deep; keys are often ones the parser knows.
fn any_json(keys: &'static [&'static str]) -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        edge_int(),
        any::<f64>().prop_map(Value::from),
        prop::sample::select(vec![0.5f64, -0.0, 1e-300, 1e300, f64::MAX, f64::MIN_POSITIVE]).prop_map(Value::from),
        "\\PC{0,24}".prop_map(Value::from),
        prop::sample::select(keys.to_vec()).prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((key(keys), inner), 0..4).prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

fn key(keys: &'static [&'static str]) -> impl Strategy<Value = String> {
    prop_oneof![3 => prop::sample::select(keys.to_vec()).prop_map(String::from), 1 => "\\PC{0,12}"]
}

/// Raw JSON-ish text no `serde_json::Value` can hold.
fn raw_json() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "1e400",
            "-1e400",
            "18446744073709551616",
            "-9223372036854775809",
            "340282366920938463463374607431768211456",
            "1e-400",
            "-0",
            "0.0",
            "1.0",
            "4294967296",
            "NaN",
            "Infinity",
            "\"\\ud800\"",
            "\"\\udc00\\ud800\"",
            "\"\\u0000\"",
            "\"\\uFFFF\"",
            "[]",
            "{}",
            "",
            ",",
        ])
        .prop_map(String::from),
        (1usize..300).prop_map(|d| "[".repeat(d) + &"]".repeat(d)),
        (1usize..300).prop_map(|d| "{\"a\":".repeat(d) + "1" + &"}".repeat(d)),
        (1usize..200).prop_map(|d| "[".repeat(d)),
        (0usize..20_000).prop_map(|n| format!("\"{}\"", "x".repeat(n))),
        "\\PC{0,40}",
    ]
}

fn edit(keys: &'static [&'static str]) -> impl Strategy<Value = Edit> {
    prop_oneof![
        3 => Just(Edit::Delete),
        4 => any_json(keys).prop_map(Edit::Replace),
        2 => raw_json().prop_map(Edit::Raw),
        1 => key(keys).prop_map(Edit::Rename),
        2 => (key(keys), any_json(keys)).prop_map(|(k, v)| Edit::Insert(k, v)),
        1 => Just(Edit::DuplicateKey),
    ]
}

/// One of `seeds`, mutated: structural edits, then byte edits.
fn mutated(seeds: Vec<Value>, keys: &'static [&'static str]) -> impl Strategy<Value = Vec<u8>> {
    (prop::sample::select(seeds), prop::collection::vec((any::<Index>(), edit(keys)), 0..5), byte_edits())
        .prop_map(|(seed, edits, bytes)| mutate_bytes(mutate_json(seed, &edits).into_bytes(), &bytes))
}

// ---------------------------------------------------------------------------------------------
// Seeds: bodies real clients send.

const KEYS: &[&str] = &[
    "model",
    "prompt",
    "messages",
    "role",
    "content",
    "type",
    "text",
    "image_url",
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "top_p",
    "top_k",
    "seed",
    "ignore_eos",
    "min_tokens",
    "stop_token_ids",
    "n",
    "stream",
    "stream_options",
    "include_usage",
    "return_token_ids",
    "system",
    "user",
    "assistant",
];

fn completion_seeds() -> Vec<Value> {
    vec![
        json!({"model": "tiny", "prompt": "Hello", "max_tokens": 16}),
        json!({"model": "tiny", "prompt": [1, 2, 3], "max_tokens": 4, "ignore_eos": true, "temperature": 0}),
        json!({"model": "tiny", "prompt": ["one prompt"], "stream": true, "stream_options": {"include_usage": true}}),
        json!({"model": "tiny", "prompt": [[5, 6, 7]], "max_tokens": 8, "min_tokens": 2, "top_k": -1, "top_p": 0.9,
               "seed": 42, "stop_token_ids": [2], "n": 1, "return_token_ids": true}),
    ]
}

fn chat_seeds() -> Vec<Value> {
    vec![
        json!({"model": "tiny", "messages": [{"role": "user", "content": "Hi"}]}),
        json!({"model": "tiny", "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "What is 2+2?"},
            {"role": "assistant", "content": "4"},
            {"role": "user", "content": "And 3+3?"}
        ], "max_completion_tokens": 32, "stream": true, "stream_options": {"include_usage": true}}),
        json!({"model": "tiny", "messages": [{"role": "user", "content": [
            {"type": "text", "text": "Describe "},
            {"type": "text", "text": "this."}
        ]}], "temperature": 0.7, "top_k": 40}),
        json!({"model": "tiny", "messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "data:,"}}
        ]}]}),
    ]
}

/// Templates of the shapes models ship (ChatML, Llama 3, one that refuses a system role).
const TEMPLATES: &[&str] = &[
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
    "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}",
    "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{{ '<start_of_turn>' + message['role'] + '\n' + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}",
    "{%- set sys = messages | selectattr('role', 'equalto', 'system') | list -%}{{ sys | length }}{% for m in messages[1:] %}[{{ loop.index }}:{{ m.role | upper }}] {{ m.content[:20] }}{% endfor %}{{ eos_token }}",
];

fn messages() -> Vec<Message> {
    vec![
        Message { role: "system".into(), content: Content::Text("Be brief.".into()) },
        Message { role: "user".into(), content: Content::Text("Hi {{ there }} {% raw %}".into()) },
    ]
}

#[test]
fn the_seed_bodies_and_templates_are_valid() {
    for s in completion_seeds() {
        parse::<CompletionRequest>(s.to_string().as_bytes()).unwrap();
    }
    for s in chat_seeds() {
        parse::<ChatRequest>(s.to_string().as_bytes()).unwrap();
    }
    for t in TEMPLATES {
        let t = ChatTemplate::new(Some(t.to_string())).unwrap();
        let _ = t.render(&messages());
    }
}

/// Renders `messages` with the ChatML fallback: Ok (and then ends with the generation
/// prompt and holds every role), or refused for non-text content.
fn check_chatml(messages: &[Message]) -> Result<(), TestCaseError> {
    let chatml = ChatTemplate::new(None).unwrap();
    if let Ok(text) = chatml.render(messages) {
        prop_assert!(text.ends_with("<|im_start|>assistant\n"));
        for m in messages {
            let needle = format!("<|im_start|>{}\n", m.role);
            prop_assert!(text.contains(&needle));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_bytes_are_parsed_or_refused_as_either_body(body in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = parse::<CompletionRequest>(&body);
        if let Ok(chat) = parse::<ChatRequest>(&body) {
            check_chatml(&chat.messages)?;
        }
    }

    #[test]
    fn any_text_is_parsed_or_refused_as_either_body(body in "\\PC{0,256}") {
        let _ = parse::<CompletionRequest>(body.as_bytes());
        if let Ok(chat) = parse::<ChatRequest>(body.as_bytes()) {
            check_chatml(&chat.messages)?;
        }
    }

    #[test]
    fn a_completion_body_of_any_shape_is_parsed_or_refused(body in mutated(completion_seeds(), KEYS)) {
        if let Ok(req) = parse::<CompletionRequest>(&body) {
            // What parsed is usable: the sampling fields read without surprise.
            let _ = (req.sampling.max_tokens, req.sampling.max_completion_tokens, req.sampling.n);
        }
        // A completion body sent to the chat endpoint is refused or parsed, never a panic.
        let _ = parse::<ChatRequest>(&body);
    }

    #[test]
    fn a_chat_body_of_any_shape_is_parsed_or_refused_and_renders_in_chatml(body in mutated(chat_seeds(), KEYS)) {
        let _ = parse::<CompletionRequest>(&body);
        if let Ok(chat) = parse::<ChatRequest>(&body) {
            check_chatml(&chat.messages)?;
            for m in &chat.messages {
                let _ = m.content.text();
            }
        }
    }

    #[test]
    fn the_messages_of_any_chat_body_render_through_model_templates_or_are_refused(
        body in mutated(chat_seeds(), KEYS),
        template in prop::sample::select(TEMPLATES.to_vec()),
    ) {
        if let Ok(chat) = parse::<ChatRequest>(&body) {
            let t = ChatTemplate::new(Some(template.to_string())).unwrap();
            let _ = t.render(&chat.messages);
        }
    }

    #[test]
    fn any_template_text_compiles_or_is_refused_and_renders_or_refuses(
        template in prop_oneof![
            "\\PC{0,120}",
            // Fragments of template syntax, shuffled into any order.
            prop::collection::vec(prop::sample::select(vec![
                "{{", "}}", "{%", "%}", "{#", "#}", "{%-", "-%}", "for m in messages", "endfor", "if", "endif",
                "else", "m.content", "m['role']", "raise_exception('x')", "messages[0]", "| trim", "| upper",
                "loop.index0", "add_generation_prompt", "set x = 1", "x", "(", ")", "[", "]", "'", "\"", " ",
                "range(3)", "macro f()", "endmacro", "f()", "messages | length", "~", "+", "%", "/", "0",
            ]), 0..24).prop_map(|parts| parts.concat()),
            // A real template with bytes edited.
            (prop::sample::select(TEMPLATES.to_vec()), byte_edits())
                .prop_map(|(t, e)| String::from_utf8_lossy(&mutate_bytes(t.as_bytes().to_vec(), &e)).into_owned()),
        ],
    ) {
        if let Ok(t) = ChatTemplate::new(Some(template)) {
            prop_assert!(t.is_model_s());
            let _ = t.render(&messages());
            let _ = t.render(&[]);
        }
    }
}
