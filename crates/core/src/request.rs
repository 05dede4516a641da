//! Requests as the engine sees them, and the raw records it keeps of them.
//!
//! Records hold raw stamps only; every derived number (queue time, TTFT, …) is defined once,
//! in `goodput-metrics`.

use crate::clock::Stamp;
use serde::{Deserialize, Serialize};

pub type RequestId = u64;
pub type TokenId = u32;

/// How a request's tokens are chosen and when its generation stops.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SamplingParams {
    /// Most tokens to generate (≥ 1).
    pub max_tokens: usize,
    /// End-of-sequence and stop tokens are ignored until this many tokens were generated.
    pub min_tokens: usize,
    /// 0 means greedy (argmax).
    pub temperature: f32,
    /// Keep only the k most likely tokens (0 = off).
    pub top_k: usize,
    /// Keep the smallest set of tokens whose probability reaches p (1.0 = off).
    pub top_p: f32,
    /// Seed of this request's sampler; the same seed gives the same tokens.
    pub seed: u64,
    /// Generate exactly `max_tokens`, ignoring end-of-sequence (what benchmarks use).
    pub ignore_eos: bool,
    /// Extra token ids that end generation (the stop token is kept in the output).
    pub stop_token_ids: Vec<TokenId>,
    /// goodput's extension for reasoning workloads on weights that do not think (dummy
    /// weights, the `reasoning` scenario): the first this many output tokens are the
    /// reasoning phase. The engine ignores it; goodput's server streams them as reasoning
    /// (`delta.reasoning`, counted in usage's `reasoning_tokens`) and the in-process target
    /// records them so. 0: none.
    pub reasoning_tokens: usize,
}

impl SamplingParams {
    /// The fewest output tokens a server honouring these parameters returns: `max_tokens`
    /// when end-of-sequence is ignored, else `min_tokens`; `None` when nothing is required.
    /// (A stop token id may still end a request early; benchmark workloads set none.)
    pub fn required_output_tokens(&self) -> Option<usize> {
        let n = if self.ignore_eos { self.max_tokens.max(self.min_tokens) } else { self.min_tokens };
        (n > 0 && self.stop_token_ids.is_empty()).then_some(n)
    }
}

impl Default for SamplingParams {
    fn default() -> Self {
        Self {
            max_tokens: 16,
            min_tokens: 0,
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            seed: 0,
            ignore_eos: false,
            stop_token_ids: Vec::new(),
            reasoning_tokens: 0,
        }
    }
}

impl SamplingParams {
    /// Greedy decoding of exactly `n` tokens, the usual benchmark request.
    pub fn greedy_exact(n: usize) -> Self {
        Self { max_tokens: n, ignore_eos: true, ..Self::default() }
    }

    /// Checks the values a caller controls; the error names the field.
    pub fn validate(&self) -> Result<(), ParamsError> {
        if self.max_tokens == 0 {
            return Err(ParamsError::ZeroMaxTokens);
        }
        if self.min_tokens > self.max_tokens {
            return Err(ParamsError::MinOverMax { min_tokens: self.min_tokens, max_tokens: self.max_tokens });
        }
        if !(self.temperature.is_finite() && self.temperature >= 0.0) {
            return Err(ParamsError::Temperature(self.temperature));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(ParamsError::TopP(self.top_p));
        }
        Ok(())
    }
}

/// Sampling parameters a request may not have, by field.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ParamsError {
    #[error("max_tokens must be at least 1")]
    ZeroMaxTokens,
    #[error("min_tokens ({min_tokens}) is larger than max_tokens ({max_tokens})")]
    MinOverMax { min_tokens: usize, max_tokens: usize },
    #[error("temperature must be finite and >= 0, got {0}")]
    Temperature(f32),
    #[error("top_p must be in (0, 1], got {0}")]
    TopP(f32),
    /// A request prefilled elsewhere (its first token generated there) asks for one token only.
    #[error("a prefilled request has its one token already")]
    PrefilledOneToken,
}

impl ParamsError {
    /// The request field at fault (an OpenAI error's `param`).
    pub fn field(&self) -> &'static str {
        match self {
            ParamsError::ZeroMaxTokens | ParamsError::PrefilledOneToken => "max_tokens",
            ParamsError::MinOverMax { .. } => "min_tokens",
            ParamsError::Temperature(_) => "temperature",
            ParamsError::TopP(_) => "top_p",
        }
    }
}

/// Why a request stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// `max_tokens` reached.
    Length,
    /// End-of-sequence or a stop token was generated.
    Stop,
    /// Aborted by the caller (or its client went away).
    Abort,
    /// The engine failed while running it.
    Error,
}

/// Everything the engine stamped for one request (one monotonic clock, see [`Stamp`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EngineRecord {
    pub id: RequestId,
    /// The engine handle accepted the request.
    pub arrival: Stamp,
    /// The request entered the scheduler's waiting queue.
    pub queued: Stamp,
    /// First time any of its tokens was scheduled; never reset by a preemption.
    pub first_scheduled: Option<Stamp>,
    /// The first generated token was sampled.
    pub first_token: Option<Stamp>,
    /// The time each generated token was sampled (the first equals `first_token`).
    pub token_times: Vec<Stamp>,
    /// The engine finished the request (last token, abort or error).
    pub finished: Stamp,
    pub prompt_tokens: usize,
    /// Prompt tokens served from the prefix cache at the first scheduling.
    pub cached_tokens: usize,
    pub generated_tokens: usize,
    /// Times it was preempted (its KV freed and later recomputed).
    pub preemptions: u32,
    pub finish_reason: FinishReason,
}

impl EngineRecord {
    /// Every stamp on a clock whose origin is `ns` nanoseconds earlier.
    pub fn shift(&mut self, ns: u64) {
        for s in [&mut self.arrival, &mut self.queued, &mut self.finished] {
            *s = s.shifted(ns);
        }
        for s in [&mut self.first_scheduled, &mut self.first_token].into_iter().flatten() {
            *s = s.shifted(ns);
        }
        self.token_times.iter_mut().for_each(|t| *t = t.shifted(ns));
    }

    /// Stamp of the last generated token.
    pub fn last_token(&self) -> Option<Stamp> {
        self.token_times.last().copied()
    }
}

/// What the engine did in one step (one forward pass).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    pub step: u64,
    pub start: Stamp,
    pub end: Stamp,
    /// Seconds spent in the scheduler (choosing the batch, allocating blocks).
    pub schedule_s: f64,
    /// Seconds spent preparing inputs and running the model.
    pub forward_s: f64,
    /// Seconds spent sampling and updating requests (stop checks, stamps, events).
    pub sample_s: f64,
    /// Prompt (or recompute) tokens computed this step.
    pub prefill_tokens: usize,
    /// Sequences that computed exactly one decode token this step.
    pub decode_seqs: usize,
    /// Sequences in the batch.
    pub num_seqs: usize,
    /// Requests running / waiting after scheduling.
    pub running: usize,
    pub waiting: usize,
    /// KV blocks referenced by requests after the step, and the pool's usable blocks.
    pub blocks_used: usize,
    pub usable_blocks: usize,
    pub block_size: usize,
    /// Tokens whose K/V the running requests hold after the step.
    pub tokens_held: usize,
    /// Preemptions made while scheduling this step.
    pub preemptions: usize,
    /// Prompt tokens found in the prefix cache while scheduling this step.
    pub prefix_hit_tokens: usize,
    /// Prompt tokens looked up in the prefix cache while scheduling this step.
    pub prefix_query_tokens: usize,
    /// Attention work of the prefill chunks: Σ over their tokens of the positions each one
    /// attends to (a chunk of `n` tokens after `c` cached ones: `n·c + n(n+1)/2`). Absent
    /// (0) in steps written before it was recorded.
    #[serde(default)]
    pub prefill_attention: u64,
    /// Σ context length (positions attended) over the decode sequences.
    #[serde(default)]
    pub decode_context: u64,
    /// The distinct positions among [`StepRecord::decode_context`]'s: a KV block that several
    /// decode sequences share (a common prefix from the prefix cache) counted once. What the
    /// step reads from memory, where `decode_context` is what it computes. Absent in steps
    /// written before it was recorded (then taken as `decode_context`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_distinct_context: Option<u64>,
    /// Rows sampled (sequences whose last position produced a token this step).
    #[serde(default)]
    pub sampled: usize,
    /// The routed experts the step used (MoE models only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experts: Option<ExpertStepLoad>,
    /// The KV blocks held after the step by each kind of layer group, for models whose layers
    /// keep their K/V differently (full layers every position, sliding ones their window).
    /// `blocks_used` is their sum.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_by_kind: Option<KvBlocksByKind>,
    /// On an engine that serves steps from CUDA graphs: whether this one was replayed from a
    /// captured graph (else launched kernel by kernel). Absent where no graph can serve a step
    /// (the CPU, graphs off, the simulator).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graph: Option<bool>,
}

impl StepRecord {
    /// The longest step believed, seconds: an engine step is milliseconds to seconds.
    pub const MAX_STEP_S: f64 = 3600.0;

    /// Why this record cannot be a step an engine took, if it cannot: its times out of order
    /// or beyond [`StepRecord::MAX_STEP_S`], its parts longer than the step, or counts beyond
    /// what its KV pool holds (no sequence attends to more positions than the pool's slots, no
    /// step computes more tokens). A fit on such a record would be decided by it.
    pub fn implausible(&self) -> Option<String> {
        let span = self.end.secs_since(self.start);
        if self.end < self.start || span > Self::MAX_STEP_S {
            return Some(format!("it ends {span:.3} s after it starts (a step takes 0 to {} s)", Self::MAX_STEP_S));
        }
        let parts = [("schedule_s", self.schedule_s), ("forward_s", self.forward_s), ("sample_s", self.sample_s)];
        if let Some((name, v)) = parts.iter().find(|(_, v)| !(v.is_finite() && *v >= 0.0 && *v <= span + 1e-3)) {
            return Some(format!("{name} is {v}, outside its step of {span:.6} s"));
        }
        let slots = (self.usable_blocks as u128).saturating_mul(self.block_size.max(1) as u128);
        let counts = [
            ("prefill_tokens", self.prefill_tokens as u128, slots),
            ("tokens_held", self.tokens_held as u128, slots),
            ("blocks_used", self.blocks_used as u128, self.usable_blocks as u128),
            ("decode_seqs", self.decode_seqs as u128, self.num_seqs as u128),
            ("prefill_attention", self.prefill_attention as u128, slots.saturating_mul(slots)),
            ("decode_context", self.decode_context as u128, slots.saturating_mul(self.decode_seqs as u128)),
            ("decode_distinct_context", self.decode_distinct_context.unwrap_or(0) as u128, self.decode_context as u128),
        ];
        if let Some((name, v, max)) = counts.iter().find(|(_, v, max)| v > max) {
            return Some(format!(
                "{name} is {v}, more than {max} (its pool holds {} blocks of {} tokens)",
                self.usable_blocks, self.block_size
            ));
        }
        None
    }

    /// Why `steps` (one engine's, in the order written) cannot be a run: a record that is
    /// [`StepRecord::implausible`], steps that start out of order, or a span over a year.
    /// Names the record by its place (1-based) in `steps`.
    pub fn implausible_run(steps: &[StepRecord]) -> Option<String> {
        for (i, s) in steps.iter().enumerate() {
            if let Some(why) = s.implausible() {
                return Some(format!("step record {} (step {}): {why}", i + 1, s.step));
            }
        }
        if let Some(i) = steps.windows(2).position(|w| w[1].start < w[0].start) {
            let (a, b) = (&steps[i], &steps[i + 1]);
            return Some(format!(
                "step record {} (step {}) starts {:.6} s before the one written before it (step {}): one engine's steps are written in order",
                i + 2,
                b.step,
                a.start.secs_since(b.start),
                a.step
            ));
        }
        let span = match (steps.first(), steps.last()) {
            (Some(a), Some(b)) => b.end.secs_since(a.start),
            _ => 0.0,
        };
        (span > 366.0 * 86_400.0).then(|| format!("the steps span {:.3e} s, more than a year", span))
    }
}

/// KV blocks held by the block tables of each kind of layer group.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvBlocksByKind {
    /// Groups of full-attention (or latent) layers: every position.
    pub full: usize,
    /// Groups of sliding-window layers: the blocks their windows still see.
    pub sliding: usize,
}

/// What one step's routing did, summed over the sparse layers: how many expert weight sets
/// it read (each expert a step touches is read once, whatever its tokens) and how evenly the
/// tokens spread.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpertStepLoad {
    /// Sparse layers of the model.
    pub sparse_layers: usize,
    /// Routed experts per sparse layer.
    pub experts: usize,
    /// Token-to-expert assignments (tokens × experts per token × sparse layers).
    pub assignments: u64,
    /// Experts that received at least one token, summed over the sparse layers: the expert
    /// weight sets the step read.
    pub touched: u64,
    /// The most tokens one expert took in one layer.
    pub max_tokens: u32,
}

impl ExpertStepLoad {
    /// Share of all the experts' weights the step read: `touched / (sparse_layers × experts)`.
    pub fn touched_share(&self) -> f64 {
        let all = (self.sparse_layers * self.experts) as f64;
        if all == 0.0 {
            0.0
        } else {
            self.touched as f64 / all
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{SamplingParams, StepRecord};
    use crate::Stamp;

    #[test]
    fn required_output_tokens() {
        let p = |max_tokens, min_tokens, ignore_eos| SamplingParams {
            max_tokens,
            min_tokens,
            ignore_eos,
            ..Default::default()
        };
        assert_eq!(p(64, 64, true).required_output_tokens(), Some(64));
        assert_eq!(p(64, 0, true).required_output_tokens(), Some(64));
        assert_eq!(p(64, 10, false).required_output_tokens(), Some(10));
        assert_eq!(p(64, 0, false).required_output_tokens(), None);
        let stops = SamplingParams { stop_token_ids: vec![2], ..p(64, 0, true) };
        assert_eq!(stops.required_output_tokens(), None);
    }

    /// A decode step of 4 sequences in a pool of 100 blocks of 16 tokens.
    fn step(n: u64) -> StepRecord {
        StepRecord {
            step: n,
            start: Stamp(n * 10_000_000),
            end: Stamp(n * 10_000_000 + 8_000_000),
            forward_s: 0.007,
            decode_seqs: 4,
            num_seqs: 4,
            usable_blocks: 100,
            block_size: 16,
            blocks_used: 8,
            tokens_held: 120,
            decode_context: 116,
            ..StepRecord::default()
        }
    }

    #[test]
    fn impossible_steps_are_named_and_possible_ones_pass() {
        let run: Vec<StepRecord> = (0..5).map(step).collect();
        assert_eq!(StepRecord::implausible_run(&run), None);
        let bad = |f: &dyn Fn(&mut StepRecord)| {
            let mut r = run.clone();
            f(&mut r[2]);
            StepRecord::implausible_run(&r).expect("refused")
        };
        assert!(bad(&|s| s.prefill_tokens = usize::MAX).contains("step record 3 (step 2): prefill_tokens"));
        assert!(bad(&|s| s.end = Stamp(0)).contains("ends -"));
        assert!(bad(&|s| s.forward_s = f64::NAN).contains("forward_s is NaN"));
        assert!(bad(&|s| s.decode_context = u64::MAX).contains("decode_context"));
        assert!(
            bad(&|s| s.decode_distinct_context = Some(117)).contains("decode_distinct_context is 117, more than 116")
        );
        let shared = StepRecord { decode_distinct_context: Some(52), ..run[2].clone() };
        assert_eq!(shared.implausible(), None);
        let late = bad(&|s| {
            s.start = Stamp(u64::MAX - 1);
            s.end = Stamp(u64::MAX);
            s.forward_s = 0.0;
        });
        assert!(late.contains("step record 4 (step 3) starts"), "{late}");
    }
}
