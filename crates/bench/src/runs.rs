//! Runs as `compare`, `run --repeats` and `report` read them: a run directory's measured
//! records by level (through `goodput_results`' typed reader), a side of a comparison — one
//! run, its repeats given as a list, or a `--repeats` directory whose index names them — and
//! the labelled runs a report overlays.

use goodput_core::{ClientRecord, Phase};
use goodput_results::files::{read_jsonl, RECORDS};
use goodput_results::matrix::MatrixIndex;
use goodput_results::ResultsError;
use goodput_results::{RecordRow, Results};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Why runs could not be read as a comparison or a report reads them.
#[derive(Debug, thiserror::Error)]
pub enum RunsError {
    #[error("{0}: not a goodput run directory (no records.jsonl)")]
    NotARun(String),
    /// The run's summary exists but cannot be read (cut, corrupt, from a newer goodput).
    #[error("{dir}: its summary cannot be read")]
    Summary { dir: String, source: ResultsError },
    #[error(transparent)]
    Results(#[from] ResultsError),
    #[error("{0}: no measured requests")]
    NoMeasured(String),
    /// A matrix of several combinations given as one side.
    #[error("{dir}: a matrix of {count} combinations ({names}); compare one of them: name its run directory, or a --repeats directory of one")]
    Matrix { dir: String, count: usize, names: String },
    #[error("{0}: none of its runs finished")]
    NoneFinished(String),
    #[error("no finished run in {0}")]
    NoFinishedRun(String),
}

type Result<T, E = RunsError> = std::result::Result<T, E>;

/// A run's measured records by level load (the text of the load, as the tables show it), and
/// why the run is incomplete if it is.
pub type Loaded = (BTreeMap<String, Vec<ClientRecord>>, Option<String>);

/// Reads the measured records of the run in `dir`.
pub fn load_run(dir: &Path) -> Result<Loaded> {
    let path = dir.join(RECORDS);
    if !path.is_file() {
        return Err(RunsError::NotARun(dir.display().to_string()));
    }
    let rows = read_jsonl::<RecordRow>(&path)?;
    // A run killed before its first level ended has no summary; one that cannot be read (cut,
    // corrupt, from a newer goodput) is an error, never taken for a missing one.
    let summary = match goodput_results::read_summary(dir) {
        Ok(s) => Some(s),
        Err(ResultsError::NotResults { .. }) => None,
        Err(source) => return Err(RunsError::Summary { dir: dir.display().to_string(), source }),
    };
    let note = goodput_results::incomplete_note(summary.as_ref(), &rows).map(|n| format!("`{}`: {n}", dir.display()));
    let mut levels: BTreeMap<String, Vec<ClientRecord>> = BTreeMap::new();
    for row in rows.into_iter().filter(|r| r.phase == Phase::Measured) {
        levels.entry(row.level.to_string()).or_default().push(row.record);
    }
    if levels.is_empty() {
        return Err(RunsError::NoMeasured(path.display().to_string()));
    }
    Ok((levels, note))
}

/// The run directories of one side: each directory as given, except a `--repeats` directory
/// (an `index.json` of one combination's repeats), which stands for its finished repeats. A
/// matrix of several combinations is refused, naming them: a side is one configuration.
pub fn side(dirs: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for dir in dirs {
        let Some(index) = MatrixIndex::read(dir)? else {
            out.push(dir.clone());
            continue;
        };
        let groups = index.groups();
        if groups.len() > 1 {
            let names: Vec<String> = groups.iter().map(|g| format!("`{}`", g.label())).collect();
            let (dir, count, names) = (dir.display().to_string(), groups.len(), names.join(", "));
            return Err(RunsError::Matrix { dir, count, names });
        }
        let finished: Vec<PathBuf> =
            groups.iter().flat_map(|g| &g.runs).filter(|r| r.finished()).map(|r| dir.join(&r.dir)).collect();
        if finished.is_empty() {
            return Err(RunsError::NoneFinished(dir.display().to_string()));
        }
        out.extend(finished);
    }
    Ok(out)
}

/// The runs `report` overlays, each with its label: a run directory by its name, a matrix's
/// directory as its finished runs labelled by their axes' values (`key=value, …`); a label
/// two runs share becomes each run's path. A matrix's unfinished runs and an incomplete run
/// are said through `warn`.
pub fn labeled(dirs: &[PathBuf], warn: &mut dyn FnMut(String)) -> Result<Vec<(String, Results)>> {
    let mut out: Vec<(String, Results)> = Vec::new();
    for dir in dirs {
        let Some(index) = MatrixIndex::read(dir)? else {
            let name = dir.file_name().map_or_else(|| dir.display().to_string(), |n| n.to_string_lossy().into_owned());
            out.push((name, read(dir, warn)?));
            continue;
        };
        for run in index.runs.iter().filter(|r| r.finished()) {
            let label = run.values.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(", ");
            out.push((label, read(&dir.join(&run.dir), warn)?));
        }
        let failed = index.runs.iter().filter(|r| !r.finished()).count();
        if failed > 0 {
            warn(format!("{}: {failed} of the matrix's runs did not finish and are left out", dir.display()));
        }
    }
    if out.is_empty() {
        let dirs: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
        return Err(RunsError::NoFinishedRun(dirs.join(", ")));
    }
    let labels: Vec<String> = out.iter().map(|(l, _)| l.clone()).collect();
    for (label, r) in &mut out {
        if labels.iter().filter(|l| *l == label).count() > 1 {
            *label = r.dir.display().to_string();
        }
    }
    Ok(out)
}

fn read(dir: &Path, warn: &mut dyn FnMut(String)) -> Result<Results> {
    let r = Results::read(dir)?;
    if let Some(note) = r.incomplete() {
        warn(format!("{}: incomplete run: {note}", dir.display()));
    }
    Ok(r)
}
