//! Console tables (comfy-table), one style for every command: [`new`] for any command's own
//! table, and the tables of a run — the level line on stderr as each level ends, its three
//! layers, the sweep ([`levels`], from [`crate::columns`]; [`latency::levels_with`] with
//! chosen latency columns), the HTTP and server-side views, the
//! multi-turn, agent and RAG tables and predicted against measured.
//!
//! Only strings come out: printing them (stdout for results, stderr for progress) is the
//! cli's, the only caller: no other module of this crate imports from this folder.

mod accuracy;
mod http;
pub mod latency;
mod matrix;
mod predicted;
mod repeats;
mod run;
mod shards;
mod soak;
mod sweep;
mod tasks;

pub use crate::text::{bytes, f};
pub use accuracy::accuracy;
pub use http::{http, server, spec_decode};
pub use matrix::matrix;
pub use predicted::prediction;
pub use repeats::repeats;
pub use run::{retry_storm, run};
pub use shards::{rows as shard_rows, shards, time_line as shards_time_line, SHARD_HEADER};
pub use soak::{soak, verdict as soak_verdict};
pub use sweep::{caption, layers, level_brief, level_line, level_warnings, levels};
pub use tasks::{agent, rag, sessions, turns};

use crate::columns::{Column, Output, Value};
use comfy_table::{presets::UTF8_FULL_CONDENSED, Cell, CellAlignment, Color, Table};
use goodput_metrics::interval::Confidence;
use goodput_results::LevelReport;
use std::cell::Cell as Flag;

thread_local! {
    static COLOR: Flag<bool> = const { Flag::new(false) };
}

/// Whether console tables built on this thread color what they judge (a level's SLOs: green
/// where they hold, red where broken). Off until the cli decides (`--color`, `NO_COLOR`,
/// whether stdout is a terminal) on the thread that prints; the words stay, so nothing is
/// said by color alone. Per thread, so tests of either setting run side by side.
pub fn set_color(on: bool) {
    COLOR.with(|c| c.set(on));
}

/// See [`set_color`].
pub fn color() -> bool {
    COLOR.with(|c| c.get())
}

/// Column `c`'s cell for level `l`: its text, colored where it is a verdict and color is on.
fn cell(c: &Column, l: &LevelReport) -> Cell {
    let cell = Cell::new(c.text(Output::Console, l));
    match (c.get)(l) {
        Value::Slos(c) if color() => cell.fg(match c {
            Confidence::Holds => Color::Green,
            Confidence::HoldsNotSignificant | Confidence::BreaksNotSignificant => Color::Yellow,
            Confidence::Breaks | Confidence::NoData => Color::Red,
        }),
        _ => cell,
    }
}

/// A table in the one console style: the first column left-aligned, the others right.
pub fn new(header: &[&str]) -> Table {
    let mut t = Table::new();
    if color() {
        t.enforce_styling();
    } else {
        t.force_no_tty();
    }
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(header.iter().copied());
    for i in 1..header.len() {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    t
}
