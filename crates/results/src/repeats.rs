//! `repeats.json`: what `goodput run --repeats N` measured across its repeats, beside the
//! matrix index of the runs ([`crate::matrix`]). For each combination (one, without a
//! config's matrix): each level's metrics as their median over the repeats and their spread
//! ([`goodput_metrics::spread::Spread`]), each repeat's own value kept, and the capacity
//! verdict's usable and limit capacity the same way. Levels that not every repeat ran (a
//! `--refine` bisection can choose differently per repeat) are named, not summarized.

use crate::{LoadUnit, ResultsError};
use goodput_metrics::spread::Spread;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The file's name in the matrix directory.
pub const REPEATS: &str = "repeats.json";

/// The file's format; a newer one is refused by name.
pub const REPEATS_FORMAT: u32 = 1;

/// Every combination's spread over its repeats.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RepeatsFile {
    pub format: u32,
    /// The metric keys summarized (`goodput compare`'s: `ttft_p95`, `output_throughput`, …).
    pub keys: Vec<String>,
    pub groups: Vec<GroupSpread>,
}

/// One combination's repeats.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GroupSpread {
    /// `(key, value)` per matrix axis but the repeat; empty for a run's repeats alone.
    pub values: Vec<(String, String)>,
    /// The repeats' directories, relative to the matrix directory, in order (those that
    /// finished).
    pub runs: Vec<PathBuf>,
    /// The repeats that did not finish (an error, an interrupt), by directory.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unfinished: Vec<PathBuf>,
    /// The seed every repeat ran with.
    pub seed: u64,
    /// What the levels' loads count.
    pub unit: LoadUnit,
    /// Levels every repeat ran, by load ascending.
    pub levels: Vec<LevelSpread>,
    /// Usable capacity per repeat (`None` where no level met the SLOs) and its spread.
    pub usable: Vec<Option<f64>>,
    pub usable_spread: Option<Spread>,
    /// Limit capacity per repeat and its spread.
    pub limit: Vec<Option<f64>>,
    pub limit_spread: Option<Spread>,
    /// Levels some repeats ran and others did not, in words.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_shared: Vec<String>,
}

/// One level's metrics over the repeats.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LevelSpread {
    pub load: f64,
    pub metrics: Vec<MetricSpread>,
}

/// One metric of one level: each repeat's value (`None` where the repeat has none) and the
/// spread of those present.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MetricSpread {
    pub key: String,
    pub values: Vec<Option<f64>>,
    pub spread: Spread,
}

impl RepeatsFile {
    /// Writes `dir/repeats.json` whole (never half-written).
    pub fn write(&self, dir: &Path) -> Result<(), ResultsError> {
        crate::files::write_json(dir, REPEATS, self)
    }

    /// Reads `dir/repeats.json`; `None` when `dir` holds none.
    pub fn read(dir: &Path) -> Result<Option<Self>, ResultsError> {
        crate::files::read_json(dir, REPEATS, REPEATS_FORMAT, |f: &Self| f.format)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeats_file_round_trips() {
        let dir = std::env::temp_dir().join(format!("goodput-repeats-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(RepeatsFile::read(&dir).unwrap(), None);
        let spread = Spread::of(&[1.0, 2.0]).unwrap();
        let file = RepeatsFile {
            format: REPEATS_FORMAT,
            keys: vec!["ttft_p95".into()],
            groups: vec![GroupSpread {
                values: Vec::new(),
                runs: vec!["1-repeat=1".into(), "2-repeat=2".into()],
                unfinished: Vec::new(),
                seed: 7,
                unit: LoadUnit::Rate,
                levels: vec![LevelSpread {
                    load: 4.0,
                    metrics: vec![MetricSpread {
                        key: "ttft_p95".into(),
                        values: vec![Some(1.0), Some(2.0)],
                        spread: spread.clone(),
                    }],
                }],
                usable: vec![Some(4.0), None],
                usable_spread: Spread::of(&[4.0]),
                limit: vec![Some(8.0), Some(8.0)],
                limit_spread: Spread::of(&[8.0, 8.0]),
                not_shared: vec!["load 6 ran in repeat 1 only".into()],
            }],
        };
        file.write(&dir).unwrap();
        assert_eq!(RepeatsFile::read(&dir).unwrap(), Some(file));
        std::fs::write(dir.join(REPEATS), r#"{"format": 7, "keys": [], "groups": []}"#).unwrap();
        assert!(matches!(RepeatsFile::read(&dir), Err(ResultsError::TooNew { format: 7, .. })));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
