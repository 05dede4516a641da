//! The ratio of one set of steps' times to another's on the shapes both measured. Two grids
//! of one machine taken at different times (before and after a campaign of runs) tell how far
//! the machine's own speed moved between them, which no fit can tell from either alone: on a
//! shared host, a 90 s grid ran the decode shapes that a 300 s grid 50 minutes later also
//! measured 15–40 % slower.

use goodput_core::StepRecord;
use goodput_metrics::stats::percentile;
use std::collections::HashMap;

/// Steps of a shape each side needs before the shape is compared.
const MIN_STEPS: usize = 3;

/// One set of steps against another: `ratio` is the median, over the decode shapes both
/// measured, of the later set's median step time ÷ the earlier's (> 1: slower later).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SpeedRatio {
    pub ratio: f64,
    /// Shapes compared.
    pub shapes: usize,
}

/// A decode-only step's shape: its batch, and its context per sequence to 16 tokens (a grid's
/// decode probe walks 32 tokens at one batch and starting context, so two grids' probes meet
/// on two or three shapes each).
fn shape(s: &StepRecord) -> Option<(usize, u64)> {
    (s.prefill_tokens == 0 && s.decode_seqs > 0).then(|| (s.decode_seqs, s.decode_context / s.decode_seqs as u64 / 16))
}

/// Each shape's step times (start to end, seconds).
fn by_shape(steps: &[StepRecord]) -> HashMap<(usize, u64), Vec<f64>> {
    let mut out: HashMap<(usize, u64), Vec<f64>> = HashMap::new();
    for s in steps {
        if let Some(k) = shape(s) {
            out.entry(k).or_default().push(s.end.secs_since(s.start));
        }
    }
    out
}

/// `later` against `earlier` (see [`SpeedRatio`]); `None` when no decode shape has
/// [`MIN_STEPS`] steps on both sides.
pub fn speed_ratio(earlier: &[StepRecord], later: &[StepRecord]) -> Option<SpeedRatio> {
    let (a, b) = (by_shape(earlier), by_shape(later));
    let ratios: Vec<f64> = a
        .iter()
        .filter(|(_, v)| v.len() >= MIN_STEPS)
        .filter_map(|(k, va)| {
            let vb = b.get(k).filter(|v| v.len() >= MIN_STEPS)?;
            Some(percentile(vb, 50.0)? / percentile(va, 50.0)?)
        })
        .filter(|r| r.is_finite())
        .collect();
    Some(SpeedRatio { ratio: percentile(&ratios, 50.0)?, shapes: ratios.len() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use goodput_core::Stamp;

    fn step(decode_seqs: usize, context: u64, ms: u64) -> StepRecord {
        StepRecord {
            decode_seqs,
            decode_context: context * decode_seqs as u64,
            start: Stamp(0),
            end: Stamp(ms * 1_000_000),
            ..Default::default()
        }
    }

    #[test]
    fn a_later_grid_is_compared_shape_by_shape() {
        // Batch 1 at 256: 2, 2, 2 ms then 3, 3, 3 (1.5); batch 4 at 1024: 10, 10, 12 then 11,
        // 11, 11 (1.1); batch 8 at 64 only before, batch 2 at 64 with two steps after: not
        // compared. The median of 1.5 and 1.1 is 1.3.
        let mut before: Vec<StepRecord> = [2, 2, 2].map(|t| step(1, 256, t)).into();
        before.extend([10, 10, 12].map(|t| step(4, 1024, t)));
        before.extend([5, 5, 5].map(|t| step(8, 64, t)));
        before.extend([3, 3, 3].map(|t| step(2, 64, t)));
        let mut after: Vec<StepRecord> = [3, 3, 3].map(|t| step(1, 260, t)).into();
        after.extend([11, 11, 11].map(|t| step(4, 1030, t)));
        after.extend([9, 9].map(|t| step(2, 64, t)));
        // Prefill steps of the same batch and context are no decode shape (counted, batch 1
        // would be 50 ms).
        after.extend([0, 1, 2, 3].map(|_| StepRecord { prefill_tokens: 16, ..step(1, 256, 50) }));
        let r = speed_ratio(&before, &after).expect("two shapes");
        assert_eq!(r.shapes, 2);
        assert!((r.ratio - 1.3).abs() < 1e-12, "{r:?}");
        assert_eq!(speed_ratio(&before, &[step(16, 16, 1)]), None);
    }
}
