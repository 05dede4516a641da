//! The machine during a level: what else used its CPUs, what the hypervisor took, and whether
//! the CPU's speed drifted. A level measured on a busy or drifting machine does not reproduce
//! (the seeds' pitfall of an unwatched load generator and host); it is flagged with the figure
//! and what to do. Pure: the counters are read by the cli.

use serde::{Deserialize, Serialize};

/// The machine's CPU counters around one level (from `/proc/stat`, `/proc/loadavg` and the
/// process's own CPU time) and the speed probe before and after it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MachineLoad {
    /// Online CPUs.
    pub cpus: usize,
    /// `other_cores` = (the machine's busy CPU seconds − goodput's own) ÷ the level's wall
    /// seconds: how many cores other processes kept busy on average during the level.
    #[schemars(range(min = 0.0))]
    pub other_cores: f64,
    /// Steal time ÷ all CPU time over the level: what the hypervisor gave other guests.
    #[schemars(range(min = 0.0, max = 1.0))]
    pub steal_share: f64,
    /// The 1-minute load average at the level's end.
    pub load_avg_1m: f64,
    /// The speed probe (a fixed single-thread computation, best of three) after the level
    /// against before it: after ÷ before − 1 (+0.2 = 20 % slower after). `None` when not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_drift: Option<f64>,
    /// The target runs on this machine in another process (an HTTP server on loopback): its
    /// CPU is part of `other_cores`, which then does not say the machine was busy.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub includes_target: bool,
}

/// Other processes keeping this many cores busy on average flag a level.
pub const BUSY_OTHER_CORES: f64 = 0.25;
/// A steal share at or above this flags a level.
pub const BUSY_STEAL_SHARE: f64 = 0.05;
/// A speed probe this much slower or faster after the level than before flags it.
pub const DRIFT: f64 = 0.15;

/// Why a level's machine was not quiet.
#[derive(Clone, Debug, PartialEq)]
pub enum Busy {
    /// Other processes used this many cores of `cpus`.
    Others { cores: f64, cpus: usize, load_avg: f64 },
    /// The hypervisor stole this share of the CPU time.
    Steal(f64),
    /// The CPU's speed changed by this much over the level.
    Drift(f64),
}

impl std::fmt::Display for Busy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Busy::Others { cores, cpus, load_avg } => {
                write!(f, "other processes kept {cores:.2} of {cpus} cores busy, load average {load_avg:.1}")
            }
            Busy::Steal(s) => write!(f, "the hypervisor stole {:.0} % of the CPU time", s * 100.0),
            Busy::Drift(d) => write!(f, "the CPU's speed drifted {:+.0} % over the level (speed probe)", d * 100.0),
        }
    }
}

impl MachineLoad {
    /// What made the machine busy during the level, worst first; empty when it was quiet.
    pub fn busy(&self) -> Vec<Busy> {
        let mut out = Vec::new();
        if !self.includes_target && self.other_cores >= BUSY_OTHER_CORES {
            out.push(Busy::Others { cores: self.other_cores, cpus: self.cpus, load_avg: self.load_avg_1m });
        }
        if self.steal_share >= BUSY_STEAL_SHARE {
            out.push(Busy::Steal(self.steal_share));
        }
        if let Some(d) = self.probe_drift.filter(|d| d.abs() >= DRIFT) {
            out.push(Busy::Drift(d));
        }
        out
    }

    /// From two readings of the counters: CPU ticks (busy, steal, all) of the machine,
    /// goodput's own CPU seconds and the wall seconds between them.
    pub fn between(start: &CpuCounters, end: &CpuCounters, tick_s: f64, wall_s: f64) -> MachineLoad {
        let d = |f: fn(&CpuCounters) -> u64| f(end).saturating_sub(f(start)) as f64;
        let busy_s = d(|c| c.busy_ticks) * tick_s;
        let own_s = (end.own_cpu_s - start.own_cpu_s).max(0.0);
        let all = d(|c| c.all_ticks);
        MachineLoad {
            cpus: end.cpus,
            other_cores: if wall_s > 0.0 { ((busy_s - own_s) / wall_s).max(0.0) } else { 0.0 },
            steal_share: if all > 0.0 { d(|c| c.steal_ticks) / all } else { 0.0 },
            load_avg_1m: end.load_avg_1m,
            probe_drift: None,
            includes_target: false,
        }
    }
}

/// One reading of the machine's CPU counters.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CpuCounters {
    pub cpus: usize,
    /// user + nice + system + irq + softirq ticks over every CPU (`/proc/stat`'s `cpu` line).
    pub busy_ticks: u64,
    pub steal_ticks: u64,
    /// Every tick of the line (idle and iowait included).
    pub all_ticks: u64,
    /// goodput's own CPU seconds (every thread).
    pub own_cpu_s: f64,
    pub load_avg_1m: f64,
}

impl CpuCounters {
    /// Parses `/proc/stat`'s aggregate `cpu` line into (busy, steal, all) ticks.
    pub fn parse_stat(stat: &str) -> Option<(u64, u64, u64)> {
        let line = stat.lines().find(|l| l.starts_with("cpu "))?;
        let v: Vec<u64> = line.split_whitespace().skip(1).map(|x| x.parse().ok()).collect::<Option<_>>()?;
        let at = |i: usize| v.get(i).copied().unwrap_or(0);
        // user nice system idle iowait irq softirq steal (guest time is inside user).
        let busy = at(0) + at(1) + at(2) + at(5) + at(6);
        Some((busy, at(7), (0..8).map(at).sum()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn other_cores_are_the_machine_s_busy_time_less_our_own() {
        // 10 s at 100 ticks/s: the machine's busy ticks rose by 1500 (15 CPU seconds) while
        // goodput used 9: others kept 0.6 cores busy; 100 of 4000 ticks stolen.
        let start = CpuCounters {
            cpus: 2,
            busy_ticks: 1000,
            steal_ticks: 0,
            all_ticks: 10_000,
            own_cpu_s: 1.0,
            load_avg_1m: 0.0,
        };
        let end = CpuCounters {
            cpus: 2,
            busy_ticks: 2500,
            steal_ticks: 100,
            all_ticks: 12_000,
            own_cpu_s: 10.0,
            load_avg_1m: 2.5,
        };
        let m = MachineLoad::between(&start, &end, 0.01, 10.0);
        assert!((m.other_cores - 0.6).abs() < 1e-12, "{m:?}");
        assert!((m.steal_share - 0.05).abs() < 1e-12, "{m:?}");
        let busy = m.busy();
        assert_eq!(busy.len(), 2, "{busy:?}");
        assert!(busy[0].to_string().contains("0.60 of 2 cores"), "{}", busy[0]);
        // The same with a server on loopback: its CPU is not others'.
        assert_eq!(MachineLoad { includes_target: true, ..m.clone() }.busy(), vec![Busy::Steal(0.05)]);
        let quiet = MachineLoad { other_cores: 0.1, steal_share: 0.0, probe_drift: Some(0.05), ..m };
        assert!(quiet.busy().is_empty());
        assert_eq!(MachineLoad { probe_drift: Some(-0.3), ..quiet }.busy(), vec![Busy::Drift(-0.3)]);
    }

    #[test]
    fn the_stat_line_parses() {
        let stat = "cpu  100 5 50 1000 20 3 2 7 0 0\ncpu0 50 2 25 500 10 1 1 3 0 0\n";
        assert_eq!(CpuCounters::parse_stat(stat), Some((160, 7, 1187)));
        assert_eq!(CpuCounters::parse_stat("intr 1 2"), None);
    }
}
