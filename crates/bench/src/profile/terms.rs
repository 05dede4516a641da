//! The terms a profile is fitted with: the tables over the shapes the steps reached, and the
//! decode-attention term chosen by held-out error (`--context-term auto`, the default): a
//! table over Σ context, or one over the batch and the context per sequence, whichever prices
//! the step shapes it was not fitted on better (`goodput_sizing::fit::held_out`), never by
//! in-sample R², which the larger table always wins.

use goodput_core::StepRecord;
use goodput_sizing::cost::{ExpertShape, Term};
use goodput_sizing::fit::{held_out, Sample};
use goodput_sizing::profile::Candidate;

/// Folds of the held-out comparison.
const FOLDS: usize = 5;

/// The terms to fit `steps` (sampled as `samples`) with, and the decode-attention candidates
/// compared with their held-out errors (empty when `context_term` named one).
pub fn choose(
    steps: &[StepRecord],
    samples: &[Sample],
    experts: Option<ExpertShape>,
    context_term: &str,
    rows_term: &str,
) -> (Vec<Term>, Vec<Candidate>) {
    // Tables over the batch shapes the steps reached (kernels switch with the batch).
    let max_tokens = steps.iter().map(|s| s.prefill_tokens + s.decode_seqs).max().unwrap_or(1);
    let max_rows = steps.iter().map(|s| s.sampled).max().unwrap_or(1);
    let decodes = || steps.iter().filter(|s| s.decode_seqs > 0);
    // With repeated positions priced apart the Σ-context table is read at the distinct ones.
    let repeated = repeats(steps);
    let table_context = |s: &StepRecord| match s.decode_distinct_context {
        Some(d) if repeated => d.min(s.decode_context),
        _ => s.decode_context,
    };
    let max_context = decodes().map(table_context).max().unwrap_or(0);
    let max_batch = decodes().map(|s| s.decode_seqs).max().unwrap_or(1);
    let max_per_seq = decodes().map(|s| s.decode_context / s.decode_seqs as u64).max().unwrap_or(0);
    let mut base = Term::table(max_tokens, max_rows, usize::try_from(max_context).unwrap_or(usize::MAX));
    base.retain(|t| !matches!(t, Term::Context(_)));
    if rows_term == "linear" {
        base.retain(|t| !matches!(t, Term::Rows(_)));
        base.push(Term::SampledRows);
    }
    // A mixture of experts reads the experts its tokens reach: recorded per step, expected
    // when simulated.
    base.extend(experts.map(|_| Term::ExpertsTouched));
    base.extend(Term::after_prefill());
    base.extend(Term::after_idle());
    // Decode batches that share a prefix read its blocks once: their repeated positions are
    // priced apart when the steps hold any (the grid's shared-prefix probes, a run's turns).
    base.extend(repeated.then_some(Term::RepeatedContext));
    let with = |attention: Vec<Term>| {
        let mut t = base.clone();
        t.extend(attention);
        t
    };
    let sigma = Term::table(1, 1, usize::try_from(max_context).unwrap_or(usize::MAX))
        .into_iter()
        .filter(|t| matches!(t, Term::Context(_)))
        .collect::<Vec<_>>();
    let per_seq = usize::try_from(max_per_seq).unwrap_or(usize::MAX);
    let seq = Term::seq_table(max_batch, per_seq);
    let additive = Term::batch_length_tables(max_batch, per_seq);
    let candidates: Vec<(&str, Vec<Term>)> = match context_term {
        "linear" => return (with(vec![Term::DecodeContext]), Vec::new()),
        "table" => return (with(sigma), Vec::new()),
        "seq" => return (with(seq), Vec::new()),
        "batch+length" => return (with(additive), Vec::new()),
        _ => vec![
            ("Σ context", with(sigma)),
            ("batch + context per sequence", with(additive)),
            ("batch × context per sequence", with(seq)),
        ],
    };
    let scored: Vec<(Candidate, Vec<Term>)> = candidates
        .into_iter()
        .filter_map(|(name, terms)| {
            let h = held_out(samples, &terms, FOLDS).ok()?;
            Some((Candidate { name: name.into(), held_out: h, chosen: false }, terms))
        })
        .collect();
    let Some(best) = (0..scored.len()).min_by(|&i, &j| scored[i].0.held_out.mean.total_cmp(&scored[j].0.held_out.mean))
    else {
        return (with(Term::table(1, 1, usize::try_from(max_context).unwrap_or(usize::MAX))), Vec::new());
    };
    let terms = scored[best].1.clone();
    let selection = scored.into_iter().enumerate().map(|(i, (c, _))| Candidate { chosen: i == best, ..c }).collect();
    (terms, selection)
}

/// Whether some decode step of `steps` attends positions another of its sequences also
/// attends (its distinct context below its Σ context).
pub fn repeats(steps: &[StepRecord]) -> bool {
    steps.iter().any(|s| s.decode_distinct_context.is_some_and(|d| d < s.decode_context))
}
