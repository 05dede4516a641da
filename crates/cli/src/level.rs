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
}

/// Harness CPU share of the process above which the numbers may be skewed by it.
const CPU_SHARE_WARN: f64 = 0.05;
/// P99 send lag above which the generator fell behind its schedule.
const SEND_LAG_WARN_S: f64 = 0.005;

impl Harness {
    pub fn new(s: &LevelSummary, run: &goodput_workload::LevelRun, cpu: crate::cpu::CpuUse, arrival: &Arrival) -> Self {
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
        }
    }

    /// What a reader must know before trusting the level's numbers.
    pub fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        if self.cpu.share() > CPU_SHARE_WARN {
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
    pub engine: EngineLevel,
    /// HTTP targets: the server's own histograms over the level and its gauges over time,
    /// from its /metrics.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<ServerSide>,
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
