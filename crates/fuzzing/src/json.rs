//! Structural mutation of JSON documents, then byte edits (the scheme of the server's,
//! client's and engine's fuzz tests).

use crate::bytes::{byte_edits, mutate_bytes};
use crate::tree::{all_paths, node_mut, Seg};
use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::{json, Value};

/// A structural edit at one node of a JSON document.
#[derive(Clone, Debug)]
pub enum Edit {
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
pub fn mutate_json(mut v: Value, edits: &[(Index, Edit)]) -> String {
    let mut raws: Vec<String> = Vec::new();
    for (at, edit) in edits {
        let all = all_paths(&v);
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

/// Integers at the edges of every Rust integer type a field might have.
pub fn edge_int() -> impl Strategy<Value = Value> {
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
pub fn any_json(keys: &'static [&'static str]) -> impl Strategy<Value = Value> {
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

/// A key: one of `keys` three times in four, otherwise any short text.
pub fn key(keys: &'static [&'static str]) -> impl Strategy<Value = String> {
    prop_oneof![3 => prop::sample::select(keys.to_vec()).prop_map(String::from), 1 => "\\PC{0,12}"]
}

/// Raw JSON-ish text no `serde_json::Value` can hold.
pub fn raw_json() -> impl Strategy<Value = String> {
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

/// One structural edit, its values drawn with `keys`.
pub fn edit(keys: &'static [&'static str]) -> impl Strategy<Value = Edit> {
    prop_oneof![
        3 => Just(Edit::Delete),
        4 => any_json(keys).prop_map(Edit::Replace),
        2 => raw_json().prop_map(Edit::Raw),
        1 => key(keys).prop_map(Edit::Rename),
        2 => (key(keys), any_json(keys)).prop_map(|(k, v)| Edit::Insert(k, v)),
        1 => Just(Edit::DuplicateKey),
    ]
}

/// One of `seeds`, mutated: up to four structural edits, then byte edits.
pub fn mutated(seeds: Vec<Value>, keys: &'static [&'static str]) -> impl Strategy<Value = Vec<u8>> {
    (prop::sample::select(seeds), prop::collection::vec((any::<Index>(), edit(keys)), 0..5), byte_edits())
        .prop_map(|(seed, edits, bytes)| mutate_bytes(mutate_json(seed, &edits).into_bytes(), &bytes))
}
