//! The load generator's own side of a level: its CPU cost (it runs on one thread, so that
//! thread's CPU time is its whole cost), whether it kept to its schedule — the seeds'
//! warning that the load generator can itself be the bottleneck — and how it paced the
//! level: a cap on requests in flight, the ramp its users started over, and whether their
//! sends came in waves ([`wave_share`]).

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
    /// Open loop: the rate the schedule itself called for over the measured requests (the
    /// same over their intended send times). A random schedule of few requests strays from
    /// the target by chance; the load generator is held to its schedule, not to the target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduled_rate: Option<f64>,
    /// Whether the engine runs in this process (in-process and http-local targets): only then
    /// is the harness's share of the process CPU a share taken from the engine.
    #[serde(default)]
    pub engine_in_process: bool,
    /// Open loop: at most this many requests were in flight (`--max-concurrency`); an arrival
    /// that found them busy waited, its wait in its latency and its send lag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<usize>,
    /// Closed loop: the users started staggered over this many seconds (0: all at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0))]
    pub ramp_s: Option<f64>,
    /// Closed loop of enough users and sends: the share of measured sends that came in a
    /// wave ([`wave_share`]); at [`WAVE_WARN`] or more the users march in lock-step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub wave_share: Option<f64>,
    /// The users of that closed loop (what [`wave_share`] was measured against).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub users: Option<usize>,
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
    /// The load generator's threads: its driver's alone (1), or its worker pool's
    /// (`--harness-cpus` of two or more CPUs).
    #[serde(default = "one")]
    pub threads: usize,
    /// The CPU seconds of the busiest of those threads (the driver's or a worker's): a pool
    /// saturates at its busiest worker, whatever the others' average. Absent (NaN) in results
    /// written before it was kept.
    #[serde(default = "nan", with = "goodput_metrics::nan::Nullable")]
    pub busiest_s: f64,
}

fn nan() -> f64 {
    f64::NAN
}

fn one() -> usize {
    1
}

impl CpuUse {
    /// The harness's CPU over the wall time of its threads: how busy the load generator was
    /// (1.0: saturated, it can no longer keep to its schedule).
    pub fn busy(&self) -> f64 {
        if self.wall_s > 0.0 {
            self.harness_s / (self.wall_s * self.threads.max(1) as f64)
        } else {
            0.0
        }
    }

    /// How busy the busiest load-generator thread was (its CPU over the wall time); the
    /// average [`CpuUse::busy`] where the busiest is unknown.
    pub fn busiest(&self) -> f64 {
        if self.busiest_s.is_finite() && self.wall_s > 0.0 {
            self.busiest_s / self.wall_s
        } else {
            self.busy()
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

/// An open loop's measured requests: when each was sent and when it was due (seconds), and
/// the target rate.
#[derive(Clone, Copy, Debug)]
pub struct OpenLoop<'a> {
    pub sent: &'a [f64],
    pub intended: &'a [f64],
    pub rate: f64,
}

impl Harness {
    /// The harness of a level: `cpu` over `requests` requests (warm-up included), the P99
    /// send lag of the measured ones, and an open loop's sends against its schedule.
    pub fn new(
        cpu: CpuUse,
        requests: usize,
        send_lag_p99_s: f64,
        open_loop: Option<OpenLoop<'_>>,
        engine_in_process: bool,
    ) -> Self {
        // Fewer than two sends give no rate: none rather than NaN (which JSON cannot hold).
        let rate_of = |stamps: &[f64]| Some(achieved_rate(stamps)).filter(|r| r.is_finite());
        let (achieved_rate, scheduled_rate, target_rate) = match open_loop {
            Some(o) => (rate_of(o.sent), rate_of(o.intended), Some(o.rate)),
            None => (None, None, None),
        };
        Harness {
            cpu,
            cpu_per_request_s: cpu.harness_s / requests.max(1) as f64,
            send_lag_p99_s,
            achieved_rate,
            target_rate,
            scheduled_rate,
            engine_in_process,
            ..Harness::default()
        }
    }

    /// A closed loop of `users`: its ramp (seconds) and the wave share of its measured send
    /// stamps `sent` (seconds).
    pub fn closed_loop(mut self, users: usize, ramp_s: f64, sent: &[f64]) -> Self {
        (self.users, self.ramp_s, self.wave_share) = (Some(users), Some(ramp_s), wave_share(sent, users));
        self
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
        if self.cpu.busiest() > BUSY_WARN {
            w.push(format!(
                "the load generator's {} was busy {:.0} % of the level's wall time; near 100 % it cannot keep to its schedule (`goodput calibrate` shows its ceiling; `--harness-cpus` of several CPUs spreads it)",
                if self.cpu.threads > 1 {
                    format!("busiest of {} threads", self.cpu.threads)
                } else {
                    "thread".to_string()
                },
                self.cpu.busiest() * 100.0
            ));
        }
        if self.engine_in_process && self.cpu.share() > CPU_SHARE_WARN {
            w.push(format!(
                "the harness used {:.1} % of the process CPU ({:.3} s); on shared cores it competes with the engine",
                self.cpu.share() * 100.0,
                self.cpu.harness_s
            ));
        }
        let lag_ms = self.send_lag_p99_s * 1e3;
        match self.max_concurrency {
            _ if self.send_lag_p99_s <= SEND_LAG_WARN_S => {}
            Some(n) => w.push(format!(
                "arrivals waited for one of the {n} slots of --max-concurrency: send lag p99 {lag_ms:.1} ms (the rate needs more than {n} in flight; the waits are in the latencies)"
            )),
            None => w.push(format!("the load generator fell behind: send lag p99 {lag_ms:.1} ms")),
        }
        if let (Some(a), Some(t)) = (self.achieved_rate, self.target_rate) {
            // Held to what the schedule called for: a random draw of few arrivals is not the
            // generator's shortfall.
            let due = self.scheduled_rate.unwrap_or(t);
            if a < 0.95 * due {
                let why = self
                    .max_concurrency
                    .map_or(String::new(), |n| format!("; the {n} slots of --max-concurrency held it back"));
                let drawn =
                    self.scheduled_rate.map_or(String::new(), |d| format!(", whose schedule called for {d:.2}"));
                w.push(format!("achieved {a:.2} req/s of the {t} req/s target{drawn} (< 95 %){why}"));
            }
        }
        if let (Some(share), Some(users)) = (self.wave_share, self.users) {
            if share >= WAVE_WARN {
                w.push(format!(
                    "the users sent in waves: {:.0} % of the measured sends came within half a mean gap of at least {} other users' (lock-step; the first wave's timing repeats): give a longer --ramp or a --think-jitter",
                    share * 100.0,
                    wave_quorum(users)
                ));
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

/// [`wave_share`] at or above which a level's sends came in waves.
pub const WAVE_WARN: f64 = 0.5;

/// The other sends that make a wave around one of `users` users' sends: half the users, and
/// at least 3 (with fewer users a chance coincidence would pass for one).
pub fn wave_quorum(users: usize) -> usize {
    users.div_ceil(2).max(3)
}

/// How much a closed loop's sends cluster in waves: the share of `sent` (send stamps,
/// seconds) with at least [`wave_quorum`]`(users)` other sends within `g / 2` of it, where
/// `g = (last − first) / (n − 1)` is the mean gap between sends. Users whose sends are spread
/// over their cycle (each user sends once per `N · g`) have about one other send within a
/// window of width `g` — Poisson(1) when random, none when evenly staggered — so few sends
/// reach the quorum; users in lock-step send all `N` within a moment, once per cycle, and
/// every send does. `None` with fewer than 4 users or fewer than two sends per user (no
/// repeating pattern to see).
pub fn wave_share(sent: &[f64], users: usize) -> Option<f64> {
    let n = sent.len();
    if users < 4 || n < 2 * users || sent.iter().any(|t| !t.is_finite()) {
        return None;
    }
    let mut t = sent.to_vec();
    t.sort_by(f64::total_cmp);
    let half = (t[n - 1] - t[0]) / (n - 1) as f64 / 2.0;
    let quorum = wave_quorum(users);
    // A window [t_i − half, t_i + half] sliding over the sorted stamps.
    let (mut lo, mut hi, mut in_wave) = (0, 0, 0usize);
    for i in 0..n {
        while t[i] - t[lo] > half {
            lo += 1;
        }
        while hi + 1 < n && t[hi + 1] - t[i] <= half {
            hi += 1;
        }
        if hi - lo >= quorum {
            in_wave += 1;
        }
    }
    Some(in_wave as f64 / n as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_computed_harness() {
        // 5 sends over 2 s: 4 gaps, 2 req/s; a 4 req/s target was missed.
        assert_eq!(achieved_rate(&[0.0, 0.5, 1.0, 1.5, 2.0]), 2.0);
        assert!(achieved_rate(&[1.0]).is_nan());
        let cpu = CpuUse { harness_s: 0.2, process_s: 1.0, wall_s: 0.25, threads: 1, busiest_s: 0.2 };
        let sent = [0.0, 0.5, 1.0, 1.5, 2.0];
        let h = Harness::new(
            cpu,
            10,
            0.006,
            Some(OpenLoop { sent: &sent, intended: &[0.0, 0.25, 0.5, 0.75, 1.0], rate: 4.0 }),
            true,
        );
        assert!((h.cpu_per_request_s - 0.02).abs() < 1e-12);
        assert_eq!(h.cpu_text(), "20.00 ms/req (20.0 %)");
        // Busy 80 %, 20 % of the process, 6 ms lag, half the rate: four warnings.
        assert_eq!(h.warnings().len(), 4);
        assert!(
            h.warnings()[3].contains("achieved 2.00 req/s of the 4 req/s target, whose schedule called for 4.00"),
            "{:?}",
            h.warnings()
        );
        // A schedule of few arrivals that drew 2 req/s, kept to: no shortfall of the generator.
        let drawn = Harness::new(cpu, 10, 0.001, Some(OpenLoop { sent: &sent, intended: &sent, rate: 4.0 }), true);
        assert!(!drawn.warnings().iter().any(|w| w.contains("achieved")), "{:?}", drawn.warnings());
        let quiet = Harness::new(
            CpuUse { harness_s: 0.01, process_s: 1.0, wall_s: 1.0, threads: 1, busiest_s: 0.01 },
            10,
            0.001,
            None,
            false,
        );
        assert!(quiet.warnings().is_empty());
        assert_eq!(quiet.cpu_text(), "1.00 ms/req (1 % busy)");
        // The same lag under a cap on requests in flight is the cap's, not the generator's.
        let capped = Harness { max_concurrency: Some(2), ..h };
        let w = capped.warnings();
        assert!(w.iter().any(|w| w.contains("2 slots of --max-concurrency: send lag p99 6.0 ms")), "{w:?}");
        assert!(!w.iter().any(|w| w.contains("fell behind")), "{w:?}");
        // Four workers with 0.2 s of CPU over 0.25 s: 20 % busy each (0.2 / (0.25 × 4)).
        let pool = CpuUse { threads: 4, busiest_s: 0.05, ..cpu };
        assert!((pool.busy() - 0.2).abs() < 1e-12 && (pool.busiest() - 0.2).abs() < 1e-12);
        // One worker of the four did all the work: 80 % busy, whatever the average says.
        let lopsided = Harness::new(CpuUse { busiest_s: 0.2, ..pool }, 10, 0.001, None, false);
        assert!((lopsided.cpu.busiest() - 0.8).abs() < 1e-12, "{:?}", lopsided.cpu);
        let w = lopsided.warnings();
        assert!(w.iter().any(|w| w.contains("busiest of 4 threads was busy 80 %")), "{w:?}");
        let old: CpuUse = serde_json::from_str(r#"{"harness_s": 0.2, "process_s": 1.0, "wall_s": 0.25}"#).unwrap();
        assert_eq!(old.threads, 1, "results written before the pool read as one thread");
        assert!(old.busiest_s.is_nan() && (old.busiest() - 0.8).abs() < 1e-12, "the average stands in: {old:?}");
    }

    #[test]
    fn lock_step_sends_are_waves_and_staggered_ones_are_not() {
        // 8 users, 4 cycles of 1 s. Lock-step: each cycle's 8 sends 10 ms apart. Mean gap
        // (3.07 − 0) / 31 ≈ 99 ms, half of it ≈ 50 ms: each send has at least 4 others of its
        // wave within it (the quorum of 8 users): all 32 are in a wave.
        let lock_step: Vec<f64> = (0..4).flat_map(|c| (0..8).map(move |k| c as f64 + k as f64 * 0.01)).collect();
        assert_eq!(wave_share(&lock_step, 8), Some(1.0));
        // Staggered over the cycle: user k sends at k/8 s each cycle; gaps of 125 ms, so no
        // other send within 62.5 ms of any: none.
        let staggered: Vec<f64> = (0..32).map(|i| i as f64 * 0.125).collect();
        assert_eq!(wave_share(&staggered, 8), Some(0.0));
        // Staggered over half the cycle (a ramp of half a request time): sends 62.5 ms apart
        // in the first half of each second; the half window (≈ 62 ms) holds at most the 2
        // neighbours, short of the quorum of 4.
        let half: Vec<f64> = (0..4).flat_map(|c| (0..8).map(move |k| c as f64 + k as f64 * 0.0625)).collect();
        assert_eq!(wave_share(&half, 8), Some(0.0));
        // A wave of 5 users and 3 staggered ones a cycle (at 625, 750, 875 ms; mean gap 125 ms):
        // each wave send has the 4 others within 4 ms, a staggered one none: 20 of 32.
        let mixed: Vec<f64> = (0..4)
            .flat_map(|c| (0..8).map(move |k| c as f64 + if k < 5 { k as f64 * 0.001 } else { k as f64 * 0.125 }))
            .collect();
        assert_eq!(wave_share(&mixed, 8), Some(0.625));
        // Sends at random (uniform over 10 s, 16 users, 160 sends): about Poisson(1) others in
        // a window, far short of the quorum of 8.
        let mut x = 12345u64;
        let random: Vec<f64> = (0..160)
            .map(|_| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (x >> 11) as f64 / (1u64 << 53) as f64 * 10.0
            })
            .collect();
        assert!(wave_share(&random, 16).unwrap() < 0.05);
        // Too few users or sends to tell.
        assert_eq!(wave_share(&lock_step[..12], 8), None);
        assert_eq!(wave_share(&lock_step, 3), None);
        let h = Harness::default().closed_loop(8, 0.0, &lock_step);
        assert!(h.warnings().iter().any(|w| w.contains("100 % of the measured sends") && w.contains("--ramp")));
        assert!(Harness::default().closed_loop(8, 0.5, &staggered).warnings().is_empty());
    }
}
