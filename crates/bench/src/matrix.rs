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
use std::path::{Component, Path};

/// Why a matrix could not start or record its runs.
#[derive(Debug, thiserror::Error)]
pub enum MatrixError {
    #[error("{0}: holds a matrix's runs (index.json); choose another out, or give overwrite = true (--overwrite) to replace them")]
    HoldsMatrix(String),
    #[error("{0}: not empty and not a matrix's directory (no index.json); a matrix or --repeats writes its runs under an empty --out")]
    NotEmpty(String),
    #[error("{0}: its matrix holds runs this one does not make ({1}); --resume keeps what it reruns: give --overwrite as well to remove them")]
    Gone(String, String),
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
    /// Keep the runs of an old matrix in `root` that finished (exit 0, a summary written) and
    /// are among `jobs`; run the rest.
    pub resume: bool,
}

/// A finished matrix: its index, the exit status, and for repeats their spread (or why it
/// could not be taken; the runs themselves are written).
pub struct MatrixOutcome {
    pub index: MatrixIndex,
    pub status: i32,
    pub spread: Option<Result<RepeatsFile, crate::runs::RunsError>>,
}

impl MatrixOutcome {
    /// What the console shows of the matrix: its summary, and for repeats their spread.
    pub fn tables(&self) -> Vec<String> {
        let spread = self.spread.as_ref().and_then(|s| s.as_ref().ok()).map(goodput_report::console::repeats);
        std::iter::once(goodput_report::console::matrix(&self.index)).chain(spread).collect()
    }

    /// The lines after the tables: why the repeats' spread could not be taken (when it could
    /// not), and where the `planned` runs went under `root`.
    pub fn footer(&self, root: &Path, planned: usize) -> String {
        let error = match &self.spread {
            Some(Err(e)) => {
                format!("error: the repeats' spread: {} (the runs themselves are written)\n", goodput_client::causes(e))
            }
            _ => String::new(),
        };
        let spread = root.join(goodput_results::repeats::REPEATS);
        let spread =
            if self.index.repeated() { format!(", their spread: {}", spread.display()) } else { String::new() };
        let index = root.join(goodput_results::matrix::INDEX);
        let (done, at) = (self.index.runs.len(), root.display());
        format!("{error}matrix: {done} of {planned} runs in {at} (their index: {}{spread})", index.display())
    }
}

/// Runs `jobs` one by one through `run` under `spec.root`, each in its directory (its name)
/// emptied first, until they are done or `stop` is raised. `seed` tells a job's seed, which a
/// run kept by `--resume` must have been run with.
/// A run's error is any error (the caller's, with its causes): it is recorded as text.
pub fn run<A, E: Into<Box<dyn std::error::Error + Send + Sync>>>(
    spec: MatrixSpec,
    jobs: Vec<Job<A>>,
    stop: &Stop,
    progress: &dyn Progress,
    seed: impl Fn(&A) -> Option<u64>,
    mut run: impl FnMut(A) -> Result<i32, E>,
) -> Result<MatrixOutcome, MatrixError> {
    let root = spec.root;
    let finished = if spec.resume { finished(root, &jobs, spec.overwrite, seed)? } else { Vec::new() };
    let names: Vec<&str> = match spec.resume {
        true => finished.iter().map(|r| r.name.as_str()).collect(),
        false => jobs.iter().map(|j| j.name.as_str()).collect(),
    };
    for warning in prepare(root, spec.overwrite || spec.resume, &names)? {
        progress.line(&format!("warning: {warning}"), true);
    }
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
    let mut jobs = jobs.into_iter().enumerate();
    for (i, job) in jobs.by_ref() {
        if let Some(done) = finished.iter().find(|r| r.name == job.name) {
            progress.line(&format!("matrix: run {} of {n}: {} finished before (--resume)", i + 1, job.name), false);
            index.runs.push(done.clone());
            index.write(root)?;
            continue;
        }
        progress.line(&format!("matrix: run {} of {n}: {}", i + 1, job.name), false);
        // An old run of this name (--overwrite, --resume, one cut short) is gone before this
        // one, so nothing of it is read as this run's.
        if let Some(warning) = clear(&root.join(&job.name))? {
            progress.line(&format!("warning: {warning}"), true);
        }
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
    // Stopped early: the finished runs not reached stay in the index (a later --resume keeps them).
    index.runs.extend(jobs.filter_map(|(_, j)| finished.iter().find(|r| r.name == j.name).cloned()));
    index.write(root)?;
    let spread = index
        .repeated()
        .then(|| crate::repeats::summarize(root, &index).and_then(|s| Ok(s.write(root).map(|()| s)?)));
    Ok(MatrixOutcome { index, status, spread })
}

/// Removes the run in `dir`: only a run's own files go; a directory holding anything else
/// stays, said in the warning returned.
fn clear(dir: &Path) -> Result<Option<String>, MatrixError> {
    match goodput_results::files::check_out_dir(dir, true) {
        Ok(()) => match std::fs::remove_dir_all(dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(MatrixError::Io(dir.display().to_string(), e)),
            _ => Ok(None),
        },
        Err(e) => Ok(Some(format!("the old matrix's run {} is left in place: {e}", dir.display()))),
    }
}

/// The runs of the matrix already in `root` (none when it holds none) that finished, each as
/// one of `jobs` (the same name, so the same values) with the seed the job has: exit 0, no
/// error, a summary written. Its runs that no job makes are refused unless `overwrite`.
fn finished<A>(
    root: &Path,
    jobs: &[Job<A>],
    overwrite: bool,
    seed: impl Fn(&A) -> Option<u64>,
) -> Result<Vec<MatrixRun>, MatrixError> {
    let Some(old) = MatrixIndex::read(root)? else { return Ok(Vec::new()) };
    let gone: Vec<&str> =
        old.runs.iter().filter(|r| !jobs.iter().any(|j| j.name == r.name)).map(|r| r.name.as_str()).collect();
    if !gone.is_empty() && !overwrite {
        return Err(MatrixError::Gone(root.display().to_string(), gone.join(", ")));
    }
    let done = |r: &MatrixRun| {
        let Some(job) = jobs.iter().find(|j| j.name == r.name && j.values == r.values) else { return false };
        let summary = goodput_results::read_summary(&root.join(&r.dir));
        let same_seed = |s: &goodput_results::RunSummary| seed(&job.args).is_none_or(|x| x == s.seed);
        r.exit == EXIT_OK && r.error.is_none() && summary.is_ok_and(|s| same_seed(&s))
    };
    Ok(old.runs.into_iter().filter(done).collect())
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
            warnings.extend(clear(&root.join(&run.dir))?);
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
