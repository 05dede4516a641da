//! The bounds every run keeps: the most users, the highest rate, the most requests, levels
//! and the longest duration a level may have. Imports nothing of the spec.

use std::time::Duration;

/// The most virtual users (or burst requests) one level may have: far beyond what one load
/// generator drives, and small enough that a typo cannot exhaust memory.
pub const MAX_USERS: usize = 100_000;
/// The highest request rate one level may offer (requests per second).
pub const MAX_RATE: f64 = 100_000.0;
/// The most measured requests (sessions, tasks) per level.
pub const MAX_REQUESTS: usize = 10_000_000;
/// The longest level, warm-up or think time.
pub const MAX_DURATION: Duration = Duration::from_secs(7 * 24 * 3600);

/// The most levels one sweep runs.
pub const MAX_LEVELS: usize = 1000;
