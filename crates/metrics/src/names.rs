//! Names that cross a process boundary, in one place: the Prometheus series goodput's server
//! exposes and reads back from any server (vLLM's names after their `vllm:` prefix, goodput's
//! after `goodput_`), so a renamed series is renamed everywhere at once.

/// Histogram: time to first token, seconds.
pub const TTFT_SECONDS: &str = "time_to_first_token_seconds";
/// Histogram: time between consecutive output tokens, seconds.
pub const ITL_SECONDS: &str = "inter_token_latency_seconds";
/// Histogram: end-to-end request latency, seconds.
pub const E2E_SECONDS: &str = "e2e_request_latency_seconds";
/// Histogram: time waiting in the scheduler, seconds.
pub const QUEUE_SECONDS: &str = "request_queue_time_seconds";
/// Histogram: first scheduling to first token, seconds.
pub const PREFILL_SECONDS: &str = "request_prefill_time_seconds";
/// Histogram: first to last token, seconds.
pub const DECODE_SECONDS: &str = "request_decode_time_seconds";
/// Histogram: first scheduling to last token, seconds.
pub const INFERENCE_SECONDS: &str = "request_inference_time_seconds";
/// Gauge: requests in the running batch.
pub const RUNNING: &str = "num_requests_running";
/// Gauge: requests waiting to be scheduled.
pub const WAITING: &str = "num_requests_waiting";
/// Gauge: KV-cache block usage, 1 is full (vLLM v1's name).
pub const KV_USAGE: &str = "kv_cache_usage_perc";
/// Gauge: KV-cache block usage under vLLM v0's name.
pub const KV_USAGE_V0: &str = "gpu_cache_usage_perc";
