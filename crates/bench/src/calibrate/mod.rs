//! The load generator measured against a mock server with a known schedule (fixed TTFT,
//! fixed inter-token interval, no model), so a user knows whether the client itself is a
//! bottleneck at a given number of concurrent streams. The mock stamps when it wrote each
//! chunk; the client stamps when it read it; the difference is the client's own delay
//! (loopback, HTTP, SSE parsing, scheduling), reported with the client's CPU per token. With
//! [`CalibrateSpec::floor`], the bare reads of the same streams ([`floor`]): the floor under
//! any client here. The mock runs in this process on a thread of its own.

mod floor;

use crate::progress::Progress;
use goodput_core::{ClientRecord, Clock, Stamp};
use goodput_engine::EngineError;
use goodput_metrics::Summary;
pub use goodput_results::calibration::{
    CalibrationLevel, FloorLevel, BOUND_CHUNK_P99_S, BOUND_TTFT_P50_S, MOCK_SATURATED,
};
use goodput_results::CpuUse;
use goodput_server::mock::Mock;
use goodput_workload::{run_level, Arrival, LengthDist, LevelPlan, LevelRun, Ramp, RetryPolicy, Scenario, UnitPlan};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A calibration: the mock's schedule, the levels of concurrent streams, and where the client
/// and the mock run.
#[derive(Clone, Debug)]
pub struct CalibrateSpec {
    /// Concurrent streams per level.
    pub concurrency: Vec<usize>,
    /// The mock's time to first token.
    pub ttft: Duration,
    /// The mock's interval between tokens.
    pub itl: Duration,
    /// Tokens per response.
    pub tokens: usize,
    /// Requests each stream sends one after the other.
    pub requests_per_stream: usize,
    /// Start the streams spread over one inter-token interval instead of all at once.
    pub stagger: bool,
    /// Pin the client to these CPUs; two or more: a worker pool, one pinned worker per CPU.
    pub client_cpus: Option<Vec<usize>>,
    /// Pin the mock server's thread to these CPUs.
    pub mock_cpus: Option<Vec<usize>>,
    /// After each level, the same streams read as bare bytes on this thread.
    pub floor: bool,
    /// Read the streams through hyper (reqwest) instead of goodput's own HTTP/1.1.
    pub hyper: bool,
}

/// A finished calibration: its levels, and the cores the client ran on.
#[derive(Debug)]
pub struct Calibration {
    pub levels: Vec<CalibrationLevel>,
    pub cores: usize,
}

/// Why a calibration could not run.
#[derive(Debug, thiserror::Error)]
pub enum CalibrateError {
    /// A setting out of its bounds, named by its flag, or too few open files for its streams.
    #[error("{0}")]
    Spec(String),
    #[error("--client-cpus")]
    Pin(#[source] EngineError),
    /// The mock's socket, a runtime, or the floor's bare streams: what was being done.
    #[error("{what}")]
    Io { what: &'static str, source: std::io::Error },
    #[error(transparent)]
    Client(#[from] goodput_client::ClientError),
    #[error(transparent)]
    Pool(#[from] goodput_workload::pool::PoolError),
    #[error("--floor: read {read} events where the mock sent {sent}")]
    FloorEvents { read: usize, sent: usize },
}

type Result<T, E = CalibrateError> = std::result::Result<T, E>;

fn io(what: &'static str) -> impl FnOnce(std::io::Error) -> CalibrateError {
    move |source| CalibrateError::Io { what, source }
}

/// Runs the calibration: the mock on a thread of its own, the client on this one (or its
/// pool), each level measured and said through `progress` as it ends.
pub fn calibrate(a: &CalibrateSpec, progress: &dyn Progress) -> Result<Calibration> {
    check(a)?;
    let clock = Clock::new();
    let mock = Arc::new(Mock::new(clock, a.ttft, a.itl, a.tokens));
    // The mock on a thread of its own; the client on this one (its CPU is the client's).
    let (server_rt, mock_tids) = mock_runtime(a)?;
    if let Some(c) = &a.client_cpus {
        goodput_engine::affinity::pin_current(c).map_err(CalibrateError::Pin)?;
    }
    let pool = client_pool(a)?;
    let listener = server_rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).map_err(io("binding 127.0.0.1"))?;
    let addr = listener.local_addr().map_err(io("the mock's address"))?;
    // Stopped when calibrate ends (the sender dropped): its connections close at once.
    let (_stop_mock, mock_stopped) = tokio::sync::oneshot::channel::<()>();
    server_rt.spawn(goodput_server::mock::serve(listener, mock.clone(), async {
        let _ = mock_stopped.await;
    }));
    let target = Arc::new(goodput_client::HttpTarget::new(
        goodput_client::HttpConfig { own_http1: !a.hyper, ..mock_config(addr) },
        clock,
    )?);
    let scenario = Arc::new(Scenario {
        name: "calibrate".into(),
        input: LengthDist::Fixed { n: 4 },
        output: LengthDist::Fixed { n: a.tokens },
        shared_prefix: 0,
        reasoning_share: None,
        note: None,
    });
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(io("the client's runtime"))?;
    let on = match &pool {
        Some((w, _)) => format!("the client on {} worker threads, one per --client-cpus CPU", w.len()),
        None => "the client on this thread".into(),
    };
    let on = format!("{on}, through {}", if a.hyper { "hyper" } else { "goodput's own HTTP/1.1" });
    let line = format!(
        "goodput calibrate: mock server on {addr} (TTFT {:?}, ITL {:?}, {} tokens); {on}",
        a.ttft, a.itl, a.tokens
    );
    progress.line(&line, false);
    let mut levels = Vec::new();
    let mut first_id = 0u64;
    for &c in &a.concurrency {
        let plan = level_plan(a, c, first_id);
        let t = std::time::Instant::now();
        let (threads, tids) = match &pool {
            Some((w, tids)) => (w.pthreads(), tids.lock().unwrap_or_else(|e| e.into_inner()).clone()),
            None => (Vec::new(), Vec::new()),
        };
        let uk0 = user_kernel(&tids);
        let mock0 = tasks_cpu(&mock_tids.lock().unwrap_or_else(|e| e.into_inner()));
        let _entered = pool.as_ref().map(|(w, _)| w.enter());
        // The mock serves from this process: the machine's other work is everyone else's.
        let ((run, cpu), machine) = crate::cpu::watched(false, || {
            crate::cpu::measure_with(&threads, || rt.block_on(run_level(target.clone(), scenario.clone(), 1000, plan)))
        });
        let uk1 = user_kernel(&tids);
        let mock_s = tasks_cpu(&mock_tids.lock().unwrap_or_else(|e| e.into_inner())) - mock0;
        let cpu = Cpu { all: cpu, user_s: uk1.0 - uk0.0, kernel_s: uk1.1 - uk0.1 };
        first_id = run.records.iter().map(|r| r.id + 1).max().unwrap_or(first_id);
        let wall_s = t.elapsed().as_secs_f64();
        let sent = std::mem::take(&mut *mock.sent.lock().unwrap_or_else(|e| e.into_inner()));
        let received = std::mem::take(&mut *mock.received.lock().unwrap_or_else(|e| e.into_inner()));
        let mut level = measure(a, c, &run, &Written { sent, received, cpu_s: mock_s }, cpu, wall_s);
        level.machine = machine;
        drop(_entered);
        if a.floor {
            level.floor = Some(floor_level(a, &rt, addr, c, &mock)?);
            mock.sent.lock().unwrap_or_else(|e| e.into_inner()).clear();
            mock.received.lock().unwrap_or_else(|e| e.into_inner()).clear();
        }
        for (line, warning) in level_lines(c, &level) {
            progress.line(&line, warning);
        }
        levels.push(level);
    }
    let cores = pool.as_ref().map_or(1, |(w, _)| w.len());
    Ok(Calibration { levels, cores })
}

/// The mock's runtime: one worker thread, pinned to `--mock-cpus`, whose thread ids are kept
/// to read its CPU time.
fn mock_runtime(a: &CalibrateSpec) -> Result<(tokio::runtime::Runtime, Arc<Mutex<Vec<i32>>>)> {
    let mock_cpus = a.mock_cpus.clone();
    let mock_tids = Arc::new(Mutex::new(Vec::new()));
    let seen = mock_tids.clone();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("goodput-mock")
        .on_thread_start(move || {
            if let Some(c) = &mock_cpus {
                if let Err(e) = goodput_engine::affinity::pin_current(c) {
                    eprintln!("warning: --mock-cpus: {e}");
                }
            }
            if let Some(t) = crate::cpu::current_tid() {
                seen.lock().unwrap_or_else(|e| e.into_inner()).push(t);
            }
        })
        .enable_all()
        .build()
        .map_err(io("the mock's runtime"))?;
    Ok((rt, mock_tids))
}

/// A level's line, and the warning (`true`) when the mock, not the client, set its limit.
fn level_lines(c: usize, level: &CalibrationLevel) -> Vec<(String, bool)> {
    let mut lines = vec![(
        format!(
            "  {c} streams: chunk delay p99 {} ms, client CPU {:.1} µs/token (user {:.1}, kernel {:.1})",
            level.chunk_delay.as_ref().map_or("-".into(), |s| format!("{:.3}", s.p99 * 1e3)),
            level.cpu_per_token_s * 1e6,
            level.user_per_token_s * 1e6,
            level.kernel_per_token_s * 1e6,
        ),
        false,
    )];
    if level.mock_busy > MOCK_SATURATED {
        lines.push((format!(
            "  warning: the mock's thread was busy {:.0} % of the level ({:.1} µs a chunk): its own sends lag, and this level measures the mock's limit as much as the client's",
            level.mock_busy * 100.0,
            level.mock_cpu_per_token_s * 1e6
        ), true));
    }
    lines
}

/// `c` streams read bare on this thread ([`floor`]), their CPU per token.
fn floor_level(
    a: &CalibrateSpec,
    rt: &tokio::runtime::Runtime,
    addr: std::net::SocketAddr,
    c: usize,
    mock: &Mock,
) -> Result<FloorLevel> {
    let stagger = if a.stagger { a.itl } else { Duration::ZERO };
    let (u0, k0) = crate::cpu::thread_user_kernel_secs();
    let (counts, reads) = rt
        .block_on(floor::level(addr, c, a.requests_per_stream, a.tokens, stagger, mock.clock))
        .map_err(io("--floor"))?;
    let (u1, k1) = crate::cpu::thread_user_kernel_secs();
    let tokens = (c * a.requests_per_stream * a.tokens).max(1) as f64;
    let expected = c * a.requests_per_stream * (a.tokens + 2);
    if counts.events != expected {
        return Err(CalibrateError::FloorEvents { read: counts.events, sent: expected });
    }
    let sent = mock.sent.lock().unwrap_or_else(|e| e.into_inner());
    let delay: Vec<f64> = reads
        .iter()
        .filter_map(|(id, read)| Some(read.iter().zip(sent.get(id)?).map(|(r, w)| r.secs_since(*w))))
        .flatten()
        .collect();
    Ok(FloorLevel {
        chunk_delay: Summary::of(&delay),
        cpu_per_token_s: (u1 - u0 + k1 - k0) / tokens,
        user_per_token_s: (u1 - u0) / tokens,
        kernel_per_token_s: (k1 - k0) / tokens,
        reads_per_token: counts.reads as f64 / tokens,
    })
}

/// With two or more `--client-cpus`: the load generator's pool, a worker pinned to each CPU,
/// and the workers' kernel thread ids (for their user and kernel CPU).
#[allow(clippy::type_complexity)]
fn client_pool(a: &CalibrateSpec) -> Result<Option<(goodput_workload::pool::Workers, Arc<Mutex<Vec<i32>>>)>> {
    let Some(cpus) = a.client_cpus.clone().filter(|c| c.len() >= 2) else { return Ok(None) };
    let tids = Arc::new(Mutex::new(Vec::new()));
    let seen = tids.clone();
    let workers = goodput_workload::pool::Workers::start(cpus.len(), move |k| {
        if let Err(e) = goodput_engine::affinity::pin_current(&[cpus[k]]) {
            eprintln!("warning: client worker {k}: {e}");
        }
        if let Some(t) = crate::cpu::current_tid() {
            seen.lock().unwrap_or_else(|e| e.into_inner()).push(t);
        }
    })?;
    Ok(Some((workers, tids)))
}

/// CPU seconds (user and kernel) so far of the threads `tids` of this process.
fn tasks_cpu(tids: &[i32]) -> f64 {
    tids.iter().map(|&t| crate::cpu::task_user_kernel_secs(t)).map(|(u, k)| u + k).sum()
}

/// User and kernel CPU seconds so far of this thread and the workers `tids`.
fn user_kernel(tids: &[i32]) -> (f64, f64) {
    let (u, k) = crate::cpu::thread_user_kernel_secs();
    tids.iter().map(|&t| crate::cpu::task_user_kernel_secs(t)).fold((u, k), |(u, k), (a, b)| (u + a, k + b))
}

/// The flags' own bounds, and enough open files for every stream's two sockets.
fn check(a: &CalibrateSpec) -> Result<()> {
    if a.concurrency.is_empty() || a.concurrency.contains(&0) {
        return Err(CalibrateError::Spec(format!(
            "--concurrency: every level needs at least 1 stream, got {:?}",
            a.concurrency
        )));
    }
    if a.tokens == 0 || a.requests_per_stream == 0 {
        return Err(CalibrateError::Spec("--tokens and --requests-per-stream must be at least 1".into()));
    }
    // Each stream is a socket on both sides: the mock server runs in this process.
    let streams = a.concurrency.iter().max().copied().unwrap_or(0) as u64;
    let need = crate::fds::needed(streams, 2);
    if let Some(l) = crate::fds::raise_for(need).filter(|l| l.soft < need) {
        return Err(CalibrateError::Spec(format!(
            "{streams} streams need about {need} open files (client and server sockets); the limit is {}",
            l.soft
        )));
    }
    Ok(())
}

/// `c` closed-loop streams, each sending `--requests-per-stream` measured requests after the
/// closed loop's warm-up (each stream's first), all starting at once, ids from `first_id`.
fn level_plan(a: &CalibrateSpec, c: usize, first_id: u64) -> LevelPlan {
    LevelPlan::new(
        Arrival::Closed { users: c, think: Duration::ZERO },
        UnitPlan {
            users: c,
            units: c * a.requests_per_stream,
            warmup: 0,
            cooldown: 0,
            timeout: a.ttft + a.itl * a.tokens as u32 + Duration::from_secs(60),
            retry: RetryPolicy::default(),
            seed: 0,
            first_id,
            sink: None,
            stop: Default::default(),
            ramp: Ramp::Over(if a.stagger { a.itl } else { Duration::ZERO }),
            progress: None,
        },
    )
}

/// The client thread's CPU over a level: all of it (and the process's), and its user and
/// kernel parts.
struct Cpu {
    all: CpuUse,
    user_s: f64,
    kernel_s: f64,
}

/// What the mock stamped, by request id: when it wrote each chunk, when it received each
/// request.
struct Written {
    sent: HashMap<String, Vec<Stamp>>,
    received: HashMap<String, Stamp>,
    /// The mock's threads' CPU seconds over the level.
    cpu_s: f64,
}

/// One level's client-side errors against what the mock was told to do and when it wrote,
/// over its measured requests (each stream's first, its connection's cold start, is warm-up);
/// the client's CPU per token over all of them (the CPU was measured over all).
fn measure(
    a: &CalibrateSpec,
    streams: usize,
    run: &LevelRun,
    mock: &Written,
    cpu: Cpu,
    wall_s: f64,
) -> CalibrationLevel {
    let (mut delay, mut ttft_err, mut itl_err, mut late) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let records: Vec<&ClientRecord> = run.measured().collect();
    let all_tokens: usize = run.records.iter().filter(|r| r.is_ok()).map(|r| r.chunks.len()).sum();
    let mut tokens = 0;
    for r in records.iter().filter(|r| r.is_ok()) {
        tokens += r.chunks.len();
        if let Some(first) = r.first_token() {
            ttft_err.push(first.secs_since(r.intended) - a.ttft.as_secs_f64());
        }
        for w in r.chunks.windows(2) {
            itl_err.push(w[1].at.secs_since(w[0].at) - a.itl.as_secs_f64());
        }
        let id = goodput_client::request_id(r.id);
        if let Some(s) = mock.sent.get(&id) {
            delay.extend(r.chunks.iter().zip(s).map(|(c, s)| c.at.secs_since(*s)));
            // The mock's own lateness: its first write after its receipt plus the TTFT.
            if let (Some(first), Some(got)) = (s.first(), mock.received.get(&id)) {
                late.push(first.secs_since(*got) - a.ttft.as_secs_f64());
            }
        }
    }
    let (chunk_delay, ttft_error, mock_late) = (Summary::of(&delay), Summary::of(&ttft_err), Summary::of(&late));
    let failed = records.iter().filter(|r| !r.is_ok()).count();
    // The client's part of the TTFT error: less the mock's own timer lateness (a server's
    // lateness is part of the TTFT the client measures, rightly).
    let client_ttft = ttft_error.as_ref().map(|t| t.p50 - mock_late.as_ref().map_or(0.0, |m| m.p50));
    let within_bound = failed == 0
        && chunk_delay.as_ref().is_some_and(|d| d.p99 <= BOUND_CHUNK_P99_S)
        && client_ttft.is_some_and(|t| t.abs() <= BOUND_TTFT_P50_S);
    CalibrationLevel {
        streams,
        requests: records.len(),
        failed,
        tokens,
        within_bound,
        floor: None,
        machine: None,
        chunk_delay,
        ttft_error,
        mock_late,
        itl_error: Summary::of(&itl_err),
        cpu_per_token_s: cpu.all.harness_s / all_tokens.max(1) as f64,
        user_per_token_s: cpu.user_s / all_tokens.max(1) as f64,
        kernel_per_token_s: cpu.kernel_s / all_tokens.max(1) as f64,
        cpu_per_stream: cpu.all.harness_s / (wall_s * streams.max(1) as f64),
        mock_cpu_per_token_s: mock.cpu_s / all_tokens.max(1) as f64,
        mock_busy: mock.cpu_s / wall_s.max(f64::MIN_POSITIVE),
        cpu_share: cpu.all.share(),
        wall_s,
    }
}

/// The client's settings against the mock: token-id prompts, nothing beyond OpenAI's fields.
fn mock_config(addr: std::net::SocketAddr) -> goodput_client::HttpConfig {
    goodput_client::HttpConfig {
        exact_lengths: false,
        same_clock: true,
        ..goodput_client::HttpConfig::new(format!("http://{addr}"), "mock")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What failed is the error's variant: a bad flag is `Spec`, refused before any socket.
    #[test]
    fn refusals_are_typed_by_what_failed() {
        let spec = CalibrateSpec {
            concurrency: vec![1, 0],
            ttft: Duration::from_millis(1),
            itl: Duration::from_millis(1),
            tokens: 4,
            requests_per_stream: 1,
            stagger: false,
            client_cpus: None,
            mock_cpus: None,
            floor: false,
            hyper: false,
        };
        let e = calibrate(&spec, &crate::progress::Lines { quiet: true }).err().unwrap();
        assert!(matches!(&e, CalibrateError::Spec(m) if m.starts_with("--concurrency")), "{e}");
        let e = calibrate(
            &CalibrateSpec { concurrency: vec![1], tokens: 0, ..spec },
            &crate::progress::Lines { quiet: true },
        );
        assert!(matches!(e, Err(CalibrateError::Spec(_))));
    }
}
