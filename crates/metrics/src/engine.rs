//! Engine-level metrics of one request, from the engine's own stamps (one monotonic clock).

use goodput_core::{EngineRecord, StepRecord};

/// `queue_time` = first_scheduled − queued, in seconds: how long the request waited in the
/// scheduler before any of its tokens was computed. `None` if it was never scheduled.
pub fn queue_time(r: &EngineRecord) -> Option<f64> {
    Some(r.first_scheduled?.secs_since(r.queued))
}

/// `engine_wait` = first_scheduled − arrival, in seconds: from the engine handle accepting
/// the request to its first scheduling — the handoff into the engine thread plus
/// `queue_time`. Where it grows and `queue_time` does not, requests wait in the handoff (the
/// engine thread is busy stepping), which is queueing all the same for the user.
pub fn engine_wait(r: &EngineRecord) -> Option<f64> {
    Some(r.first_scheduled?.secs_since(r.arrival))
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

/// `kv_sliding_block_usage` = blocks held by sliding-window layer groups / usable_blocks,
/// after the step: the part of `kv_block_usage` that sliding layers hold (only their window's
/// blocks); the rest is full (or latent) layers'. `None` for a model without sliding layers.
pub fn kv_sliding_block_usage(s: &StepRecord) -> Option<f64> {
    let k = s.kv_by_kind?;
    Some(if s.usable_blocks == 0 { 0.0 } else { k.sliding as f64 / s.usable_blocks as f64 })
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

/// `graph_step_share` = steps replayed from a captured CUDA graph ÷ steps of an engine that
/// serves steps from graphs (those whose record says either way): how much of the load ran
/// without per-kernel launches. `None` when no step says (the CPU, graphs off).
pub fn graph_step_share(steps: &[StepRecord]) -> Option<f64> {
    let known: Vec<bool> = steps.iter().filter_map(|s| s.graph).collect();
    (!known.is_empty()).then(|| known.iter().filter(|&&g| g).count() as f64 / known.len() as f64)
}

/// Seconds the step took, from its start to its end stamp.
pub fn step_time(s: &StepRecord) -> f64 {
    s.end.secs_since(s.start)
}

/// The engine's state over one interval of a level: gauges (running and waiting requests, KV
/// block and token usage) as means over the steps that ended in the interval, weighted by
/// their duration, and their maxima; counters (preemptions, prefill and decode tokens) as
/// sums. An interval without steps is an idle engine: everything zero.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SeriesPoint {
    /// Start of the interval, in seconds after the series' origin.
    pub t_s: f64,
    pub steps: usize,
    pub running_mean: f64,
    pub running_max: usize,
    pub waiting_mean: f64,
    pub waiting_max: usize,
    pub kv_block_usage_mean: f64,
    pub kv_block_usage_max: f64,
    pub kv_token_usage_mean: f64,
    pub preemptions: usize,
    pub prefill_tokens: usize,
    pub decode_tokens: usize,
}

/// The engine's time series: `steps` binned by their end stamp into intervals of `bin_s`
/// seconds from `origin` (steps before `origin` go to the first interval).
pub fn series(steps: &[StepRecord], origin: goodput_core::Stamp, bin_s: f64) -> Vec<SeriesPoint> {
    let bin_s = if bin_s > 0.0 { bin_s } else { 1.0 };
    let Some(last) = steps.iter().map(|s| s.end).max() else { return Vec::new() };
    let n = (last.secs_since(origin).max(0.0) / bin_s).floor() as usize + 1;
    let mut out: Vec<SeriesPoint> =
        (0..n).map(|i| SeriesPoint { t_s: i as f64 * bin_s, ..Default::default() }).collect();
    let mut weight = vec![0.0f64; n];
    for s in steps {
        let i = ((s.end.secs_since(origin).max(0.0) / bin_s).floor() as usize).min(n - 1);
        // A zero-length step still counts (weight of a nanosecond).
        let w = step_time(s).max(1e-9);
        let p = &mut out[i];
        p.steps += 1;
        p.running_mean += w * s.running as f64;
        p.waiting_mean += w * s.waiting as f64;
        p.kv_block_usage_mean += w * kv_block_usage(s);
        p.kv_token_usage_mean += w * kv_token_usage(s);
        p.running_max = p.running_max.max(s.running);
        p.waiting_max = p.waiting_max.max(s.waiting);
        p.kv_block_usage_max = p.kv_block_usage_max.max(kv_block_usage(s));
        p.preemptions += s.preemptions;
        p.prefill_tokens += s.prefill_tokens;
        p.decode_tokens += s.decode_seqs;
        weight[i] += w;
    }
    for (p, w) in out.iter_mut().zip(weight) {
        if w > 0.0 {
            p.running_mean /= w;
            p.waiting_mean /= w;
            p.kv_block_usage_mean /= w;
            p.kv_token_usage_mean /= w;
        }
    }
    out
}

#[cfg(test)]
mod series_tests {
    use super::*;
    use goodput_core::Stamp;

    fn ms(x: u64) -> Stamp {
        Stamp(x * 1_000_000)
    }

    #[test]
    fn hand_computed_series() {
        let step = |a: u64, b: u64, running, waiting, blocks, pre| StepRecord {
            start: ms(a),
            end: ms(b),
            running,
            waiting,
            blocks_used: blocks,
            usable_blocks: 100,
            block_size: 16,
            tokens_held: blocks * 8,
            preemptions: pre,
            prefill_tokens: 10,
            decode_seqs: running,
            ..Default::default()
        };
        // 100 ms bins from 0: steps ending at 30 and 90 ms (10 and 30 ms long) in bin 0,
        // nothing in bin 1, one ending at 250 ms in bin 2.
        let steps = [step(20, 30, 2, 4, 10, 0), step(60, 90, 6, 0, 50, 1), step(240, 250, 1, 0, 20, 0)];
        let s = series(&steps, ms(0), 0.1);
        assert_eq!(s.len(), 3);
        assert_eq!(s[0].steps, 2);
        // Running: (10·2 + 30·6) / 40 = 5; waiting (10·4) / 40 = 1; blocks (10·.1 + 30·.5)/40 = .4.
        assert!((s[0].running_mean - 5.0).abs() < 1e-9);
        assert!((s[0].waiting_mean - 1.0).abs() < 1e-9);
        assert!((s[0].kv_block_usage_mean - 0.4).abs() < 1e-9);
        assert!((s[0].kv_token_usage_mean - 0.2).abs() < 1e-9);
        assert_eq!((s[0].running_max, s[0].waiting_max, s[0].preemptions), (6, 4, 1));
        assert_eq!((s[0].prefill_tokens, s[0].decode_tokens), (20, 8));
        assert_eq!(s[1], SeriesPoint { t_s: 0.1, ..Default::default() });
        assert!((s[2].t_s - 0.2).abs() < 1e-12);
        assert_eq!(s[2].running_max, 1);
        assert!(series(&[], ms(0), 0.1).is_empty());
    }
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
        // Arrival 0, queued 1 ms, scheduled 11 ms: 1 ms of handoff + 10 ms of queue.
        assert!((engine_wait(&r).unwrap() - 0.011).abs() < 1e-12);
        assert!((prefill_time(&r).unwrap() - 0.030).abs() < 1e-12);
        assert!((decode_time(&r).unwrap() - 0.040).abs() < 1e-12);
        assert!((inference_time(&r).unwrap() - 0.070).abs() < 1e-12);
        assert_eq!(prefix_hit_rate(&r), 0.64);
        let never = EngineRecord { first_scheduled: None, first_token: None, token_times: vec![], ..r };
        assert_eq!(queue_time(&never), None);
        assert_eq!(engine_wait(&never), None);
        assert_eq!(decode_time(&never), None);
    }

    #[test]
    fn hand_computed_graph_step_share() {
        let step = |graph| StepRecord { graph, ..Default::default() };
        // Three of four steps from graphs; a step that does not say is left out.
        let steps = [step(Some(true)), step(Some(false)), step(Some(true)), step(None), step(Some(true))];
        assert_eq!(graph_step_share(&steps), Some(0.75));
        assert_eq!(graph_step_share(&[step(None)]), None);
        assert_eq!(graph_step_share(&[]), None);
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
        assert_eq!(kv_sliding_block_usage(&s), None);
        // 30 blocks: 24 full layers' and 6 sliding layers' → 6 / 120.
        let hybrid =
            StepRecord { kv_by_kind: Some(goodput_core::KvBlocksByKind { full: 24, sliding: 6 }), ..s.clone() };
        assert_eq!(kv_sliding_block_usage(&hybrid), Some(0.05));
        assert!((step_time(&s) - 0.005).abs() < 1e-12);
    }
}
