//! Structural mutation of TOML documents, then byte edits (the scheme of the core crate's
//! and the workload's fuzz tests).

use crate::bytes::{byte_edits, mutate_bytes};
use crate::tree::{all_paths, node_mut, Seg};
use ::toml::{Table, Value};
use proptest::prelude::*;
use proptest::sample::Index;

/// A structural edit at one node of a TOML document.
#[derive(Clone, Debug)]
pub enum Edit {
    /// Remove the node from its table or array.
    Delete,
    /// Put another value (of any type) in its place.
    Replace(Value),
    /// Put raw text in its place: integers beyond i64, nan/inf, other bases, datetimes,
    /// deep nesting, garbage.
    Raw(String),
    /// Give the node another key in its table.
    Rename(String),
    /// Add a key to a table, or an element to an array.
    Insert(String, Value),
    /// Replace an integer of the document (chosen among the integers only) by another.
    Integer(i64),
}

/// `doc` with `edits` applied, as TOML text (edits at the root only insert).
pub fn mutate_toml(doc: Table, edits: &[(Index, Edit)]) -> String {
    let mut v = Value::Table(doc);
    let mut raws: Vec<String> = Vec::new();
    for (at, edit) in edits {
        let mut all = all_paths(&v);
        if let Edit::Integer(_) = edit {
            all.retain(|p| matches!(node_mut(&mut v, p), Some(Value::Integer(_))));
            if all.is_empty() {
                continue;
            }
        }
        let path = all[at.index(all.len())].clone();
        match edit {
            Edit::Delete | Edit::Rename(_) => {
                let Some((last, parent)) = path.split_last() else { continue };
                let Some(p) = node_mut(&mut v, parent) else { continue };
                match (p, last) {
                    (Value::Table(t), Seg::Key(k)) => {
                        let old = t.remove(k);
                        if let (Edit::Rename(new), Some(old)) = (edit, old) {
                            t.insert(new.clone(), old);
                        }
                    }
                    (Value::Array(a), Seg::Index(i)) if matches!(edit, Edit::Delete) => {
                        a.remove(*i);
                    }
                    _ => {}
                }
            }
            Edit::Replace(_) | Edit::Raw(_) | Edit::Integer(_) if path.is_empty() => {}
            Edit::Integer(i) => {
                if let Some(n) = node_mut(&mut v, &path) {
                    *n = Value::Integer(*i);
                }
            }
            Edit::Replace(new) => {
                if let Some(n) = node_mut(&mut v, &path) {
                    *n = new.clone();
                }
            }
            Edit::Raw(text) => {
                if let Some(n) = node_mut(&mut v, &path) {
                    *n = Value::String(format!("@@raw{}@@", raws.len()));
                    raws.push(text.clone());
                }
            }
            Edit::Insert(k, new) => match node_mut(&mut v, &path) {
                Some(Value::Table(t)) => {
                    t.insert(k.clone(), new.clone());
                }
                Some(Value::Array(a)) => a.push(new.clone()),
                _ => {}
            },
        }
    }
    let mut s = ::toml::to_string(&v).unwrap_or_default();
    for (i, r) in raws.iter().enumerate().rev() {
        s = s.replace(&format!("\"@@raw{i}@@\""), r).replace(&format!("'@@raw{i}@@'"), r);
    }
    s
}

/// Integers at the edges of every integer type a field might have (TOML stops at i64):
/// huge ones (sums and products of a few overflow u64), small ones, negative ones, any.
pub fn edge_int() -> impl Strategy<Value = i64> {
    prop_oneof![
        2 => prop::sample::select(vec![
            i64::MAX,
            i64::MAX - 1,
            i64::MAX / 2 + 1,
            i64::MAX / 3 + 1,
            1 << 62,
            1 << 50,
            1 << 32,
            u32::MAX as i64 + 1,
            u32::MAX as i64,
            (1 << 31) + 1,
            1 << 31,
        ]),
        2 => prop::sample::select(vec![0, 1, -1, 2, 3, 7, 64, 256]),
        1 => prop::sample::select(vec![i64::MIN, i64::MIN + 1, -(1 << 31)]),
        1 => any::<i64>(),
    ]
}

/// A TOML value of any type, at most three levels deep; keys are often ones the parser knows.
pub fn any_toml(keys: &'static [&'static str]) -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        1 => any::<bool>().prop_map(Value::Boolean),
        3 => edge_int().prop_map(Value::Integer),
        1 => any::<f64>().prop_map(Value::Float),
        1 => prop::sample::select(vec![0.0f64, -0.0, 0.5, 1e-300, 1e300, f64::NAN, f64::INFINITY, f64::NEG_INFINITY])
            .prop_map(Value::Float),
        1 => "\\PC{0,24}".prop_map(Value::String),
        1 => prop::sample::select(keys.to_vec()).prop_map(|k| Value::String(k.into())),
    ];
    leaf.prop_recursive(3, 24, 4, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((key(keys), inner), 0..4).prop_map(|kv| Value::Table(kv.into_iter().collect())),
        ]
    })
}

/// A key: one of `keys` three times in four, otherwise any short text (as [`crate::json::key`]).
pub fn key(keys: &'static [&'static str]) -> impl Strategy<Value = String> {
    crate::json::key(keys)
}

/// Raw TOML value text no `toml::Value` of the right type holds.
pub fn raw_toml() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "9223372036854775808",
            "-9223372036854775809",
            "18446744073709551615",
            "340282366920938463463374607431768211456",
            "nan",
            "+nan",
            "-nan",
            "inf",
            "-inf",
            "1e400",
            "-1e400",
            "1e-400",
            "0x7fffffffffffffff",
            "0xffffffffffffffff",
            "0o777",
            "0b101",
            "1_000",
            "1__0",
            "01",
            "+0",
            "-0",
            "0.0",
            "1979-05-27T07:32:00Z",
            "1979-05-27",
            "07:32:00",
            "\"\\u0000\"",
            "\"\\uD800\"",
            "'''multi\nline'''",
            "[]",
            "{}",
            "",
            "=",
        ])
        .prop_map(String::from),
        (1usize..300).prop_map(|d| "[".repeat(d) + &"]".repeat(d)),
        (1usize..300).prop_map(|d| "{ a = ".repeat(d) + "1" + &" }".repeat(d)),
        (1usize..200).prop_map(|d| "[".repeat(d)),
        (0usize..20_000).prop_map(|n| format!("\"{}\"", "x".repeat(n))),
        "\\PC{0,40}",
    ]
}

/// One structural edit, its values drawn with `keys`.
pub fn edit(keys: &'static [&'static str]) -> impl Strategy<Value = Edit> {
    prop_oneof![
        3 => Just(Edit::Delete),
        5 => any_toml(keys).prop_map(Edit::Replace),
        2 => raw_toml().prop_map(Edit::Raw),
        1 => key(keys).prop_map(Edit::Rename),
        2 => (key(keys), any_toml(keys)).prop_map(|(k, v)| Edit::Insert(k, v)),
        3 => edge_int().prop_map(Edit::Integer),
    ]
}

/// One of `seeds` (TOML texts), mutated: up to four structural edits, then byte edits.
pub fn mutated(seeds: Vec<&'static str>, keys: &'static [&'static str]) -> impl Strategy<Value = String> {
    (prop::sample::select(seeds), prop::collection::vec((any::<Index>(), edit(keys)), 0..5), byte_edits()).prop_map(
        |(seed, edits, bytes)| {
            let doc: Table = ::toml::from_str(seed).expect("seeds are valid TOML");
            String::from_utf8_lossy(&mutate_bytes(mutate_toml(doc, &edits).into_bytes(), &bytes)).into_owned()
        },
    )
}
