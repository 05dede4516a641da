//! What a step costs: the step's contents as the terms of a linear model, and the models that
//! turn them into seconds (fitted from measured steps, or projected from the roofline).

use goodput_core::StepRecord;
use goodput_scheduler::SchedulerOutput;
use serde::{Deserialize, Serialize};

/// One term of the step-cost model, in the spirit of Vidur and BLIS: what a step's time grows
/// with. The unit of each coefficient is seconds per unit of its term.
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
}

impl Term {
    /// Every term, in the order of [`StepWork::row`].
    pub const ALL: [Term; 6] = [
        Term::Fixed,
        Term::PrefillTokens,
        Term::PrefillAttention,
        Term::DecodeSeqs,
        Term::DecodeContext,
        Term::SampledRows,
    ];

    /// The term's name in files and tables.
    pub fn name(self) -> &'static str {
        match self {
            Term::Fixed => "fixed",
            Term::PrefillTokens => "prefill_tokens",
            Term::PrefillAttention => "prefill_attention",
            Term::DecodeSeqs => "decode_seqs",
            Term::DecodeContext => "decode_context",
            Term::SampledRows => "sampled_rows",
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
        }
    }

    /// The value of each term, in [`Term::ALL`]'s order (the fixed term is 1).
    pub fn row(&self) -> [f64; 6] {
        [1.0, self.prefill_tokens, self.prefill_attention, self.decode_seqs, self.decode_context, self.sampled]
    }

    /// The value of one term.
    pub fn get(&self, t: Term) -> f64 {
        self.row()[Term::ALL.iter().position(|x| *x == t).unwrap_or(0)]
    }
}

/// What a step costs in seconds, and the engine's own time between two busy steps.
pub trait StepCost: Send + Sync {
    /// Seconds from the start of a step doing `w` to its end.
    fn step_seconds(&self, w: &StepWork) -> f64;
    /// Seconds between the end of a step and the start of the next when there is work (taking
    /// new requests, sending tokens).
    fn gap_seconds(&self) -> f64;
}

/// A linear step-cost model: Σ coefficient × term, plus the gap between busy steps.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LinearCost {
    /// Seconds per unit of each term, in [`Term::ALL`]'s order.
    pub coefficients: [f64; 6],
    pub gap_s: f64,
}

impl LinearCost {
    pub fn coefficient(&self, t: Term) -> f64 {
        self.coefficients[Term::ALL.iter().position(|x| *x == t).unwrap_or(0)]
    }
}

impl StepCost for LinearCost {
    fn step_seconds(&self, w: &StepWork) -> f64 {
        w.row().iter().zip(&self.coefficients).map(|(x, c)| x * c).sum::<f64>().max(0.0)
    }
    fn gap_seconds(&self) -> f64 {
        self.gap_s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_linear_cost_is_the_sum_of_its_terms() {
        let c = LinearCost { coefficients: [1e-3, 1e-5, 1e-9, 2e-5, 1e-8, 3e-5], gap_s: 5e-5 };
        let w = StepWork {
            prefill_tokens: 100.0,
            prefill_attention: 5050.0,
            decode_seqs: 4.0,
            decode_context: 400.0,
            sampled: 5.0,
        };
        // 1 ms + 100·10 µs + 5050 ns + 4·20 µs + 400·10 ns + 5·30 µs
        let want = 1e-3 + 1e-3 + 5.05e-6 + 8e-5 + 4e-6 + 1.5e-4;
        assert!((c.step_seconds(&w) - want).abs() < 1e-12);
        assert_eq!(w.get(Term::DecodeContext), 400.0);
        assert_eq!(c.coefficient(Term::SampledRows), 3e-5);
    }
}
