//! The level table, defined once: one [`Column`] per quantity a sweep shows for each level —
//! its header, unit, how its value is got from the level, which outputs show it — rendered to
//! the console (`console::levels`), the page (`html::tables`), CSV and Markdown (`export`),
//! the way hyperfine's exporters write one result table to every format.
//! The outputs differ in which columns they show (the console's is the widest), never in what a
//! column means.
//!
//! Also the rows of a level's three-layer table ([`LAYERS`]), shared by the console and the
//! page the same way.

use crate::text::{ms, num};
use goodput_metrics::interval::Confidence;
use goodput_metrics::Summary;
use goodput_results::{LevelReport, LoadUnit};
use serde::{Serialize, Serializer};

/// An output of the level table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    /// The console's widest table (`run --wide`).
    Console,
    /// The console's default table: [`COMPACT`]'s columns, which a 120-column terminal holds.
    Compact,
    Html,
    Markdown,
    Csv,
}

/// Which outputs show a column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shown {
    pub console: bool,
    pub html: bool,
    pub markdown: bool,
    pub csv: bool,
}

impl Shown {
    pub fn shows(self, out: Output) -> bool {
        match out {
            Output::Console => self.console,
            Output::Compact => false,
            Output::Html => self.html,
            Output::Markdown => self.markdown,
            Output::Csv => self.csv,
        }
    }
}

const EVERY: Shown = Shown { console: true, html: true, markdown: true, csv: true };
/// The console's extra columns: the engine's occupancy and the harness, too wide for the rest.
const CONSOLE: Shown = Shown { console: true, html: false, markdown: false, csv: false };
const CONSOLE_CSV: Shown = Shown { console: true, html: false, markdown: false, csv: true };
const NOT_MARKDOWN: Shown = Shown { console: true, html: true, markdown: false, csv: true };
const CSV: Shown = Shown { console: false, html: false, markdown: false, csv: true };

/// A column's value for one level, before an output writes it.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// The level's load: as Rust writes the number (`1`, `0.5`); CSV as serde does (`1.0`).
    Load(f64),
    Count(usize),
    /// With the column's decimals, `-` when unknown or not finite; CSV writes the number as
    /// it is, an empty field when unknown.
    Number(Option<f64>),
    /// A fraction, written as a percent (`37 %`), `-` when unknown; CSV writes the fraction.
    Percent(Option<f64>),
    /// What the SLOs' values and intervals say ([`slos_word`]); CSV writes whether every
    /// value meets its bound, `true` or `false`.
    Slos(Confidence),
    /// Words already (the console's harness and occupancy cells).
    Text(String),
}

impl Value {
    /// As the console, the page and Markdown write it, with `d` decimals.
    pub fn text(&self, d: usize) -> String {
        match self {
            Value::Load(x) => x.to_string(),
            Value::Count(n) => n.to_string(),
            Value::Number(x) => num(*x, d),
            Value::Percent(x) => x.filter(|v| v.is_finite()).map_or("-".into(), |v| format!("{:.d$} %", v * 100.0)),
            Value::Slos(c) => slos_word(*c).into(),
            Value::Text(s) => s.clone(),
        }
    }
}

/// A level's SLOs in a table cell: `hold` (every one holds with 95 % confidence), `hold,
/// n.s.` (every value meets its bound, but an interval reaches past it: not significant),
/// `broken, n.s.` (a value misses its bound within its interval's reach), `broken`, `no data`.
pub fn slos_word(c: Confidence) -> &'static str {
    match c {
        Confidence::Holds => "hold",
        Confidence::HoldsNotSignificant => "hold, n.s.",
        Confidence::BreaksNotSignificant => "broken, n.s.",
        Confidence::Breaks => "broken",
        Confidence::NoData => "no data",
    }
}

/// CSV's cells: each value as serde writes the plain number, flag or word it holds, so a
/// reader deserializes the file into `export::LevelRow`.
impl Serialize for Value {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Value::Load(x) => s.serialize_f64(*x),
            Value::Count(n) => s.serialize_u64(*n as u64),
            Value::Number(x) | Value::Percent(x) => match x {
                Some(x) => s.serialize_f64(*x),
                None => s.serialize_none(),
            },
            Value::Slos(c) => s.serialize_bool(matches!(c, Confidence::Holds | Confidence::HoldsNotSignificant)),
            Value::Text(t) => s.serialize_str(t),
        }
    }
}

/// Markdown's alignment of a column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Align {
    Right,
    Left,
}

/// One column of the level table.
pub struct Column {
    /// The column's name: its CSV field (and `export::LevelRow`'s).
    pub key: &'static str,
    /// The header on the page and in Markdown; `{unit}` stands for the load unit.
    pub header: &'static str,
    /// The console's header where it is narrower (its table has 21 columns).
    pub console_header: Option<&'static str>,
    /// The unit of the value: `ms`, `tok/s`, `req/s`, `fraction`; empty for counts and words.
    pub unit: &'static str,
    /// Decimals on the console and the page.
    pub decimals: usize,
    /// Decimals in the Markdown export where they differ: it has written TPOT with two and
    /// E2E with none since its first version, and its readers keep its files.
    pub markdown_decimals: Option<usize>,
    /// Markdown's alignment (the console left-aligns its first column as every console table
    /// does; the page right-aligns every cell).
    pub align: Align,
    pub shown: Shown,
    /// The level's value.
    pub get: fn(&LevelReport) -> Value,
    /// A column only some runs have (reasoning models'): shown when this holds of at least
    /// one level of the table; `None` shows it always.
    pub when: Option<fn(&LevelReport) -> bool>,
}

impl Column {
    /// The header `out` writes.
    pub fn header(&self, out: Output, unit: LoadUnit) -> String {
        let h = match (out, self.console_header) {
            (Output::Console | Output::Compact, Some(h)) => h,
            (Output::Csv, _) => self.key,
            _ => self.header,
        };
        h.replace("{unit}", unit.as_str())
    }

    /// The cell `out` (not CSV) writes for level `l`.
    pub fn text(&self, out: Output, l: &LevelReport) -> String {
        let d = match (out, self.markdown_decimals) {
            (Output::Markdown, Some(d)) => d,
            _ => self.decimals,
        };
        (self.get)(l).text(d)
    }
}

/// The columns of the console's default table, by key: the load, the requests, the two
/// throughputs, the P95 of each latency users see and of the queue, and the SLOs' verdict.
pub const COMPACT: [&str; 10] = [
    "load",
    "requests",
    "request_throughput",
    "output_throughput",
    "ttft_p95_ms",
    "ttfo_p95_ms",
    "tpot_p95_ms",
    "e2e_p95_ms",
    "queue_time_p95_ms",
    "slos_hold",
];

/// The columns `out` shows for a table of `levels`, in order: those it shows, less the
/// conditional ones ([`Column::when`]) no level has.
pub fn shown(out: Output, levels: &[LevelReport]) -> Vec<&'static Column> {
    let shows = move |c: &Column| if out == Output::Compact { COMPACT.contains(&c.key) } else { c.shown.shows(out) };
    LEVEL.iter().filter(move |c| shows(c) && c.when.is_none_or(|when| levels.iter().any(when))).collect()
}

/// Whether a level's requests reasoned (its summary counts reasoning tokens; their answer
/// may never have started): the reasoning columns' condition.
pub fn reasoned(l: &LevelReport) -> bool {
    l.summary.reasoning_tokens.is_some()
}

const fn column(
    key: &'static str,
    header: &'static str,
    unit: &'static str,
    decimals: usize,
    shown: Shown,
    get: fn(&LevelReport) -> Value,
) -> Column {
    Column {
        key,
        header,
        console_header: None,
        unit,
        decimals,
        markdown_decimals: None,
        align: Align::Right,
        shown,
        get,
        when: None,
    }
}

/// A time column: the P`p` of a level's distribution, in ms.
macro_rules! time {
    ($key:literal, $header:literal, $field:ident . $stat:ident, $shown:expr) => {
        column($key, $header, "ms", 1, $shown, |l| Value::Number(ms(&l.summary.$field, |x| x.$stat)))
    };
}

/// Every column of the level table, in the order every output shows its own.
pub static LEVEL: [Column; 26] = [
    column("load", "load ({unit})", "", 0, EVERY, |l| Value::Load(l.summary.load)),
    Column {
        console_header: Some("n"),
        ..column("requests", "requests", "", 0, EVERY, |l| Value::Count(l.summary.requests))
    },
    Column {
        console_header: Some("ok"),
        ..column("completed", "completed", "", 0, CONSOLE_CSV, |l| Value::Count(l.summary.completed))
    },
    column("request_throughput", "req/s", "req/s", 2, EVERY, |l| Value::Number(Some(l.summary.request_throughput))),
    column("output_throughput", "out tok/s", "tok/s", 0, EVERY, |l| Value::Number(Some(l.summary.output_throughput))),
    column("goodput", "goodput", "req/s", 2, EVERY, |l| Value::Number(Some(l.summary.goodput))),
    time!("ttft_p50_ms", "TTFT p50", ttft.p50, EVERY),
    time!("ttft_p95_ms", "TTFT p95", ttft.p95, EVERY),
    Column { when: Some(reasoned), ..time!("ttfo_p95_ms", "TTFO p95", ttfo.p95, EVERY) },
    Column {
        console_header: Some("think p50"),
        when: Some(reasoned),
        ..time!("reasoning_time_p50_ms", "reasoning p50", reasoning_time.p50, EVERY)
    },
    Column {
        console_header: Some("think share"),
        when: Some(reasoned),
        ..column("reasoning_share", "reasoning share", "fraction", 0, EVERY, |l| {
            Value::Percent(l.summary.reasoning_share)
        })
    },
    Column { markdown_decimals: Some(2), ..time!("tpot_p50_ms", "TPOT p50", tpot.p50, EVERY) },
    Column { markdown_decimals: Some(2), ..time!("tpot_p95_ms", "TPOT p95", tpot.p95, EVERY) },
    Column { markdown_decimals: Some(0), ..time!("e2e_p95_ms", "E2E p95", e2e.p95, EVERY) },
    column("per_user_tps_p50", "user tok/s", "tok/s", 1, CONSOLE_CSV, |l| {
        Value::Number(l.summary.per_user_tps.as_ref().map(|x| x.p50))
    }),
    Column {
        console_header: Some("wait p95"),
        ..time!("engine_wait_p95_ms", "engine wait p95", engine_wait.p95, EVERY)
    },
    time!("queue_time_p95_ms", "queue p95", queue_time.p95, EVERY),
    time!("prefill_time_p95_ms", "prefill p95", prefill_time.p95, NOT_MARKDOWN),
    column("kv_max", "KV max", "fraction", 0, EVERY, |l| {
        Value::Percent(l.occupancy.as_ref().map(|o| o.kv_max).filter(|x| x.is_finite()))
    }),
    column("running_waiting_max", "run/wait max", "", 0, CONSOLE, |l| {
        let o = |g: fn(&goodput_metrics::occupancy::Occupancy) -> f64| num(l.occupancy.as_ref().map(g), 0);
        Value::Text(format!("{}/{}", o(|x| x.running_max), o(|x| x.waiting_max)))
    }),
    column("preemptions", "preempt", "", 0, CONSOLE, |l| {
        Value::Text(l.occupancy.as_ref().and_then(|x| x.preemptions).map_or("-".into(), |p| p.to_string()))
    }),
    column("harness_cpu", "harness CPU", "", 0, CONSOLE, |l| Value::Text(l.harness.cpu_text())),
    column("send_lag_p99_ms", "lag p99", "ms", 2, CONSOLE, |l| Value::Number(Some(l.harness.send_lag_p99_s * 1e3))),
    Column {
        when: Some(|l| l.machine.is_some()),
        ..column("machine", "machine", "", 0, CONSOLE, |l| {
            Value::Text(match &l.machine {
                None => "-".into(),
                Some(m) if m.busy().is_empty() => "quiet".into(),
                Some(m) if m.includes_target || m.other_cores < goodput_metrics::machine::BUSY_OTHER_CORES => {
                    "busy".into()
                }
                Some(m) => format!("busy ({:.1} cores)", m.other_cores),
            })
        })
    },
    column("error_rate", "errors", "fraction", 2, CSV, |l| Value::Number(Some(l.summary.error_rate))),
    Column { align: Align::Left, ..column("slos_hold", "SLOs", "", 0, EVERY, |l| Value::Slos(l.summary.confidence())) },
];

/// A distribution of one level as a row of a three-layer table: n, mean, P50/P90/P95/P99, max.
pub struct Stat {
    /// `user` (what users saw) or `engine` (what the engine did).
    pub layer: &'static str,
    pub name: &'static str,
    /// From the stored unit to the shown one (seconds to ms: 1e3).
    pub scale: f64,
    /// The console's decimals (the page writes two everywhere).
    pub decimals: usize,
    pub get: fn(&LevelReport) -> &Option<Summary>,
    /// Shown only where the level has the distribution (reasoning models' rows); the others
    /// show dashes without one.
    pub optional: bool,
}

/// A row every level's table has.
const fn stat(
    layer: &'static str,
    name: &'static str,
    scale: f64,
    decimals: usize,
    get: fn(&LevelReport) -> &Option<Summary>,
) -> Stat {
    Stat { layer, name, scale, decimals, get, optional: false }
}

impl Stat {
    /// The row only where the level has the distribution.
    const fn optional(self) -> Stat {
        Stat { optional: true, ..self }
    }

    /// Whether level `l`'s table has this row.
    pub fn shown(&self, l: &LevelReport) -> bool {
        !self.optional || (self.get)(l).is_some()
    }
}

/// The header of a three-layer table.
pub const STAT_HEADER: [&str; 9] = ["layer", "metric", "n", "mean", "p50", "p90", "p95", "p99", "max"];

/// The rows of a level's three-layer table that every level has, users' first.
pub static LAYERS: [Stat; 14] = [
    stat("user", "TTFT (ms)", 1e3, 1, |l| &l.summary.ttft),
    stat("user", "TTFO (ms)", 1e3, 1, |l| &l.summary.ttfo).optional(),
    stat("user", "reasoning (ms)", 1e3, 1, |l| &l.summary.reasoning_time).optional(),
    stat("user", "reasoning tokens", 1.0, 0, |l| &l.summary.reasoning_tokens).optional(),
    stat("user", "TPOT (ms)", 1e3, 2, |l| &l.summary.tpot),
    stat("user", "ITL (ms)", 1e3, 2, |l| &l.summary.itl),
    stat("user", "E2E (ms)", 1e3, 0, |l| &l.summary.e2e),
    stat("user", "per-user tok/s", 1.0, 1, |l| &l.summary.per_user_tps),
    stat("engine", "engine wait (ms)", 1e3, 1, |l| &l.summary.engine_wait),
    stat("engine", "queue (ms)", 1e3, 1, |l| &l.summary.queue_time),
    stat("engine", "prefill (ms)", 1e3, 1, |l| &l.summary.prefill_time),
    stat("engine", "decode (ms)", 1e3, 0, |l| &l.summary.decode_time),
    stat("engine", "inference (ms)", 1e3, 0, |l| &l.summary.inference_time),
    stat("engine", "step (ms)", 1e3, 2, |l| &l.engine.step_time),
];

/// The cells after a stat row's layer and name: n, then mean, P50, P90, P95, P99 and max
/// times `scale` with `d` decimals (`0` and dashes without a distribution).
pub fn stat_cells(x: &Option<Summary>, scale: f64, d: usize) -> Vec<String> {
    let cell = |f: fn(&Summary) -> f64| num(x.as_ref().map(|s| f(s) * scale), d);
    vec![
        x.as_ref().map_or("0".into(), |s| s.n.to_string()),
        cell(|s| s.mean),
        cell(|s| s.p50),
        cell(|s| s.p90),
        cell(|s| s.p95),
        cell(|s| s.p99),
        cell(|s| s.max),
    ]
}
