//! The sequences a decode step holds that finished their prefill a few steps before: the
//! share of the batch the after-prefill terms weigh (see [`super::Term::AfterPrefill`]).

use std::collections::VecDeque;

/// Steps a finished prefill counts as fresh: the after-prefill table's reach (twice its last
/// knot, where it falls to 0).
pub const FRESH_WINDOW: u64 = 32;

/// The prefills finished over the last [`FRESH_WINDOW`] steps, by step: fed each step's
/// finished prefills in order ([`FreshSequences::record`]), it tells the share of a decode
/// batch they make ([`FreshSequences::share`]). The same count for a step file and for the
/// simulator, which see only a step's totals: a step's finished prefills are its sampled rows
/// beyond its decode sequences.
#[derive(Clone, Debug, Default)]
pub struct FreshSequences {
    finished: VecDeque<(u64, usize)>,
}

impl FreshSequences {
    /// The share of `decode_seqs` sequences that finished a prefill in the [`FRESH_WINDOW`]
    /// steps before `step` (at most 1; `None` for a step without decodes).
    pub fn share(&mut self, step: u64, decode_seqs: f64) -> Option<f64> {
        while self.finished.front().is_some_and(|(s, _)| s + FRESH_WINDOW <= step) {
            self.finished.pop_front();
        }
        let fresh: usize = self.finished.iter().map(|(_, n)| n).sum();
        (decode_seqs > 0.0).then(|| (fresh as f64 / decode_seqs).min(1.0))
    }

    /// Step `step` finished the prefill of `n` sequences.
    pub fn record(&mut self, step: u64, n: usize) {
        if n > 0 {
            self.finished.push_back((step, n));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_is_as_fresh_as_its_recent_prefills() {
        let mut f = FreshSequences::default();
        f.record(10, 1);
        // One of four sequences finished its prefill at step 10; a second at step 12.
        assert_eq!(f.share(11, 4.0), Some(0.25));
        f.record(12, 1);
        assert_eq!(f.share(13, 4.0), Some(0.5));
        assert_eq!(f.share(13, 1.0), Some(1.0), "at most the whole batch");
        assert_eq!(f.share(13, 0.0), None);
        // Step 10's is stale from step 42 on, step 12's from 44.
        assert_eq!(f.share(42, 4.0), Some(0.25));
        assert_eq!(f.share(44, 4.0), Some(0.0));
    }
}
