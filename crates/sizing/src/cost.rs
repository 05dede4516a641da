//! What a step costs: the step's contents as the terms of a linear model, and the models that
//! turn them into seconds (fitted from measured steps, or projected from the roofline).

use crate::routing::Routing;
use goodput_core::{ModelSpec, StepRecord};
use goodput_scheduler::SchedulerOutput;
pub use knots::Tables;
use knots::{batch_knots, clamped_hat, context_knots, hat, knots};
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
    /// each priced a long generation's steps a third too high.
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
}

/// The knots of [`Term::AfterPrefill`]'s table: steps since the last prefill.
pub const AFTER_PREFILL_KNOTS: [u32; 8] = [1, 2, 3, 4, 6, 8, 12, 16];

/// The weight of after-prefill knot `j` at `since` steps after a prefill: 1 at the knot,
/// falling linearly to 0 at its neighbouring knots (at 0 below the first, at twice the last).
fn after_prefill_weight(j: u32, since: u32) -> f64 {
    let Some(i) = AFTER_PREFILL_KNOTS.iter().position(|&k| k == j) else { return 0.0 };
    let (s, k) = (f64::from(since), f64::from(j));
    if s <= k {
        let lo = if i == 0 { 0.0 } else { f64::from(AFTER_PREFILL_KNOTS[i - 1]) };
        return ((s - lo) / (k - lo)).max(0.0);
    }
    let hi = AFTER_PREFILL_KNOTS.get(i + 1).map_or(2.0 * k, |&h| f64::from(h));
    ((hi - s) / (hi - k)).max(0.0)
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
    pub sampled: f64,
    /// Distinct experts reached, summed over the sparse layers, as the engine recorded it;
    /// `None` for a planned step (a cost model with an [`ExpertShape`] takes the expectation).
    pub experts_touched: Option<f64>,
    /// Steps since the last step that computed prompt tokens (1: the step right after it);
    /// `None` when no such step is known (a planned step alone, the first steps of a file).
    pub since_prefill: Option<u32>,
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
            sampled: r.sampled as f64,
            experts_touched: r.experts.as_ref().map(|e| e.touched as f64),
            since_prefill: None,
        }
    }

    /// The work of each of a run of steps, in order: each knows how many steps ago the last
    /// prompt tokens were computed (counted in step numbers, so a gap in the file's steps
    /// counts its missing ones).
    pub fn of_records(steps: &[StepRecord]) -> Vec<Self> {
        let mut last: Option<u64> = None;
        steps
            .iter()
            .map(|r| {
                let since = last.map(|l| u32::try_from(r.step.saturating_sub(l)).unwrap_or(u32::MAX));
                if r.prefill_tokens > 0 {
                    last = Some(r.step);
                }
                Self { since_prefill: since, ..Self::of_record(r) }
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
            sampled: o.sampled() as f64,
            experts_touched: None,
            since_prefill: None,
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
    /// known prefill.
    fn after_prefill(&self, j: u32) -> f64 {
        match self.since_prefill {
            Some(since) if self.prefill_tokens == 0.0 && self.decode_seqs > 0.0 => after_prefill_weight(j, since),
            _ => 0.0,
        }
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
            Term::Context(k) => hat(k, &tables.context, self.decode_context),
            Term::SeqContext(..) | Term::BatchContext(_) | Term::LengthContext(_) => {
                self.decode_context * self.share(t, tables)
            }
            Term::ExpertsTouched => self.experts_touched.unwrap_or(0.0),
            Term::AfterPrefill(j) => self.after_prefill(j),
            Term::AfterPrefillContext(j) => self.after_prefill(j) * self.decode_context,
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
    /// `j` with `decode_context + j × decode_seqs` (and `since_prefill + j`): each handed to `each`, in order, until it
    /// answers false. Equal to `step_seconds` of each step; a cost whose other parts stay put
    /// along a run computes them once.
    fn decode_run_seconds(&self, first: &StepWork, steps: usize, each: &mut dyn FnMut(f64) -> bool) {
        let mut w = *first;
        for j in 0..steps {
            w.decode_context = first.decode_context + j as f64 * first.decode_seqs;
            w.since_prefill = first.since_prefill.map(|s| s.saturating_add(j as u32));
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

#[path = "cost/knots.rs"]
mod knots;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_planned_step_expects_the_experts_a_recorded_one_counts() {
        // 2 sparse layers of 8 experts, top 2: 4 tokens reach 8·(1 − (6/8)^4) = 5.46875 each.
        let shape = ExpertShape { routing: Routing::uniform(8, 2), sparse_layers: 2 };
        let c =
            LinearCost::new(vec![Term::Fixed, Term::ExpertsTouched], vec![1e-3, 1e-4], 0.0).with_experts(Some(shape));
        let planned = StepWork { decode_seqs: 4.0, ..Default::default() };
        assert!((c.step_seconds(&planned) - (1e-3 + 1e-4 * 2.0 * 5.468_75)).abs() < 1e-12);
        let recorded = StepWork { experts_touched: Some(3.0), ..planned };
        assert!((c.step_seconds(&recorded) - (1e-3 + 3e-4)).abs() < 1e-12);
        // A dense model's cost ignores the term.
        let dense = LinearCost::new(vec![Term::Fixed, Term::ExpertsTouched], vec![1e-3, 1e-4], 0.0);
        assert_eq!(dense.step_seconds(&planned), 1e-3);
        assert_eq!(Term::ExpertsTouched.name(), "experts_touched");
    }

    #[test]
    fn a_linear_cost_is_the_sum_of_its_terms() {
        let c = LinearCost::classic([1e-3, 1e-5, 1e-9, 2e-5, 1e-8, 3e-5], 5e-5);
        let w = StepWork {
            prefill_tokens: 100.0,
            prefill_attention: 5050.0,
            decode_seqs: 4.0,
            decode_context: 400.0,
            sampled: 5.0,
            experts_touched: None,
            since_prefill: None,
        };
        // 1 ms + 100·10 µs + 5050 ns + 4·20 µs + 400·10 ns + 5·30 µs
        let want = 1e-3 + 1e-3 + 5.05e-6 + 8e-5 + 4e-6 + 1.5e-4;
        assert!((c.step_seconds(&w) - want).abs() < 1e-12);
        assert_eq!(w.value(Term::DecodeContext, &Tables::default()), 400.0);
        assert_eq!(c.coefficient(Term::SampledRows), 3e-5);
    }

    #[test]
    fn a_table_interpolates_between_its_knots_and_extends_its_last() {
        let terms = Term::table(6, 1, 1500);
        let k: Vec<Term> = [1, 2, 3, 4, 5, 8].into_iter().map(Term::Tokens).collect();
        assert_eq!(terms[..6], k[..]);
        assert_eq!(
            terms[6..],
            [
                Term::Rows(1),
                Term::PrefillAttention,
                Term::DecodeSeqs,
                Term::Context(512),
                Term::Context(1024),
                Term::Context(2048)
            ]
        );
        assert_eq!(knots(64), [1, 2, 3, 4, 5, 8, 9, 16, 17, 32, 33, 64]);
        assert_eq!(knots(3), [1, 2, 3, 4]);
        assert_eq!(context_knots(0), [512]);
        assert_eq!(context_knots(4096), [512, 1024, 2048, 4096]);
        // 1 µs a context token up to 1024, then 3 µs (a cliff); the last knot extends through 0.
        let t = Tables::of(&terms);
        let ctx = |c: f64| {
            let w = StepWork { decode_context: c, ..Default::default() };
            [512, 1024, 2048]
                .iter()
                .zip([0.512e-3, 1.024e-3, 4.096e-3])
                .map(|(&k, v)| w.value(Term::Context(k), &t) * v)
                .sum::<f64>()
        };
        assert!((ctx(256.0) - 0.256e-3).abs() < 1e-12 && (ctx(1536.0) - 2.56e-3).abs() < 1e-12);
        assert!((ctx(4096.0) - 8.192e-3).abs() < 1e-12, "beyond the last knot: its value × c / k");
        // 1 ms at 1 token, 2 at 2, 2.5 at 3, 3 at 4, 4 at 5, 10 at 8 (a kernel switch); 0.5 ms per row.
        let c = LinearCost::new(
            terms.clone(),
            vec![1e-3, 2e-3, 2.5e-3, 3e-3, 4e-3, 10e-3, 0.5e-3, 0.0, 0.0, 0.0, 0.0, 0.0],
            0.0,
        );
        let at = |tokens: f64, rows: f64| {
            let w = StepWork { prefill_tokens: tokens, sampled: rows, ..Default::default() };
            c.step_seconds(&w)
        };
        assert!((at(1.0, 1.0) - 1.5e-3).abs() < 1e-12);
        assert!((at(3.0, 1.0) - (2.5e-3 + 0.5e-3)).abs() < 1e-12);
        assert!((at(6.5, 0.0) - 7e-3).abs() < 1e-12, "halfway between 5 and 8");
        assert!((at(16.0, 1.0) - (20e-3 + 0.5e-3)).abs() < 1e-12, "the last knot grows linearly");
        assert!((at(8.0, 4.0) - (10e-3 + 2e-3)).abs() < 1e-12, "rows beyond their last knot");
    }

    #[test]
    fn steps_know_how_long_ago_the_last_prefill_was() {
        let step = |n: u64, prefill: usize| StepRecord {
            step: n,
            prefill_tokens: prefill,
            decode_seqs: 1,
            ..Default::default()
        };
        // Nothing before the first prefill; a missing step number counts; a prefill restarts.
        let steps = [step(1, 0), step(2, 50), step(3, 0), step(5, 0), step(6, 10), step(7, 0)];
        let since: Vec<Option<u32>> = StepWork::of_records(&steps).iter().map(|w| w.since_prefill).collect();
        assert_eq!(since, [None, None, Some(1), Some(3), Some(4), Some(1)]);
        let w = StepWork::of_records(&steps);
        let t = Tables::default();
        // A decode-only step 1 after a prefill has the term, with its context; a mixed one not.
        let after = StepWork { decode_context: 300.0, ..w[2] };
        assert_eq!(after.value(Term::AfterPrefill(1), &t), 1.0);
        assert_eq!(after.value(Term::AfterPrefillContext(1), &t), 300.0);
        assert_eq!(after.value(Term::AfterPrefill(2), &t), 0.0);
        assert_eq!(w[5].value(Term::AfterPrefill(1), &t), 1.0);
        let mixed = StepWork { prefill_tokens: 4.0, ..w[2] };
        assert_eq!(mixed.value(Term::AfterPrefill(1), &t), 0.0);
        assert_eq!(Term::after_prefill().len(), 2 * AFTER_PREFILL_KNOTS.len());
        // Between knots: 5 steps after is halfway from 4 to 6; 24 halfway from 16 to 0 at 32.
        let at = |since| StepWork { since_prefill: Some(since), ..after };
        assert_eq!(at(5).value(Term::AfterPrefill(4), &t), 0.5);
        assert_eq!(at(5).value(Term::AfterPrefill(6), &t), 0.5);
        assert_eq!(at(24).value(Term::AfterPrefill(16), &t), 0.5);
        assert_eq!(at(40).value(Term::AfterPrefill(16), &t), 0.0);
    }

    #[test]
    fn a_decode_shares_its_context_among_the_cells_of_its_batch_and_length() {
        let terms = Term::seq_table(8, 1024);
        let t = Tables::of(&terms);
        assert_eq!(t.batch, [1, 2, 3, 4, 8]);
        assert_eq!(t.seq_context, [256, 1024]);
        // 6 sequences of 640 tokens: halfway between batches 4 and 8, and contexts 256 and 1024.
        let w = StepWork { decode_seqs: 6.0, decode_context: 6.0 * 640.0, ..Default::default() };
        let share = |b, c| w.share(Term::SeqContext(b, c), &t);
        assert!((share(4, 256) - 0.25).abs() < 1e-12 && (share(8, 1024) - 0.25).abs() < 1e-12);
        let total: f64 = terms.iter().map(|&x| w.share(x, &t)).sum();
        assert!((total - 1.0).abs() < 1e-12);
        // 0.5 µs a token in every cell: the step's attention is 3840 × 0.5 µs.
        let c = LinearCost::new(terms.clone(), vec![0.5e-6; terms.len()], 0.0);
        assert!((c.step_seconds(&w) - 3840.0 * 0.5e-6).abs() < 1e-12);
        assert_eq!(StepWork::default().share(Term::SeqContext(1, 256), &t), 0.0, "no decode, no share");
        assert_eq!(Term::SeqContext(4, 256).name(), "context@4x256");
    }

    proptest::proptest! {
        #[test]
        fn every_decode_is_priced_whole_by_each_attention_table(b in 1u32..300, per_seq in 1.0f64..20_000.0) {
            // One rate in every cell: any step's attention is its Σ context at that rate,
            // whichever table and whatever its batch and length, inside the knots or beyond.
            let w = StepWork { decode_seqs: f64::from(b), decode_context: f64::from(b) * per_seq, ..Default::default() };
            for terms in [Term::seq_table(64, 1552), Term::batch_length_tables(64, 1552)] {
                let t = Tables::of(&terms);
                let cells: Vec<Term> = terms.iter().copied().filter(|x| x.is_attention_cell()).collect();
                let rows = if matches!(cells[0], Term::SeqContext(..)) { 1.0 } else { 2.0 };
                let share: f64 = cells.iter().map(|&x| w.share(x, &t)).sum();
                proptest::prop_assert!((share - rows).abs() < 1e-9, "{share}");
                let c = LinearCost::new(terms.clone(), vec![1e-7; terms.len()], 0.0);
                let want = rows * 1e-7 * w.decode_context;
                proptest::prop_assert!((c.step_seconds(&w) / want - 1.0).abs() < 1e-9);
            }
        }
    }
}
