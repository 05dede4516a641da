//! The scheduler's limits and the size of its KV pool ([`SchedulerConfig`]), and why a
//! request is refused before it is queued ([`AdmissionError`]).

use goodput_core::{RequestId, SamplingParams, TokenId};

/// Limits of the scheduler and the size of the KV pool.
#[derive(Clone, Debug, PartialEq)]
pub struct SchedulerConfig {
    /// Token budget of one step (prefill chunk tokens + one per decode).
    pub max_num_batched_tokens: usize,
    /// Prefill tokens past which a step starts no further waiting prompt (SGLang's
    /// `--max-prefill-tokens`): the first always starts, chunked by the budget. Where prefill
    /// is compute-bound (a CPU), a second prompt in the same step only makes the first wait
    /// for it; one at a time, each gets its first token as soon as its own prefill is done.
    /// `None`: prompts join while the budget lasts.
    pub max_prefill_tokens: Option<usize>,
    /// Most sequences running at once.
    pub max_num_seqs: usize,
    /// Blocks in the pool, including the reserved null block.
    pub num_blocks: usize,
    /// Token slots per block.
    pub block_size: usize,
    pub enable_prefix_caching: bool,
    /// Longest sequence (prompt + generated) the model accepts.
    pub max_model_len: usize,
    /// End-of-sequence token of the model, if it has one.
    pub eos_token_id: Option<TokenId>,
    /// The window of each KV-cache group's layers (`None`: full attention), one block table
    /// per group (`ModelSpec::kv_groups`); one full group for a uniform model.
    pub group_windows: Vec<Option<usize>>,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        Self {
            max_num_batched_tokens: 2048,
            max_prefill_tokens: None,
            max_num_seqs: 256,
            num_blocks: 1024,
            block_size: 16,
            enable_prefix_caching: true,
            max_model_len: 2048,
            eos_token_id: None,
            group_windows: vec![None],
        }
    }
}

impl SchedulerConfig {
    /// Checks the limits themselves: every budget positive, a pool of at least two blocks
    /// (one is the reserved null block). The error names the setting.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let positive = [
            ("block size", self.block_size),
            ("max batched tokens", self.max_num_batched_tokens),
            ("max prefill tokens", self.max_prefill_tokens.unwrap_or(1)),
            ("max sequences", self.max_num_seqs),
            ("max model length", self.max_model_len),
        ];
        if let Some(&(name, _)) = positive.iter().find(|(_, v)| *v == 0) {
            return Err(ConfigError::Zero(name));
        }
        if self.num_blocks < 2 {
            return Err(ConfigError::TooFewBlocks(self.num_blocks));
        }
        if self.group_windows.is_empty() {
            return Err(ConfigError::NoLayerGroups);
        }
        if self.group_windows.contains(&Some(0)) {
            return Err(ConfigError::ZeroWindow);
        }
        Ok(())
    }

    /// Checks a request against the model and the pool, without queueing it.
    pub fn check(&self, prompt_len: usize, params: &SamplingParams) -> Result<(), AdmissionError> {
        if prompt_len == 0 {
            return Err(AdmissionError::EmptyPrompt);
        }
        params.validate().map_err(AdmissionError::InvalidParams)?;
        let max = self.max_model_len;
        if prompt_len >= max {
            return Err(AdmissionError::PromptTooLong { prompt: prompt_len, max_model_len: max });
        }
        if prompt_len.checked_add(params.max_tokens).is_none_or(|n| n > max) {
            return Err(AdmissionError::ContextTooLong {
                prompt: prompt_len,
                max_tokens: params.max_tokens,
                max_model_len: max,
            });
        }
        // The last generated token is never fed back, so a sequence holds at most
        // prompt + max_tokens - 1 tokens of K/V. It must fit alone, or it would preempt itself forever.
        let needed = self.blocks_alone(prompt_len + params.max_tokens - 1);
        let usable = self.num_blocks.saturating_sub(1);
        if needed > usable {
            return Err(AdmissionError::ExceedsPool {
                needed,
                usable,
                prompt: prompt_len,
                max_tokens: params.max_tokens,
            });
        }
        Ok(())
    }
}

impl SchedulerConfig {
    /// The most blocks a sequence of `tokens` positions holds at once when it runs alone: all
    /// of its blocks in each full group; in a sliding group, those of the window before its
    /// largest chunk and of the chunk (a chunk's K/V are all written before they are attended).
    pub fn blocks_alone(&self, tokens: usize) -> usize {
        let bs = self.block_size;
        let all = tokens.div_ceil(bs);
        let chunk = tokens.min(self.max_num_batched_tokens);
        let per_group = |w: &Option<usize>| match *w {
            None => all,
            Some(w) => all.min((w.saturating_sub(1) + chunk).div_ceil(bs) + 1),
        };
        self.group_windows.iter().map(per_group).sum()
    }
}

/// Scheduler settings it cannot run with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A budget of 0: the setting named.
    #[error("the {0} must be at least 1")]
    Zero(&'static str),
    #[error("the KV pool has {0} blocks; it needs at least 2 (one is reserved)")]
    TooFewBlocks(usize),
    #[error("the KV cache needs at least one group of layers")]
    NoLayerGroups,
    #[error("a sliding window must be at least 1 position")]
    ZeroWindow,
}

/// Why a request was refused before it was queued.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AdmissionError {
    #[error("the prompt is empty")]
    EmptyPrompt,
    #[error("invalid sampling parameters: {0}")]
    InvalidParams(goodput_core::ParamsError),
    #[error("the prompt has {prompt} tokens but the model's context is {max_model_len} tokens")]
    PromptTooLong { prompt: usize, max_model_len: usize },
    #[error(
        "prompt ({prompt} tokens) + max_tokens ({max_tokens}) exceeds the model's context of {max_model_len} tokens"
    )]
    ContextTooLong { prompt: usize, max_tokens: usize, max_model_len: usize },
    #[error(
        "the request needs {needed} KV blocks (prompt {prompt} + max_tokens {max_tokens} tokens) but the whole pool has {usable}; raise --kv-blocks or --kv-memory"
    )]
    ExceedsPool { needed: usize, usable: usize, prompt: usize, max_tokens: usize },
    #[error("request id {0} is already in the engine")]
    DuplicateId(RequestId),
    #[error("token id {token} is outside the vocabulary ({vocab})")]
    TokenOutOfVocab { token: TokenId, vocab: usize },
}
