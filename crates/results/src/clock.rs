//! Where a run's clock stood: the wall time of its stamp 0, and (`--clock-ref`) its machine's
//! offset from a reference clock measured before and after the run — what `goodput merge`
//! needs to put shards that ran on different machines on one time line; and what a merged
//! run keeps of the shards it came from.

use goodput_core::shard::Shard;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The run's clock against wall time and a reference.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ClockInfo {
    /// This machine's wall time of stamp 0 (the run's monotonic clock origin), nanoseconds
    /// since the Unix epoch.
    pub origin_unix_ns: u64,
    /// `--clock-ref`: the machine's offset from the reference clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<ClockReference>,
}

/// The machine's offset from a reference clock, measured before the first level and after
/// the last (NTP's exchange: the sample of the shortest round trip of several).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ClockReference {
    /// The reference: `ntp://HOST[:PORT]`, or the URL of a `goodput serve`.
    pub url: String,
    pub start: ClockOffset,
    /// `None` when the run ended before the second measurement, or it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<ClockOffset>,
}

/// One measurement of the offset.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ClockOffset {
    /// Reference time minus this machine's wall time, seconds: add it to a wall time here to
    /// get the reference's.
    pub offset_s: f64,
    /// The round trip of the sample it came from, seconds: the offset is exact to within
    /// half of it.
    #[schemars(range(min = 0.0))]
    pub rtt_s: f64,
}

impl ClockInfo {
    /// The offset used to put this run on the reference's time line: the mean of the
    /// measurements (the midpoint of a linear drift); `None` without a reference.
    pub fn offset_s(&self) -> Option<f64> {
        let r = self.reference.as_ref()?;
        Some(r.end.map_or(r.start.offset_s, |e| (r.start.offset_s + e.offset_s) / 2.0))
    }

    /// How far the offset moved between the two measurements, seconds.
    pub fn drift_s(&self) -> Option<f64> {
        let r = self.reference.as_ref()?;
        Some(r.end?.offset_s - r.start.offset_s)
    }

    /// Stamp 0 in nanoseconds since the Unix epoch on the reference's clock (this machine's
    /// own without a reference).
    pub fn origin_ns(&self) -> i128 {
        self.origin_unix_ns as i128 + (self.offset_s().unwrap_or(0.0) * 1e9).round() as i128
    }
}

/// A run built by `goodput merge` from the shards of its levels.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Merged {
    /// Every shard merged, by level and index.
    pub shards: Vec<MergedShard>,
    /// The shards' clocks were put on a reference's time line (every shard measured its
    /// offset against the same `--clock-ref`); `false`: their wall clocks were trusted.
    pub referenced: bool,
}

/// One shard of a merged run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MergedShard {
    /// The shard's results directory.
    pub dir: PathBuf,
    pub shard: Shard,
    /// The level it sent its slice of.
    pub load: f64,
    /// Requests it recorded (warm-up and cool-down included).
    pub records: usize,
    /// Requests of its slice it has no record of (ids in the level's range that no shard
    /// recorded and that fall to it).
    pub lost: usize,
    /// Its first intended send after the level's earliest shard's, seconds (common clock).
    pub start_s: f64,
    /// `--start-at`: how late it started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub late_s: Option<f64>,
    /// Its clock as it recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<ClockInfo>,
}
