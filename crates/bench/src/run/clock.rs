//! The run's clock: the wall time of its stamp 0, and with `--clock-ref` this machine's offset
//! from a reference clock before and after the sweep (shards on machines whose clocks
//! disagree are lined up by it), and a reference moment on this machine's clock.

use super::error::RunError;
use super::rig::Rig;
use super::spec::RunSpec;
use crate::progress::Progress;
use goodput_results::RunSummary;

/// The moment `at` of a reference clock on this machine's clock, which is `offset_s` behind
/// the reference (reference − here).
pub fn on_this_clock(at: std::time::SystemTime, offset_s: f64) -> std::time::SystemTime {
    let shift = std::time::Duration::from_secs_f64(offset_s.abs().min(1e6));
    if offset_s >= 0.0 { at.checked_sub(shift) } else { at.checked_add(shift) }.unwrap_or(at)
}

/// The wall time of the run's stamp 0, and with `--clock-ref` the machine's offset from the
/// reference before the first level (a reference that does not answer ends the run here).
pub fn clock_start(
    spec: &RunSpec,
    rig: &Rig,
    progress: &dyn Progress,
) -> Result<goodput_results::clock::ClockInfo, RunError> {
    let now = goodput_core::http::WallClock::now().unix_ns;
    let stamp = goodput_core::Target::clock(&*rig.target).now();
    let origin_unix_ns = now.saturating_sub(stamp.0);
    let reference = match &spec.clock_ref {
        None => None,
        Some(r) => {
            let start =
                crate::clockref::measure(r).map_err(|source| RunError::ClockRef { url: r.to_string(), source })?;
            let line = format!("{:+.3} ms from {r} (round trip {:.3} ms)", start.offset_s * 1e3, start.rtt_s * 1e3);
            if start.offset_s.abs() > 1.0 {
                let warning = format!(
                    "warning: this machine's clock is {line}: the merge lines shards up by it, but check the clock"
                );
                progress.line(&warning, true);
            } else {
                progress.line(&format!("clock: {line}"), false);
            }
            Some(goodput_results::clock::ClockReference { url: r.to_string(), start, end: None })
        }
    };
    Ok(goodput_results::clock::ClockInfo { origin_unix_ns, reference })
}

/// `--clock-ref`: the offset again after the last level (a failure here is a warning: the
/// start's measurement stands).
pub fn clock_end(spec: &RunSpec, summary: &mut RunSummary, progress: &dyn Progress) {
    let Some(r) = summary.clock.as_mut().and_then(|c| c.reference.as_mut()) else { return };
    let Some(c) = &spec.clock_ref else { return };
    match crate::clockref::measure(c) {
        Ok(end) => r.end = Some(end),
        Err(e) => progress.line(
            &format!(
                "warning: --clock-ref {}: the offset after the run: {} (the one before stands)",
                r.url,
                goodput_client::causes(&e)
            ),
            true,
        ),
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn a_reference_moment_is_moved_by_the_offset() {
        let at = UNIX_EPOCH + Duration::from_secs(1000);
        // The reference is 2.5 s ahead of this clock: its 1000 s is this clock's 997.5 s.
        assert_eq!(super::on_this_clock(at, 2.5), UNIX_EPOCH + Duration::from_millis(997_500));
        assert_eq!(super::on_this_clock(at, -0.25), UNIX_EPOCH + Duration::from_millis(1_000_250));
        assert_eq!(super::on_this_clock(at, 0.0), at);
    }
}
