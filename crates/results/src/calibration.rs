//! What `goodput calibrate` measured (`goodput_bench::calibrate` measures it, its `--json`
//! writes it): each level's client error and CPU against the mock's schedule, and the bound a
//! load generator keeps to measure faithfully.

use goodput_metrics::Summary;

/// The floor of one level (the bare reads of `goodput calibrate --floor`): CPU per token of bare reads of the same streams.
#[derive(Debug, serde::Serialize)]
pub struct FloorLevel {
    pub cpu_per_token_s: f64,
    pub user_per_token_s: f64,
    pub kernel_per_token_s: f64,
    /// Socket reads per token.
    pub reads_per_token: f64,
    /// Bare read − mock write of every chunk, seconds: the chunk delay under any client here
    /// (the mock's and the kernel's part of it).
    pub chunk_delay: Option<Summary>,
}

/// One level of the calibration.
#[derive(Debug, serde::Serialize)]
pub struct CalibrationLevel {
    pub streams: usize,
    pub requests: usize,
    pub failed: usize,
    pub tokens: usize,
    /// Client read time − mock write time of every chunk, seconds.
    pub chunk_delay: Option<Summary>,
    /// Client TTFT − the mock's TTFT, seconds.
    pub ttft_error: Option<Summary>,
    /// The mock's own lateness, seconds: its first write − (its receipt of the request +
    /// TTFT), its timer's granularity and wake-up; part of the TTFT error that is not the
    /// client's.
    pub mock_late: Option<Summary>,
    /// Client ITL − the mock's ITL, seconds.
    pub itl_error: Option<Summary>,
    /// Client CPU seconds per streamed token (user + kernel), and its share of the process's
    /// CPU.
    pub cpu_per_token_s: f64,
    /// The client's user-space CPU seconds per token (its own code: HTTP, SSE, JSON, stamps).
    pub user_per_token_s: f64,
    /// The kernel's CPU seconds per token on the client's thread (its reads, epoll, and on
    /// loopback the ACKs it sends, processed in its context).
    pub kernel_per_token_s: f64,
    /// Client CPU seconds per second of each open stream: the share of a core one stream
    /// costs at this level's token rate (× 1000: the cores a thousand streams need).
    pub cpu_per_stream: f64,
    pub cpu_share: f64,
    /// The mock's CPU seconds per token it streamed (its writes; on loopback also the
    /// receiving side's TCP processing, which runs in the sender's context).
    pub mock_cpu_per_token_s: f64,
    /// The mock's CPU seconds over the level's wall time: above [`MOCK_SATURATED`] its own
    /// writes lag, and the level measures the mock as much as the client.
    pub mock_busy: f64,
    pub wall_s: f64,
    /// Chunk-delay p99 within [`BOUND_CHUNK_P99_S`] and TTFT-error p50 (less the mock's own
    /// lateness p50) within [`BOUND_TTFT_P50_S`]: the client kept this many streams without
    /// skewing what it measures.
    pub within_bound: bool,
    /// `--floor`: bare reads of the same streams.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub floor: Option<FloorLevel>,
    /// The machine during the level (other processes, steal, the speed probe).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub machine: Option<goodput_metrics::machine::MachineLoad>,
}

/// The bound a load generator keeps to measure faithfully (issue 31's target): every chunk
/// read within 5 ms of its write at p99, and TTFT off by at most 2 ms at the median.
pub const BOUND_CHUNK_P99_S: f64 = 0.005;
pub const BOUND_TTFT_P50_S: f64 = 0.002;

/// The mock's share of its core above which its own writes lag behind their schedule.
pub const MOCK_SATURATED: f64 = 0.9;
