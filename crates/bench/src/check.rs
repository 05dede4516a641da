//! A measured run's sweep simulated with a profile (`goodput plan --check RUN_DIR --profile
//! P`): the run made again as a simulation at exactly the loads it measured, and the
//! prediction set beside the measurement, written to `RUN_DIR/prediction.json`. How the
//! stored command line becomes the simulated run's [`RunSpec`] is the caller's (the command
//! line re-reads it with its own parser); here: the run, its measurement and the prediction.

use crate::progress::Progress;
use crate::run::{Outcome, RunError};
use crate::RunSpec;
use goodput_results::prediction::Prediction;
use goodput_results::{files, LevelReport, RunSummary};
use goodput_workload::Stop;
use std::path::{Path, PathBuf};

/// Why a run could not be checked.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// The run's summary (or the simulated run's) could not be read.
    #[error(transparent)]
    Read(#[from] goodput_results::ResultsError),
    #[error("{}: the run predates stored command lines; run it again (or with --predict)", dir.display())]
    NoCommand { dir: PathBuf },
    #[error("{}: the run has no finished level to check", dir.display())]
    NoLevels { dir: PathBuf },
    /// The caller could not make the simulated run's spec of the stored command line.
    #[error("{}", goodput_client::causes(.0.as_ref()))]
    Spec(Box<dyn std::error::Error + Send + Sync>),
    #[error("simulating the run's sweep")]
    Simulate(#[source] RunError),
    #[error("writing {}", path.display())]
    Write { path: PathBuf, source: goodput_results::ResultsError },
    #[error("the prediction as JSON")]
    Json(#[from] serde_json::Error),
}

/// A checked run: the measurement, the simulated run (its outcome, as the caller shows any
/// run) and the prediction made of it, written to `path`.
pub struct Checked<V> {
    pub measured: RunSummary,
    /// What the caller made beside the spec (how it shows the run).
    pub view: V,
    pub outcome: Outcome,
    pub prediction: Prediction,
    pub path: PathBuf,
    /// Notes on how the prediction was counted.
    pub notes: Vec<String>,
}

/// Simulates the run in `dir` with `profile`: `simulated` makes the run's spec (its levels
/// at the measured loads, the profile's simulation, its files under the given directory),
/// which runs with `progress` until done or `stop`.
pub fn check<V, E: Into<Box<dyn std::error::Error + Send + Sync>>>(
    dir: &Path,
    profile: &Path,
    simulated: impl FnOnce(&RunSummary, &Path) -> Result<(RunSpec, V), E>,
    stop: Stop,
    progress: &dyn Progress,
) -> Result<Checked<V>, CheckError> {
    let measured = goodput_results::read_summary(dir)?;
    if measured.command.is_empty() {
        return Err(CheckError::NoCommand { dir: dir.into() });
    }
    if measured.levels.is_empty() {
        return Err(CheckError::NoLevels { dir: dir.into() });
    }
    let out = std::env::temp_dir().join(format!("goodput-check-{}", std::process::id()));
    let (spec, view) = simulated(&measured, &out).map_err(|e| CheckError::Spec(e.into()))?;
    let t = std::time::Instant::now();
    let ran = crate::run::run(&spec, stop, progress);
    let wall = t.elapsed().as_secs_f64();
    let sim = ran.and_then(|o| Ok((o, goodput_results::read_summary(&out)?)));
    if sim.is_err() {
        let _ = std::fs::remove_dir_all(&out);
    }
    let (outcome, sim) = sim.map_err(CheckError::Simulate)?;
    let steps = files::read_jsonl::<goodput_results::StepRow>(&out.join(files::STEPS)).map_or(0, |s| s.len());
    let simulated: f64 = sim.levels.iter().map(|l| l.summary.window_s).sum();
    let mut prediction = Prediction {
        profile: profile.display().to_string(),
        levels: Vec::new(),
        capacity: RunSummary::verdict_of(&[]),
        steps_per_s: steps as f64 / wall,
        speedup: simulated / wall,
    };
    let mut notes = Vec::new();
    for l in like_the_measured(&measured, sim.levels, &out, &mut notes) {
        prediction.push_level(l);
    }
    let _ = std::fs::remove_dir_all(&out);
    let path = dir.join(files::PREDICTION);
    let text = serde_json::to_string_pretty(&prediction)? + "\n";
    files::write_whole(dir, files::PREDICTION, text.as_bytes())
        .map_err(|source| CheckError::Write { path: path.clone(), source })?;
    Ok(Checked { measured, view, outcome, prediction, path, notes })
}

/// The simulated levels counted as the measured run counted its own: a run written before the
/// steady window counted its throughputs over the whole measured window (ramp and drain
/// included), so its prediction is summarised over the same window from the simulated
/// records, like with like.
fn like_the_measured(
    measured: &RunSummary,
    mut levels: Vec<LevelReport>,
    out: &Path,
    notes: &mut Vec<String>,
) -> Vec<LevelReport> {
    if measured.levels.iter().any(|l| l.steady.is_some()) {
        return levels;
    }
    let Ok(records) = goodput_results::Results::read(out) else { return levels };
    notes.push("the measured run predates the steady window: its prediction is counted over the whole measured window, as the run's own figures were".into());
    for l in &mut levels {
        let rs: Vec<&goodput_core::ClientRecord> = records.measured(l.summary.load).collect();
        l.summary = goodput_metrics::level::summarize(l.summary.load, &rs, &measured.slos);
        l.steady = None;
    }
    levels
}
