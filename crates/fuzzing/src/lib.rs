//! The input-mutation toolkit of goodput's property-based fuzz tests (the `tests/fuzz` targets
//! of the server, client, core, workload and engine crates). It is a dev-dependency only and
//! is not shipped (`publish = false`).
//!
//! - [`config`]: the proptest configuration every fuzz property runs under (256 cases, or
//!   `PROPTEST_CASES`; failures not persisted).
//! - [`bytes`]: byte-level edits of a serialised input (flips, insertions, removals,
//!   truncation), and arbitrary small byte strings.
//! - [`tree`]: paths into a JSON or TOML document, shared by the structural mutations.
//! - [`json`]: structural mutation of JSON documents (fields deleted, renamed, duplicated or
//!   added, values replaced by other types, huge or non-finite numbers, deep nesting, lone
//!   surrogates), then byte edits.
//! - [`toml`]: the same for TOML documents (integers at every type's edge, nan/inf, integers
//!   beyond i64, other bases, datetimes, deep nesting), then byte edits.
//!
//! Each fuzz target keeps what is specific to its parser: its seeds, its keys and its
//! properties.

pub mod bytes;
pub mod json;
pub mod toml;
pub mod tree;

pub use bytes::{byte_edits, mutate_bytes, small_bytes, ByteEdit};

use proptest::prelude::*;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

/// The configuration of every fuzz property: 256 cases (`PROPTEST_CASES=N` for a deeper run),
/// failures not persisted (no `proptest-regressions` files).
pub fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(256);
    ProptestConfig { cases, failure_persistence: None, ..ProptestConfig::default() }
}

/// A fresh temporary file for test `tag` with extension `ext`, in `std::env::temp_dir()`, named
/// with the process id and a per-process counter: every call gets its own path, so two tests
/// running in parallel with the same tag (two properties on the same catalog model) never
/// read each other's file.
pub fn temp_path(tag: &str, ext: &str) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("goodput-fuzz-{}-{n}-{tag}.{ext}", std::process::id()))
}

/// Any text of up to `max` characters, or any `max` bytes read as UTF-8 (lossily), half and half.
pub fn any_text(max: usize) -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::string::string_regex(&format!("\\PC{{0,{max}}}")).expect("a valid regex"),
        small_bytes(max).prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
    ]
}
