//! A matrix of runs — a config file's combinations, or `--repeats` — run one after another
//! under one directory: the directory made ready (an old matrix's runs replaced, anything else
//! refused), `index.json` written before the first run and after each, a stop between runs
//! honoured, and for repeats their spread ([`crate::repeats`]) written beside the index. How
//! each run is run is the caller's: a run's failure is recorded in the index and the matrix
//! goes on.

use crate::config::Job;
use crate::progress::Progress;
use crate::run::{EXIT_INTERRUPTED, EXIT_OK};
use goodput_results::matrix::{Axis, MatrixIndex, MatrixRun, INDEX_FORMAT};
use goodput_results::outcome::RunOutcome;
use goodput_results::repeats::RepeatsFile;
use goodput_workload::Stop;
use std::path::{Component, Path, PathBuf};

/// Why a matrix could not start or record its runs.
#[derive(Debug, thiserror::Error)]
pub enum MatrixError {
    #[error("{0}: holds a matrix's runs (index.json); choose another out, or give overwrite = true (--overwrite) to replace them")]
    HoldsMatrix(String),
    #[error("{0}: not empty and not a matrix's directory (no index.json); a matrix or --repeats writes its runs under an empty --out")]
    NotEmpty(String),
    #[error("{0}: {1}")]
    Io(String, std::io::Error),
    #[error(transparent)]
    Results(#[from] goodput_results::ResultsError),
}

/// A matrix to run: where, from which config file, along which axes.
pub struct MatrixSpec<'a> {
    pub root: &'a Path,
    pub config: Option<&'a Path>,
    pub axes: Vec<Axis>,
    /// Replace an old matrix's runs in `root`.
    pub overwrite: bool,
}

/// A finished matrix: its index, the exit status, and for repeats their spread (or why it
/// could not be taken; the runs themselves are written).
pub struct MatrixOutcome {
    pub index: MatrixIndex,
    pub status: i32,
    pub spread: Option<Result<RepeatsFile, crate::runs::RunsError>>,
}

/// Runs `jobs` one by one through `run` under `spec.root`, each in its directory (its name),
/// until they are done or `stop` is raised.
/// A run's error is any error (the caller's, with its causes): it is recorded as text.
pub fn run<A, E: Into<Box<dyn std::error::Error + Send + Sync>>>(
    spec: MatrixSpec,
    jobs: Vec<Job<A>>,
    stop: &Stop,
    progress: &dyn Progress,
    mut run: impl FnMut(A) -> Result<i32, E>,
) -> Result<MatrixOutcome, MatrixError> {
    let names: Vec<&str> = jobs.iter().map(|j| j.name.as_str()).collect();
    for warning in prepare(spec.root, spec.overwrite, &names)? {
        progress.line(&format!("warning: {warning}"), true);
    }
    let root = spec.root;
    let mut index = MatrixIndex {
        format: INDEX_FORMAT,
        config: spec.config.map(Path::to_path_buf),
        axes: spec.axes,
        runs: Vec::new(),
    };
    // Written before the first run, so a matrix killed during it is still one (and reruns).
    index.write(root)?;
    let n = jobs.len();
    let mut status = EXIT_OK;
    for (i, job) in jobs.into_iter().enumerate() {
        progress.line(&format!("matrix: run {} of {n}: {}", i + 1, job.name), false);
        let (exit, error) = match run(job.args) {
            Ok(code) => (code, None),
            Err(e) => {
                let e = goodput_client::causes(e.into().as_ref());
                progress.line(&format!("error: the matrix's run {}: {e}", job.name), true);
                (1, Some(e))
            }
        };
        // What the run found, from the summary it wrote (none where it wrote none).
        let outcome = goodput_results::read_summary(&root.join(&job.name)).ok().map(|s| RunOutcome::of(&s));
        let dir = job.name.clone().into();
        index.runs.push(MatrixRun { dir, name: job.name, values: job.values, exit, error, outcome });
        index.write(root)?;
        if status == EXIT_OK {
            status = exit;
        }
        if stop.raised() {
            status = EXIT_INTERRUPTED;
            break;
        }
    }
    let spread = index
        .repeated()
        .then(|| crate::repeats::summarize(root, &index).and_then(|s| Ok(s.write(root).map(|()| s)?)));
    Ok(MatrixOutcome { index, status, spread })
}

/// Makes `root` ready for a matrix of the runs `names`: an old matrix's runs that are not
/// among them removed (with `overwrite`), its spread removed; anything else there refused.
/// Returns warnings for old runs left in place (a directory holding more than a run's files).
pub fn prepare(root: &Path, overwrite: bool, names: &[&str]) -> Result<Vec<String>, MatrixError> {
    let shown = root.display().to_string();
    let io = |e| MatrixError::Io(shown.clone(), e);
    let mut warnings = Vec::new();
    if let Some(old) = MatrixIndex::read(root)? {
        if !overwrite {
            return Err(MatrixError::HoldsMatrix(shown));
        }
        let own = |d: &Path| matches!(d.components().collect::<Vec<_>>()[..], [Component::Normal(_)]);
        for run in old.runs.iter().filter(|r| own(&r.dir) && !names.iter().any(|n| Path::new(n) == r.dir)) {
            let dir: PathBuf = root.join(&run.dir);
            // Only a run's own files go; a directory holding anything else stays, said so.
            match goodput_results::files::check_out_dir(&dir, true) {
                Ok(()) => match std::fs::remove_dir_all(&dir) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io(e)),
                    _ => {}
                },
                Err(e) => warnings.push(format!("the old matrix's run {} is left in place: {e}", dir.display())),
            }
        }
    } else if std::fs::read_dir(root).is_ok_and(|mut d| d.next().is_some()) {
        return Err(MatrixError::NotEmpty(shown));
    }
    match std::fs::remove_file(root.join(goodput_results::repeats::REPEATS)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io(e)),
        _ => {}
    }
    std::fs::create_dir_all(root).map_err(io)?;
    Ok(warnings)
}
