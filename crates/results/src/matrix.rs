//! The index of a benchmark matrix (`goodput run --config FILE` with a `[matrix]`): one run
//! per combination of the matrix's values, each in its own directory under the matrix's
//! `--out`, and `index.json` there naming them, rewritten whole after each run so a reader
//! (or an interrupted matrix) always finds the runs that finished. `report` reads it to
//! overlay the runs; nothing walks the directory by name.

use crate::files::write_whole;
use crate::ResultsError;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The index's file name in the matrix directory.
pub const INDEX: &str = "index.json";

/// The index's format; a newer one is refused by name.
pub const INDEX_FORMAT: u32 = 1;

/// What a matrix ran: the config it came from and every run, in order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MatrixIndex {
    pub format: u32,
    /// The config file, as given.
    pub config: PathBuf,
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
}

impl MatrixIndex {
    /// Writes `dir/index.json` whole (never half-written).
    pub fn write(&self, dir: &Path) -> Result<(), ResultsError> {
        let bytes = serde_json::to_vec_pretty(self).map_err(|source| ResultsError::Json {
            path: dir.join(INDEX),
            line: None,
            source,
        })?;
        write_whole(dir, INDEX, &bytes)
    }

    /// Reads `dir/index.json`; `None` when `dir` holds none (a single run's directory).
    pub fn read(dir: &Path) -> Result<Option<Self>, ResultsError> {
        let path = dir.join(INDEX);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(ResultsError::Io { path, source }),
        };
        let index: Self = serde_json::from_slice(&bytes).map_err(|source| ResultsError::Json {
            path: path.clone(),
            line: None,
            source,
        })?;
        if index.format > INDEX_FORMAT {
            return Err(ResultsError::TooNew { path, format: index.format });
        }
        Ok(Some(index))
    }

    /// The directories of the runs that finished (exit 0 or 3), each joined to `dir`.
    pub fn finished_dirs(&self, dir: &Path) -> Vec<PathBuf> {
        self.runs.iter().filter(|r| r.exit == 0 || r.exit == 3).map(|r| dir.join(&r.dir)).collect()
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
        };
        let index = MatrixIndex {
            format: INDEX_FORMAT,
            config: "bench.toml".into(),
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
}
