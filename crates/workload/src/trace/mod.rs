//! Trace replay: requests sent open loop at a production trace's times (optionally faster,
//! within a time window), with its input and output lengths.
//!
//! - **Mooncake** JSONL: `{"timestamp": ms, "input_length": n, "output_length": n,
//!   "hash_ids": [..]}`. Each hash id names one block of `block_size` prompt tokens (512 in
//!   Mooncake's traces): equal ids are equal blocks, so requests that share leading hash ids
//!   share that prefix, and the target's prefix cache meets what the traced one met.
//!   A line may give its prompt as text (`"text_input"`, AIPerf's field) in place of
//!   `input_length` and `hash_ids`: sent in the model's tokens ([`Trace::tokenized`]).
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
//!
//! **Subagents**: a session whose first line names `"parent_session_id"` is a subagent the
//! parent's turn before it (in the file) calls: it starts `delay` ms after that turn ended, and
//! the parent's next turn waits until every subagent it called has ended (its wait counted from
//! then), as an agent awaits the tools it called.

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
    /// A subagent's first turn: the session that calls it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<u64>,
    /// The prompt as text (`text_input`), sent in the model's tokens ([`Trace::tokenized`]) in
    /// place of hash blocks; `input` is its length in bytes until then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

#[derive(Deserialize)]
struct MooncakeLine {
    timestamp: Option<f64>,
    input_length: Option<usize>,
    text_input: Option<String>,
    output_length: usize,
    #[serde(default)]
    hash_ids: Vec<u64>,
    session_id: Option<serde_json::Value>,
    delay: Option<f64>,
    parent_session_id: Option<serde_json::Value>,
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
                    parent: None,
                    text: None,
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
        let (output, hash_ids, text) = (l.output_length, l.hash_ids, l.text_input);
        let input = match (l.input_length, &text) {
            (_, Some(t)) => t.len(),
            (Some(n), None) => n,
            (None, None) => return Err("neither input_length nor text_input".into()),
        };
        let Some(id) = l.session_id else {
            let at_s = at.ok_or("no timestamp (a turn of a session may give a delay instead)")?;
            return Ok(TraceEntry { at_s, input, output, hash_ids, session: None, delay_s, parent: None, text });
        };
        let key = key_of(id)?;
        let known = self.ids.get(&key).copied();
        let parent = match (l.parent_session_id.map(key_of).transpose()?, known) {
            (Some(p), None) => {
                let found = self.ids.get(&p).copied();
                Some((p.clone(), found.ok_or(format!("the parent session {p} has no turn before its subagent {key}"))?))
            }
            _ => None,
        };
        // A session's turns keep their order: none placed before the turn before it; a
        // subagent's first after its parent's turn, and the parent's next after it.
        let last = known.or(parent.as_ref().map(|(_, v)| *v)).map(|(_, last)| last);
        let at_s = match (at, last) {
            (Some(t), None) => t,
            (Some(t), Some(last)) => t.max(last),
            (None, Some(last)) => last + delay_s.unwrap_or(0.0),
            (None, None) => return Err(format!("session {key} starts without a timestamp")),
        };
        let n = known.map_or(self.ids.len() as u64, |(n, _)| n);
        self.ids.insert(key, (n, at_s));
        if let Some((p, (pn, plast))) = &parent {
            self.ids.insert(p.clone(), (*pn, plast.max(at_s)));
        }
        let parent = parent.map(|(_, (pn, _))| pn);
        Ok(TraceEntry { at_s, input, output, hash_ids, session: Some(n), delay_s, parent, text })
    }
}

/// A session id as text (a string or a number).
fn key_of(id: serde_json::Value) -> Result<String, String> {
    match id {
        serde_json::Value::String(s) => Ok(s),
        serde_json::Value::Number(n) => Ok(n.to_string()),
        other => Err(format!("the session_id {other} is not a string or number")),
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
    /// The model's context: a request's prompt and output within it.
    max_len: usize,
    /// Per request given as text, its prompt in the model's tokens ([`Trace::tokenized`]).
    prompts: Vec<Option<Vec<TokenId>>>,
    /// Prompts given as text cut to fit the model's context.
    pub cut: usize,
}

/// A request's place in its session: the session, its turn number (1 first, within the
/// window), the turn after it with when that one is due, the subagents it calls (their first
/// turns, each with its delay) and whether it is a subagent's first turn (sent by its caller).
#[derive(Clone, Debug, PartialEq)]
struct Turn {
    session: u64,
    number: u32,
    next: Option<(usize, NextDue)>,
    calls: Vec<(usize, f64)>,
    called: bool,
}

/// The turns of `entries`: each session's in order, each linked to the next, and a subagent's
/// first to its parent's turn before it; sessions numbered 0, 1, … as they start in the window
/// (so a replay past it numbers on without a gap).
fn turns(entries: &[TraceEntry]) -> (Vec<Option<Turn>>, u64) {
    let mut turns: Vec<Option<Turn>> = vec![None; entries.len()];
    let mut last: std::collections::HashMap<u64, usize> = std::collections::HashMap::new();
    let mut dense: std::collections::HashMap<u64, u64> = std::collections::HashMap::new();
    for (j, e) in entries.iter().enumerate() {
        let Some(id) = e.session else { continue };
        let n = dense.len() as u64;
        let session = *dense.entry(id).or_insert(n);
        let caller = e.parent.and_then(|p| last.get(dense.get(&p)?).copied());
        let number = match last.insert(session, j) {
            Some(i) => {
                let due = e.delay_s.map_or(NextDue::At(e.at_s), NextDue::After);
                let prev = turns[i].as_mut().expect("a session's turn");
                prev.next = Some((j, due));
                prev.number + 1
            }
            None => 1,
        };
        let called = number == 1 && caller.is_some();
        if let Some(i) = caller.filter(|_| called) {
            turns[i].as_mut().expect("a session's turn").calls.push((j, e.delay_s.unwrap_or(0.0)));
        }
        turns[j] = Some(Turn { session, number, next: None, calls: Vec::new(), called });
    }
    (turns, dense.len() as u64)
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
            // A text's length is known in tokens once tokenized, and cut to fit then.
            .filter(|e| {
                let fits = e.text.is_some() || e.input.checked_add(e.output).is_some_and(|n| n <= max_model_len);
                e.input >= 1 && e.output >= 1 && e.output < max_model_len && fits
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
        let too_long = n - entries.len();
        let (max_len, prompts, cut) = (max_model_len, Vec::new(), 0);
        Ok(Trace { name, too_long, span_s, options, entries, seed, turns, sessions, max_len, prompts, cut })
    }

    /// Whether a request gives its prompt as text.
    pub fn has_text(&self) -> bool {
        self.entries.iter().any(|e| e.text.is_some())
    }

    /// The trace with every prompt given as text in the model's tokens (`encode`), each cut
    /// to leave its output room in the model's context (counted in [`Trace::cut`]).
    pub fn tokenized<E: std::fmt::Display>(
        &self,
        encode: impl Fn(&str) -> Result<Vec<TokenId>, E>,
    ) -> Result<Trace, WorkloadError> {
        let mut t = self.clone();
        t.prompts = vec![None; t.entries.len()];
        for (e, p) in t.entries.iter_mut().zip(t.prompts.iter_mut()) {
            let Some(text) = &e.text else { continue };
            let mut ids =
                encode(text).map_err(|err| crate::Invalid::new(format!("trace {}", self.name), err.to_string()))?;
            if ids.len() + e.output > t.max_len {
                ids.truncate(t.max_len - e.output);
                t.cut += 1;
            }
            if ids.is_empty() {
                return Err(
                    crate::Invalid::new(format!("trace {}", self.name), "a text_input encodes to no token").into()
                );
            }
            e.input = ids.len();
            *p = Some(ids);
        }
        Ok(t)
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
    /// A prompt given as text is its tokens.
    pub fn request(&self, id: u64, i: usize, vocab: usize) -> WorkRequest {
        let e = &self.entries[i % self.entries.len()];
        let session = self.turn(i as u64).map(|(s, _)| s);
        if let Some(prompt) = self.prompts.get(i % self.entries.len()).and_then(Option::clone) {
            return WorkRequest { session, id, prompt, params: SamplingParams::greedy_exact(e.output) };
        }
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
        WorkRequest { session, id, prompt, params: SamplingParams::greedy_exact(e.output) }
    }

    /// Request `index`'s session and turn: a replay past the window's end (more requests than
    /// it holds) takes it again, with sessions numbered on.
    pub fn turn(&self, index: u64) -> Option<(u64, u32)> {
        let len = self.entries.len() as u64;
        let t = self.turns[(index % len) as usize].as_ref()?;
        Some((t.session + index / len * self.sessions, t.number))
    }

    /// The turn after request `index` in its session, and when it is due.
    pub fn next_turn(&self, index: u64) -> Option<(u64, NextDue)> {
        let len = self.entries.len() as u64;
        let (j, due) = self.turns[(index % len) as usize].as_ref()?.next?;
        Some((index - index % len + j as u64, due))
    }

    /// Whether request `index` is sent by another's chain (a later turn, a subagent's first).
    pub fn follows(&self, index: u64) -> bool {
        let len = self.entries.len() as u64;
        self.turns[(index % len) as usize].as_ref().is_some_and(|t| t.number > 1 || t.called)
    }

    /// The subagents request `index` calls: their first turns, each with its delay (s).
    pub fn calls(&self, index: u64) -> Vec<(u64, f64)> {
        let len = self.entries.len() as u64;
        let base = index - index % len;
        let t = self.turns[(index % len) as usize].as_ref();
        t.map_or(Vec::new(), |t| t.calls.iter().map(|&(j, d)| (base + j as u64, d)).collect())
    }

    pub fn describe(&self) -> String {
        let mean =
            |f: fn(&TraceEntry) -> usize| self.entries.iter().map(f).sum::<usize>() as f64 / self.entries.len() as f64;
        format!(
            "{}: {} requests over {:.0} s ({:.2} req/s at speed 1; {} beyond the context left out, {} texts cut to \
             it), mean input {:.0}, output {:.0} tokens",
            self.name,
            self.entries.len(),
            self.span_s,
            self.rate(),
            self.too_long,
            self.cut,
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
    fn follows(&self, index: u64) -> bool {
        Trace::follows(self, index)
    }
    fn calls(&self, index: u64) -> Vec<(u64, f64)> {
        Trace::calls(self, index)
    }
}

#[cfg(test)]
mod tests;
