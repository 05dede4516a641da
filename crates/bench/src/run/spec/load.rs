//! How a run paces its load: the cap on requests in flight of an open loop
//! (`--max-concurrency`), a closed loop's ramp (`--ramp`, or users joining one per ended
//! request) and think jitter; and the requests a level may have in flight.

use super::bounds::{MAX_DURATION, MAX_USERS};
use super::error::SpecError;
use super::levels::LevelSpec;
use goodput_workload::{Arrival, Ramp};
use std::collections::VecDeque;
use std::time::Duration;

/// The run's pacing of its levels.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pacing {
    /// Open loops: at most this many requests in flight.
    pub max_in_flight: Option<usize>,
    /// Closed loops: `--ramp`; `None`: users join one per ended unit ([`Ramp::Paced`]).
    pub ramp: Option<Duration>,
    /// Closed loops: think times drawn from think × (1 ± this).
    pub think_jitter: f64,
}

impl Pacing {
    /// The pacing given, checked against the `levels` it applies to: a cap on requests in
    /// flight (of an open loop only, at most [`MAX_USERS`]), arrivals shaped other than
    /// Poisson (`burstiness` not `Some(1.0)`: `--burstiness`, or `None` for `--constant-rate`;
    /// of rates only), a think jitter (a fraction, and only of a think time), a ramp of at
    /// most [`MAX_DURATION`].
    pub fn checked(
        max_in_flight: Option<usize>,
        burstiness: Option<f64>,
        ramp: Option<Duration>,
        think_jitter: f64,
        think: Duration,
        levels: &VecDeque<LevelSpec>,
    ) -> Result<Pacing, SpecError> {
        let open = levels.iter().all(|l| matches!(l.arrival, Arrival::Rate { .. } | Arrival::Trace { .. }));
        match max_in_flight {
            Some(0) => return Err(SpecError::ZeroInFlight),
            Some(n) if n > MAX_USERS => return Err(SpecError::InFlightOver(n)),
            Some(n) if !open => return Err(SpecError::InFlightClosed(n)),
            _ => {}
        }
        if burstiness != Some(1.0) && !levels.iter().all(|l| matches!(l.arrival, Arrival::Rate { .. })) {
            return Err(SpecError::ShapedNotRate(burstiness));
        }
        let j = think_jitter;
        if !(j.is_finite() && (0.0..=1.0).contains(&j)) {
            return Err(SpecError::ThinkJitter(j));
        }
        if j > 0.0 && think.is_zero() {
            return Err(SpecError::JitterNoThink(j));
        }
        if let Some(r) = ramp.filter(|r| *r > MAX_DURATION) {
            return Err(SpecError::RampTooLong(r));
        }
        Ok(Pacing { max_in_flight, ramp, think_jitter: j })
    }

    /// A closed loop's ramp: `--ramp`, else users joining one per ended unit.
    pub fn ramp(&self) -> Ramp {
        self.ramp.map_or(Ramp::Paced, Ramp::Over)
    }

    /// Where the ramp came from, for a level's line (`sessions`: units of several requests).
    pub fn ramp_source(&self, sessions: bool) -> &'static str {
        match (self.ramp, sessions) {
            (Some(_), _) => "--ramp",
            (None, false) => "one user joining per ended request",
            (None, true) => "one user joining per ended unit",
        }
    }
}

/// The most requests a level may have in flight at once, and whether that is a bound (a
/// closed loop's users, a burst, a cap) or only what an uncapped open loop reaches when every
/// request lasts until its timeout.
pub fn in_flight(level: &LevelSpec, cap: Option<usize>, timeout: Duration) -> (u64, bool) {
    match (&level.arrival, cap) {
        (Arrival::Closed { users, .. }, _) => (*users as u64, true),
        (Arrival::Burst { size }, _) => (*size as u64, true),
        (Arrival::Rate { .. } | Arrival::Trace { .. }, Some(n)) => (n as u64, true),
        (Arrival::Rate { rate, .. } | Arrival::Trace { rate, .. }, None) => {
            ((rate * timeout.as_secs_f64()).ceil().min(1e9) as u64, false)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_flight_is_the_users_the_cap_or_what_the_timeout_allows() {
        let level = |arrival| LevelSpec { load: 1.0, arrival, duration: None };
        let t = Duration::from_secs(120);
        assert_eq!(in_flight(&level(Arrival::Closed { users: 64, think: Duration::ZERO }), None, t), (64, true));
        assert_eq!(in_flight(&level(Arrival::Rate { rate: 10.0, burstiness: None }), Some(32), t), (32, true));
        assert_eq!(in_flight(&level(Arrival::Rate { rate: 10.0, burstiness: None }), None, t), (1200, false));
        assert_eq!(in_flight(&level(Arrival::Burst { size: 500 }), None, t), (500, true));
    }
}
