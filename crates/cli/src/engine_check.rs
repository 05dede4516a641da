//! `goodput engine-check`: the engine on a device against the CPU f32 engine from the same
//! weights ([`goodput_engine::check::device`]), or with `--rounding-study` each bf16 rounding
//! scheme against f32 on the CPU ([`goodput_engine::check::study`]); printed through
//! `goodput_report::engine_check`. Exit code 1 when a check fails.

use crate::args::ModelArgs;
use anyhow::{bail, Context, Result};
use clap::Args;
use goodput_engine::check::device::CheckSpec;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// The model and the device under test (`--device cuda`); --dtype is the dtype of the
    /// logits comparison (default bf16 on CUDA). The greedy comparisons run at f32.
    #[command(flatten)]
    pub model: ModelArgs,
    /// Tokens generated per request in the greedy comparisons.
    #[arg(long, default_value_t = 24)]
    pub max_tokens: usize,
    /// Teacher-forced sequences of 128 random tokens in the logits comparison (the text
    /// prompts are always compared too).
    #[arg(long, default_value_t = 4)]
    pub sequences: usize,
    /// Lowest top-1 agreement of the logits comparison that passes.
    #[arg(long, default_value_t = 0.99)]
    pub min_top1: f64,
    /// Also write the results as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Instead of checking a device: on the CPU, the same teacher-forced sequences through an
    /// f32 forward that rounds chosen points of the step to bf16 (matmul inputs and outputs,
    /// q/k/v, attention scores, logits), each scheme's top-1 agreement with f32 — where a bf16
    /// GPU step loses agreement, found without a GPU.
    #[arg(long)]
    pub rounding_study: bool,
}

pub fn run(a: CheckArgs) -> Result<()> {
    let spec =
        CheckSpec { model: a.model.source(), max_tokens: a.max_tokens, sequences: a.sequences, min_top1: a.min_top1 };
    let say = &mut |line: &str| eprintln!("{line}");
    let (json, passed) = if a.rounding_study {
        let results = goodput_engine::check::device::rounding_study(&spec, say)?;
        println!("{}", goodput_report::engine_check::rounding(&spec.model.spec()?.name, &results));
        (serde_json::to_string_pretty(&results)?, true)
    } else {
        let report = goodput_engine::check::device::run(&spec, say)?;
        print!("{}", goodput_report::engine_check::text(&report));
        (serde_json::to_string_pretty(&report)?, report.passed)
    };
    if let Some(p) = &a.json {
        std::fs::write(p, json).with_context(|| format!("cannot write {}", p.display()))?;
    }
    if !passed {
        bail!("engine-check failed (see above)");
    }
    Ok(())
}
