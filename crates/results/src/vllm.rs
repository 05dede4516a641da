//! vLLM `bench serve`'s keys of a level, written into `summary.json` beside the metric
//! contract's names so that dashboards built on vLLM's result files read ours (DESIGN.md,
//! "Output JSON keeps these names"). Nothing of goodput reads them back.
//!
//! The keys mirror the result file `vllm bench serve --save-result` writes, in vLLM's
//! `vllm/benchmarks/serve.py` (formerly `benchmarks/benchmark_serving.py`): the `result` dict
//! of `benchmark()` — `duration`, `completed`, `failed`, `total_input_tokens`,
//! `total_output_tokens`, `request_throughput`, `request_goodput`, `output_throughput`,
//! `total_token_throughput`, `max_output_tokens_per_s`, `max_concurrent_requests` — the
//! `mean_/median_/std_/pNN_{ttft,tpot,itl,e2el}_ms` of its `process_one_metric`, and the
//! `request_rate` (`"inf"` when unpaced), `burstiness` and `max_concurrency` it adds before saving. vLLM's
//! per-request lists (`ttfts`, `itls`, `generated_texts`, …) are not written: `records.jsonl`
//! holds every request.

use goodput_metrics::level::LevelSummary;
use goodput_metrics::Summary;
use serde::{Deserialize, Serialize};

/// Declares [`VllmKeys`]: `completed`, then optional numbers (left out when unknown).
macro_rules! vllm_keys_struct {
    ($($name:ident),* $(,)?) => {
        /// vLLM `bench serve`'s keys of a level, written beside the contract's names: counts and
        /// rates as vLLM names them, latencies in milliseconds with `mean_/median_/std_/pNN_`
        /// prefixes. Keys goodput does not know are ignored on reading.
        #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
        pub struct VllmKeys {
            #[serde(default)]
            pub completed: usize,
            #[serde(default)]
            pub failed: usize,
            #[serde(default)]
            pub total_input_tokens: usize,
            #[serde(default)]
            pub total_output_tokens: usize,
            /// Requests per second sent (open loop), `"inf"` (closed loop and bursts).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub request_rate: Option<RequestRate>,
            /// Closed loop: the users (vLLM's `--max-concurrency`).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub max_concurrency: Option<usize>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub max_concurrent_requests: Option<usize>,
            $(
                #[serde(default, skip_serializing_if = "Option::is_none")]
                pub $name: Option<f64>,
            )*
        }
    };
}

vllm_keys_struct!(
    duration,
    burstiness,
    max_output_tokens_per_s,
    request_throughput,
    output_throughput,
    total_token_throughput,
    request_goodput,
    mean_ttft_ms,
    median_ttft_ms,
    std_ttft_ms,
    p90_ttft_ms,
    p95_ttft_ms,
    p99_ttft_ms,
    mean_tpot_ms,
    median_tpot_ms,
    std_tpot_ms,
    p90_tpot_ms,
    p95_tpot_ms,
    p99_tpot_ms,
    mean_itl_ms,
    median_itl_ms,
    std_itl_ms,
    p90_itl_ms,
    p95_itl_ms,
    p99_itl_ms,
    mean_e2el_ms,
    median_e2el_ms,
    std_e2el_ms,
    p90_e2el_ms,
    p95_e2el_ms,
    p99_e2el_ms,
);

/// vLLM's `request_rate`: a number, or `"inf"` when requests are not paced by a rate.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum RequestRate {
    PerSecond(f64),
    Unlimited(Inf),
}

/// The string `"inf"`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub enum Inf {
    #[serde(rename = "inf")]
    Inf,
}

/// How a level sent its requests and what peaked, for the vLLM keys beyond the summary.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct VllmLoad {
    pub request_rate: Option<RequestRate>,
    pub max_concurrency: Option<usize>,
    pub burstiness: Option<f64>,
    /// [`goodput_metrics::peaks::max_output_tokens_per_s`].
    pub max_output_tokens_per_s: Option<f64>,
    /// [`goodput_metrics::peaks::max_concurrent_requests`].
    pub max_concurrent_requests: Option<usize>,
}

/// Mean, median, standard deviation, P90, P95, P99 of `s` in milliseconds. The standard
/// deviation is the population's, as vLLM's (`np.std`): goodput's sample one × √((n−1)/n).
fn ms6(s: &Option<Summary>) -> [Option<f64>; 6] {
    let x = |f: &dyn Fn(&Summary) -> f64| s.as_ref().map(|s| f(s) * 1e3).filter(|v| v.is_finite());
    let population = |s: &Summary| s.stddev * ((s.n.max(1) - 1) as f64 / s.n.max(1) as f64).sqrt();
    [x(&|s| s.mean), x(&|s| s.p50), x(&population), x(&|s| s.p90), x(&|s| s.p95), x(&|s| s.p99)]
}

/// vLLM `bench serve`'s keys of a level, from its summary and how it was loaded.
pub fn vllm_keys(s: &LevelSummary, load: VllmLoad) -> VllmKeys {
    let finite = |v: f64| Some(v).filter(|v| v.is_finite());
    let mut k = VllmKeys {
        completed: s.completed,
        failed: s.requests - s.completed,
        total_input_tokens: s.total_input_tokens,
        total_output_tokens: s.total_output_tokens,
        duration: finite(s.window_s),
        request_rate: load.request_rate,
        max_concurrency: load.max_concurrency,
        burstiness: load.burstiness,
        max_output_tokens_per_s: load.max_output_tokens_per_s,
        max_concurrent_requests: load.max_concurrent_requests,
        request_throughput: finite(s.request_throughput),
        output_throughput: finite(s.output_throughput),
        total_token_throughput: finite(s.input_throughput + s.output_throughput),
        request_goodput: finite(s.goodput),
        ..Default::default()
    };
    [k.mean_ttft_ms, k.median_ttft_ms, k.std_ttft_ms, k.p90_ttft_ms, k.p95_ttft_ms, k.p99_ttft_ms] = ms6(&s.ttft);
    [k.mean_tpot_ms, k.median_tpot_ms, k.std_tpot_ms, k.p90_tpot_ms, k.p95_tpot_ms, k.p99_tpot_ms] = ms6(&s.tpot);
    [k.mean_itl_ms, k.median_itl_ms, k.std_itl_ms, k.p90_itl_ms, k.p95_itl_ms, k.p99_itl_ms] = ms6(&s.itl);
    [k.mean_e2el_ms, k.median_e2el_ms, k.std_e2el_ms, k.p90_e2el_ms, k.p95_e2el_ms, k.p99_e2el_ms] = ms6(&s.e2e);
    k
}
