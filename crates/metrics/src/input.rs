//! The prompt lengths a target counted against those the workload drew: a chat template or
//! another tokenizer makes a server count a prompt differently from the scenario's length.

use goodput_core::ClientRecord;
use serde::{Deserialize, Serialize};

/// The prompt lengths a target counted (`input_tokens`: a server's `usage.prompt_tokens`)
/// against those the workload drew ([`ClientRecord::drawn_input_tokens`]), means over the
/// completed requests that carry both. A chat template or another tokenizer counts
/// differently; the client fits its text prompts so the two agree.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct InputCheck {
    pub drawn_mean: f64,
    pub counted_mean: f64,
    pub requests: usize,
}

impl InputCheck {
    /// How far the counted mean may stray from the drawn one and still be the scenario's.
    pub const TOLERANCE: f64 = 0.02;

    pub fn of(records: &[&ClientRecord]) -> Option<InputCheck> {
        let pairs: Vec<(usize, usize)> = records
            .iter()
            .filter(|r| r.is_ok())
            .filter_map(|r| Some((r.drawn_input_tokens?, r.input_tokens)))
            .collect();
        let n = pairs.len();
        let mean = |f: fn(&(usize, usize)) -> usize| pairs.iter().map(f).sum::<usize>() as f64 / n as f64;
        (n > 0).then(|| InputCheck { drawn_mean: mean(|p| p.0), counted_mean: mean(|p| p.1), requests: n })
    }

    /// counted ÷ drawn − 1 (0 for a drawn mean of 0).
    pub fn off(&self) -> f64 {
        if self.drawn_mean > 0.0 {
            self.counted_mean / self.drawn_mean - 1.0
        } else {
            0.0
        }
    }

    /// The counted mean strays from the scenario's by more than [`InputCheck::TOLERANCE`].
    pub fn strays(&self) -> bool {
        self.off().abs() > Self::TOLERANCE
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use goodput_core::{Outcome, RecordBuilder, Stamp};

    fn ms(x: u64) -> Stamp {
        Stamp(x * 1_000_000)
    }

    /// 3 completed requests drawn at 100, 100 and 130 tokens (mean 110), counted 110, 112 and
    /// 140 (mean 120.67): 9.7 % over, beyond the 2 %; a failed one and one without a drawn
    /// length are left out.
    #[test]
    fn the_input_check_holds_counted_prompts_against_drawn_ones() {
        let r = |id, drawn: Option<usize>, counted, ok: bool| {
            let mut b = RecordBuilder::new(id).intended(ms(0)).end(ms(10)).input(counted);
            if let Some(d) = drawn {
                b = b.drawn_input(d);
            }
            if !ok {
                b = b.outcome(Outcome::Timeout);
            }
            b.build()
        };
        let recs = [r(0, Some(100), 110, true), r(1, Some(100), 112, true), r(2, Some(130), 140, true)];
        let extra = [r(3, Some(10), 500, false), r(4, None, 900, true)];
        let all: Vec<&ClientRecord> = recs.iter().chain(&extra).collect();
        let c = InputCheck::of(&all).unwrap();
        assert_eq!((c.drawn_mean, c.requests), (110.0, 3));
        assert!((c.counted_mean - 362.0 / 3.0).abs() < 1e-12);
        assert!((c.off() - (362.0 / 330.0 - 1.0)).abs() < 1e-12 && c.strays());
        let same = [r(0, Some(100), 101, true)];
        assert!(!InputCheck::of(&[&same[0]]).unwrap().strays(), "1 % is within the 2 %");
        assert_eq!(InputCheck::of(&[&extra[1]]), None);
    }
}
