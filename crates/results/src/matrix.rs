//! The index of a benchmark matrix (`goodput run --config FILE` with a `[matrix]`): one run
//! per combination of the matrix's values, each in its own directory under the matrix's
//! `--out`, and `index.json` there naming them, rewritten whole after each run so a reader
//! (or an interrupted matrix) always finds the runs that finished. `report` reads it to
//! overlay the runs; nothing walks the directory by name.
//!
//! `goodput run --repeats N` writes the same index with a last axis, [`REPEAT`] (1…N): a
//! config's matrix repeats each combination, a run without a config is a matrix of its
//! repeats alone. [`MatrixIndex::groups`] gathers each combination's repeats.

use crate::ResultsError;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The index's file name in the matrix directory.
pub const INDEX: &str = "index.json";

/// The index's format; a newer one is refused by name.
pub const INDEX_FORMAT: u32 = 1;

/// The axis `--repeats N` adds, last, with the values 1…N.
pub const REPEAT: &str = "repeat";

/// What a matrix ran: the config it came from and every run, in order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MatrixIndex {
    pub format: u32,
    /// The config file, as given; none for `--repeats` without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<PathBuf>,
    /// The matrix's axes: each key and its values, as the file gives them (TOML values in
    /// their command-line form).
    pub axes: Vec<Axis>,
    pub runs: Vec<MatrixRun>,
}

/// One axis of the matrix: a flag of `run` and the values it takes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Axis {
    pub key: String,
    pub values: Vec<String>,
}

/// One combination: its directory (relative to the matrix directory), the value each axis
/// took, and how the run ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MatrixRun {
    pub name: String,
    pub dir: PathBuf,
    /// `(key, value)` per axis, in the axes' order.
    pub values: Vec<(String, String)>,
    /// `goodput run`'s exit status (0, 3 or 130), or 1 with `error` when it failed.
    pub exit: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What the run found (absent for a run that wrote no summary, and in indexes written
    /// before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<crate::outcome::RunOutcome>,
}

impl MatrixIndex {
    /// Writes `dir/index.json` whole (never half-written).
    pub fn write(&self, dir: &Path) -> Result<(), ResultsError> {
        crate::files::write_json(dir, INDEX, self)
    }

    /// Reads `dir/index.json`; `None` when `dir` holds none.
    pub fn read(dir: &Path) -> Result<Option<Self>, ResultsError> {
        crate::files::read_json(dir, INDEX, INDEX_FORMAT, |f: &Self| f.format)
    }

    /// Whether the runs are repeated (the last axis is [`REPEAT`]).
    pub fn repeated(&self) -> bool {
        self.axes.last().is_some_and(|a| a.key == REPEAT)
    }

    /// The runs by combination: the runs whose values agree on every axis but [`REPEAT`],
    /// in the index's order (one run per group when the matrix is not repeated).
    pub fn groups(&self) -> Vec<Group<'_>> {
        let mut out: Vec<Group<'_>> = Vec::new();
        for run in &self.runs {
            let values: Vec<(String, String)> = run.values.iter().filter(|(k, _)| k != REPEAT).cloned().collect();
            match out.iter_mut().find(|g| g.values == values) {
                Some(g) => g.runs.push(run),
                None => out.push(Group { values, runs: vec![run] }),
            }
        }
        out
    }

    /// The directories of the runs that finished (exit 0 or 3), each joined to `dir`.
    pub fn finished_dirs(&self, dir: &Path) -> Vec<PathBuf> {
        self.runs.iter().filter(|r| r.finished()).map(|r| dir.join(&r.dir)).collect()
    }
}

/// One combination of a matrix and its runs (its repeats, with `--repeats`).
#[derive(Clone, Debug, PartialEq)]
pub struct Group<'a> {
    /// `(key, value)` per axis but [`REPEAT`].
    pub values: Vec<(String, String)>,
    pub runs: Vec<&'a MatrixRun>,
}

impl Group<'_> {
    /// The combination in words: `rate=4, max-num-seqs=8`; empty for a run's repeats alone.
    pub fn label(&self) -> String {
        self.values.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(", ")
    }
}

impl MatrixRun {
    /// Whether the run finished (exit 0, or 3 when a level completed nothing).
    pub fn finished(&self) -> bool {
        self.exit == 0 || self.exit == 3
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_index_round_trips_and_names_its_finished_runs() {
        let dir = std::env::temp_dir().join(format!("goodput-matrix-index-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(MatrixIndex::read(&dir).unwrap(), None);
        let run = |name: &str, exit, error: Option<&str>| MatrixRun {
            name: name.into(),
            dir: name.into(),
            values: vec![("max-num-seqs".into(), name.into())],
            exit,
            error: error.map(Into::into),
            outcome: None,
        };
        let index = MatrixIndex {
            format: INDEX_FORMAT,
            config: Some("bench.toml".into()),
            axes: vec![Axis { key: "max-num-seqs".into(), values: vec!["8".into(), "64".into(), "256".into()] }],
            runs: vec![run("8", 0, None), run("64", 1, Some("boom")), run("256", 3, None)],
        };
        index.write(&dir).unwrap();
        let back = MatrixIndex::read(&dir).unwrap().unwrap();
        assert_eq!(back, index);
        assert_eq!(back.finished_dirs(&dir), vec![dir.join("8"), dir.join("256")]);
        std::fs::write(dir.join(INDEX), r#"{"format": 99, "config": "x", "axes": [], "runs": []}"#).unwrap();
        assert!(matches!(MatrixIndex::read(&dir), Err(ResultsError::TooNew { format: 99, .. })));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn groups_gather_a_combinations_repeats() {
        let run = |rate: &str, k: &str| MatrixRun {
            name: format!("rate={rate},repeat={k}"),
            dir: format!("rate={rate},repeat={k}").into(),
            values: vec![("rate".into(), rate.into()), (REPEAT.into(), k.into())],
            exit: 0,
            error: None,
            outcome: None,
        };
        let index = MatrixIndex {
            format: INDEX_FORMAT,
            config: None,
            axes: vec![
                Axis { key: "rate".into(), values: vec!["1".into(), "2".into()] },
                Axis { key: REPEAT.into(), values: vec!["1".into(), "2".into()] },
            ],
            runs: vec![run("1", "1"), run("1", "2"), run("2", "1"), run("2", "2")],
        };
        assert!(index.repeated());
        let groups = index.groups();
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[1].label(), "rate=2");
        let names: Vec<&str> = groups[1].runs.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["rate=2,repeat=1", "rate=2,repeat=2"]);
        // An index written before `config` was optional reads the same.
        let old = r#"{"format": 1, "config": "bench.toml", "axes": [], "runs": []}"#;
        let back: MatrixIndex = serde_json::from_str(old).unwrap();
        assert_eq!(back.config, Some("bench.toml".into()));
        assert!(!back.repeated());
    }
}
