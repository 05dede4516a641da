//! Continuous batching in the manner of vLLM v1.
//!
//! Each step: running sequences first (decodes and unfinished prefill chunks, oldest first),
//! then waiting ones (FCFS), within a token budget (`max_num_batched_tokens`), a sequence
//! cap (`max_num_seqs`) and, if set, a cap on the prefill tokens past which no further prompt
//! starts (`max_prefill_tokens`). A prompt larger than the remaining budget is prefilled in chunks,
//! mixed with decodes in the same forward. When the pool has no block for a running sequence,
//! the newest running sequence is preempted by recompute: its blocks are freed and it goes
//! back to the front of the waiting queue with everything it has generated so far.
//!
//! The scheduler only decides; the caller runs the model over [`SchedulerOutput`] and hands
//! back one sampled token per sequence that samples ([`Scheduler::update`]).

use crate::block_pool::{hash_full_blocks, BlockHash, BlockPool, PoolError};
use crate::block_table::SharedPool;
pub use crate::config::{AdmissionError, SchedulerConfig};
use crate::seq_blocks::{self, SeqBlocks};
use goodput_core::{EngineRecord, FinishReason, KvBlocksByKind, RequestId, SamplingParams, Stamp, TokenId};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

/// A request handed to the scheduler.
#[derive(Clone, Debug)]
pub struct NewRequest {
    pub id: RequestId,
    pub prompt: Vec<TokenId>,
    pub params: SamplingParams,
    /// When the engine accepted it.
    pub arrival: Stamp,
}

#[derive(Debug)]
struct Sequence {
    id: RequestId,
    prompt_len: usize,
    /// Prompt followed by every generated token.
    tokens: Vec<TokenId>,
    /// Tokens whose K/V are in the pool.
    num_computed: usize,
    /// A block table per KV-cache group.
    blocks: SeqBlocks,
    /// Hashes of the full blocks cached so far (prefix caching only).
    block_hashes: Vec<BlockHash>,
    params: SamplingParams,
    record: EngineRecord,
    /// Its prompt's K/V and first token came from elsewhere ([`Scheduler::add_prefilled`]):
    /// admitted as a decode. A preemption drops it (the K/V is then recomputed here).
    prefilled: bool,
}

impl Sequence {
    fn generated(&self) -> usize {
        self.tokens.len() - self.prompt_len
    }
}

/// One sequence of a step: compute `tokens` at positions `start..start + tokens.len()`.
#[derive(Clone, Debug, PartialEq)]
pub struct ScheduledSeq {
    pub id: RequestId,
    /// Position of the first new token (= tokens already in the KV cache).
    pub start: usize,
    pub tokens: Vec<TokenId>,
    /// Per KV-cache group (group 0 first), the blocks covering positions
    /// `0..start + tokens.len()` (a sliding group's: the null block before its window).
    pub block_tables: Vec<Vec<u32>>,
    /// Whether a token is sampled from the last position (the prompt is complete after this step).
    pub samples: bool,
    /// Whether this is a single-token decode step (vs a prefill or recompute chunk).
    pub is_decode: bool,
}

impl ScheduledSeq {
    /// Context length after this step.
    pub fn context_len(&self) -> usize {
        self.start + self.tokens.len()
    }

    /// The block table of the first KV-cache group (the only one of a uniform model).
    pub fn block_table(&self) -> &[u32] {
        &self.block_tables[0]
    }
}

/// What to compute in one step.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SchedulerOutput {
    pub seqs: Vec<ScheduledSeq>,
    pub prefill_tokens: usize,
    pub decode_seqs: usize,
    /// Requests preempted while scheduling this step.
    pub preempted: Vec<RequestId>,
    pub prefix_hit_tokens: usize,
    pub prefix_query_tokens: usize,
    /// The distinct positions among [`SchedulerOutput::decode_context`]'s: a KV block of the
    /// first group that several decode sequences share counted once.
    pub decode_distinct_context: u64,
}

impl SchedulerOutput {
    pub fn is_empty(&self) -> bool {
        self.seqs.is_empty()
    }
    pub fn num_tokens(&self) -> usize {
        self.seqs.iter().map(|s| s.tokens.len()).sum()
    }

    /// Attention work of the prefill (and recompute) chunks: Σ over their tokens of the
    /// positions each attends to. A chunk of `n` tokens after `c` computed ones: `n·c + n(n+1)/2`.
    pub fn prefill_attention(&self) -> u64 {
        let chunk = |s: &ScheduledSeq| {
            let (n, c) = (s.tokens.len() as u64, s.start as u64);
            n * c + n * (n + 1) / 2
        };
        self.seqs.iter().filter(|s| !s.is_decode).map(chunk).sum()
    }

    /// Σ positions attended over the decode sequences (each one's context after the step).
    pub fn decode_context(&self) -> u64 {
        self.seqs.iter().filter(|s| s.is_decode).map(|s| s.context_len() as u64).sum()
    }

    /// Sequences whose last position is sampled this step.
    pub fn sampled(&self) -> usize {
        self.seqs.iter().filter(|s| s.samples).count()
    }
}

/// The result of one step for the caller: tokens to stream and finished requests.
#[derive(Debug, Default)]
pub struct StepUpdate {
    /// (request, token, index of the token among the request's generated tokens).
    pub tokens: Vec<(RequestId, TokenId, usize)>,
    /// Records of requests that finished this step, with their generated tokens.
    pub finished: Vec<(EngineRecord, Vec<TokenId>)>,
    /// The stamp of this step's tokens.
    pub time: Stamp,
}

/// The continuous-batching scheduler over a paged KV pool.
pub struct Scheduler {
    cfg: SchedulerConfig,
    pool: SharedPool,
    waiting: VecDeque<Sequence>,
    running: Vec<Sequence>,
    vocab_size: Option<usize>,
}

impl Scheduler {
    pub fn new(cfg: SchedulerConfig) -> Result<Self, PoolError> {
        let pool = BlockPool::new(cfg.num_blocks, cfg.block_size, cfg.enable_prefix_caching)?;
        Ok(Self {
            cfg,
            pool: Rc::new(RefCell::new(pool)),
            waiting: VecDeque::new(),
            running: Vec::new(),
            vocab_size: None,
        })
    }

    /// Rejects prompts holding token ids at or above `vocab`.
    pub fn with_vocab_size(mut self, vocab: usize) -> Self {
        self.vocab_size = Some(vocab);
        self
    }

    pub fn config(&self) -> &SchedulerConfig {
        &self.cfg
    }

    pub fn pool(&self) -> std::cell::Ref<'_, BlockPool> {
        self.pool.borrow()
    }

    pub fn num_running(&self) -> usize {
        self.running.len()
    }

    pub fn num_waiting(&self) -> usize {
        self.waiting.len()
    }

    /// When the longest-waiting queued request was queued (`None` when none waits).
    pub fn oldest_waiting(&self) -> Option<Stamp> {
        self.waiting.iter().map(|s| s.record.queued).min()
    }

    pub fn has_work(&self) -> bool {
        !self.running.is_empty() || !self.waiting.is_empty()
    }

    /// Checks a request against the model and the pool, without queueing it.
    pub fn check(&self, prompt_len: usize, params: &SamplingParams) -> Result<(), AdmissionError> {
        self.cfg.check(prompt_len, params)
    }

    /// Queues a request (FCFS) after checking it.
    pub fn add(&mut self, req: NewRequest, now: Stamp) -> Result<(), AdmissionError> {
        self.queue(req, None, now)
    }

    /// Queues a request whose prompt was prefilled by another engine, which also sampled its
    /// first token `first` (prefill/decode disaggregation: the K/V arrives with it). It is
    /// admitted as a decode once the pool has blocks for its prompt and that token; its
    /// record counts `first` among its generated tokens but holds no stamp for it (the other
    /// engine's record has that).
    pub fn add_prefilled(&mut self, req: NewRequest, first: TokenId, now: Stamp) -> Result<(), AdmissionError> {
        self.queue(req, Some(first), now)
    }

    fn queue(&mut self, req: NewRequest, first: Option<TokenId>, now: Stamp) -> Result<(), AdmissionError> {
        self.check(req.prompt.len(), &req.params)?;
        if first.is_some() && req.params.max_tokens < 2 {
            return Err(AdmissionError::InvalidParams(goodput_core::ParamsError::PrefilledOneToken));
        }
        if let Some(vocab) = self.vocab_size {
            if let Some(&token) = req.prompt.iter().find(|&&t| t as usize >= vocab) {
                return Err(AdmissionError::TokenOutOfVocab { token, vocab });
            }
        }
        if self.running.iter().chain(self.waiting.iter()).any(|s| s.id == req.id) {
            return Err(AdmissionError::DuplicateId(req.id));
        }
        let record = EngineRecord {
            id: req.id,
            arrival: req.arrival,
            queued: now,
            first_scheduled: None,
            first_token: None,
            token_times: Vec::with_capacity(req.params.max_tokens.min(self.cfg.max_model_len)),
            finished: now,
            prompt_tokens: req.prompt.len(),
            cached_tokens: 0,
            generated_tokens: 0,
            preemptions: 0,
            finish_reason: FinishReason::Length,
        };
        let mut tokens = req.prompt;
        tokens.reserve(req.params.max_tokens.min(self.cfg.max_model_len));
        let prompt_len = tokens.len();
        tokens.extend(first);
        self.waiting.push_back(Sequence {
            id: req.id,
            prompt_len,
            tokens,
            num_computed: 0,
            blocks: SeqBlocks::new(&self.pool, self.cfg.group_windows.len()),
            block_hashes: Vec::new(),
            params: req.params,
            record,
            prefilled: first.is_some(),
        });
        Ok(())
    }

    /// Removes a request wherever it is; its blocks return to the pool at once.
    pub fn abort(&mut self, id: RequestId, now: Stamp) -> Option<(EngineRecord, Vec<TokenId>)> {
        let seq = if let Some(i) = self.running.iter().position(|s| s.id == id) {
            self.running.remove(i)
        } else {
            let i = self.waiting.iter().position(|s| s.id == id)?;
            self.waiting.remove(i)?
        };
        Some(Self::finish(seq, FinishReason::Abort, now))
    }

    /// Aborts everything (shutdown, or an engine error), returning the records.
    pub fn abort_all(&mut self, reason: FinishReason, now: Stamp) -> Vec<(EngineRecord, Vec<TokenId>)> {
        let all: Vec<Sequence> = self.running.drain(..).chain(self.waiting.drain(..)).collect();
        all.into_iter().map(|s| Self::finish(s, reason, now)).collect()
    }

    fn finish(mut seq: Sequence, reason: FinishReason, now: Stamp) -> (EngineRecord, Vec<TokenId>) {
        seq.blocks.release();
        seq.record.finished = now;
        seq.record.finish_reason = reason;
        seq.record.generated_tokens = seq.generated();
        let out = seq.tokens.split_off(seq.prompt_len);
        (seq.record, out)
    }

    fn preempt(&mut self, mut seq: Sequence) {
        seq.blocks.release();
        seq.block_hashes.clear();
        seq.num_computed = 0;
        seq.prefilled = false;
        seq.record.preemptions += 1;
        self.waiting.push_front(seq);
    }

    /// Moves the front waiting sequence to running with its prefix-cache hits and the blocks of
    /// its first chunk (at most `budget` tokens); the chunk's length, or `None` when the pool
    /// is short (or nothing waits).
    fn admit_front(&mut self, budget: usize, now: Stamp, out: &mut SchedulerOutput) -> Option<usize> {
        let bs = self.cfg.block_size;
        let seq = self.waiting.front_mut()?;
        if seq.prefilled {
            return self.admit_prefilled(now);
        }
        let (mut k, mut hits) = (0, Vec::new());
        if self.cfg.enable_prefix_caching && seq.num_computed == 0 {
            // Never serve the last token from the cache: it must be computed to sample.
            let max_blocks = (seq.tokens.len() - 1) / bs;
            let hashes = hash_full_blocks(&seq.tokens[..max_blocks * bs], bs);
            (k, hits) = seq_blocks::lookup(&self.pool.borrow(), &hashes, &self.cfg.group_windows, bs);
            seq.block_hashes = hashes;
            seq.block_hashes.truncate(k);
        }
        let cached = k * bs;
        let n = (seq.tokens.len() - cached).min(budget);
        let need = (cached + n).div_ceil(bs).saturating_sub(k) * self.cfg.group_windows.len();
        {
            let pool = self.pool.borrow();
            let hits_free = hits.iter().flatten().filter(|&&b| b != BlockPool::NULL_BLOCK && pool.ref_count(b) == 0);
            if pool.num_free_blocks() < need + hits_free.count() {
                return None;
            }
        }
        let mut seq = self.waiting.pop_front().expect("front exists");
        if self.cfg.enable_prefix_caching {
            out.prefix_query_tokens += seq.tokens.len();
        }
        seq.blocks.push_cached(&hits);
        let grown = seq.blocks.grow_to(cached + n, bs, &self.pool);
        debug_assert!(grown, "free blocks were counted above");
        seq.num_computed = cached;
        if seq.record.first_scheduled.is_none() {
            seq.record.first_scheduled = Some(now);
            seq.record.cached_tokens = cached.min(seq.prompt_len);
        }
        out.prefix_hit_tokens += cached;
        self.running.push(seq);
        Some(n)
    }

    /// Admits the front waiting sequence, prefilled elsewhere, as a decode: blocks for all of
    /// its positions, all but the last computed. `None` when the pool is short.
    fn admit_prefilled(&mut self, now: Stamp) -> Option<usize> {
        let bs = self.cfg.block_size;
        let seq = self.waiting.front()?;
        if self.pool.borrow().num_free_blocks() < seq.blocks.needed(seq.tokens.len(), bs) {
            return None;
        }
        let mut seq = self.waiting.pop_front().expect("front exists");
        let grown = seq.blocks.grow_to(seq.tokens.len(), bs, &self.pool);
        debug_assert!(grown, "free blocks were counted above");
        seq.num_computed = seq.tokens.len() - 1;
        seq.record.first_scheduled.get_or_insert(now);
        self.running.push(seq);
        Some(1)
    }

    /// Whether `n` new tokens of `seq` are a decode: its one last token, after the first
    /// sampled.
    fn is_decode(seq: &Sequence, n: usize) -> bool {
        n == 1 && seq.generated() > 0 && seq.num_computed + n == seq.tokens.len()
    }

    /// The prefill tokens of `n` new tokens of `seq` in a step: 0 for a decode, else `n`.
    fn prefill_part(seq: &Sequence, n: usize) -> usize {
        if Self::is_decode(seq, n) {
            0
        } else {
            n
        }
    }

    /// Chooses this step's batch and allocates its blocks.
    pub fn schedule(&mut self, now: Stamp) -> SchedulerOutput {
        let mut out = SchedulerOutput::default();
        let mut budget = self.cfg.max_num_batched_tokens;
        // (index into running, new tokens)
        let mut picked: Vec<(usize, usize)> = Vec::new();
        // Prefill tokens picked so far (for `max_prefill_tokens`).
        let mut prefill = 0;

        let mut i = 0;
        while i < self.running.len() && budget > 0 {
            let n = (self.running[i].tokens.len() - self.running[i].num_computed).min(budget);
            if n == 0 {
                // Its last step produced no token (a runner error); nothing to compute.
                i += 1;
                continue;
            }
            let mut scheduled = false;
            loop {
                let (bs, seq) = (self.cfg.block_size, &mut self.running[i]);
                if seq.blocks.grow_to(seq.num_computed + n, bs, &self.pool) {
                    scheduled = true;
                    break;
                }
                // Preempt the newest running sequence (possibly this one).
                let victim = self.running.pop().expect("running is not empty");
                out.preempted.push(victim.id);
                let was_self = self.running.len() == i;
                self.preempt(victim);
                if was_self {
                    break;
                }
            }
            if !scheduled {
                break;
            }
            picked.push((i, n));
            prefill += Self::prefill_part(&self.running[i], n);
            budget -= n;
            i += 1;
        }

        // Admit waiting sequences only when nothing had to be preempted (as vLLM v1 does).
        if out.preempted.is_empty() {
            let cap = self.cfg.max_prefill_tokens.unwrap_or(usize::MAX);
            while budget > 0 && self.running.len() < self.cfg.max_num_seqs {
                // A prompt to prefill waits for the next step once this one holds `cap`
                // prefill tokens; one prefilled elsewhere joins as a decode.
                if prefill >= cap && self.waiting.front().is_some_and(|s| !s.prefilled) {
                    break;
                }
                let Some(n) = self.admit_front(budget, now, &mut out) else { break };
                prefill += Self::prefill_part(self.running.last().expect("just admitted"), n);
                picked.push((self.running.len() - 1, n));
                budget -= n;
            }
        }

        for &(idx, n) in &picked {
            let seq = &mut self.running[idx];
            if seq.record.first_scheduled.is_none() {
                seq.record.first_scheduled = Some(now);
            }
            let start = seq.num_computed;
            let samples = start + n == seq.tokens.len();
            let is_decode = Self::is_decode(seq, n);
            if is_decode {
                out.decode_seqs += 1;
            } else {
                out.prefill_tokens += n;
            }
            out.seqs.push(ScheduledSeq {
                id: seq.id,
                start,
                tokens: seq.tokens[start..start + n].to_vec(),
                block_tables: seq.blocks.ids(),
                samples,
                is_decode,
            });
        }
        let decodes = out.seqs.iter().filter(|s| s.is_decode).map(|s| (s.block_table(), s.context_len()));
        out.decode_distinct_context = distinct::distinct_positions(decodes, self.cfg.block_size, &self.pool.borrow());
        out
    }

    /// Applies a step's results: `sampled[i]` is the token of `output.seqs[i]` when it samples
    /// (ignored otherwise). `now` stamps the tokens.
    pub fn update(&mut self, output: &SchedulerOutput, sampled: &[Option<TokenId>], now: Stamp) -> StepUpdate {
        let mut upd = StepUpdate { time: now, ..StepUpdate::default() };
        let bs = self.cfg.block_size;
        let mut done: Vec<(RequestId, FinishReason)> = Vec::new();
        for (k, s) in output.seqs.iter().enumerate() {
            // `schedule` lists running sequences in order, so position k is almost always right.
            let idx = match self.running.get(k) {
                Some(q) if q.id == s.id => k,
                _ => match self.running.iter().position(|q| q.id == s.id) {
                    Some(i) => i,
                    None => continue,
                },
            };
            let seq = &mut self.running[idx];
            seq.num_computed = s.start + s.tokens.len();
            if self.cfg.enable_prefix_caching {
                Self::cache_full_blocks(seq, &self.pool, bs);
            }
            if s.samples {
                match sampled.get(k).copied().flatten() {
                    Some(token) => {
                        if let Some(reason) = Self::push_token(seq, token, &self.cfg, now, &mut upd) {
                            done.push((seq.id, reason));
                        }
                    }
                    // No token came back: recompute the last position next step rather than
                    // leaving the sequence with nothing to do.
                    None => seq.num_computed = seq.tokens.len() - 1,
                }
            }
            seq.blocks.free_out_of_window(seq.num_computed, &self.cfg.group_windows, bs);
        }
        for (id, reason) in done {
            if let Some(i) = self.running.iter().position(|q| q.id == id) {
                let seq = self.running.remove(i);
                upd.finished.push(Self::finish(seq, reason, now));
            }
        }
        upd
    }

    /// Registers the sequence's newly full blocks in the prefix cache, in every group.
    fn cache_full_blocks(seq: &mut Sequence, pool: &SharedPool, bs: usize) {
        let full = seq.num_computed / bs;
        let mut pool = pool.borrow_mut();
        while seq.block_hashes.len() < full {
            let j = seq.block_hashes.len();
            let h = BlockHash::chain(seq.block_hashes.last().copied(), &seq.tokens[j * bs..(j + 1) * bs]);
            for (g, t) in seq.blocks.tables().iter().enumerate() {
                let b = t.ids()[j];
                if b != BlockPool::NULL_BLOCK {
                    pool.cache_block(b, h.in_group(g));
                }
            }
            seq.block_hashes.push(h);
        }
    }

    /// Appends a sampled token to the sequence and its record; why it finishes, if it does.
    fn push_token(
        seq: &mut Sequence,
        token: TokenId,
        cfg: &SchedulerConfig,
        now: Stamp,
        upd: &mut StepUpdate,
    ) -> Option<FinishReason> {
        seq.tokens.push(token);
        seq.record.token_times.push(now);
        if seq.record.first_token.is_none() {
            seq.record.first_token = Some(now);
        }
        let generated = seq.generated();
        upd.tokens.push((seq.id, token, generated - 1));
        let p = &seq.params;
        let stop_allowed = generated >= p.min_tokens;
        let is_eos = !p.ignore_eos && Some(token) == cfg.eos_token_id;
        if stop_allowed && (is_eos || p.stop_token_ids.contains(&token)) {
            Some(FinishReason::Stop)
        } else if generated >= p.max_tokens || seq.tokens.len() >= cfg.max_model_len {
            Some(FinishReason::Length)
        } else {
            None
        }
    }

    /// KV blocks referenced by requests.
    pub fn blocks_used(&self) -> usize {
        let p = self.pool.borrow();
        p.usable_blocks() - p.num_free_blocks()
    }

    /// Tokens whose K/V the running requests hold, counting a block shared by several
    /// requests (prefix cache) once.
    pub fn tokens_held(&self) -> usize {
        let pool = self.pool.borrow();
        let bs = self.cfg.block_size;
        let mut held = 0.0f64;
        for s in &self.running {
            for t in s.blocks.tables() {
                for (j, &b) in t.ids().iter().enumerate().filter(|(_, &b)| b != BlockPool::NULL_BLOCK) {
                    let filled = s.num_computed.saturating_sub(j * bs).min(bs);
                    let refs = pool.ref_count(b).max(1);
                    held += filled as f64 / refs as f64;
                }
            }
        }
        held.round() as usize
    }

    /// The blocks held by full and by sliding groups' tables (a block shared by several
    /// requests counted once); `None` for a model with no sliding group.
    pub fn kv_by_kind(&self) -> Option<KvBlocksByKind> {
        let windows = &self.cfg.group_windows;
        if windows.iter().all(Option::is_none) {
            return None;
        }
        // Every holder of a block is a table of the one group it was allocated to: a block
        // counts 1/refs per holder, once in all.
        let pool = self.pool.borrow();
        let mut held = 0.0f64;
        for s in &self.running {
            for (t, _) in s.blocks.tables().iter().zip(windows).filter(|(_, w)| w.is_some()) {
                held += t.held().map(|b| 1.0 / f64::from(pool.ref_count(b).max(1))).sum::<f64>();
            }
        }
        let sliding = held.round() as usize;
        let used = pool.usable_blocks() - pool.num_free_blocks();
        Some(KvBlocksByKind { full: used.saturating_sub(sliding), sliding })
    }
}

mod decode_run;
mod distinct;

#[cfg(test)]
mod tests;
