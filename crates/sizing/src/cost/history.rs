//! What a step's price knows of the steps before it — steps since the last prefill, the
//! share of its decode batch that prefill made, the engine's idle time before it — counted
//! by one [`StepHistory`] for a step file and for the simulator alike.

use super::StepWork;
use goodput_core::Stamp;
use std::collections::VecDeque;

/// Steps a finished prefill counts as fresh: the after-prefill table's reach (twice its last
/// knot, where it falls to 0).
pub const FRESH_WINDOW: u64 = 32;

/// The steps so far, as the after-prefill and after-idle terms read them: fed each step (or
/// decode run) in order, [`StepHistory::before`] fills in the next step's history from them
/// and [`StepHistory::after`] records it. A step's finished prefills are its sampled rows
/// beyond its decode sequences, which a step file and the simulator both know.
#[derive(Clone, Debug, Default)]
pub struct StepHistory {
    /// The number of the last step that computed prompt tokens.
    last_prefill: Option<u64>,
    /// The number and end of the last step recorded.
    last: Option<(u64, Stamp)>,
    /// Prefills finished over the last [`FRESH_WINDOW`] steps, by step.
    finished: VecDeque<(u64, usize)>,
}

impl StepHistory {
    /// `w`, the work of step `step` starting at `start`, with its history: steps since the
    /// last prefill (a missing step number counts), the share of its decodes whose prefill
    /// finished in the [`FRESH_WINDOW`] steps before (at most 1), and the idle since the step
    /// before (when that step was the one numbered just before).
    pub fn before(&mut self, step: u64, start: Stamp, w: StepWork) -> StepWork {
        while self.finished.front().is_some_and(|(s, _)| s + FRESH_WINDOW <= step) {
            self.finished.pop_front();
        }
        let fresh: usize = self.finished.iter().map(|(_, n)| n).sum();
        StepWork {
            since_prefill: self.last_prefill.map(|l| u32::try_from(step.saturating_sub(l)).unwrap_or(u32::MAX)),
            fresh: (w.decode_seqs > 0.0).then(|| (fresh as f64 / w.decode_seqs).min(1.0)),
            idle_s: self.last.filter(|(n, end)| n + 1 == step && start >= *end).map(|(_, end)| start.secs_since(end)),
            ..w
        }
    }

    /// Step `step` (a decode run's last) ended at `end`, after computing prompt tokens
    /// (`prefill`) and finishing the prefill of `finished` sequences.
    pub fn after(&mut self, step: u64, end: Stamp, prefill: bool, finished: usize) {
        self.last = Some((step, end));
        if prefill {
            self.last_prefill = Some(step);
        }
        if finished > 0 {
            self.finished.push_back((step, finished));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_is_as_fresh_as_its_recent_prefills() {
        let mut h = StepHistory::default();
        let decodes = |n: f64| StepWork { decode_seqs: n, ..Default::default() };
        let share = |h: &mut StepHistory, step: u64, n: f64| h.before(step, Stamp(0), decodes(n)).fresh;
        h.after(10, Stamp(0), true, 1);
        // One of four sequences finished its prefill at step 10; a second at step 12.
        assert_eq!(share(&mut h, 11, 4.0), Some(0.25));
        h.after(12, Stamp(0), true, 1);
        assert_eq!(share(&mut h, 13, 4.0), Some(0.5));
        assert_eq!(share(&mut h, 13, 1.0), Some(1.0), "at most the whole batch");
        assert_eq!(share(&mut h, 13, 0.0), None);
        // Step 10's is stale from step 42 on, step 12's from 44.
        assert_eq!(share(&mut h, 42, 4.0), Some(0.25));
        assert_eq!(share(&mut h, 44, 4.0), Some(0.0));
        assert_eq!(h.before(44, Stamp(0), decodes(4.0)).since_prefill, Some(32));
    }
}
