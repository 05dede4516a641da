//! Session metrics (multi-turn conversations, agent tasks, a trace's sessions): how much each
//! session re-sends, how much of it the prefix cache serves, and whether each turn reached the
//! cache its session left — the test of session affinity behind a router, where a turn sent
//! to another replica than the turn before it finds none of its session's blocks there.

use crate::request::ttft;
use crate::stats::Summary;
use goodput_core::ClientRecord;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How many of the turn before's prompt tokens a turn may miss in the cache and still have
/// "continued" its session on the same replica: a partial last block (16 tokens in vLLM's and
/// goodput's blocks, 1 in SGLang's radix tree, 64 at most in common engines). An absolute
/// slack, not a share: a prompt that is mostly a system prompt every replica holds is cached
/// nearly whole anywhere, all but the session's own turns.
pub const CONTINUED_SLACK: usize = 64;

/// A level's sessions, over its measured requests that name a session and a turn.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionSummary {
    /// Sessions with at least one measured turn.
    pub sessions: usize,
    /// Their turns (measured requests).
    pub turns: usize,
    /// `amplification` = prompt tokens sent over a session's turns / its last turn's prompt
    /// tokens, summed over sessions: how many times the final context was sent.
    pub amplification: f64,
    /// Cached prompt tokens / prompt tokens over turns after the first (the engine's count,
    /// else the server's `usage.prompt_tokens_details.cached_tokens`).
    pub later_cached_share: f64,
    /// Turns after the first whose turn before is among the records and succeeded.
    pub later_turns: usize,
    /// Of those, the turns that found the turn before's prompt cached, all but
    /// [`CONTINUED_SLACK`] tokens at most: sent where their session's context was.
    pub continued: usize,
    /// Sessions of two turns or more all of whose later turns continued.
    pub sessions_kept: usize,
    /// Sessions of two turns or more.
    pub multi_turn_sessions: usize,
    /// TTFT (seconds) of the sessions' first turns, and of their later turns (which re-send
    /// the session's context: the prefix cache's, and a router's affinity's, to serve).
    pub first_ttft: Option<Summary>,
    pub later_ttft: Option<Summary>,
    /// A session's span, in seconds: its first turn's intended time to its last turn's end,
    /// over the sessions whose turns all succeeded (tool waits and subagents included).
    pub session_e2e: Option<Summary>,
}

/// Prompt tokens of `r` served by the prefix cache: the engine's count, else the server's
/// usage (none: 0).
pub fn cached_tokens(r: &ClientRecord) -> usize {
    match &r.engine {
        Some(e) => e.cached_tokens,
        None => r.http.as_ref().and_then(|h| h.usage_cached_tokens).unwrap_or(0),
    }
}

/// The sessions of `records` (those without a session or a turn are left out); none when no
/// record names a session.
pub fn summarize(records: &[&ClientRecord]) -> Option<SessionSummary> {
    let mut by: BTreeMap<u64, Vec<&ClientRecord>> = BTreeMap::new();
    for r in records.iter().filter(|r| r.turn.is_some()) {
        if let Some(s) = r.session {
            by.entry(s).or_default().push(r);
        }
    }
    if by.is_empty() {
        return None;
    }
    let mut s = SessionSummary {
        sessions: by.len(),
        turns: 0,
        amplification: 0.0,
        later_cached_share: 0.0,
        later_turns: 0,
        continued: 0,
        sessions_kept: 0,
        multi_turn_sessions: 0,
        first_ttft: None,
        later_ttft: None,
        session_e2e: None,
    };
    let (mut first, mut later, mut spans) = (Vec::new(), Vec::new(), Vec::new());
    let (mut sent, mut last, mut later_prompt, mut later_cached) = (0usize, 0usize, 0usize, 0usize);
    for turns in by.values_mut() {
        turns.sort_by_key(|r| r.turn);
        s.turns += turns.len();
        first.extend(turns.iter().filter(|r| r.turn == Some(1)).filter_map(|r| ttft(r)));
        later.extend(turns.iter().filter(|r| r.turn.is_some_and(|t| t > 1)).filter_map(|r| ttft(r)));
        if turns.iter().all(|r| r.is_ok()) {
            let (start, end) = (turns.iter().map(|r| r.intended).min(), turns.iter().map(|r| r.end).max());
            spans.extend(start.zip(end).map(|(a, b)| b.secs_since(a)));
        }
        sent += turns.iter().map(|r| r.input_tokens).sum::<usize>();
        last += turns.last().map_or(0, |r| r.input_tokens);
        let mut kept = true;
        for pair in turns.windows(2) {
            let (before, r) = (pair[0], pair[1]);
            later_prompt += r.input_tokens;
            later_cached += cached_tokens(r);
            if r.turn != before.turn.map(|t| t + 1) || !before.is_ok() {
                continue;
            }
            s.later_turns += 1;
            let continued = cached_tokens(r) + CONTINUED_SLACK >= before.input_tokens;
            s.continued += usize::from(continued);
            kept &= continued;
        }
        if turns.len() > 1 {
            s.multi_turn_sessions += 1;
            s.sessions_kept += usize::from(kept);
        }
    }
    s.amplification = if last > 0 { sent as f64 / last as f64 } else { 0.0 };
    s.later_cached_share = if later_prompt > 0 { later_cached as f64 / later_prompt as f64 } else { 0.0 };
    (s.first_ttft, s.later_ttft, s.session_e2e) = (Summary::of(&first), Summary::of(&later), Summary::of(&spans));
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use goodput_core::{HttpStamps, RecordBuilder, Stamp};

    /// Turn `turn` of `session`: `prompt` tokens, `cached` of them from the server's usage.
    fn turn(session: u64, turn: u32, prompt: usize, cached: usize) -> ClientRecord {
        let http = HttpStamps { usage_cached_tokens: Some(cached), ..Default::default() };
        RecordBuilder::new(u64::from(turn)).input(prompt).http(http).turn(session, turn).build()
    }

    #[test]
    fn a_session_kept_on_its_replica_continues_each_turn() {
        // Session 1: 100, 200 (40 of 100 cached: continued, 64 at most missed), 300 (120 of 200:
        // not). Session 2: 100, 250 (100 of 100 cached: continued) — kept.
        // Session 3: one turn.
        let rs = [
            turn(1, 1, 100, 0),
            turn(1, 2, 200, 40),
            turn(1, 3, 300, 120),
            turn(2, 2, 250, 100),
            turn(2, 1, 100, 0),
            turn(3, 1, 400, 0),
        ];
        let refs: Vec<&ClientRecord> = rs.iter().collect();
        let s = summarize(&refs).unwrap();
        assert_eq!((s.sessions, s.turns, s.multi_turn_sessions), (3, 6, 2));
        assert_eq!((s.later_turns, s.continued, s.sessions_kept), (3, 2, 1));
        // (600 + 350 + 400) / (300 + 250 + 400) = 1350 / 950
        assert!((s.amplification - 1350.0 / 950.0).abs() < 1e-12);
        // (40 + 120 + 100) / (200 + 300 + 250)
        assert!((s.later_cached_share - 260.0 / 750.0).abs() < 1e-12);
        // No turn has a first token here: no TTFT; no span without times either.
        assert_eq!((s.first_ttft.is_none(), s.later_ttft.is_none()), (true, true));
        let none = turn(1, 1, 10, 0);
        let mut plain = none.clone();
        plain.session = None;
        assert_eq!(summarize(&[&plain]), None);
    }

    #[test]
    fn first_and_later_turns_ttft_and_a_sessions_span() {
        // Turn 1: intended at 0, first token at 100 ms, end at 200 ms; turn 2 (a tool wait
        // later): intended at 300 ms, first token at 350 ms, end at 500 ms.
        let ms = |m: u64| Stamp(m * 1_000_000);
        let t = |turn: u32, at: u64, first: u64, end: u64| {
            RecordBuilder::new(u64::from(turn))
                .intended(ms(at))
                .sent(ms(at))
                .tokens_at([ms(first)])
                .end(ms(end))
                .input(100)
                .turn(7, turn)
                .build()
        };
        let rs = [t(1, 0, 100, 200), t(2, 300, 350, 500)];
        let refs: Vec<&ClientRecord> = rs.iter().collect();
        let s = summarize(&refs).unwrap();
        let p50 = |x: &Option<Summary>| x.as_ref().map(|s| (s.p50 * 1e3).round());
        assert_eq!(
            (p50(&s.first_ttft), p50(&s.later_ttft), p50(&s.session_e2e)),
            (Some(100.0), Some(50.0), Some(500.0))
        );
    }
}
