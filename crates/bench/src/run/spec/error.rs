//! Why a run's description was refused: each variant a setting out of its bounds, named by
//! its flag (the flag a program sets through the field of the same name).

use super::bounds::{MAX_LEVELS, MAX_RATE, MAX_USERS};
use goodput_workload::shard::Shard;
use std::path::PathBuf;
use std::time::Duration;

/// A refused setting of the run.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("--concurrency: every level must be at least 1 user, got {0:?}")]
    ZeroUsers(Vec<usize>),
    #[error("--rate: every rate must be a positive number, at least 0.001 requests per second, got {0:?}")]
    Rates(Vec<f64>),
    #[error("--burst: every level must send at least 1 request, got {0:?}")]
    Bursts(Vec<usize>),
    #[error("--stages: give at least one USERSxDURATION stage")]
    NoStages,
    #[error(
        "--trace-speedup {speedup}: the trace would offer {offered} requests per second, beyond what goodput \
         offers (at most {MAX_RATE})"
    )]
    TraceSpeedup { speedup: f64, offered: f64 },
    #[error("--trace-speedup: every speedup must be a number from 0.001 to 10000, got {0:?}")]
    Speedups(Vec<f64>),
    #[error("--max-users must be between 1 and {MAX_USERS}, got {0}")]
    MaxUsers(usize),
    #[error("--max-rate must be a positive rate of at most {MAX_RATE} requests per second, got {0}")]
    MaxRate(f64),
    /// A trace of sessions split over shards.
    #[error("--shard with a trace of sessions: a session's turns follow one another, so they cannot be split over load generators by request; run one generator, or split the trace by session into one file per generator")]
    ShardedSessions,
    /// A shard whose slice of a level's schedule is empty.
    #[error(
        "--shard {shard}: the level at {load} holds {total} requests (warm-up and cool-down included), none of which falls to shard {} (request j goes to shard j mod {}): give fewer shards or more --requests",
        shard.index,
        shard.count
    )]
    EmptySlice { shard: Shard, load: f64, total: usize },
    #[error("{0} levels given; a sweep runs at most {MAX_LEVELS}")]
    TooManyLevels(usize),
    #[error("the load {0} is given twice; each level of a sweep must have a load of its own")]
    LoadTwice(f64),
    #[error("--max-concurrency must be at least 1: it is the most requests in flight at once")]
    ZeroInFlight,
    #[error("--max-concurrency: {0} is more than goodput keeps in flight in one level (at most {MAX_USERS})")]
    InFlightOver(usize),
    #[error(
        "--max-concurrency {0} caps an open loop (--rate or --trace); a closed loop's users are its concurrency (--concurrency)"
    )]
    InFlightClosed(usize),
    #[error(
        "{} shapes the arrivals of an open loop at rates (--rate or --rate-of-limit); a closed loop's users send as their requests end, a burst and a trace keep their own times",
        .0.map_or("--constant-rate".to_string(), |b| format!("--burstiness {b}"))
    )]
    ShapedNotRate(Option<f64>),
    #[error("--think-jitter must be a fraction between 0 and 1 (0.2: think times within ±20 %), got {0}")]
    ThinkJitter(f64),
    #[error("--think-jitter {0} jitters the think time, and there is none: give --think too")]
    JitterNoThink(f64),
    #[error("--ramp: {0:?} is longer than a week, the longest goodput accepts")]
    RampTooLong(Duration),
    /// `--out` holds another run (or foreign files).
    #[error(transparent)]
    Out(#[from] goodput_results::ResultsError),
    #[error("{flag} {}: no directory {} to write it in", path.display(), dir.display())]
    ExportDir { flag: &'static str, path: PathBuf, dir: PathBuf },
}

/// `--start-at` out of its window, in hours from now.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum StartError {
    #[error("{ahead:.0} hours from now; --start-at may be at most {most:.0} hours ahead")]
    Ahead { ahead: f64, most: f64 },
    #[error("{ago:.0} hours ago; --start-at may be at most {most:.0} hours in the past (a late shard starts at once)")]
    Behind { ago: f64, most: f64 },
}

/// `--start-at`'s value refused: not a time, or outside its window. The cause is part of the
/// message (a value parser's error is printed alone).
#[derive(Debug, thiserror::Error)]
pub enum StartAtError {
    #[error("`{value}`: {reason} (expected RFC 3339, e.g. 2026-12-02T18:30:00Z)")]
    NotATime { value: String, reason: humantime::TimestampError },
    #[error("`{value}`: {reason}")]
    Outside { value: String, reason: StartError },
}
