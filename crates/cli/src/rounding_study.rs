//! `goodput engine-check --rounding-study`: which bf16 rounding of a step costs how much top-1
//! agreement with f32, on the CPU (`goodput_engine::check::numerics`). It uses the same teacher-forced
//! sequences as the logits comparison and reports each scheme against f32 on the same weights,
//! so a GPU's agreement can be predicted, and its losses placed, on a machine without one.

use anyhow::Result;
use goodput_core::TokenId;
use goodput_engine::check::numerics::agreement;
use goodput_engine::check::reference::Rounding;
use goodput_engine::Llama;
use goodput_report::console as table;
use serde::Serialize;

/// Teacher-forced sequences: each one's tokens and the positions whose logits are compared
/// (what `engine_check` builds and hands over; this module imports nothing of it).
pub type Sequences = Vec<(Vec<TokenId>, std::ops::Range<usize>)>;

/// One scheme on one kind of sequence.
#[derive(Serialize)]
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
            seqs.iter().map(|(t, _)| model.logits_rounded(t, Rounding::NONE)).collect::<Result<_, _>>()?;
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

pub fn print(model: &str, results: &[SchemeResult]) {
    let mut t = table::new(&["rounded to bf16", "sequences", "positions", "top-1 vs f32", "max |Δ|"]);
    for r in results {
        t.add_row(vec![
            r.scheme.to_string(),
            r.sequences.to_string(),
            r.positions.to_string(),
            format!("{:.2} %", r.top1_agreement * 100.0),
            format!("{:.4}", r.max_abs_diff),
        ]);
    }
    println!("{model}: bf16 rounding points against f32 on the same weights (CPU, dense reference)\n{t}");
}
