//! Console tables (comfy-table), one style for every command: [`new`] for any command's own
//! table, and the tables of a run — the level line on stderr as each level ends, its three
//! layers, the sweep ([`levels`], from [`crate::columns`]; [`latency::levels_with`] with
//! chosen latency columns), the HTTP and server-side views, the
//! multi-turn, agent and RAG tables and predicted against measured.
//!
//! Only strings come out: printing them (stdout for results, stderr for progress) is the
//! cli's, the only caller: no other module of this crate imports from this folder.

mod http;
pub mod latency;
mod predicted;
mod sweep;
mod tasks;

pub use crate::text::{bytes, f};
pub use http::{http, server};
pub use predicted::prediction;
pub use sweep::{layers, level_line, levels};
pub use tasks::{agent, rag, turns};

use comfy_table::{presets::UTF8_FULL_CONDENSED, CellAlignment, Table};

/// A table in the one console style: the first column left-aligned, the others right.
pub fn new(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(header.iter().copied());
    for i in 1..header.len() {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    t
}
