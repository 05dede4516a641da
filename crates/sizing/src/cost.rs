//! What a step costs: the step's contents as the terms of a linear model, and the models that
//! turn them into seconds (fitted from measured steps, or projected from the roofline).

use crate::routing::Routing;
use goodput_core::{ModelSpec, StepRecord};
use goodput_scheduler::SchedulerOutput;
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
        }
    }
}

/// Knots 1–5, then every power of two and the next count, and last the first power of two at
/// or above `max`.
fn knots(max: usize) -> Vec<u32> {
    let top = max.max(1).next_power_of_two() as u32;
    let mut out: Vec<u32> = (1..=5).filter(|&k| k <= top.max(1)).collect();
    let mut p = 8;
    while p < top {
        out.extend([p, p + 1]);
        p *= 2;
    }
    if top > 5 {
        out.push(top);
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// The first context knot: below it a step's K/V is small against any cache.
const FIRST_CONTEXT_KNOT: u32 = 512;

/// Every power of two from [`FIRST_CONTEXT_KNOT`] to the first at or above `max`.
fn context_knots(max: usize) -> Vec<u32> {
    let top = (max.max(1).next_power_of_two() as u64).clamp(FIRST_CONTEXT_KNOT as u64, 1 << 31) as u32;
    std::iter::successors(Some(FIRST_CONTEXT_KNOT), |k| (*k < top).then(|| k * 2)).collect()
}

/// The hat function of knot `k` among the sorted `knots` at `x`: 1 at `k`, falling linearly
/// to 0 at its neighbouring knots (to 0 at `x = 0` below the first); the last knot keeps
/// rising beyond itself (`x / k`).
fn hat(k: u32, knots: &[u32], x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    let i = knots.iter().position(|&n| n == k).unwrap_or(0);
    let kf = k as f64;
    if x <= kf {
        let lo = if i == 0 { 0.0 } else { knots[i - 1] as f64 };
        return ((x - lo) / (kf - lo)).max(0.0);
    }
    match knots.get(i + 1) {
        Some(&hi) => ((hi as f64 - x) / (hi as f64 - kf)).max(0.0),
        None => x / kf,
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
    /// The work of a step the engine recorded.
    pub fn of_record(r: &StepRecord) -> Self {
        Self {
            prefill_tokens: r.prefill_tokens as f64,
            prefill_attention: r.prefill_attention as f64,
            decode_seqs: r.decode_seqs as f64,
            decode_context: r.decode_context as f64,
            sampled: r.sampled as f64,
            experts_touched: r.experts.as_ref().map(|e| e.touched as f64),
        }
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
            Term::ExpertsTouched => self.experts_touched.unwrap_or(0.0),
        }
    }

    /// The values of `terms`.
    pub fn values(&self, terms: &[Term]) -> Vec<f64> {
        let tables = Tables::of(terms);
        terms.iter().map(|&t| self.value(t, &tables)).collect()
    }
}

/// The sorted knots of the tokens, rows and context tables among some terms.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tables {
    pub tokens: Vec<u32>,
    pub rows: Vec<u32>,
    pub context: Vec<u32>,
}

impl Tables {
    pub fn of(terms: &[Term]) -> Self {
        let pick = |f: fn(&Term) -> Option<u32>| {
            let mut v: Vec<u32> = terms.iter().filter_map(f).collect();
            v.sort_unstable();
            v
        };
        Self {
            tokens: pick(|t| if let Term::Tokens(k) = t { Some(*k) } else { None }),
            rows: pick(|t| if let Term::Rows(k) = t { Some(*k) } else { None }),
            context: pick(|t| if let Term::Context(k) = t { Some(*k) } else { None }),
        }
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
    /// `j` with `decode_context + j × decode_seqs`: each handed to `each`, in order, until it
    /// answers false. Equal to `step_seconds` of each step; a cost whose other parts stay put
    /// along a run computes them once.
    fn decode_run_seconds(&self, first: &StepWork, steps: usize, each: &mut dyn FnMut(f64) -> bool) {
        let mut w = *first;
        for j in 0..steps {
            w.decode_context = first.decode_context + j as f64 * first.decode_seqs;
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
}
