//! Trace replay: requests sent open loop at a production trace's times (optionally faster,
//! within a time window), with its input and output lengths.
//!
//! - **Mooncake** JSONL: `{"timestamp": ms, "input_length": n, "output_length": n,
//!   "hash_ids": [..]}`. Each hash id names one block of `block_size` prompt tokens (512 in
//!   Mooncake's traces): equal ids are equal blocks, so requests that share leading hash ids
//!   share that prefix, and the target's prefix cache meets what the traced one met.
//! - **Azure** LLM inference trace CSV: `TIMESTAMP` (`2023-11-16 18:15:46.6805900`),
//!   `ContextTokens`, `GeneratedTokens`; prompts are unique.
//!
//! Latency counts from each request's intended time (its trace time), as for any open loop.
//!
//! **Sessions** (agentic and chat traces, as AIPerf's `mooncake_trace` with `session_id`
//! reads them): a Mooncake line with `"session_id"` (a string or number) is a turn of that
//! session, in the file's order; a session starts at its first turn's `timestamp`, and each
//! later turn is sent `delay` ms (a tool's or user's wait) after the turn before it ended, or,
//! without `delay`, at its own `timestamp` once that turn ended. A turn's `hash_ids` are its
//! whole prompt as recorded, so a session's context grows as it grew (its turns share their
//! leading blocks), whatever the target answers.

use crate::prompts::{NextDue, Prompts};
use crate::scenario::random_tokens;
use crate::WorkloadError;
use goodput_core::{input, SamplingParams, TokenId, WorkRequest};
use rand::SeedableRng;
use serde::{Deserialize, Serialize};
use std::path::Path;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TraceFormat {
    Mooncake,
    Azure,
    /// Azure when the first line names `TIMESTAMP`, else Mooncake.
    #[default]
    Auto,
}

impl std::str::FromStr for TraceFormat {
    type Err = goodput_core::ValueError;

    /// `mooncake`, `azure` or `auto`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "mooncake" => Ok(TraceFormat::Mooncake),
            "azure" => Ok(TraceFormat::Azure),
            "auto" => Ok(TraceFormat::Auto),
            _ => Err(goodput_core::ValueError::new(s, "a trace is mooncake, azure or auto")),
        }
    }
}

/// One traced request: when (seconds from the trace's first request) and how long.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceEntry {
    pub at_s: f64,
    pub input: usize,
    pub output: usize,
    /// Mooncake: the ids of the prompt's blocks, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hash_ids: Vec<u64>,
    /// The session the request is a turn of (sessions numbered from 0 in the file's order).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<u64>,
    /// Seconds after the session's turn before ended at which this turn is due.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_s: Option<f64>,
}

#[derive(Deserialize)]
struct MooncakeLine {
    timestamp: Option<f64>,
    input_length: usize,
    output_length: usize,
    #[serde(default)]
    hash_ids: Vec<u64>,
    session_id: Option<serde_json::Value>,
    delay: Option<f64>,
}

#[derive(Deserialize)]
struct AzureRow {
    #[serde(rename = "TIMESTAMP")]
    timestamp: String,
    #[serde(rename = "ContextTokens")]
    context: usize,
    #[serde(rename = "GeneratedTokens")]
    generated: usize,
}

/// Seconds since 1970 of `YYYY-MM-DD HH:MM:SS[.fraction]` (UTC, as the Azure traces are).
pub fn parse_timestamp(s: &str) -> Option<f64> {
    let (date, time) = s.trim().split_once([' ', 'T'])?;
    let mut d = date.split('-').map(|x| x.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let mut t = time.trim_end_matches('Z').split(':');
    let (hh, mm) = (t.next()?.parse::<i64>().ok()?, t.next()?.parse::<i64>().ok()?);
    let ss: f64 = t.next()?.parse().ok()?;
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days_in_month = [31, if leap { 29 } else { 28 }, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    let date_ok =
        (1..=9999).contains(&y) && (1..=12).contains(&m) && (1..=days_in_month[(m - 1) as usize]).contains(&day);
    if !date_ok || !(0..=23).contains(&hh) || !(0..=59).contains(&mm) || !(0.0..61.0).contains(&ss) {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some((days * 86_400 + hh * 3600 + mm * 60) as f64 + ss)
}

/// The longest span a trace may have (a year): beyond it a replay would wait for ever.
const MAX_SPAN_S: f64 = 366.0 * 86_400.0;

/// Reads a trace: its requests by time, the first at 0. Read as a stream (a malformed line is
/// reported without reading the rest of the file).
pub fn read(path: &Path, format: TraceFormat) -> Result<Vec<TraceEntry>, WorkloadError> {
    let bad = |reason: String| WorkloadError::Data { what: "trace", path: path.to_path_buf(), reason };
    let format = match format {
        TraceFormat::Auto => {
            let head = input::head(path, 4096).map_err(|e| bad(e.to_string()))?;
            let first = head.split(|&b| b == b'\n').next().unwrap_or_default();
            if String::from_utf8_lossy(first).contains("TIMESTAMP") {
                TraceFormat::Azure
            } else {
                TraceFormat::Mooncake
            }
        }
        f => f,
    };
    let file = std::fs::File::open(path).map_err(|e| bad(e.to_string()))?;
    let mut entries: Vec<TraceEntry> = Vec::new();
    match format {
        TraceFormat::Azure => {
            let mut r = csv::Reader::from_reader(std::io::BufReader::new(file));
            for (i, row) in r.deserialize::<AzureRow>().enumerate() {
                let row = row.map_err(|e| bad(format!("row {}: {e}", i + 1)))?;
                let at = parse_timestamp(&row.timestamp)
                    .ok_or_else(|| bad(format!("row {}: `{}` is not a timestamp", i + 1, row.timestamp)))?;
                let (input, output) = (row.context, row.generated);
                entries.push(TraceEntry {
                    at_s: at,
                    input,
                    output,
                    hash_ids: Vec::new(),
                    session: None,
                    delay_s: None,
                });
            }
        }
        _ => {
            let mut sessions = Sessions::default();
            input::for_each_line(file, |i, line| {
                let l: MooncakeLine = serde_json::from_str(line).map_err(|e| format!("line {i}: {e}"))?;
                entries.push(sessions.entry(l).map_err(|e| format!("line {i}: {e}"))?);
                Ok::<(), String>(())
            })
            .map_err(|e| bad(e.to_string()))?
        }
    }
    if entries.is_empty() {
        return Err(bad("no requests".into()));
    }
    entries.sort_by(|a, b| a.at_s.total_cmp(&b.at_s));
    let t0 = entries[0].at_s;
    entries.iter_mut().for_each(|e| e.at_s -= t0);
    let span = entries.last().map_or(0.0, |e| e.at_s);
    if span > MAX_SPAN_S {
        return Err(bad(format!("its requests span {span:.0} s; a trace may span at most a year ({MAX_SPAN_S:.0} s)")));
    }
    Ok(entries)
}

/// The sessions of a Mooncake trace as its lines come: each id's number and its last turn's
/// time (a later turn without a timestamp is placed `delay` after it, to order and window it).
#[derive(Default)]
struct Sessions {
    ids: std::collections::HashMap<String, (u64, f64)>,
}

impl Sessions {
    fn entry(&mut self, l: MooncakeLine) -> Result<TraceEntry, String> {
        let ms = |x: f64, what: &str| {
            (x.is_finite() && x >= 0.0)
                .then_some(x / 1e3)
                .ok_or(format!("the {what} is not a number of milliseconds from 0"))
        };
        let delay_s = l.delay.map(|d| ms(d, "delay")).transpose()?;
        let at = l.timestamp.map(|t| ms(t, "timestamp")).transpose()?;
        let (session, at_s) = match l.session_id {
            None => (None, at.ok_or("no timestamp (a turn of a session may give a delay instead)")?),
            Some(id) => {
                let key = match id {
                    serde_json::Value::String(s) => s,
                    serde_json::Value::Number(n) => n.to_string(),
                    other => return Err(format!("the session_id {other} is not a string or number")),
                };
                let next = self.ids.len() as u64;
                let known = self.ids.get(&key).copied();
                // A session's turns keep their order: none placed before the turn before it.
                let at_s = match (at, known) {
                    (Some(t), None) => t,
                    (Some(t), Some((_, last))) => t.max(last),
                    (None, Some((_, last))) => last + delay_s.unwrap_or(0.0),
                    (None, None) => return Err(format!("session {key} starts without a timestamp")),
                };
                let n = known.map_or(next, |(n, _)| n);
                self.ids.insert(key, (n, at_s));
                (Some(n), at_s)
            }
        };
        let (input, output, hash_ids) = (l.input_length, l.output_length, l.hash_ids);
        Ok(TraceEntry { at_s, input, output, hash_ids, session, delay_s })
    }
}

/// How a trace is replayed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceOptions {
    /// Seconds of the trace (from its first request) to replay: `[from, to)`.
    pub window: (f64, Option<f64>),
    /// Tokens per hash id (Mooncake: 512).
    pub block_size: usize,
}

/// A trace ready to replay: the requests of its window, their times from the window's start.
#[derive(Clone, Debug)]
pub struct Trace {
    pub name: String,
    pub options: TraceOptions,
    pub entries: Vec<TraceEntry>,
    /// Requests of the window left out because prompt and output exceed the model's context.
    pub too_long: usize,
    /// Seconds the window spans (to its last request).
    pub span_s: f64,
    seed: u64,
    /// Per request of a trace of sessions: its turn ([`Turn`]).
    turns: Vec<Option<Turn>>,
    /// The sessions in the window.
    pub sessions: u64,
}

/// A request's place in its session: the session, its turn number (1 first, within the
/// window) and the turn after it with when that one is due.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Turn {
    session: u64,
    number: u32,
    next: Option<(usize, NextDue)>,
}

/// The turns of `entries`: each session's in order, each linked to the next.
fn turns(entries: &[TraceEntry]) -> (Vec<Option<Turn>>, u64) {
    let mut turns: Vec<Option<Turn>> = vec![None; entries.len()];
    let mut last: std::collections::HashMap<u64, usize> = std::collections::HashMap::new();
    for (j, e) in entries.iter().enumerate() {
        let Some(session) = e.session else { continue };
        let number = match last.insert(session, j) {
            Some(i) => {
                let due = e.delay_s.map_or(NextDue::At(e.at_s), NextDue::After);
                let prev = turns[i].as_mut().expect("a session's turn");
                prev.next = Some((j, due));
                prev.number + 1
            }
            None => 1,
        };
        turns[j] = Some(Turn { session, number, next: None });
    }
    (turns, last.len() as u64)
}

impl Trace {
    /// The window's requests that fit `max_model_len`; prompts drawn with `seed`.
    pub fn new(
        name: String,
        all: Vec<TraceEntry>,
        options: TraceOptions,
        max_model_len: usize,
        seed: u64,
    ) -> Result<Self, WorkloadError> {
        if options.block_size == 0 {
            return Err(crate::Invalid::new("trace", "the block size must be at least 1").into());
        }
        let (from, to) = options.window;
        let inside: Vec<TraceEntry> =
            all.into_iter().filter(|e| e.at_s >= from && to.is_none_or(|t| e.at_s < t)).collect();
        let n = inside.len();
        let entries: Vec<TraceEntry> = inside
            .into_iter()
            .filter(|e| {
                e.input >= 1 && e.output >= 1 && e.input.checked_add(e.output).is_some_and(|n| n <= max_model_len)
            })
            .map(|e| TraceEntry { at_s: e.at_s - from, ..e })
            .collect();
        if entries.is_empty() {
            let problem =
                format!("no request in the window fits the model's context of {max_model_len} ({n} in the window)");
            return Err(crate::Invalid::new(format!("trace {name}"), problem).into());
        }
        let span_s = entries.last().map_or(0.0, |e| e.at_s);
        let (turns, sessions) = turns(&entries);
        Ok(Trace { name, too_long: n - entries.len(), span_s, options, entries, seed, turns, sessions })
    }

    /// Whether two of the window's requests share a hash id (so their prompts share a prefix
    /// block). Without one no prompt can hit another's cache: the prompts of an Azure trace,
    /// which has no hash ids, are each the request's own.
    pub fn shares_prefixes(&self) -> bool {
        let mut seen = std::collections::HashSet::new();
        self.entries.iter().any(|e| {
            let mine: std::collections::HashSet<u64> = e.hash_ids.iter().copied().collect();
            mine.into_iter().any(|h| !seen.insert(h))
        })
    }

    /// Requests per second the window offers at speed 1 (its requests over its span; one
    /// second at least).
    pub fn rate(&self) -> f64 {
        self.entries.len() as f64 / self.span_s.max(1.0)
    }

    /// Seconds from the level's start at which request `i` is due, at `speedup`.
    pub fn due(&self, i: usize, speedup: f64) -> f64 {
        self.entries[i % self.entries.len()].at_s / speedup
    }

    /// Request `id` (the `i`-th of its level): the traced lengths; blocks of equal hash ids
    /// are equal tokens within a level (each level its own, so a replay at another speed
    /// does not start with the last one's cache), the rest unique to the request.
    pub fn request(&self, id: u64, i: usize, vocab: usize) -> WorkRequest {
        let e = &self.entries[i % self.entries.len()];
        let bs = self.options.block_size;
        let level = id.wrapping_sub(i as u64);
        let mut prompt: Vec<TokenId> = Vec::with_capacity(e.input);
        for &h in &e.hash_ids {
            if prompt.len() >= e.input {
                break;
            }
            let block_seed =
                self.seed ^ h.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ level.wrapping_mul(0xA24B_AED4_963E_E407);
            let mut rng = rand::rngs::SmallRng::seed_from_u64(block_seed);
            prompt.extend(random_tokens(&mut rng, bs.min(e.input - prompt.len()), vocab));
        }
        let mut rng = rand::rngs::SmallRng::seed_from_u64(self.seed ^ id.wrapping_mul(0xD1B5_4A32_D192_ED03));
        prompt.extend(random_tokens(&mut rng, e.input - prompt.len(), vocab));
        let session = self.turn(i as u64).map(|(s, _)| s);
        WorkRequest { session, id, prompt, params: SamplingParams::greedy_exact(e.output) }
    }

    /// Request `index`'s session and turn: a replay past the window's end (more requests than
    /// it holds) takes it again, with sessions numbered on.
    pub fn turn(&self, index: u64) -> Option<(u64, u32)> {
        let len = self.entries.len() as u64;
        let t = self.turns[(index % len) as usize]?;
        Some((t.session + index / len * self.sessions, t.number))
    }

    /// The turn after request `index` in its session, and when it is due.
    pub fn next_turn(&self, index: u64) -> Option<(u64, NextDue)> {
        let len = self.entries.len() as u64;
        let (j, due) = self.turns[(index % len) as usize]?.next?;
        Some((index - index % len + j as u64, due))
    }

    pub fn describe(&self) -> String {
        let mean =
            |f: fn(&TraceEntry) -> usize| self.entries.iter().map(f).sum::<usize>() as f64 / self.entries.len() as f64;
        format!(
            "{}: {} requests over {:.0} s ({:.2} req/s at speed 1; {} beyond the context left out), mean input {:.0}, \
             output {:.0} tokens",
            self.name,
            self.entries.len(),
            self.span_s,
            self.rate(),
            self.too_long,
            mean(|e| e.input),
            mean(|e| e.output)
        )
    }
}

impl Prompts for Trace {
    fn request(&self, _seed: u64, id: u64, index: u64, vocab: usize) -> WorkRequest {
        Trace::request(self, id, index as usize, vocab)
    }
    fn due(&self, index: u64, speedup: f64) -> Option<f64> {
        Some(Trace::due(self, index as usize, speedup))
    }
    fn turn(&self, index: u64) -> Option<(u64, u32)> {
        Trace::turn(self, index)
    }
    fn next_turn(&self, index: u64) -> Option<(u64, NextDue)> {
        Trace::next_turn(self, index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, text: &str) -> std::path::PathBuf {
        let p = std::env::temp_dir().join(format!("goodput-trace-{}-{name}", std::process::id()));
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn azure_timestamps_are_seconds_since_1970() {
        assert_eq!(parse_timestamp("1970-01-01 00:00:01"), Some(1.0));
        // 2023-11-16 is day 19 677 since 1970.
        let t = parse_timestamp("2023-11-16 18:15:46.6805900").unwrap();
        assert!((t - (19_677.0 * 86_400.0 + 18.0 * 3600.0 + 15.0 * 60.0 + 46.68059)).abs() < 1e-6, "{t}");
        assert_eq!(parse_timestamp("2024-02-29T00:00:00Z"), Some(19_782.0 * 86_400.0));
        assert_eq!(parse_timestamp("2023-13-01 00:00:00"), None);
        for impossible in ["2023-02-31 00:00:00", "2023-02-29 00:00:00", "2023-04-31 00:00:00", "2023-01-01 -1:00:00"] {
            assert_eq!(parse_timestamp(impossible), None, "{impossible}");
        }
        assert_eq!(parse_timestamp("99999999999999999-01-01 00:00:00"), None, "no overflow");
        assert_eq!(parse_timestamp("yesterday"), None);
    }

    #[test]
    fn mooncake_blocks_share_prefixes_by_hash_id_and_the_window_cuts() {
        let text = "{\"timestamp\": 1000, \"input_length\": 10, \"output_length\": 2, \"hash_ids\": [7, 8, 9]}\n\
                    {\"timestamp\": 0, \"input_length\": 9, \"output_length\": 3, \"hash_ids\": [7, 8, 5]}\n\
                    {\"timestamp\": 2500, \"input_length\": 900, \"output_length\": 3, \"hash_ids\": []}\n";
        let all = read(&file("m.jsonl", text), TraceFormat::Auto).unwrap();
        assert_eq!(all.iter().map(|e| e.at_s).collect::<Vec<_>>(), [0.0, 1.0, 2.5], "sorted, from the first");
        let opts = TraceOptions { window: (0.0, None), block_size: 4 };
        let t = Trace::new("m".into(), all.clone(), opts, 512, 1).unwrap();
        assert_eq!((t.entries.len(), t.too_long), (2, 1), "900 + 3 tokens exceed 512");
        let (a, b) = (t.request(100, 0, 1000), t.request(101, 1, 1000));
        assert_eq!((a.prompt.len(), b.prompt.len()), (9, 10));
        // Blocks 7 and 8: the first 8 tokens agree; block 5 and block 9 differ.
        assert_eq!(a.prompt[..8], b.prompt[..8]);
        assert_ne!(a.prompt[8], b.prompt[8]);
        assert_eq!((t.due(1, 2.0), t.rate()), (0.5, 2.0));
        assert!(t.shares_prefixes(), "7 and 8 in both");
        let late =
            Trace::new("m".into(), all, TraceOptions { window: (0.5, Some(3.0)), block_size: 4 }, 4096, 1).unwrap();
        assert_eq!(late.entries.iter().map(|e| e.at_s).collect::<Vec<_>>(), [0.5, 2.0]);
        // One request left in the window: nothing shared, even with a repeated id.
        let once = "{\"timestamp\": 0, \"input_length\": 9, \"output_length\": 3, \"hash_ids\": [7, 7, 5]}\n";
        let t = Trace::new("m".into(), read(&file("o.jsonl", once), TraceFormat::Auto).unwrap(), opts_of(4), 512, 1);
        assert!(!t.unwrap().shares_prefixes());
    }

    #[test]
    fn sessions_link_their_turns_in_order_with_their_waits() {
        // Session "a": at 0, then 250 ms after turn 1 ended, then at its own time (2 s); session
        // 7 at 1 s; a request of no session at 0.5 s.
        let text = r#"{"session_id": "a", "timestamp": 0, "input_length": 8, "output_length": 2, "hash_ids": [1, 2]}
{"session_id": 7, "timestamp": 1000, "input_length": 8, "output_length": 2, "hash_ids": [9, 10]}
{"session_id": "a", "delay": 250, "input_length": 12, "output_length": 2, "hash_ids": [1, 2, 3]}
{"timestamp": 500, "input_length": 4, "output_length": 2}
{"session_id": "a", "timestamp": 2000, "input_length": 16, "output_length": 2, "hash_ids": [1, 2, 3, 4]}
"#;
        let all = read(&file("s.jsonl", text), TraceFormat::Auto).unwrap();
        let order: Vec<(f64, Option<u64>)> = all.iter().map(|e| (e.at_s, e.session)).collect();
        assert_eq!(order, [(0.0, Some(0)), (0.25, Some(0)), (0.5, None), (1.0, Some(1)), (2.0, Some(0))]);
        let t = Trace::new("s".into(), all, opts_of(4), 512, 1).unwrap();
        assert_eq!(t.sessions, 2);
        let turns: Vec<Option<(u64, u32)>> = (0..5).map(|i| t.turn(i)).collect();
        assert_eq!(turns, [Some((0, 1)), Some((0, 2)), None, Some((1, 1)), Some((0, 3))]);
        assert_eq!(t.next_turn(0), Some((1, NextDue::After(0.25))));
        assert_eq!(t.next_turn(1), Some((4, NextDue::At(2.0))));
        assert_eq!((t.next_turn(2), t.next_turn(3), t.next_turn(4)), (None, None, None));
        // A replay past the window takes the sessions again, numbered on; a request its session.
        assert_eq!((t.turn(5), t.next_turn(6)), (Some((2, 1)), Some((9, NextDue::At(2.0)))));
        assert_eq!((t.request(100, 1, 1000).session, t.request(102, 2, 1000).session), (Some(0), None));
        // The turns share their session's blocks: turn 2 starts with turn 1's prompt.
        assert_eq!(t.request(100, 0, 1000).prompt[..], t.request(101, 1, 1000).prompt[..8]);
        for (bad, said) in [
            (
                r#"{"session_id": "b", "delay": 5, "input_length": 8, "output_length": 2}"#,
                "session b starts without a timestamp",
            ),
            (r#"{"input_length": 8, "output_length": 2}"#, "no timestamp"),
            (
                r#"{"session_id": [1], "timestamp": 0, "input_length": 8, "output_length": 2}"#,
                "is not a string or number",
            ),
            (
                r#"{"session_id": 1, "timestamp": 0, "delay": -1, "input_length": 8, "output_length": 2}"#,
                "the delay is not",
            ),
        ] {
            let e = read(&file("bad.jsonl", &format!("{bad}\n")), TraceFormat::Mooncake).unwrap_err().to_string();
            assert!(e.contains("line 1") && e.contains(said), "{e}");
        }
    }

    fn opts_of(block_size: usize) -> TraceOptions {
        TraceOptions { window: (0.0, None), block_size }
    }

    #[test]
    fn azure_csv_rows_and_refusals_by_row() {
        let text = "TIMESTAMP,ContextTokens,GeneratedTokens\n\
                    2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:50.9951690,396,109\n";
        let all = read(&file("a.csv", text), TraceFormat::Auto).unwrap();
        assert_eq!(all.len(), 2);
        assert!(!Trace::new("a".into(), all.clone(), opts_of(16), 4096, 1).unwrap().shares_prefixes());
        assert!((all[1].at_s - 4.314579).abs() < 1e-6 && all[1].input == 396 && all[1].output == 109);
        let bad = "TIMESTAMP,ContextTokens,GeneratedTokens\nnot a time,1,1\n";
        assert!(read(&file("b.csv", bad), TraceFormat::Azure).unwrap_err().to_string().contains("row 1"));
        let err = read(&file("c.jsonl", "{\"timestamp\": 1}\n"), TraceFormat::Mooncake).unwrap_err();
        assert!(err.to_string().contains("line 1"), "{err}");
    }

    #[test]
    fn boundary_lengths_are_left_out_not_wrapped() {
        let max = u64::MAX;
        let text = format!(
            "{{\"timestamp\":0,\"input_length\":{max},\"output_length\":1}}\n\
             {{\"timestamp\":1,\"input_length\":1,\"output_length\":{max}}}\n\
             {{\"timestamp\":2,\"input_length\":3,\"output_length\":4}}\n"
        );
        let all = read(&file("max.jsonl", &text), TraceFormat::Auto).unwrap();
        let t = Trace::new("max".into(), all, TraceOptions { window: (0.0, None), block_size: 4 }, 2048, 1).unwrap();
        assert_eq!((t.entries.len(), t.too_long), (1, 2));
        let far = "{\"timestamp\":0,\"input_length\":1,\"output_length\":1}\n\
                   {\"timestamp\":1e300,\"input_length\":1,\"output_length\":1}\n";
        let err = read(&file("far.jsonl", far), TraceFormat::Auto).unwrap_err().to_string();
        assert!(err.contains("at most a year"), "{err}");
        let neg = "{\"timestamp\":-5,\"input_length\":1,\"output_length\":1}\n";
        assert!(read(&file("neg.jsonl", neg), TraceFormat::Auto).is_err());
    }
}
