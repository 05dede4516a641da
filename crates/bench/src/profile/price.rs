//! `goodput profile --from-steps FILES --price-with PROFILE`: measured steps priced by a
//! profile, without fitting. For each file (a replica's steps under a run, or a simulated
//! replica's from `plan --trace --steps-out`) what its engine did — steps, busy time, prefill
//! tokens, mixed steps, preemptions, prefix hits — and how its step periods compare with the
//! profile's price of the same work, by kind of step: where a simulation built on the profile
//! gains or loses time against the run, step by step (`goodput_sizing::price`).

use super::error::ProfilingError;
use goodput_core::StepRecord;
use goodput_sizing::price::{price, Priced};
use goodput_sizing::profile::Profile;
use std::path::{Path, PathBuf};

/// Prices each file's steps with `profile`.
pub fn run(files: &[PathBuf], profile: &Path) -> Result<Vec<Priced>, ProfilingError> {
    let p = Profile::read(profile)?;
    let cost = p.cost();
    let mut all = Vec::new();
    for path in files {
        if !path.exists() {
            return Err(ProfilingError::NoFile { path: path.clone() });
        }
        let steps: Vec<StepRecord> = goodput_results::files::read_jsonl(path)?;
        if steps.is_empty() {
            return Err(ProfilingError::NoStepRecords { path: path.clone() });
        }
        all.push(price(path.display().to_string(), &steps, &cost));
    }
    Ok(all)
}
