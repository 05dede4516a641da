//! The files of a results directory: one writer and one reader for each, through the typed
//! rows of [`crate::rows`] and the [`RunSummary`]. Records are appended as each request
//! finishes ([`RecordLog`], flushed per record, so a killed run keeps every finished
//! request); steps and the time series per level; `summary.json` is rewritten whole after each
//! level through a rename, so it is never seen half-written (hyperfine's exports, oha's
//! collector).

use crate::rows::{RecordRow, RequestRow, SeriesRow, StepRow, REQUEST_COLUMNS, SERIES_COLUMNS};
use crate::summary::{RunSummary, WorkloadInfo, FORMAT};
use crate::ResultsError;
use goodput_core::{ClientRecord, Phase, StepRecord};
use goodput_metrics::engine::SeriesPoint;
use goodput_metrics::occupancy::Occupancy;
use serde::Serialize;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

pub const SUMMARY: &str = "summary.json";
pub const RECORDS: &str = "records.jsonl";
pub const REQUESTS: &str = "requests.csv";
pub const STEPS: &str = "steps.jsonl";
pub const SERIES: &str = "timeseries.csv";
pub const CONCLUSION: &str = "conclusion.txt";
pub const REPORT: &str = "report.html";
pub const PREDICTION: &str = "prediction.json";
/// An inline scenario of a config file (`goodput run --config`), as a scenario file: the run's
/// stored command line names it, so `plan --check` re-reads the scenario the run ran.
pub const SCENARIO: &str = "scenario.toml";

/// `--soak`: every request of the soak, one [`crate::RecordRow`] a line (the soak runs a load
/// the sweep already ran, so its records are kept apart from `records.jsonl`'s one level
/// per load).
pub const SOAK_RECORDS: &str = "soak.jsonl";

/// A server the run started (`run --server`, a config's `[server]`): what it printed, and how
/// it was started and stopped (`ServerRecord`, in the `server` module, which reads this one).
pub const SERVER_LOG: &str = "server.log";
pub const SERVER: &str = "server.json";

/// Every file a run (and `report`, `plan --check` on it) writes into its directory: what
/// `--overwrite` may remove.
const RUN_FILES: [&str; 12] = [
    SUMMARY,
    RECORDS,
    REQUESTS,
    STEPS,
    SERIES,
    CONCLUSION,
    REPORT,
    PREDICTION,
    SCENARIO,
    SOAK_RECORDS,
    SERVER_LOG,
    SERVER,
];

/// Writes `rows` as JSON lines to `dir/name`, whole ([`write_whole`]).
pub fn write_jsonl<T: serde::Serialize>(dir: &Path, name: &str, rows: &[T]) -> Result<()> {
    let mut bytes = Vec::new();
    for row in rows {
        serde_json::to_writer(&mut bytes, row).map_err(|source| ResultsError::Json {
            path: dir.join(name),
            line: None,
            source,
        })?;
        bytes.push(b'\n');
    }
    write_whole(dir, name, &bytes)
}

type Result<T> = std::result::Result<T, ResultsError>;

/// A new file `name` in `dir`: never an existing one, never through a symbolic link
/// (`O_CREAT | O_EXCL`, which refuses a link planted at the name instead of following it).
fn create(dir: &Path, name: &str) -> Result<File> {
    let path = dir.join(name);
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(|source| ResultsError::Io { path, source })
}

/// Writes `bytes` as `dir/name` whole: into a new temporary file beside it (never through a
/// link), then renamed over the name (a rename replaces a link, it does not follow it), so a
/// reader sees the old file or the new one, never half of one.
pub fn write_whole(dir: &Path, name: &str, bytes: &[u8]) -> Result<()> {
    let tmp_name = format!(".{name}.{}.tmp", std::process::id());
    let tmp = dir.join(&tmp_name);
    match std::fs::remove_file(&tmp) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io(&tmp)(e)),
        _ => {}
    }
    let mut f = create(dir, &tmp_name)?;
    f.write_all(bytes).and_then(|()| f.sync_data()).map_err(io(&tmp))?;
    let path = dir.join(name);
    std::fs::rename(&tmp, &path).map_err(io(&path))
}

/// Writes `value` as pretty JSON to `dir/name`, whole ([`write_whole`]).
pub fn write_json<T: serde::Serialize>(dir: &Path, name: &str, value: &T) -> Result<()> {
    let bytes = serde_json::to_vec_pretty(value).map_err(|source| ResultsError::Json {
        path: dir.join(name),
        line: None,
        source,
    })?;
    write_whole(dir, name, &bytes)
}

/// Reads `dir/name` as JSON; `None` when there is no such file. `format` gives the file's
/// format number: one above `newest` is refused by name.
pub fn read_json<T: serde::de::DeserializeOwned>(
    dir: &Path,
    name: &str,
    newest: u32,
    format: impl Fn(&T) -> u32,
) -> Result<Option<T>> {
    let path = dir.join(name);
    let bytes = match read_bounded(&path, name) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(ResultsError::Io { path, source }),
    };
    let value: T = serde_json::from_slice(&bytes).map_err(|source| ResultsError::Json {
        path: path.clone(),
        line: None,
        source,
    })?;
    match format(&value) {
        f if f > newest => Err(ResultsError::TooNew { path, format: f, newest }),
        _ => Ok(Some(value)),
    }
}

/// Whether `dir` can take a new run: it does not exist, or is empty, or (with `overwrite`)
/// holds nothing but a run's own files. Checked before anything runs; [`RunWriter::create`]
/// checks again and removes the old run's files.
pub fn check_out_dir(dir: &Path, overwrite: bool) -> Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => return Err(ResultsError::Io { path: dir.to_path_buf(), source }),
    };
    let mut found: Vec<String> = Vec::new();
    for entry in entries {
        let entry = entry.map_err(io(dir))?;
        found.push(entry.file_name().to_string_lossy().into_owned());
    }
    found.sort();
    if found.is_empty() {
        return Ok(());
    }
    if !overwrite {
        return Err(ResultsError::NotEmpty { dir: dir.to_path_buf(), found: shorten(found) });
    }
    let is_run_file = |n: &String| RUN_FILES.contains(&n.as_str()) || (n.starts_with('.') && n.ends_with(".tmp"));
    let foreign: Vec<String> = found.into_iter().filter(|n| !is_run_file(n)).collect();
    if !foreign.is_empty() {
        return Err(ResultsError::Foreign { dir: dir.to_path_buf(), found: shorten(foreign) });
    }
    Ok(())
}

/// At most five names, then how many more.
fn shorten(mut names: Vec<String>) -> Vec<String> {
    if names.len() > 5 {
        let more = names.len() - 5;
        names.truncate(5);
        names.push(format!("{more} more"));
    }
    names
}

/// Removes the run files of `dir` (links themselves, never what they point to).
fn remove_run_files(dir: &Path) -> Result<()> {
    for entry in std::fs::read_dir(dir).map_err(io(dir))? {
        let entry = entry.map_err(io(dir))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if RUN_FILES.contains(&name.as_str()) || (name.starts_with('.') && name.ends_with(".tmp")) {
            std::fs::remove_file(entry.path()).map_err(io(&entry.path()))?;
        }
    }
    Ok(())
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ResultsError + '_ {
    move |source| ResultsError::Io { path: path.to_path_buf(), source }
}

fn csv_err(path: &Path) -> impl Fn(csv::Error) -> ResultsError + '_ {
    move |source| ResultsError::Csv { path: path.to_path_buf(), source }
}

/// CSV rows written into memory, to be appended to their file whole.
fn row_buffer() -> csv::Writer<Vec<u8>> {
    csv::WriterBuilder::new().has_headers(false).from_writer(Vec::new())
}

/// A CSV file whose header is written now; rows follow without one.
fn csv_with_header(dir: &Path, name: &str, columns: &[&str]) -> Result<csv::Writer<File>> {
    let path = dir.join(name);
    let mut w = csv::WriterBuilder::new().has_headers(false).from_writer(create(dir, name)?);
    w.write_record(columns).map_err(csv_err(&path))?;
    w.flush().map_err(io(&path))?;
    Ok(w)
}

/// The per-request files: `records.jsonl` and `requests.csv`, appended one request at a time.
pub struct RecordLog {
    dir: PathBuf,
    records: File,
    requests: File,
    /// Whole lines appended since the last flush: a flush writes them with one call per
    /// file, so a killed process leaves no line half-written (a buffered writer would spill
    /// mid-line when its buffer filled).
    records_buf: Vec<u8>,
    requests_buf: csv::Writer<Vec<u8>>,
}

/// A [`RecordRow`] to write, borrowing the record.
#[derive(Serialize)]
struct RecordRowRef<'a> {
    level: f64,
    phase: Phase,
    #[serde(flatten)]
    record: &'a ClientRecord,
}

impl RecordLog {
    /// Appends one request to both files (buffered: [`RecordLog::flush`] puts it on disk).
    pub fn append(&mut self, level: f64, phase: Phase, record: &ClientRecord) -> Result<()> {
        let path = self.dir.join(RECORDS);
        serde_json::to_writer(&mut self.records_buf, &RecordRowRef { level, phase, record })
            .map_err(|source| ResultsError::Json { path: path.clone(), line: None, source })?;
        self.records_buf.push(b'\n');
        let csv_path = self.dir.join(REQUESTS);
        self.requests_buf.serialize(RequestRow::of(level, phase, record)).map_err(csv_err(&csv_path))
    }

    /// Writes what was appended through to the files, whole lines only.
    pub fn flush(&mut self) -> Result<()> {
        let path = self.dir.join(REQUESTS);
        let full = std::mem::replace(&mut self.requests_buf, row_buffer());
        let csv_lines = full.into_inner().map_err(|e| io(&path)(e.into_error()))?;
        self.records.write_all(&self.records_buf).map_err(io(&self.dir.join(RECORDS)))?;
        self.records_buf.clear();
        self.requests.write_all(&csv_lines).map_err(io(&path))
    }
}

/// The per-level and per-run files: steps, the time series, the summary and the conclusion.
pub struct RunWriter {
    dir: PathBuf,
    steps: BufWriter<File>,
    series: csv::Writer<File>,
}

impl RunWriter {
    /// Creates `dir` and its files. A directory that holds files is refused, unless
    /// `overwrite`, where an earlier run's files are removed first (anything else there is
    /// refused: see [`check_out_dir`]), so no file of another run is left beside this one's.
    /// The record log goes to whoever collects the requests as they finish.
    pub fn create(dir: &Path, overwrite: bool) -> Result<(RunWriter, RecordLog)> {
        check_out_dir(dir, overwrite)?;
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        remove_run_files(dir)?;
        let requests = csv_with_header(dir, REQUESTS, &REQUEST_COLUMNS)?;
        let log = RecordLog {
            dir: dir.to_path_buf(),
            records: create(dir, RECORDS)?,
            requests: requests.into_inner().map_err(|e| io(&dir.join(REQUESTS))(e.into_error()))?,
            records_buf: Vec::new(),
            requests_buf: row_buffer(),
        };
        let writer = RunWriter {
            dir: dir.to_path_buf(),
            steps: BufWriter::new(create(dir, STEPS)?),
            series: csv_with_header(dir, SERIES, &SERIES_COLUMNS)?,
        };
        Ok((writer, log))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Appends one level's engine steps and time series.
    pub fn append_level(&mut self, level: f64, steps: &[StepRecord], series: &[SeriesPoint]) -> Result<()> {
        let path = self.dir.join(STEPS);
        for step in steps {
            let row = StepRow { level, step: step.clone() };
            serde_json::to_writer(&mut self.steps, &row).map_err(|source| ResultsError::Json {
                path: path.clone(),
                line: None,
                source,
            })?;
            self.steps.write_all(b"\n").map_err(io(&path))?;
        }
        self.steps.flush().map_err(io(&path))?;
        let path = self.dir.join(SERIES);
        for p in series {
            self.series.serialize(SeriesRow::of(level, p)).map_err(csv_err(&path))?;
        }
        self.series.flush().map_err(io(&path))
    }

    /// Rewrites `summary.json` (through a temporary file and a rename).
    pub fn write_summary(&self, summary: &RunSummary) -> Result<()> {
        let path = self.dir.join(SUMMARY);
        let text = serde_json::to_vec_pretty(summary).map_err(|source| ResultsError::Json {
            path: path.clone(),
            line: None,
            source,
        })?;
        write_whole(&self.dir, SUMMARY, &text)
    }

    /// Writes the conclusion as text.
    pub fn write_conclusion(&self, text: &str) -> Result<()> {
        write_whole(&self.dir, CONCLUSION, text.as_bytes())
    }
}

/// A results directory as its readers see it.
#[derive(Clone, Debug)]
pub struct Results {
    pub dir: PathBuf,
    pub summary: RunSummary,
    /// Every request, warm-up and cool-down included.
    pub records: Vec<RecordRow>,
    /// The engine's time series (empty for a target whose engine is another process's).
    pub series: Vec<SeriesRow>,
    /// `conclusion.txt` as the run wrote it: one paragraph, without its heading; empty when
    /// the run wrote none (killed before it ended). The report builds the one it shows from
    /// the summary (`goodput_report::Conclusion`) and takes this text only for results of
    /// format 1, which lack what it is built from.
    pub conclusion: String,
}

/// Why a run's files are not a whole run (interrupted, or killed), in one sentence for the
/// top of a report or a comparison; `None` when the run finished. `summary` is `None` when
/// the run wrote none (killed before its first level ended).
pub fn incomplete_note(summary: Option<&RunSummary>, records: &[RecordRow]) -> Option<String> {
    let Some(s) = summary else {
        return Some(format!(
            "This run did not finish: it has no summary.json (killed before its first level ended); records.jsonl holds {} requests.",
            records.len()
        ));
    };
    if s.complete {
        return None;
    }
    let mut text = format!(
        "This run did not finish (it was interrupted or killed): its summary holds {} level(s)",
        s.levels.len()
    );
    let partial: Vec<String> = s.levels.iter().filter(|l| l.partial).map(|l| l.summary.load.to_string()).collect();
    if !partial.is_empty() {
        text.push_str(&format!(", the one at {} cut short", partial.join(", ")));
    }
    let summarized = |load: f64| s.levels.iter().any(|l| l.summary.load == load);
    let orphans = records.iter().filter(|r| !summarized(r.level)).count();
    if orphans > 0 {
        text.push_str(&format!(
            "; records.jsonl holds {orphans} more request(s) of a level that never ended, left out of every table"
        ));
    }
    text.push('.');
    Some(text)
}

impl Results {
    /// [`incomplete_note`] of these results.
    pub fn incomplete(&self) -> Option<String> {
        incomplete_note(Some(&self.summary), &self.records)
    }

    /// Reads `summary.json`, `records.jsonl` and `timeseries.csv` of `dir`.
    pub fn read(dir: &Path) -> Result<Results> {
        let summary = read_summary(dir)?;
        let records = read_jsonl(&dir.join(RECORDS))?;
        let series = read_csv(&dir.join(SERIES))?;
        let text = read_bounded(&dir.join(CONCLUSION), CONCLUSION)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        let conclusion = text.trim().trim_start_matches("Conclusion").trim().to_string();
        Ok(Results { dir: dir.to_path_buf(), summary, records, series, conclusion })
    }

    /// The measured requests of the level at `load`.
    pub fn measured(&self, load: f64) -> impl Iterator<Item = &ClientRecord> {
        self.records.iter().filter(move |r| r.level == load && r.phase == Phase::Measured).map(|r| &r.record)
    }
}

/// `summary.json` of `dir`; results of an older format are brought up to this one (their
/// capacity verdict computed once, here, by the function a writer uses).
pub fn read_summary(dir: &Path) -> Result<RunSummary> {
    let path = dir.join(SUMMARY);
    let bytes = read_bounded(&path, SUMMARY).map_err(|source| match source.kind() {
        std::io::ErrorKind::NotFound => ResultsError::NotResults { dir: dir.to_path_buf() },
        _ => ResultsError::Io { path: path.clone(), source },
    })?;
    let mut s: RunSummary = serde_json::from_slice(&bytes).map_err(|source| ResultsError::Json {
        path: path.clone(),
        line: None,
        source,
    })?;
    if s.format > FORMAT {
        return Err(ResultsError::TooNew { path, format: s.format, newest: FORMAT });
    }
    if s.format < FORMAT {
        upgrade(&mut s);
    }
    Ok(s)
}

/// Fills what format 1 did not store: occupancy (then the engine's numbers), the workload's
/// name, the capacity verdict.
fn upgrade(s: &mut RunSummary) {
    for l in &mut s.levels {
        if l.occupancy.is_none() && l.engine.steps > 0 {
            l.occupancy = Occupancy::of(&l.engine, None);
        }
    }
    if s.workload.name.is_empty() {
        // Format 1 kept the name only inside the workload's own settings.
        let name = s.scenario.get("name").and_then(|n| n.as_str()).unwrap_or("scenario");
        s.workload = WorkloadInfo { name: name.to_string(), ..Default::default() };
    }
    if s.capacity.is_none() {
        s.capacity = Some(RunSummary::verdict_of(&s.levels));
    }
}

/// The rows of a JSON-lines file (missing: none), read one bounded line at a time
/// ([`goodput_core::input::for_each_line_ended`]: a line past 16 MiB, as from `/dev/zero`, is
/// refused at its bound). A line that is not a row is an error naming it, except a last line
/// cut short by a killed run (no line feed after it), which is left out.
pub fn read_jsonl<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Vec<T>> {
    let mut rows = Vec::new();
    for_each_jsonl(path, |row| {
        rows.push(row);
        Ok(())
    })?;
    Ok(rows)
}

/// Calls `f` with each row of a JSON-lines file as [`read_jsonl`] reads them, so a caller that
/// keeps only some (a level's steps) never holds the rest; `f`'s error stops the read.
pub fn for_each_jsonl<T: serde::de::DeserializeOwned>(path: &Path, mut f: impl FnMut(T) -> Result<()>) -> Result<()> {
    use goodput_core::input::{for_each_line_ended, LineError};
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => return Err(ResultsError::Io { path: path.to_path_buf(), source }),
    };
    let io = |e: String| ResultsError::Io { path: path.to_path_buf(), source: std::io::Error::other(e) };
    // A line that did not parse and did not end: the last line of a killed run, if no other
    // line follows it.
    let mut cut: Option<(usize, serde_json::Error)> = None;
    let read = for_each_line_ended(file, |i, line, ended| {
        if let Some((line, source)) = cut.take() {
            return Err(ResultsError::Json { path: path.to_path_buf(), line: Some(line), source });
        }
        match serde_json::from_str(line) {
            Ok(row) => f(row),
            Err(source) if !ended => {
                cut = Some((i, source));
                Ok(())
            }
            Err(source) => Err(ResultsError::Json { path: path.to_path_buf(), line: Some(i), source }),
        }
    });
    match read {
        Ok(()) => Ok(()),
        Err(LineError::Parse(e)) => Err(e),
        Err(e @ (LineError::TooLong { .. } | LineError::NotUtf8 { .. })) => Err(io(e.to_string())),
        Err(LineError::Io(source)) => Err(ResultsError::Io { path: path.to_path_buf(), source }),
    }
}

/// A file of a results directory read whole, refused past
/// [`goodput_core::input::MAX_WHOLE_FILE`] (a summary is kilobytes; a path linked to
/// `/dev/zero` is refused at the bound, not read until memory runs out).
fn read_bounded(path: &Path, what: &str) -> std::io::Result<Vec<u8>> {
    goodput_core::input::read_within(path, what, goodput_core::input::MAX_WHOLE_FILE)
}

/// The rows of a CSV file with a header (missing: none).
pub fn read_csv<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Vec<T>> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(ResultsError::Io { path: path.to_path_buf(), source }),
    };
    let bounded = goodput_core::input::LineBounded::new(file);
    csv::Reader::from_reader(bounded).deserialize().collect::<std::result::Result<_, _>>().map_err(csv_err(path))
}
