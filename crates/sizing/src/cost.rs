//! What a step costs: the step's contents as the terms of a linear model, and the models that
//! turn them into seconds (fitted from measured steps, or projected from the roofline).

use crate::routing::Routing;
use goodput_core::{ModelSpec, StepRecord};
use goodput_scheduler::SchedulerOutput;
pub use history::{StepHistory, FRESH_WINDOW};
pub use knots::Tables;
use knots::{after_idle_weight, after_prefill_weight, batch_knots, clamped_hat, context_knots, hat, knots};
pub use knots::{AFTER_IDLE_MS, AFTER_PREFILL_KNOTS};
use serde::{Deserialize, Serialize};

/// One term of the step-cost model, in the spirit of Vidur and BLIS: what a step's time grows
/// with. The unit of each coefficient is seconds per unit of its term.
///
/// The six classic terms are linear. Measurement shows that an engine's matmul kernels are not:
/// goodput's own CPU engine streams the weights once per row for up to 8 rows and hands larger
/// batches to gemm (a jump at 9 rows, then a cheaper row), and a GPU's kernels change tiles
/// with the batch. So the tokens through the linear layers and the rows through the LM head
/// are also offered as tables: [`Term::Tokens`] and [`Term::Rows`] are piecewise-linear "hat"
/// functions on knots (1 at the knot, 0 at its neighbouring knots; the last knot grows linearly
/// beyond). The knots sit at 1–5 and at every power of two and the next count (8, 9, 16, 17,
/// …): kernels switch at powers of two, and a knot on either side of a switch keeps its jump
/// out of the neighbouring batches. A fit over them (non-negative values at the knots) is
/// still linear least squares, and interpolates the cost of any batch between measured ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Term {
    /// Every step: reading the weights once, launching the layers (seconds per step).
    Fixed,
    /// Each prompt (or recompute) token through the linear layers.
    PrefillTokens,
    /// Prefill attention work: Σ over prefill tokens of the positions each attends to.
    PrefillAttention,
    /// Each decode sequence (one token through the linear layers).
    DecodeSeqs,
    /// Decode attention work: Σ context over decode sequences (K/V read per step).
    DecodeContext,
    /// Each sampled row (the LM head and the sampler).
    SampledRows,
    /// The tokens-through-the-linear-layers table's knot at this many tokens (prefill tokens +
    /// decode sequences); the last knot of a model is `Tokens(k)` with `k` its largest.
    Tokens(u32),
    /// The sampled-rows table's knot at this many rows.
    Rows(u32),
    /// The decode-context table's knot at this Σ context over the step's decode sequences.
    /// A CPU reads the K/V of a small batch from its caches and a large one from memory, so
    /// a context token costs more past the last-level cache (a cliff a linear term averages
    /// away); on a GPU the table comes out linear. Knots at every power of two from 512.
    Context(u32),
    /// Distinct routed experts the step's tokens reached, summed over the sparse layers: the
    /// expert weight sets it read (a mixture of experts' step grows with it, not with its
    /// tokens alone: B tokens reach N·(1 − (1 − k/N)^B) experts). The engine records it; a
    /// simulated step takes its expectation. The experts' FLOPs grow with the assignments,
    /// k per token and layer, which the tokens terms already carry.
    ExpertsTouched,
    /// A decode step `j` steps after the last step that computed prompt tokens (1: the next
    /// one): what such a step costs beyond the same step long after, as a table over the steps
    /// since the prefill on the knots [`AFTER_PREFILL_KNOTS`] (interpolated between them, to
    /// 0 at twice the last). Measured on goodput's CPU engine: the first two decode steps after
    /// a prefill take up to twice as long as the twentieth, and at long contexts and larger
    /// batches the excess decays over ten steps, so a grid whose decode probes ran a few steps
    /// each priced a long generation's steps a third too high. Weighed by the share of the
    /// batch that finished its prefill lately ([`StepWork::fresh`]): in runs, a step of four
    /// or more sequences that one newcomer joined ran no slower than later ones, while a grid
    /// probe's whole batch is new.
    AfterPrefill(u32),
    /// The same step's extra per context token (its K/V read again from memory).
    AfterPrefillContext(u32),
    /// Decode attention, seconds per context token, at a decode batch of `.0` sequences and
    /// `.1` context tokens per sequence: a table over both, interpolated between its knots
    /// (bilinear in the per-token rate, flat beyond the outer knots). A CPU reads the K/V
    /// of a few long sequences from its caches and walks each sequence's heads apart, while
    /// a large batch streams its K/V from memory: the same Σ context costs 0.27 µs a token at
    /// one sequence and 0.08 µs at eight (goodput's engine on `tiny`, one core), which a
    /// table over Σ context alone ([`Term::Context`]) prices alike.
    SeqContext(u32, u32),
    /// Decode attention, seconds per context token, as two tables added: this one over the
    /// decode batch (`.0` sequences), [`Term::LengthContext`] over the context per sequence
    /// — each interpolated between its knots, flat beyond. Fewer cells than
    /// [`Term::SeqContext`]'s product, each measured at every length (or batch) of the grid.
    BatchContext(u32),
    /// The context-per-sequence table of the additive decode-attention model.
    LengthContext(u32),
    /// A step that began after the engine sat idle this many milliseconds (a table on the
    /// knots [`AFTER_IDLE_MS`], interpolated, flat beyond the last): what it costs beyond
    /// the same step in a busy stretch. Measured on goodput's CPU engine: a prompt that
    /// reaches an engine idle for tens of milliseconds prefills 15–30 % slower than one
    /// queued behind a step (its weights and code cold again), which a grid whose probes
    /// followed each other within a millisecond never saw and a closed loop or a low rate
    /// meets on every request.
    AfterIdle(u32),
    /// The same step's extra per token through the linear layers (prompt tokens and decode
    /// sequences).
    AfterIdleTokens(u32),
    /// Decode attention to a position another sequence of the step also attends (a block of
    /// a common prefix, shared through the prefix cache), seconds per such position beyond
    /// the first: computed again, but read from the caches, not from memory. With this term
    /// the decode-attention tables are priced on the step's distinct positions
    /// ([`StepWork::decode_distinct`]). Measured on goodput's CPU engine (`tiny`, one core of
    /// an AVX-512 EPYC): decode steps of 5–22 sequences whose Σ context was 1.4–1.8× the
    /// distinct positions (multi-turn conversations, agents) ran 11–21 % faster than steps of
    /// the same batch and Σ context without a shared prefix.
    RepeatedContext,
}

impl Term {
    /// The six classic linear terms, in [`StepWork::row`]'s order.
    pub const ALL: [Term; 6] = [
        Term::Fixed,
        Term::PrefillTokens,
        Term::PrefillAttention,
        Term::DecodeSeqs,
        Term::DecodeContext,
        Term::SampledRows,
    ];

    /// The after-prefill terms: a constant and a per-context-token one at each of
    /// [`AFTER_PREFILL_KNOTS`].
    pub fn after_prefill() -> Vec<Term> {
        AFTER_PREFILL_KNOTS.iter().flat_map(|&j| [Term::AfterPrefill(j), Term::AfterPrefillContext(j)]).collect()
    }

    /// The after-idle terms: a constant and a per-token one at each of [`AFTER_IDLE_MS`].
    pub fn after_idle() -> Vec<Term> {
        AFTER_IDLE_MS.iter().flat_map(|&k| [Term::AfterIdle(k), Term::AfterIdleTokens(k)]).collect()
    }

    /// The decode-attention table of [`Term::SeqContext`]: batches 1, 2, 3, 4 and every power
    /// of two to the first at or above `max_batch`, crossed with contexts per sequence at
    /// every power of 4 from 256 below `max_context` and at `max_context`.
    pub fn seq_table(max_batch: usize, max_context: usize) -> Vec<Term> {
        let contexts = knots::seq_context_knots(max_context);
        batch_knots(max_batch).into_iter().flat_map(|b| contexts.iter().map(move |&c| Term::SeqContext(b, c))).collect()
    }

    /// The additive decode-attention tables: [`Term::BatchContext`] on [`Term::seq_table`]'s
    /// batches, [`Term::LengthContext`] on its contexts per sequence.
    pub fn batch_length_tables(max_batch: usize, max_context: usize) -> Vec<Term> {
        let mut out: Vec<Term> = batch_knots(max_batch).into_iter().map(Term::BatchContext).collect();
        out.extend(knots::seq_context_knots(max_context).into_iter().map(Term::LengthContext));
        out
    }

    /// Whether the term is a cell of a decode-attention table (its coefficient interpolated
    /// from its neighbours when the steps did not measure it).
    pub fn is_attention_cell(self) -> bool {
        matches!(self, Term::SeqContext(..) | Term::BatchContext(_) | Term::LengthContext(_))
    }

    /// The terms of a table model: tokens knots (see the type's docs) up to the first power
    /// of two at or above `max_tokens`, rows knots likewise up to `max_rows`, context knots
    /// up to the first power of two at or above `max_context`, and the linear prefill
    /// attention and per-sequence terms.
    pub fn table(max_tokens: usize, max_rows: usize, max_context: usize) -> Vec<Term> {
        let mut out: Vec<Term> = knots(max_tokens).into_iter().map(Term::Tokens).collect();
        out.extend(knots(max_rows).into_iter().map(Term::Rows));
        out.extend([Term::PrefillAttention, Term::DecodeSeqs]);
        out.extend(context_knots(max_context).into_iter().map(Term::Context));
        out
    }

    /// The term's name in files and tables.
    pub fn name(self) -> String {
        match self {
            Term::Fixed => "fixed".into(),
            Term::PrefillTokens => "prefill_tokens".into(),
            Term::PrefillAttention => "prefill_attention".into(),
            Term::DecodeSeqs => "decode_seqs".into(),
            Term::DecodeContext => "decode_context".into(),
            Term::SampledRows => "sampled_rows".into(),
            Term::Tokens(k) => format!("tokens@{k}"),
            Term::Rows(k) => format!("rows@{k}"),
            Term::Context(k) => format!("context@{k}"),
            Term::ExpertsTouched => "experts_touched".into(),
            Term::AfterPrefill(j) => format!("after_prefill@{j}"),
            Term::AfterPrefillContext(j) => format!("after_prefill_context@{j}"),
            Term::SeqContext(b, c) => format!("context@{b}x{c}"),
            Term::BatchContext(b) => format!("context@batch{b}"),
            Term::LengthContext(c) => format!("context@length{c}"),
            Term::AfterIdle(k) => format!("after_idle@{k}ms"),
            Term::AfterIdleTokens(k) => format!("after_idle_tokens@{k}ms"),
            Term::RepeatedContext => "repeated_context".into(),
        }
    }

    /// What one unit of the term is.
    pub fn unit(self) -> &'static str {
        match self {
            Term::Fixed => "step",
            Term::PrefillTokens => "prefill token",
            Term::PrefillAttention => "query-key pair",
            Term::DecodeSeqs => "decode sequence",
            Term::DecodeContext => "context token read",
            Term::SampledRows => "sampled row",
            Term::Tokens(_) => "step at this many tokens",
            Term::Rows(_) => "step at this many rows",
            Term::Context(_) => "step at this much context",
            Term::ExpertsTouched => "expert read (one layer)",
            Term::AfterPrefill(_) => "decode step this long after a prefill",
            Term::AfterPrefillContext(_) => "context token of such a step",
            Term::SeqContext(..) => "context token at this batch and context per sequence",
            Term::BatchContext(_) => "context token at this batch",
            Term::LengthContext(_) => "context token at this context per sequence",
            Term::AfterIdle(_) => "step after this long idle",
            Term::AfterIdleTokens(_) => "token of such a step",
            Term::RepeatedContext => "context position read again (shared block)",
        }
    }
}

/// A step's contents, as the model's terms see them.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StepWork {
    pub prefill_tokens: f64,
    pub prefill_attention: f64,
    pub decode_seqs: f64,
    pub decode_context: f64,
    /// The distinct positions among `decode_context`'s (a block several decode sequences
    /// share counted once); `None` when not known (taken as `decode_context`).
    pub decode_distinct: Option<f64>,
    pub sampled: f64,
    /// Distinct experts reached, summed over the sparse layers, as the engine recorded it;
    /// `None` for a planned step (a cost model with an [`ExpertShape`] takes the expectation).
    pub experts_touched: Option<f64>,
    /// Steps since the last step that computed prompt tokens (1: the step right after it);
    /// `None` when no such step is known (a planned step alone, the first steps of a file).
    pub since_prefill: Option<u32>,
    /// The share of the decode sequences that finished their prefill in the last
    /// [`FRESH_WINDOW`] steps (at most 1), which the after-prefill terms are weighed by;
    /// `None` when not known (taken as the whole batch).
    pub fresh: Option<f64>,
    /// Seconds the engine sat between the end of the step before and this step's start;
    /// `None` when not known (a planned step alone, the first of a file, a step of a decode
    /// run after its first, which follows its neighbour at once).
    pub idle_s: Option<f64>,
}

/// What a cost model needs to expect a step's expert reads: the routing and the sparse layers.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExpertShape {
    pub routing: Routing,
    pub sparse_layers: usize,
}

impl ExpertShape {
    /// The shape of `m`'s experts, routed uniformly; `None` for a dense model.
    pub fn of(m: &ModelSpec) -> Option<Self> {
        let moe = m.moe.as_ref()?;
        let routing = Routing {
            experts: moe.num_experts,
            top_k: moe.experts_per_token,
            skew: 0.0,
            groups: moe.n_group,
            groups_kept: moe.topk_group,
        };
        Some(Self { routing, sparse_layers: m.sparse_layers() })
    }

    /// Expected distinct experts `tokens` tokens reach, summed over the sparse layers.
    pub fn expected_touched(&self, tokens: f64) -> f64 {
        self.sparse_layers as f64 * self.routing.touched(tokens)
    }
}

impl StepWork {
    /// The work of a step the engine recorded, alone (nothing known of the steps before it).
    pub fn of_record(r: &StepRecord) -> Self {
        Self {
            prefill_tokens: r.prefill_tokens as f64,
            prefill_attention: r.prefill_attention as f64,
            decode_seqs: r.decode_seqs as f64,
            decode_context: r.decode_context as f64,
            decode_distinct: r.decode_distinct_context.map(|d| d as f64),
            sampled: r.sampled as f64,
            experts_touched: r.experts.as_ref().map(|e| e.touched as f64),
            since_prefill: None,
            fresh: None,
            idle_s: None,
        }
    }

    /// The work of each of a run of steps, in order, each with its history
    /// ([`StepHistory::before`]).
    pub fn of_records(steps: &[StepRecord]) -> Vec<Self> {
        let mut h = StepHistory::default();
        steps
            .iter()
            .map(|r| {
                let w = h.before(r.step, r.start, Self::of_record(r));
                h.after(r.step, r.end, r.prefill_tokens > 0, r.sampled.saturating_sub(r.decode_seqs));
                w
            })
            .collect()
    }

    /// The work of a step the scheduler planned.
    pub fn of_output(o: &SchedulerOutput) -> Self {
        Self {
            prefill_tokens: o.prefill_tokens as f64,
            prefill_attention: o.prefill_attention() as f64,
            decode_seqs: o.decode_seqs as f64,
            decode_context: o.decode_context() as f64,
            decode_distinct: Some(o.decode_distinct_context as f64),
            sampled: o.sampled() as f64,
            experts_touched: None,
            since_prefill: None,
            fresh: None,
            idle_s: None,
        }
    }

    /// The share of a step in a table cell: for [`Term::SeqContext`] the product of its
    /// batch's and its context per sequence's hats (the cells' shares add to 1 when the step
    /// decodes), for [`Term::BatchContext`] and [`Term::LengthContext`] the one hat; for any
    /// other term 1 when the step has the term, else 0.
    pub fn share(&self, t: Term, tables: &Tables) -> f64 {
        match t {
            Term::SeqContext(b, c) if self.decode_seqs > 0.0 => {
                let per_seq = self.decode_context / self.decode_seqs;
                clamped_hat(b, &tables.batch, self.decode_seqs) * clamped_hat(c, &tables.seq_context, per_seq)
            }
            Term::BatchContext(b) if self.decode_seqs > 0.0 => clamped_hat(b, &tables.batch, self.decode_seqs),
            Term::LengthContext(c) if self.decode_seqs > 0.0 => {
                clamped_hat(c, &tables.seq_context, self.decode_context / self.decode_seqs)
            }
            Term::SeqContext(..) | Term::BatchContext(_) | Term::LengthContext(_) => 0.0,
            _ => f64::from(u8::from(self.value(t, tables) != 0.0)),
        }
    }

    /// The weight of after-prefill knot `j` in this step: 0 unless it decodes alone after a
    /// known prefill, times the share of its sequences that prefill made.
    fn after_prefill(&self, j: u32) -> f64 {
        match self.since_prefill {
            Some(since) if self.prefill_tokens == 0.0 && self.decode_seqs > 0.0 => {
                after_prefill_weight(j, since) * self.fresh.unwrap_or(1.0)
            }
            _ => 0.0,
        }
    }

    /// The weight of after-idle knot `k` in this step: 0 when its idle is not known.
    fn after_idle(&self, k: u32) -> f64 {
        self.idle_s.map_or(0.0, |idle| after_idle_weight(k, idle))
    }

    /// The positions the decode-attention tables price: the distinct ones when the model
    /// prices repeated positions apart ([`Term::RepeatedContext`]), else all.
    fn table_context(&self, tables: &Tables) -> f64 {
        match self.decode_distinct {
            Some(d) if tables.repeats => d.min(self.decode_context),
            _ => self.decode_context,
        }
    }

    /// Positions attended beyond the distinct ones (0 when not known).
    pub fn repeated_context(&self) -> f64 {
        self.decode_distinct.map_or(0.0, |d| (self.decode_context - d).max(0.0))
    }

    /// The value of each classic term, in [`Term::ALL`]'s order (the fixed term is 1).
    pub fn row(&self) -> [f64; 6] {
        [1.0, self.prefill_tokens, self.prefill_attention, self.decode_seqs, self.decode_context, self.sampled]
    }

    /// The value of `t`; `tables` are the knots of the tokens and rows tables.
    pub fn value(&self, t: Term, tables: &Tables) -> f64 {
        match t {
            Term::Fixed => 1.0,
            Term::PrefillTokens => self.prefill_tokens,
            Term::PrefillAttention => self.prefill_attention,
            Term::DecodeSeqs => self.decode_seqs,
            Term::DecodeContext => self.decode_context,
            Term::SampledRows => self.sampled,
            Term::Tokens(k) => hat(k, &tables.tokens, self.prefill_tokens + self.decode_seqs),
            Term::Rows(k) => hat(k, &tables.rows, self.sampled),
            Term::Context(k) => hat(k, &tables.context, self.table_context(tables)),
            Term::SeqContext(..) | Term::BatchContext(_) | Term::LengthContext(_) => {
                self.table_context(tables) * self.share(t, tables)
            }
            Term::RepeatedContext => self.repeated_context(),
            Term::ExpertsTouched => self.experts_touched.unwrap_or(0.0),
            Term::AfterPrefill(j) => self.after_prefill(j),
            Term::AfterPrefillContext(j) => self.after_prefill(j) * self.decode_context,
            Term::AfterIdle(k) => self.after_idle(k),
            Term::AfterIdleTokens(k) => self.after_idle(k) * (self.prefill_tokens + self.decode_seqs),
        }
    }

    /// The values of `terms`.
    pub fn values(&self, terms: &[Term]) -> Vec<f64> {
        let tables = Tables::of(terms);
        terms.iter().map(|&t| self.value(t, &tables)).collect()
    }
}

/// What a step costs in seconds, and the engine's own time between two busy steps.
pub trait StepCost: Send + Sync {
    /// Seconds from the start of a step doing `w` to its end.
    fn step_seconds(&self, w: &StepWork) -> f64;
    /// Seconds between the end of a step and the start of the next when there is work (taking
    /// new requests, sending tokens).
    fn gap_seconds(&self) -> f64;
    /// The seconds of up to `steps` decode steps in a row from `first` (decodes alone), step
    /// `j` with `decode_context + j × decode_seqs`, `since_prefill + j`, and no idle before
    /// it after the first: each handed to `each`, in order, until it answers false. Equal to
    /// `step_seconds` of each step; a cost whose other parts stay put along a run computes
    /// them once.
    fn decode_run_seconds(&self, first: &StepWork, steps: usize, each: &mut dyn FnMut(f64) -> bool) {
        let mut w = *first;
        for j in 0..steps {
            w.decode_context = first.decode_context + j as f64 * first.decode_seqs;
            w.decode_distinct = first.decode_distinct.map(|d| d + j as f64 * first.decode_seqs);
            w.since_prefill = first.since_prefill.map(|s| s.saturating_add(j as u32));
            w.idle_s = first.idle_s.filter(|_| j == 0);
            if !each(self.step_seconds(&w)) {
                return;
            }
        }
    }
}

/// A linear step-cost model: Σ coefficient × term, plus the gap between busy steps.
#[derive(Clone, Debug, PartialEq)]
pub struct LinearCost {
    pub terms: Vec<Term>,
    /// Seconds per unit of each term.
    pub coefficients: Vec<f64>,
    pub gap_s: f64,
    tables: Tables,
    /// The experts of the model, to expect a planned step's expert reads.
    experts: Option<ExpertShape>,
}

impl LinearCost {
    pub fn new(terms: Vec<Term>, coefficients: Vec<f64>, gap_s: f64) -> Self {
        let tables = Tables::of(&terms);
        Self { terms, coefficients, gap_s, tables, experts: None }
    }

    /// The same model, expecting the expert reads of steps that do not carry them from `shape`.
    pub fn with_experts(mut self, shape: Option<ExpertShape>) -> Self {
        self.experts = shape;
        self
    }

    /// The classic six terms with these coefficients.
    pub fn classic(coefficients: [f64; 6], gap_s: f64) -> Self {
        Self::new(Term::ALL.to_vec(), coefficients.to_vec(), gap_s)
    }

    pub fn coefficient(&self, t: Term) -> f64 {
        self.terms.iter().position(|x| *x == t).map_or(0.0, |i| self.coefficients[i])
    }
}

impl StepCost for LinearCost {
    fn step_seconds(&self, w: &StepWork) -> f64 {
        let tables = &self.tables;
        let mut w = *w;
        if let (None, Some(shape)) = (w.experts_touched, &self.experts) {
            w.experts_touched = Some(shape.expected_touched(w.prefill_tokens + w.decode_seqs));
        }
        self.terms.iter().zip(&self.coefficients).map(|(&t, c)| w.value(t, tables) * c).sum::<f64>().max(0.0)
    }
    fn gap_seconds(&self) -> f64 {
        self.gap_s
    }
}

#[path = "cost/history.rs"]
mod history;
#[path = "cost/knots.rs"]
mod knots;

#[cfg(test)]
#[path = "cost/tests.rs"]
mod tests;
