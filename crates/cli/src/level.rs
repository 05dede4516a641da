//! What one finished level of `goodput run` reports beside its service summary: the engine's
//! side (from its step records), the harness's own cost and schedule keeping, and the run's
//! setup for the results file.

use crate::target::ServerSide;
use goodput_core::StepRecord;
use goodput_metrics::level::LevelSummary;
use goodput_metrics::Summary;
use goodput_workload::Arrival;

/// The engine's side of one level, from its step records.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct EngineLevel {
    pub steps: usize,
    pub kv_block_usage_max: f64,
    pub kv_token_usage_max: f64,
    pub running_max: usize,
    pub waiting_max: usize,
    /// Means over the level's steps, weighted by step duration (busy time).
    pub running_mean: f64,
    pub waiting_mean: f64,
    pub kv_block_usage_mean: f64,
    pub preemptions: usize,
    pub prefix_hit_tokens: usize,
    pub step_time: Option<Summary>,
}

pub fn engine_level(steps: &[StepRecord]) -> EngineLevel {
    use goodput_metrics::engine as em;
    let busy: f64 = steps.iter().map(em::step_time).sum();
    let mean = |f: &dyn Fn(&StepRecord) -> f64| {
        if busy > 0.0 {
            steps.iter().map(|s| em::step_time(s) * f(s)).sum::<f64>() / busy
        } else {
            0.0
        }
    };
    EngineLevel {
        running_mean: mean(&|s| s.running as f64),
        waiting_mean: mean(&|s| s.waiting as f64),
        kv_block_usage_mean: mean(&em::kv_block_usage),
        steps: steps.len(),
        kv_block_usage_max: steps.iter().map(em::kv_block_usage).fold(0.0, f64::max),
        kv_token_usage_max: steps.iter().map(em::kv_token_usage).fold(0.0, f64::max),
        running_max: steps.iter().map(|s| s.running).max().unwrap_or(0),
        waiting_max: steps.iter().map(|s| s.waiting).max().unwrap_or(0),
        preemptions: steps.iter().map(|s| s.preemptions).sum(),
        prefix_hit_tokens: steps.iter().map(|s| s.prefix_hit_tokens).sum(),
        step_time: Summary::of(&steps.iter().map(em::step_time).collect::<Vec<_>>()),
    }
}

/// The load generator's own side of a level: its CPU cost and whether it kept its schedule.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Harness {
    pub cpu: crate::cpu::CpuUse,
    /// Harness CPU per request (all requests of the level, warm-up included), in seconds.
    pub cpu_per_request_s: f64,
    /// P99 of (actual − intended send time) over the measured requests, in seconds.
    pub send_lag_p99_s: f64,
    /// Open loop: requests actually sent per second over the sending period, and the target.
    pub achieved_rate: Option<f64>,
    pub target_rate: Option<f64>,
    /// Whether the engine runs in this process (in-process and http-local targets): only then
    /// is the harness's share of the process CPU a share taken from the engine.
    pub engine_in_process: bool,
}

/// Harness CPU share of the process above which the numbers may be skewed by it.
const CPU_SHARE_WARN: f64 = 0.05;
/// Busy share of the harness thread (CPU / wall time) above which it nears saturation.
const BUSY_WARN: f64 = 0.5;
/// P99 send lag above which the generator fell behind its schedule.
const SEND_LAG_WARN_S: f64 = 0.005;

impl Harness {
    pub fn new(
        s: &LevelSummary,
        run: &goodput_workload::LevelRun,
        cpu: crate::cpu::CpuUse,
        arrival: &Arrival,
        engine_in_process: bool,
    ) -> Self {
        let n = run.records.len().max(1);
        let (achieved_rate, target_rate) = match *arrival {
            Arrival::Rate { rate, .. } => {
                let sent: Vec<f64> = run.measured().map(|r| r.sent.as_secs()).collect();
                let span =
                    sent.iter().copied().fold(f64::MIN, f64::max) - sent.iter().copied().fold(f64::MAX, f64::min);
                let achieved = if sent.len() > 1 && span > 0.0 { (sent.len() - 1) as f64 / span } else { f64::NAN };
                (Some(achieved), Some(rate))
            }
            Arrival::Closed { .. } | Arrival::Burst { .. } => (None, None),
        };
        Harness {
            cpu,
            cpu_per_request_s: cpu.harness_s / n as f64,
            send_lag_p99_s: s.send_lag.as_ref().map_or(0.0, |x| x.p99),
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

/// One finished level: the service summary, the engine's side and the harness's own.
#[derive(Clone, Debug, serde::Serialize)]
pub struct LevelReport {
    pub summary: LevelSummary,
    /// Requests run but left out of `summary`: warm-up and cool-down.
    pub warmup_requests: usize,
    pub cooldown_requests: usize,
    /// The engine's steps over the measured window (from the first measured request's
    /// intended send to the last one's end), as the summary's; the time series keeps all.
    pub engine: EngineLevel,
    /// HTTP targets: the server's own histograms over the level and its gauges over time,
    /// from its /metrics.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<ServerSide>,
    /// Running, waiting and KV usage over the level ([`Occupancy::of`]).
    pub occupancy: Option<Occupancy>,
    pub harness: Harness,
    /// Multi-turn runs: the requests grouped by turn index.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub turns: Vec<goodput_metrics::turns::TurnSummary>,
    /// Agent runs: task-level numbers (task E2E, calls per task, tool-wait share, steps).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<goodput_metrics::agent::AgentSummary>,
    /// RAG runs: the stage timeline (embed, retrieve, rerank, assemble, model call).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rag: Option<goodput_metrics::agent::AgentSummary>,
}

/// A level's occupancy: running and waiting requests and KV-cache block usage (a fraction).
/// NaN where the source does not say.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Occupancy {
    /// The engine's steps in this process (means weighted by step time), or the server's
    /// /metrics gauges at each scrape (plain means over the scrapes), over the level's
    /// measured window (a warm-up burst left out).
    pub from_server: bool,
    pub running_mean: f64,
    pub running_max: f64,
    pub waiting_mean: f64,
    pub waiting_max: f64,
    pub kv_mean: f64,
    pub kv_max: f64,
    /// Counted from the engine's steps only.
    pub preemptions: Option<usize>,
}

impl Occupancy {
    /// What a level's occupancy was: from the engine's steps where it ran in this process,
    /// else from the server's /metrics scrapes; `None` when neither is known (a remote server
    /// without /metrics), rather than zeros.
    pub fn of(e: &EngineLevel, server: Option<&ServerSide>) -> Option<Occupancy> {
        if e.steps > 0 {
            return Some(Occupancy {
                from_server: false,
                running_mean: e.running_mean,
                running_max: e.running_max as f64,
                waiting_mean: e.waiting_mean,
                waiting_max: e.waiting_max as f64,
                kv_mean: e.kv_block_usage_mean,
                kv_max: e.kv_block_usage_max,
                preemptions: Some(e.preemptions),
            });
        }
        let server = server?;
        // The scrapes inside the measured window (all of them if none is).
        let inside: Vec<&(f64, f64, f64, f64)> = match server.measured_window_s {
            Some((a, b)) => server.series.iter().filter(|x| x.0 >= a && x.0 <= b).collect(),
            None => Vec::new(),
        };
        let series: Vec<&(f64, f64, f64, f64)> =
            if inside.is_empty() { server.series.iter().collect() } else { inside };
        let stat = |g: fn(&(f64, f64, f64, f64)) -> f64| {
            let v: Vec<f64> = series.iter().copied().map(g).filter(|x| x.is_finite()).collect();
            if v.is_empty() {
                (f64::NAN, f64::NAN)
            } else {
                (v.iter().sum::<f64>() / v.len() as f64, v.iter().copied().fold(f64::MIN, f64::max))
            }
        };
        let ((running_mean, running_max), (waiting_mean, waiting_max), (kv_mean, kv_max)) =
            (stat(|x| x.1), stat(|x| x.2), stat(|x| x.3));
        if running_max.is_nan() && waiting_max.is_nan() && kv_max.is_nan() {
            return None;
        }
        Some(Occupancy {
            from_server: true,
            running_mean,
            running_max,
            waiting_mean,
            waiting_max,
            kv_mean,
            kv_max,
            preemptions: None,
        })
    }
}

impl LevelReport {
    /// The level's queue time for the knee, and where it comes from
    /// ([`goodput_metrics::capacity::level_queue_time`]).
    pub fn queue_time(&self) -> Option<(f64, goodput_metrics::capacity::QueueSource)> {
        let server = self.server.as_ref().and_then(|s| s.histograms.get("request_queue_time_seconds")?.mean);
        goodput_metrics::capacity::level_queue_time(self.summary.queue_time.as_ref().map(|q| q.p50), server)
    }
}

/// Where the engine and the harness ran (CPU lists in the kernel's notation).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Pinning {
    pub engine: Option<String>,
    pub harness: Option<String>,
}

/// What a reader needs to reproduce a run.
pub struct Setup<'a> {
    pub model: &'a str,
    pub weights: &'a str,
    pub device: &'a str,
    pub pinning: &'a Pinning,
    pub retry: goodput_workload::RetryPolicy,
    pub seed: u64,
    /// Where requests went: in-process, http-local or the server's URL.
    pub target: &'a str,
    /// The engine's settings (block size, pool, budgets).
    pub engine: serde_json::Value,
    /// The machine the run measured.
    pub machine: serde_json::Value,
}

/// CPU model, logical CPUs, memory and kernel of this machine, for the report's setup.
pub fn machine() -> serde_json::Value {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let cpuinfo = read("/proc/cpuinfo");
    let field = |text: &str, key: &str| {
        text.lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_default()
    };
    let mem_kib: u64 = field(&read("/proc/meminfo"), "MemTotal").trim_end_matches("kB").trim().parse().unwrap_or(0);
    serde_json::json!({
        "cpu": field(&cpuinfo, "model name"),
        "logical_cpus": std::thread::available_parallelism().map_or(0, |n| n.get()),
        "memory_gib": (mem_kib as f64 / (1024.0 * 1024.0) * 10.0).round() / 10.0,
        "kernel": read("/proc/sys/kernel/osrelease").trim(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn occupancy_from_the_server_s_gauges_inside_the_measured_window() {
        let no_engine = engine_level(&[]);
        let mut side = ServerSide {
            // (s, running, waiting, KV): a warm-up burst at 0.2 s, steady from 1 s, idle after.
            series: vec![
                (0.0, 0.0, 0.0, 0.0),
                (0.2, 4.0, 40.0, 0.5),
                (1.0, 2.0, 1.0, 0.1),
                (2.0, 4.0, 3.0, 0.3),
                (3.0, 0.0, 0.0, f64::NAN),
            ],
            measured_window_s: Some((0.5, 2.5)),
            ..Default::default()
        };
        let o = Occupancy::of(&no_engine, Some(&side)).unwrap();
        assert!(o.from_server && o.preemptions.is_none());
        // The scrapes at 1 s and 2 s: running (2 + 4) / 2 = 3, max 4; waiting 2, max 3; KV 0.2, max 0.3.
        assert_eq!((o.running_mean, o.running_max, o.waiting_mean, o.waiting_max), (3.0, 4.0, 2.0, 3.0));
        assert!((o.kv_mean - 0.2).abs() < 1e-12 && o.kv_max == 0.3);
        // No scrape inside the window: all of them (the burst's 40 waiting included).
        side.measured_window_s = Some((5.0, 6.0));
        assert_eq!(Occupancy::of(&no_engine, Some(&side)).unwrap().waiting_max, 40.0);
        // A server whose /metrics gives none of the gauges, or no server: unknown, not zero.
        side.series = vec![(0.0, f64::NAN, f64::NAN, f64::NAN)];
        assert!(Occupancy::of(&no_engine, Some(&side)).is_none());
        assert!(Occupancy::of(&no_engine, None).is_none());
    }
}
