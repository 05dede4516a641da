//! Mutations of JSON values and of bytes, shared by the properties.

use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::{json, Value};

/// One step of a path into a JSON value.
#[derive(Clone, Debug)]
pub(crate) enum Seg {
    Key(String),
    Index(usize),
}

pub(crate) fn paths(v: &Value, here: &mut Vec<Seg>, out: &mut Vec<Vec<Seg>>) {
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

pub(crate) fn node_mut<'a>(v: &'a mut Value, path: &[Seg]) -> Option<&'a mut Value> {
    path.iter().try_fold(v, |v, s| match s {
        Seg::Key(k) => v.get_mut(k.as_str()),
        Seg::Index(i) => v.get_mut(*i),
    })
}

/// A structural edit at one node of a JSON document.
#[derive(Clone, Debug)]
pub(crate) enum Edit {
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
pub(crate) fn mutate_json(mut v: Value, edits: &[(Index, Edit)]) -> String {
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
pub(crate) enum ByteEdit {
    Flip(Index, u8),
    Insert(Index, u8),
    Remove(Index),
    Truncate(Index),
}

pub(crate) fn mutate_bytes(mut b: Vec<u8>, edits: &[ByteEdit]) -> Vec<u8> {
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

pub(crate) fn byte_edits() -> impl Strategy<Value = Vec<ByteEdit>> {
    let one = prop_oneof![
        (any::<Index>(), any::<u8>()).prop_map(|(i, x)| ByteEdit::Flip(i, x)),
        (any::<Index>(), any::<u8>()).prop_map(|(i, x)| ByteEdit::Insert(i, x)),
        any::<Index>().prop_map(ByteEdit::Remove),
        any::<Index>().prop_map(ByteEdit::Truncate),
    ];
    prop_oneof![3 => Just(Vec::new()), 1 => prop::collection::vec(one, 1..4)]
}

/// Integers at the edges of every Rust integer type a field might have.
pub(crate) fn edge_int() -> impl Strategy<Value = Value> {
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
pub(crate) fn any_json(keys: &'static [&'static str]) -> impl Strategy<Value = Value> {
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

pub(crate) fn key(keys: &'static [&'static str]) -> impl Strategy<Value = String> {
    prop_oneof![3 => prop::sample::select(keys.to_vec()).prop_map(String::from), 1 => "\\PC{0,12}"]
}

/// Raw JSON-ish text no `serde_json::Value` can hold.
pub(crate) fn raw_json() -> impl Strategy<Value = String> {
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

pub(crate) fn edit(keys: &'static [&'static str]) -> impl Strategy<Value = Edit> {
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
pub(crate) fn mutated(seeds: Vec<Value>, keys: &'static [&'static str]) -> impl Strategy<Value = Vec<u8>> {
    (prop::sample::select(seeds), prop::collection::vec((any::<Index>(), edit(keys)), 0..5), byte_edits())
        .prop_map(|(seed, edits, bytes)| mutate_bytes(mutate_json(seed, &edits).into_bytes(), &bytes))
}

// ---------------------------------------------------------------------------------------------
// ---------------------------------------------------------------------------------------------
