//! A step's period and its price. The period is what a profile is fitted to and priced
//! against: from a step's start to the next step's start while the engine stayed busy (what
//! sets throughput: the engine's own work between steps, sending tokens and taking requests,
//! grows with the batch), else its duration plus the median gap. [`price`] sets measured steps
//! (a replica's under a run, or a simulated replica's) beside a cost model's price of the same
//! work, by kind of step: where a simulation built on the model gains or loses time against
//! the run, step by step.

use crate::cost::{StepCost, StepWork};
use goodput_core::StepRecord;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Each step that took time, with its work (knowing the steps before it) and its period in
/// seconds.
pub fn periods(steps: &[StepRecord], gap: f64) -> Vec<(&StepRecord, StepWork, f64)> {
    let works = StepWork::of_records(steps);
    steps
        .iter()
        .zip(works)
        .enumerate()
        .filter(|(_, (s, _))| s.end > s.start)
        .map(|(i, (s, work))| {
            let next =
                steps.get(i + 1).filter(|n| n.step == s.step + 1 && s.running + s.waiting > 0 && n.start >= s.end);
            let seconds = match next {
                Some(n) => n.start.secs_since(s.start),
                None => s.end.secs_since(s.start) + gap,
            };
            (s, work, seconds)
        })
        .collect()
}

/// Median time from a step's end to the next step's start while work remained.
pub fn gap(steps: &[StepRecord]) -> f64 {
    let gaps: Vec<f64> = steps
        .windows(2)
        .filter(|w| w[0].running + w[0].waiting > 0 && w[1].start >= w[0].end && w[1].step == w[0].step + 1)
        .map(|w| w[1].start.secs_since(w[0].end))
        .collect();
    goodput_metrics::stats::percentile(&gaps, 50.0).unwrap_or(0.0)
}

/// What one engine did (a file of its steps), and its steps against their price.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Priced {
    pub file: String,
    pub steps: usize,
    /// Σ step periods (measured), seconds.
    pub busy_s: f64,
    /// Σ the profile's price of the same steps (step cost plus its gap), seconds.
    pub priced_s: f64,
    /// Prompt (and recompute) tokens computed.
    pub prefill_tokens: usize,
    /// Steps that computed prompt tokens beside decode tokens.
    pub mixed_steps: usize,
    pub preemptions: usize,
    /// Prompt tokens found in the prefix cache, of those looked up.
    pub prefix_hit_tokens: usize,
    pub prefix_query_tokens: usize,
    /// Mean sequences in a step.
    pub mean_seqs: f64,
    pub kinds: Vec<Kind>,
}

/// What a kind of step computes.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum StepClass {
    /// Decodes alone.
    #[default]
    Decode,
    /// Prompt tokens beside decodes.
    Mixed,
    /// Prompt tokens alone.
    Prefill,
}

/// The steps of one kind: measured period ÷ price, percentiles.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Kind {
    pub kind: String,
    /// What the kind's steps compute, and its size: the decode batch, or the prompt tokens
    /// rounded up to a power of two.
    #[serde(default)]
    pub class: StepClass,
    #[serde(default)]
    pub size: usize,
    pub steps: usize,
    pub period_p50_s: f64,
    pub ratio_p10: f64,
    pub ratio_p50: f64,
    pub ratio_p90: f64,
    /// Σ measured ÷ Σ priced over the kind's steps.
    pub ratio_total: f64,
    /// Σ measured periods and Σ prices of the kind's steps, seconds (what kinds of several
    /// files add up to).
    #[serde(default)]
    pub measured_s: f64,
    #[serde(default)]
    pub priced_s: f64,
}

/// A kind of step: its class and size (the order kinds are listed in), and its name.
type KindKey = ((StepClass, usize), String);

/// The kind a step is counted under — decodes alone by batch; prompt chunks beside decodes
/// (mixed), or alone, by their tokens rounded up to a power of two — with its place in that
/// order.
fn kind(s: &StepRecord) -> KindKey {
    let bucket = s.prefill_tokens.next_power_of_two();
    match (s.prefill_tokens, s.decode_seqs) {
        (0, k) => ((StepClass::Decode, k), format!("decode ×{k}")),
        (_, 0) => ((StepClass::Prefill, bucket), format!("prefill ≤{bucket}")),
        (_, _) => ((StepClass::Mixed, bucket), format!("mixed ≤{bucket}")),
    }
}

/// `steps` priced by `cost` (periods as the fit reads them).
pub fn price(file: String, steps: &[StepRecord], cost: &dyn StepCost) -> Priced {
    let periods = periods(steps, gap(steps));
    let price = |w: &StepWork| cost.step_seconds(w) + cost.gap_seconds();
    let mut by_kind: BTreeMap<KindKey, Vec<(f64, f64)>> = BTreeMap::new();
    for (s, w, measured) in &periods {
        by_kind.entry(kind(s)).or_default().push((*measured, price(w)));
    }
    let kinds = by_kind.into_iter().map(|(key, pairs)| summarize_kind(key, &pairs)).collect();
    let n = steps.len().max(1) as f64;
    Priced {
        file,
        steps: steps.len(),
        busy_s: periods.iter().map(|(_, _, p)| p).sum(),
        priced_s: periods.iter().map(|(_, w, _)| price(w)).sum(),
        prefill_tokens: steps.iter().map(|s| s.prefill_tokens).sum(),
        mixed_steps: steps.iter().filter(|s| s.prefill_tokens > 0 && s.decode_seqs > 0).count(),
        preemptions: steps.iter().map(|s| s.preemptions).sum(),
        prefix_hit_tokens: steps.iter().map(|s| s.prefix_hit_tokens).sum(),
        prefix_query_tokens: steps.iter().map(|s| s.prefix_query_tokens).sum(),
        mean_seqs: steps.iter().map(|s| s.num_seqs as f64).sum::<f64>() / n,
        kinds,
    }
}

fn summarize_kind(((class, size), kind): KindKey, pairs: &[(f64, f64)]) -> Kind {
    use goodput_metrics::stats::percentile;
    let ratios: Vec<f64> = pairs.iter().filter(|(_, p)| *p > 0.0).map(|(m, p)| m / p).collect();
    let periods: Vec<f64> = pairs.iter().map(|(m, _)| *m).collect();
    let at = |v: &[f64], p| percentile(v, p).unwrap_or(f64::NAN);
    let priced: f64 = pairs.iter().map(|(_, p)| p).sum();
    let measured: f64 = periods.iter().sum();
    Kind {
        kind,
        class,
        size,
        steps: pairs.len(),
        period_p50_s: at(&periods, 50.0),
        ratio_p10: at(&ratios, 10.0),
        ratio_p50: at(&ratios, 50.0),
        ratio_p90: at(&ratios, 90.0),
        ratio_total: if priced > 0.0 { measured / priced } else { f64::NAN },
        measured_s: measured,
        priced_s: priced,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::{LinearCost, Term};
    use goodput_core::Stamp;

    fn idle_or_busy(step: u64, start_ms: u64, end_ms: u64, busy: bool) -> StepRecord {
        StepRecord {
            step,
            start: Stamp(start_ms * 1_000_000),
            end: Stamp(end_ms * 1_000_000),
            running: usize::from(busy),
            ..StepRecord::default()
        }
    }

    #[test]
    fn a_period_runs_to_the_next_start_while_busy_else_duration_and_gap() {
        // Gaps while busy: 2 ms (10→12) and 4 ms (20→24); median 3 ms. The third step ends
        // the busy stretch (nothing running), the fourth is the last.
        let steps = [
            idle_or_busy(0, 0, 10, true),
            idle_or_busy(1, 12, 20, true),
            idle_or_busy(2, 24, 30, false),
            idle_or_busy(3, 50, 55, true),
        ];
        let g = gap(&steps);
        assert!((g - 0.003).abs() < 1e-12, "{g}");
        let p: Vec<f64> = periods(&steps, g).iter().map(|(_, _, s)| *s).collect();
        let want = [0.012, 0.012, 0.006 + 0.003, 0.005 + 0.003];
        for (a, b) in p.iter().zip(want) {
            assert!((a - b).abs() < 1e-12, "{p:?}");
        }
    }

    fn step(step: u64, start_ms: u64, end_ms: u64, prefill: usize, decodes: usize) -> StepRecord {
        StepRecord {
            step,
            start: Stamp(start_ms * 1_000_000),
            end: Stamp(end_ms * 1_000_000),
            prefill_tokens: prefill,
            decode_seqs: decodes,
            num_seqs: decodes + usize::from(prefill > 0),
            sampled: decodes + usize::from(prefill > 0),
            running: 1,
            ..StepRecord::default()
        }
    }

    #[test]
    fn steps_are_priced_by_kind_against_their_periods() {
        // Price: 10 ms a step + 1 ms a prompt token + 2 ms a decode sequence, no gap.
        let cost =
            LinearCost::new(vec![Term::Fixed, Term::PrefillTokens, Term::DecodeSeqs], vec![0.010, 0.001, 0.002], 0.0);
        // Periods (start to next start, busy throughout): 12, 24, 14, then the last step's
        // 14 ms duration plus the median gap (0, every step starts where the last ended).
        let steps = [step(0, 0, 12, 0, 1), step(1, 12, 36, 10, 1), step(2, 36, 50, 0, 2), step(3, 50, 64, 0, 2)];
        let p = price("a".into(), &steps, &cost);
        // Prices: decode ×1 12 ms; mixed (10 tokens + 1) 22 ms; decode ×2 14 ms each.
        assert!((p.busy_s - 0.064).abs() < 1e-12 && (p.priced_s - 0.062).abs() < 1e-12, "{p:?}");
        assert_eq!((p.prefill_tokens, p.mixed_steps, p.steps), (10, 1, 4));
        let names: Vec<&str> = p.kinds.iter().map(|k| k.kind.as_str()).collect();
        assert_eq!(names, ["decode ×1", "decode ×2", "mixed ≤16"]);
        let mixed = &p.kinds[2];
        assert!((mixed.ratio_p50 - 24.0 / 22.0).abs() < 1e-9 && (mixed.ratio_total - 24.0 / 22.0).abs() < 1e-9);
        assert!((p.kinds[1].ratio_p50 - 1.0).abs() < 1e-9 && p.kinds[1].steps == 2);
        assert!((p.mean_seqs - 1.75).abs() < 1e-12);
    }
}
