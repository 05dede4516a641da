//! The rounding study (`goodput engine-check --rounding-study`): which bf16 rounding of a step costs how much top-1
//! agreement with f32, on the CPU (`goodput_engine::check::numerics`). It uses the same teacher-forced
//! sequences as the logits comparison and reports each scheme against f32 on the same weights,
//! so a GPU's agreement can be predicted, and its losses placed, on a machine without one.

use super::numerics::agreement;
use super::reference::Rounding;
use crate::error::Result;
use crate::Llama;
use goodput_core::TokenId;
use serde::Serialize;

/// Teacher-forced sequences: each one's tokens and the positions whose logits are compared
/// (what the device check builds and hands over; this module imports nothing of it).
pub type Sequences = Vec<(Vec<TokenId>, std::ops::Range<usize>)>;

/// One scheme on one kind of sequence.
#[derive(Debug, Serialize)]
pub struct SchemeResult {
    pub scheme: &'static str,
    pub rounding: String,
    pub sequences: &'static str,
    pub positions: usize,
    pub top1_agreement: f64,
    pub max_abs_diff: f64,
}

/// Every scheme of [`Rounding::schemes`] on each set of `sets`, against the f32 logits.
pub fn run(model: &Llama, sets: &[(&'static str, Sequences)]) -> Result<Vec<SchemeResult>> {
    let mut out = Vec::new();
    for (name, seqs) in sets {
        let want: Vec<Vec<Vec<f32>>> =
            seqs.iter().map(|(t, _)| model.logits_rounded(t, Rounding::NONE)).collect::<Result<_>>()?;
        for (scheme, r) in Rounding::schemes() {
            let (mut agree, mut n, mut max) = (0, 0, 0f64);
            for ((tokens, range), w) in seqs.iter().zip(&want) {
                let got = model.logits_rounded(tokens, r)?;
                let (a, k, m) = agreement(&w[range.clone()], &got[range.clone()]);
                (agree, n, max) = (agree + a, n + k, max.max(m));
            }
            out.push(SchemeResult {
                scheme,
                rounding: format!("{r:?}"),
                sequences: name,
                positions: n,
                top1_agreement: agree as f64 / n.max(1) as f64,
                max_abs_diff: max,
            });
        }
    }
    Ok(out)
}
