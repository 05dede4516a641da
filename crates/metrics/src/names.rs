//! Names that cross a process boundary, in one place: the Prometheus series goodput's server
//! exposes and reads back from any server (vLLM's names after their `vllm:` prefix, goodput's
//! after `goodput_`), so a renamed series is renamed everywhere at once.

/// Histogram: time to first token, seconds.
pub const TTFT_SECONDS: &str = "time_to_first_token_seconds";
/// Histogram: time between consecutive output tokens, seconds.
pub const ITL_SECONDS: &str = "inter_token_latency_seconds";
/// Histogram: time per output token of a request (first to last token over tokens − 1),
/// seconds (vLLM v1's `request_time_per_output_token_seconds`).
pub const TPOT_SECONDS: &str = "request_time_per_output_token_seconds";
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
/// Gauge: the part of [`KV_USAGE`] held by sliding-window layers (goodput's own; 0 for
/// models without them).
pub const KV_SLIDING_USAGE: &str = "kv_cache_sliding_usage_perc";
/// Gauge: KV-cache block usage under vLLM v0's name.
pub const KV_USAGE_V0: &str = "gpu_cache_usage_perc";

/// One server's name for a series, after its prefix (`vllm:`, `sglang:`, `goodput_`; TGI's
/// and llama.cpp's as written, colons included only where the server has them), and where
/// the name is defined.
#[derive(Clone, Copy, Debug)]
pub struct Alias {
    pub name: &'static str,
    pub source: &'static str,
}

const fn a(name: &'static str, source: &'static str) -> Alias {
    Alias { name, source }
}

const VLLM: &str = "vLLM vllm/v1/metrics/loggers.py";
const SGLANG: &str = "SGLang python/sglang/srt/metrics/collector.py";
const TGI: &str = "TGI router/src/server.rs, backends/v3/src/{backend,queue}.rs";
const LLAMACPP: &str = "llama.cpp tools/server/server-context.cpp";
const GOODPUT: &str = "goodput crates/server/src/metrics.rs";

/// Requests in the running batch (a count: summed over engines).
pub const RUNNING_ALIASES: &[Alias] = &[
    a(RUNNING, VLLM),
    a("num_running_reqs", SGLANG),
    a("tgi_batch_current_size", TGI),
    a("requests_processing", LLAMACPP),
];
/// Requests waiting to be scheduled (a count: summed over engines).
pub const WAITING_ALIASES: &[Alias] =
    &[a(WAITING, VLLM), a("num_queue_reqs", SGLANG), a("tgi_queue_size", TGI), a("requests_deferred", LLAMACPP)];
/// KV-cache usage as a fraction (mean and max over engines). TGI exposes no fraction: its
/// is [`TGI_KV_USED`] over [`TGI_KV_TOTAL`].
pub const KV_USAGE_ALIASES: &[Alias] =
    &[a(KV_USAGE, VLLM), a(KV_USAGE_V0, "vLLM v0 vllm/engine/metrics.py"), a("token_usage", SGLANG)];
/// TGI: tokens the running batch holds, and the token capacity set at warm-up.
pub const TGI_KV_USED: &str = "tgi_batch_current_max_tokens";
pub const TGI_KV_TOTAL: &str = "tgi_batch_max_total_tokens";

pub const TTFT_ALIASES: &[Alias] = &[a(TTFT_SECONDS, VLLM), a(TTFT_SECONDS, SGLANG)];
pub const E2E_ALIASES: &[Alias] = &[a(E2E_SECONDS, VLLM), a(E2E_SECONDS, SGLANG), a("tgi_request_duration", TGI)];
pub const QUEUE_ALIASES: &[Alias] =
    &[a(QUEUE_SECONDS, VLLM), a("queue_time_seconds", SGLANG), a("tgi_request_queue_duration", TGI)];
pub const PREFILL_ALIASES: &[Alias] = &[a(PREFILL_SECONDS, VLLM)];
pub const DECODE_ALIASES: &[Alias] = &[a(DECODE_SECONDS, VLLM)];
pub const INFERENCE_ALIASES: &[Alias] = &[a(INFERENCE_SECONDS, VLLM), a("tgi_request_inference_duration", TGI)];
/// Gaps between streamed tokens (vLLM's older name `time_per_output_token_seconds`).
pub const ITL_ALIASES: &[Alias] =
    &[a(ITL_SECONDS, VLLM), a(ITL_SECONDS, SGLANG), a("time_per_output_token_seconds", "vLLM ≤ 0.10")];
/// Per request: (last token − first token) ÷ (output tokens − 1) (TGI: inference time ÷
/// generated tokens).
pub const TPOT_ALIASES: &[Alias] =
    &[a("request_time_per_output_token_seconds", VLLM), a("tgi_request_mean_time_per_token_duration", TGI)];

/// Speculative decoding's counters: (verification steps with a draft, tokens drafted, drafted
/// tokens accepted).
pub const SPEC_DECODE_ALIASES: &[(Alias, Alias, Alias)] = &[(
    a("spec_decode_num_drafts_total", VLLM),
    a("spec_decode_num_draft_tokens_total", VLLM),
    a("spec_decode_num_accepted_tokens_total", VLLM),
)];
/// SGLang's speculative decoding: its own running average of tokens a step gains per request
/// (a gauge; the verified token included).
pub const SGLANG_ACCEPT_LENGTH: Alias = a("spec_accept_length", SGLANG);

/// Prefix-cache counters, in prompt tokens: (looked up, found). SGLang counts every prompt
/// token and the cached ones among them.
pub const PREFIX_CACHE_ALIASES: &[(Alias, Alias)] = &[
    (a("prefix_cache_queries_total", VLLM), a("prefix_cache_hits_total", VLLM)),
    (a("prefix_cache_queries_total", GOODPUT), a("prefix_cache_hits_total", GOODPUT)),
    (a("prompt_tokens_total", SGLANG), a("cached_tokens_total", SGLANG)),
];
