//! One monotonic clock for every stamp of a run.
//!
//! A [`Stamp`] is the number of nanoseconds since the [`Clock`]'s origin. The engine, the
//! workload and the metrics all read the same clock, so differences between any two stamps
//! of a run are meaningful.

use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// Nanoseconds since the origin of the run's [`Clock`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Stamp(pub u64);

impl Stamp {
    /// `self - earlier` in seconds; negative when `earlier` is later.
    pub fn secs_since(self, earlier: Stamp) -> f64 {
        (self.0 as i128 - earlier.0 as i128) as f64 * 1e-9
    }
    /// Seconds since the clock's origin.
    pub fn as_secs(self) -> f64 {
        self.0 as f64 * 1e-9
    }
    /// `d` later.
    pub fn plus(self, d: Duration) -> Stamp {
        Stamp(self.0.saturating_add(d.as_nanos().min(u64::MAX as u128) as u64))
    }
    /// `d` earlier (not before the origin).
    pub fn minus(self, d: Duration) -> Stamp {
        Stamp(self.0.saturating_sub(d.as_nanos().min(u64::MAX as u128) as u64))
    }
    /// The same moment on a clock whose origin is `ns` nanoseconds earlier (`goodput merge`
    /// puts each shard's stamps on the earliest shard's clock); never before 0.
    pub fn shifted(self, ns: u64) -> Stamp {
        Stamp(self.0.saturating_add(ns))
    }
}

/// A monotonic clock: `Instant` at creation is its origin. Cheap to copy and share.
///
/// Its time source is `Instant::now` unless another is given ([`Clock::with_source`]): the
/// simulator's clock reads a paused runtime's virtual time, so the same workload code stamps
/// simulated requests exactly as it stamps real ones.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    origin: Instant,
    source: fn() -> Instant,
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock {
    pub fn new() -> Self {
        Self::with_source(Instant::now)
    }
    /// A clock reading `source` (monotonic, never before its first reading), whose origin is
    /// `source()` now.
    pub fn with_source(source: fn() -> Instant) -> Self {
        Self { origin: source(), source }
    }
    /// The current stamp.
    pub fn now(&self) -> Stamp {
        self.stamp((self.source)())
    }
    /// The stamp of an `Instant` read elsewhere (saturates at 0 before the origin).
    pub fn stamp(&self, t: Instant) -> Stamp {
        Stamp(t.saturating_duration_since(self.origin).as_nanos() as u64)
    }
    /// The `Instant` of a stamp, for sleeping until an intended time.
    pub fn instant(&self, s: Stamp) -> Instant {
        self.origin + Duration::from_nanos(s.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_are_monotonic_and_differences_are_seconds() {
        let c = Clock::new();
        let a = c.now();
        let b = c.now();
        assert!(b >= a);
        assert_eq!(Stamp(2_500_000_000).secs_since(Stamp(500_000_000)), 2.0);
        assert_eq!(Stamp(0).secs_since(Stamp(1_000_000_000)), -1.0);
        let s = Stamp(123_456);
        assert_eq!(c.stamp(c.instant(s)), s);
    }
}
