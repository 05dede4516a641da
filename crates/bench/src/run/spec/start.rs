//! When a run's first level starts (`--start-at`): a wall-clock time, RFC 3339, within a
//! week ahead and a day behind — the start shards of one run share.

use super::error::{StartAtError, StartError};
use std::time::{Duration, SystemTime};

/// How far ahead `--start-at` may be: a week (shards scheduled for a run days away are a
/// mistake more often than a plan; a year-9999 start waits for ever).
pub const MAX_START_AHEAD: Duration = Duration::from_secs(7 * 86_400);
/// How far in the past `--start-at` may be: a day (a shard that starts late runs at once and
/// records how late; a date long gone is a typo).
pub const MAX_START_BEHIND: Duration = Duration::from_secs(86_400);

/// `--start-at`'s value: an RFC 3339 time within [`start_within`] of now.
pub fn parse_start_at(s: &str) -> Result<SystemTime, StartAtError> {
    let at = humantime::parse_rfc3339_weak(s).map_err(|reason| StartAtError::NotATime { value: s.into(), reason })?;
    start_within(at, SystemTime::now()).map_err(|reason| StartAtError::Outside { value: s.into(), reason })
}

/// `at` when it is at most [`MAX_START_AHEAD`] after `now` and [`MAX_START_BEHIND`] before it.
pub fn start_within(at: SystemTime, now: SystemTime) -> Result<SystemTime, StartError> {
    let hours = |d: Duration| d.as_secs_f64() / 3600.0;
    match at.duration_since(now) {
        Ok(ahead) if ahead > MAX_START_AHEAD => {
            Err(StartError::Ahead { ahead: hours(ahead), most: hours(MAX_START_AHEAD) })
        }
        Ok(_) => Ok(at),
        Err(e) if e.duration() > MAX_START_BEHIND => {
            Err(StartError::Behind { ago: hours(e.duration()), most: hours(MAX_START_BEHIND) })
        }
        Err(_) => Ok(at),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_at_is_bounded_a_week_ahead_and_a_day_behind() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_780_000_000);
        let ok = [now, now + Duration::from_secs(6 * 86_400), now - Duration::from_secs(3600)];
        for at in ok {
            assert_eq!(start_within(at, now), Ok(at));
        }
        let far = humantime::parse_rfc3339_weak("9999-12-31T23:59:59Z").unwrap();
        let ahead = start_within(far, now).unwrap_err();
        assert!(matches!(ahead, StartError::Ahead { most, .. } if most == 168.0), "{ahead:?}");
        assert!(ahead.to_string().contains("at most 168 hours ahead"));
        let gone = now - Duration::from_secs(3 * 86_400);
        let behind = start_within(gone, now).unwrap_err();
        assert_eq!(behind, StartError::Behind { ago: 72.0, most: 24.0 });
        assert!(behind.to_string().contains("72 hours ago"));
    }
}
