//! Engine-level metrics of one request, from the engine's own stamps (one monotonic clock).

use goodput_core::{EngineRecord, StepRecord};

/// `queue_time` = first_scheduled − queued, in seconds: how long the request waited in the
/// scheduler before any of its tokens was computed. `None` if it was never scheduled.
pub fn queue_time(r: &EngineRecord) -> Option<f64> {
    Some(r.first_scheduled?.secs_since(r.queued))
}

/// `prefill_time` = first_token − first_scheduled, in seconds: computing the prompt (all its
/// chunks, and any recompute after a preemption before the first token) until the first
/// token was sampled.
pub fn prefill_time(r: &EngineRecord) -> Option<f64> {
    Some(r.first_token?.secs_since(r.first_scheduled?))
}

/// `decode_time` = last_token − first_token, in seconds (0 for a single token).
pub fn decode_time(r: &EngineRecord) -> Option<f64> {
    Some(r.last_token()?.secs_since(r.first_token?))
}

/// `inference_time` = last_token − first_scheduled, in seconds: prefill + decode.
pub fn inference_time(r: &EngineRecord) -> Option<f64> {
    Some(r.last_token()?.secs_since(r.first_scheduled?))
}

/// `prefix_hit_rate` = cached prompt tokens / prompt tokens (0 for an empty prompt).
pub fn prefix_hit_rate(r: &EngineRecord) -> f64 {
    if r.prompt_tokens == 0 {
        0.0
    } else {
        r.cached_tokens as f64 / r.prompt_tokens as f64
    }
}

/// `kv_block_usage` = 1 − free_blocks / usable_blocks (vLLM's `kv_cache_usage_perc`),
/// after the step. Blocks held only by the prefix cache count as free.
pub fn kv_block_usage(s: &StepRecord) -> f64 {
    if s.usable_blocks == 0 {
        0.0
    } else {
        s.blocks_used as f64 / s.usable_blocks as f64
    }
}

/// `kv_token_usage` = tokens held / (usable_blocks × block_size), after the step: how full
/// the held blocks really are (the last block of each sequence is partly empty).
pub fn kv_token_usage(s: &StepRecord) -> f64 {
    let cap = s.usable_blocks * s.block_size;
    if cap == 0 {
        0.0
    } else {
        s.tokens_held as f64 / cap as f64
    }
}

/// Seconds the step took, from its start to its end stamp.
pub fn step_time(s: &StepRecord) -> f64 {
    s.end.secs_since(s.start)
}

#[cfg(test)]
mod tests {
    use super::*;
    use goodput_core::{FinishReason, Stamp};

    fn ms(x: u64) -> Stamp {
        Stamp(x * 1_000_000)
    }

    #[test]
    fn hand_computed_request_times() {
        let r = EngineRecord {
            id: 1,
            arrival: ms(0),
            queued: ms(1),
            first_scheduled: Some(ms(11)),
            first_token: Some(ms(41)),
            token_times: vec![ms(41), ms(61), ms(81)],
            finished: ms(81),
            prompt_tokens: 100,
            cached_tokens: 64,
            generated_tokens: 3,
            preemptions: 0,
            finish_reason: FinishReason::Length,
        };
        assert!((queue_time(&r).unwrap() - 0.010).abs() < 1e-12);
        assert!((prefill_time(&r).unwrap() - 0.030).abs() < 1e-12);
        assert!((decode_time(&r).unwrap() - 0.040).abs() < 1e-12);
        assert!((inference_time(&r).unwrap() - 0.070).abs() < 1e-12);
        assert_eq!(prefix_hit_rate(&r), 0.64);
        let never = EngineRecord { first_scheduled: None, first_token: None, token_times: vec![], ..r };
        assert_eq!(queue_time(&never), None);
        assert_eq!(decode_time(&never), None);
    }

    #[test]
    fn hand_computed_kv_usage() {
        let s = StepRecord {
            blocks_used: 30,
            usable_blocks: 120,
            block_size: 16,
            tokens_held: 420,
            start: ms(2),
            end: ms(7),
            ..Default::default()
        };
        assert_eq!(kv_block_usage(&s), 0.25);
        assert_eq!(kv_token_usage(&s), 420.0 / 1920.0);
        assert!((step_time(&s) - 0.005).abs() < 1e-12);
    }
}
