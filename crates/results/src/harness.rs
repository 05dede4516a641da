//! The load generator's own side of a level: its CPU cost (it runs on one thread, so that
//! thread's CPU time is its whole cost) and whether it kept to its schedule — the seeds'
//! warning that the load generator can itself be the bottleneck.

use serde::{Deserialize, Serialize};

/// The load generator's own side of a level: its CPU cost and whether it kept its schedule.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Harness {
    pub cpu: CpuUse,
    /// Harness CPU per request (all requests of the level, warm-up included), in seconds.
    #[serde(with = "goodput_metrics::nan::Nullable")]
    pub cpu_per_request_s: f64,
    /// P99 of (actual − intended send time) over the measured requests, in seconds.
    #[serde(with = "goodput_metrics::nan::Nullable")]
    pub send_lag_p99_s: f64,
    /// Open loop: requests actually sent per second over the sending period, and the target.
    pub achieved_rate: Option<f64>,
    pub target_rate: Option<f64>,
    /// Whether the engine runs in this process (in-process and http-local targets): only then
    /// is the harness's share of the process CPU a share taken from the engine.
    #[serde(default)]
    pub engine_in_process: bool,
}

/// CPU used between two readings, in seconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CpuUse {
    /// Of the harness (the load generator's thread).
    #[serde(with = "goodput_metrics::nan::Nullable")]
    pub harness_s: f64,
    /// Of the whole process (engine threads included).
    #[serde(with = "goodput_metrics::nan::Nullable")]
    pub process_s: f64,
    /// Wall-clock seconds of the measurement.
    #[serde(default, with = "goodput_metrics::nan::Nullable")]
    pub wall_s: f64,
}

impl CpuUse {
    /// The harness thread's CPU over the wall time: how busy the single-threaded load
    /// generator was (1.0: saturated, it can no longer keep to its schedule).
    pub fn busy(&self) -> f64 {
        if self.wall_s > 0.0 {
            self.harness_s / self.wall_s
        } else {
            0.0
        }
    }

    /// The harness's share of the process's CPU.
    pub fn share(&self) -> f64 {
        if self.process_s > 0.0 {
            self.harness_s / self.process_s
        } else {
            0.0
        }
    }
}

/// Harness CPU share of the process above which the numbers may be skewed by it.
const CPU_SHARE_WARN: f64 = 0.05;
/// Busy share of the harness thread (CPU / wall time) above which it nears saturation.
const BUSY_WARN: f64 = 0.5;
/// P99 send lag above which the generator fell behind its schedule.
const SEND_LAG_WARN_S: f64 = 0.005;

impl Harness {
    /// The harness of a level: `cpu` over `requests` requests (warm-up included), the P99
    /// send lag of the measured ones, and for an open loop the send stamps (seconds) of the
    /// measured requests and the target rate.
    pub fn new(
        cpu: CpuUse,
        requests: usize,
        send_lag_p99_s: f64,
        open_loop: Option<(&[f64], f64)>,
        engine_in_process: bool,
    ) -> Self {
        let (achieved_rate, target_rate) = match open_loop {
            // Fewer than two sends give no rate: none rather than NaN (which JSON cannot hold).
            Some((sent, rate)) => (Some(achieved_rate(sent)).filter(|r| r.is_finite()), Some(rate)),
            None => (None, None),
        };
        Harness {
            cpu,
            cpu_per_request_s: cpu.harness_s / requests.max(1) as f64,
            send_lag_p99_s,
            achieved_rate,
            target_rate,
            engine_in_process,
        }
    }

    /// The harness's CPU for the tables: per request, and as a share of the process where the
    /// engine shares it, else as the load generator thread's busy share of one core.
    pub fn cpu_text(&self) -> String {
        let per = self.cpu_per_request_s * 1e3;
        if self.engine_in_process {
            format!("{per:.2} ms/req ({:.1} %)", self.cpu.share() * 100.0)
        } else {
            format!("{per:.2} ms/req ({:.0} % busy)", self.cpu.busy() * 100.0)
        }
    }

    /// What a reader must know before trusting the level's numbers.
    pub fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        if self.cpu.busy() > BUSY_WARN {
            w.push(format!(
                "the load generator's thread was busy {:.0} % of the level's wall time; near 100 % it cannot keep to its schedule (`goodput calibrate` shows its ceiling)",
                self.cpu.busy() * 100.0
            ));
        }
        if self.engine_in_process && self.cpu.share() > CPU_SHARE_WARN {
            w.push(format!(
                "the harness used {:.1} % of the process CPU ({:.3} s); on shared cores it competes with the engine",
                self.cpu.share() * 100.0,
                self.cpu.harness_s
            ));
        }
        if self.send_lag_p99_s > SEND_LAG_WARN_S {
            w.push(format!("the load generator fell behind: send lag p99 {:.1} ms", self.send_lag_p99_s * 1e3));
        }
        if let (Some(a), Some(t)) = (self.achieved_rate, self.target_rate) {
            if a < 0.95 * t {
                w.push(format!("achieved {a:.2} req/s of the {t} req/s target (< 95 %)"));
            }
        }
        w
    }
}

/// Requests sent per second over the sending period: (sends − 1) / (last − first send), from
/// send stamps in seconds; NaN with fewer than two sends or no spread.
pub fn achieved_rate(sent: &[f64]) -> f64 {
    let (lo, hi) = sent.iter().fold((f64::MAX, f64::MIN), |(a, b), &s| (a.min(s), b.max(s)));
    if sent.len() > 1 && hi > lo {
        (sent.len() - 1) as f64 / (hi - lo)
    } else {
        f64::NAN
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_computed_harness() {
        // 5 sends over 2 s: 4 gaps, 2 req/s; a 4 req/s target was missed.
        assert_eq!(achieved_rate(&[0.0, 0.5, 1.0, 1.5, 2.0]), 2.0);
        assert!(achieved_rate(&[1.0]).is_nan());
        let cpu = CpuUse { harness_s: 0.2, process_s: 1.0, wall_s: 0.25 };
        let h = Harness::new(cpu, 10, 0.006, Some((&[0.0, 0.5, 1.0, 1.5, 2.0], 4.0)), true);
        assert!((h.cpu_per_request_s - 0.02).abs() < 1e-12);
        assert_eq!(h.cpu_text(), "20.00 ms/req (20.0 %)");
        // Busy 80 %, 20 % of the process, 6 ms lag, half the rate: four warnings.
        assert_eq!(h.warnings().len(), 4);
        let quiet = Harness::new(CpuUse { harness_s: 0.01, process_s: 1.0, wall_s: 1.0 }, 10, 0.001, None, false);
        assert!(quiet.warnings().is_empty());
        assert_eq!(quiet.cpu_text(), "1.00 ms/req (1 % busy)");
    }
}
