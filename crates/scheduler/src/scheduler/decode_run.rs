//! Decode runs: `k` steps in which every running sequence decodes one token and nothing else
//! happens, applied at once. A simulated fleet spends most of its steps like this (a day of
//! 32 replicas is hundreds of millions of them); the engine never uses it.
//!
//! A run goes exactly as `k` single [`Scheduler::schedule`] + [`Scheduler::update`] steps
//! would — the same tokens at the same stamps, the same prefix-cache contents — when, before
//! it, no request waits (nothing to admit), every running sequence is a decode (no prefill
//! chunk), the token budget holds them all, the pool has every block the `k` steps need (no
//! preemption), no sequence finishes within the run (the caller's token stops none, and none
//! reaches its `max_tokens` or the model's length), and no KV group slides (no block leaves a
//! window). [`Scheduler::decode_run_len`] says how long a run can be; only the blocks' ids
//! differ from single steps (each sequence takes its blocks at once), never which cached
//! contents are evicted or kept.

use super::Scheduler;
use goodput_core::{Stamp, TokenId};

impl Scheduler {
    /// How many steps, at most `max`, can run as one decode run whose sampled token is
    /// `token` (see the module docs); 0 when the next step is not a pure decode.
    pub fn decode_run_len(&self, token: TokenId, max: usize) -> usize {
        let cfg = &self.cfg;
        let decoding = |s: &super::Sequence| s.tokens.len() == s.num_computed + 1 && s.generated() > 0;
        let stops = |s: &super::Sequence| {
            (!s.params.ignore_eos && Some(token) == cfg.eos_token_id) || s.params.stop_token_ids.contains(&token)
        };
        if !self.waiting.is_empty()
            || self.running.is_empty()
            || self.running.len() > cfg.max_num_batched_tokens
            || cfg.group_windows.iter().any(Option::is_some)
        {
            return 0;
        }
        // A step pushes one token and ends the sequence once it reaches either limit: the run
        // stops a step short of the first to do so. (One pass: a day-long fleet asks often.)
        let mut left = usize::MAX;
        for s in &self.running {
            if !decoding(s) || stops(s) {
                return 0;
            }
            let by_tokens = s.params.max_tokens.saturating_sub(s.generated());
            left = left.min(by_tokens.min(cfg.max_model_len.saturating_sub(s.tokens.len())));
        }
        let longest = left.saturating_sub(1).min(max);
        // The blocks `k` steps take, monotone in k: the longest run the free blocks cover.
        let free = self.pool.borrow().num_free_blocks();
        let blocks = |k: usize| -> usize {
            self.running.iter().map(|s| s.blocks.needed(s.num_computed + k, cfg.block_size)).sum()
        };
        if blocks(longest) <= free {
            return longest;
        }
        let (mut lo, mut hi) = (0, longest);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if blocks(mid) <= free {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        lo
    }

    /// Σ over the running sequences of the positions the next decode step attends (each
    /// one's context after it), as [`super::SchedulerOutput::decode_context`] counts it.
    pub fn decode_context_next(&self) -> u64 {
        self.running.iter().map(|s| s.num_computed as u64 + 1).sum()
    }

    /// The distinct positions among [`Scheduler::decode_context_next`]'s, as
    /// [`super::SchedulerOutput::decode_distinct_context`] counts them; each step of a run
    /// adds one position a sequence, its own.
    pub fn decode_distinct_next(&self) -> u64 {
        let tables: Vec<(&[u32], usize)> =
            self.running.iter().map(|s| (s.blocks.tables()[0].ids(), s.num_computed + 1)).collect();
        super::distinct::distinct_positions(tables.into_iter(), self.cfg.block_size, &self.pool.borrow())
    }

    /// Applies a decode run of `times.len()` steps, step `j`'s tokens stamped `times[j]`.
    /// The caller asked [`Scheduler::decode_run_len`] first; a longer run is refused whole
    /// (false, nothing changed).
    pub fn decode_run(&mut self, token: TokenId, times: &[Stamp]) -> bool {
        let k = times.len();
        if k == 0 || self.decode_run_len(token, k) < k {
            return false;
        }
        let bs = self.cfg.block_size;
        let caching = self.cfg.enable_prefix_caching;
        for seq in &mut self.running {
            let grown = seq.blocks.grow_to(seq.num_computed + k, bs, &self.pool);
            debug_assert!(grown, "the run's blocks were counted");
            seq.num_computed += k;
            seq.tokens.extend(std::iter::repeat_n(token, k));
            seq.record.token_times.extend_from_slice(times);
            if caching {
                Self::cache_full_blocks(seq, &self.pool, bs);
            }
        }
        true
    }
}

#[cfg(test)]
#[path = "decode_run/tests.rs"]
mod tests;
