//! Multi-turn metrics by turn index: context grows each turn; the prefix cache serves what
//! the engine has already seen.

use crate::engine as em;
use crate::request as rm;
use crate::stats::Summary;
use goodput_core::ClientRecord;
use serde::{Deserialize, Serialize};

/// The requests of one turn index across sessions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TurnSummary {
    pub turn: u32,
    pub n: usize,
    /// Mean prompt (history + new message) tokens.
    pub prompt_tokens: f64,
    /// Mean prompt tokens served from the prefix cache (the engine's count, else the server's
    /// usage: [`crate::sessions::cached_tokens`]).
    pub cached_tokens: f64,
    /// Mean prompt tokens the engine had to compute (prompt − cached).
    pub new_prefill_tokens: f64,
    pub ttft: Option<Summary>,
    pub prefill_time: Option<Summary>,
}

/// Groups records by their turn (records without one are ignored), ascending.
pub fn by_turn(records: &[&ClientRecord]) -> Vec<TurnSummary> {
    let max_turn = records.iter().filter_map(|r| r.turn).max().unwrap_or(0);
    (1..=max_turn)
        .filter_map(|t| {
            let rs: Vec<&&ClientRecord> = records.iter().filter(|r| r.turn == Some(t)).collect();
            if rs.is_empty() {
                return None;
            }
            let n = rs.len() as f64;
            let cached: f64 = rs.iter().map(|r| crate::sessions::cached_tokens(r) as f64).sum::<f64>() / n;
            let prompt: f64 = rs.iter().map(|r| r.input_tokens as f64).sum::<f64>() / n;
            Some(TurnSummary {
                turn: t,
                n: rs.len(),
                prompt_tokens: prompt,
                cached_tokens: cached,
                new_prefill_tokens: prompt - cached,
                ttft: Summary::of(&rs.iter().filter_map(|r| rm::ttft(r)).collect::<Vec<_>>()),
                prefill_time: Summary::of(
                    &rs.iter().filter_map(|r| r.engine.as_ref().and_then(em::prefill_time)).collect::<Vec<_>>(),
                ),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use goodput_core::{EngineRecord, FinishReason, RecordBuilder, Stamp};

    fn rec(turn: u32, prompt: usize, cached: usize, ttft_ms: u64) -> ClientRecord {
        let at = Stamp(ttft_ms * 1_000_000);
        let engine = EngineRecord {
            id: 0,
            arrival: Stamp(0),
            queued: Stamp(0),
            first_scheduled: Some(Stamp(0)),
            first_token: Some(at),
            token_times: vec![],
            finished: Stamp(0),
            prompt_tokens: prompt,
            cached_tokens: cached,
            generated_tokens: 1,
            preemptions: 0,
            finish_reason: FinishReason::Length,
        };
        RecordBuilder::new(0).tokens_at([at]).end(at).input(prompt).engine(engine).turn(1, turn).build()
    }

    #[test]
    fn hand_computed_turns() {
        let a = [rec(1, 100, 64, 20), rec(1, 120, 64, 30), rec(2, 300, 160, 40), rec(2, 340, 176, 60)];
        let refs: Vec<&ClientRecord> = a.iter().collect();
        let t = by_turn(&refs);
        assert_eq!(t.len(), 2);
        assert_eq!(
            (t[0].turn, t[0].n, t[0].prompt_tokens, t[0].cached_tokens, t[0].new_prefill_tokens),
            (1, 2, 110.0, 64.0, 46.0)
        );
        assert_eq!((t[1].prompt_tokens, t[1].cached_tokens, t[1].new_prefill_tokens), (320.0, 168.0, 152.0));
        assert!((t[1].ttft.as_ref().unwrap().p50 - 0.050).abs() < 1e-12);
    }
}
