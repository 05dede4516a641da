//! /metrics of SGLang (two data-parallel ranks), TGI, vLLM (two engines) and llama.cpp, in
//! their own exposition formats, through the parser and onto goodput's running / waiting / KV /
//! queue / prefix-cache series (`goodput_metrics::names`): counts summed over engines, the KV
//! fraction as a mean and a max, never a sum.

use goodput_client::{parse_metrics, ServerScrape};
use goodput_core::Stamp;
use goodput_metrics::server::{GaugePoint, PrefixCache, ServerSide};

fn scrape(name: &str) -> ServerScrape {
    let path = format!("{}/tests/fixtures/metrics/{name}", env!("CARGO_MANIFEST_DIR"));
    parse_metrics(&std::fs::read_to_string(&path).unwrap(), Stamp(2_000_000_000)).unwrap()
}

/// The same series at zero a second earlier (a server just started).
fn zero(after: &ServerScrape) -> ServerScrape {
    let mut s = after.clone();
    s.at = Stamp(1_000_000_000);
    s.histograms.values_mut().flat_map(|b| b.iter_mut()).for_each(|b| b.1 = 0.0);
    s.sums.values_mut().for_each(|v| *v = 0.0);
    s.gauges.values_mut().for_each(|v| *v = 0.0);
    s
}

fn side(name: &str) -> ServerSide {
    let after = scrape(name);
    ServerSide::of(&[zero(&after), after], None, None)
}

fn close(a: Option<f64>, b: f64) -> bool {
    a.is_some_and(|a| (a - b).abs() < 1e-9)
}

#[test]
fn sglang_with_two_data_parallel_ranks() {
    let p = GaugePoint::of(&scrape("sglang-dp2.prom"), 0.0);
    assert_eq!((p.running, p.waiting), (Some(20.0), Some(4.0)));
    // 0.62 and 0.30: a mean of 46 % and a max of 62 %, not 92 %.
    assert!(close(p.kv_usage, 0.46) && close(p.kv_usage_max, 0.62), "{p:?}");
    let s = side("sglang-dp2.prom");
    let ttft = s.histograms.ttft.as_ref().unwrap();
    assert_eq!(ttft.count, 40.0);
    assert!(close(ttft.mean, 9.0 / 40.0));
    // Both ranks' queue histograms add up: 40 requests, 4 s.
    let queue = s.histograms.queue.as_ref().unwrap();
    assert_eq!(queue.count, 40.0);
    assert!(close(s.queue_mean(), 0.1));
    // 10 240 of 40 960 prompt tokens came from the cache.
    assert_eq!(s.prefix_cache, Some(PrefixCache { queried_tokens: 40960.0, hit_tokens: 10240.0 }));
    assert!(close(s.prefix_cache.unwrap().hit_rate(), 0.25));
}

#[test]
fn tgi_names_and_its_kv_tokens_as_a_fraction() {
    let p = GaugePoint::of(&scrape("tgi.prom"), 0.0);
    assert_eq!((p.running, p.waiting), (Some(16.0), Some(4.0)));
    assert!(close(p.kv_usage, 0.25) && p.kv_usage_max.is_none(), "{p:?}");
    let s = side("tgi.prom");
    assert!(s.histograms.ttft.is_none(), "TGI has no TTFT histogram");
    assert!(close(s.histograms.e2e.as_ref().unwrap().mean, 1.0));
    assert!(close(s.queue_mean(), 0.02));
    assert!(close(s.histograms.tpot.as_ref().unwrap().mean, 0.015));
    assert_eq!(s.prefix_cache, None);
}

#[test]
fn vllm_with_two_engines_is_not_summed_past_one() {
    let p = GaugePoint::of(&scrape("vllm-2-engines.prom"), 0.0);
    assert_eq!((p.running, p.waiting), (Some(30.0), Some(2.0)));
    assert!(close(p.kv_usage, 0.6) && close(p.kv_usage_max, 0.8), "{p:?}");
    let s = side("vllm-2-engines.prom");
    assert!(close(s.prefix_cache.unwrap().hit_rate(), 0.5));
}

#[test]
fn llama_cpp_has_counts_and_nothing_else() {
    let p = GaugePoint::of(&scrape("llamacpp.prom"), 0.0);
    assert_eq!((p.running, p.waiting, p.kv_usage), (Some(2.0), Some(1.0), None));
    assert_eq!(side("llamacpp.prom").prefix_cache, None);
}

/// Recorded from vLLM's CPU build 0.32 (`../shared/peers`) after 90 requests of goodput runs,
/// two of them with the same seed (the second served 1 152 prompt tokens from the cache).
#[test]
fn vllm_0_32_as_recorded() {
    let after = scrape("vllm-0.32-cpu.prom");
    let p = GaugePoint::of(&after, 0.0);
    assert_eq!((p.running, p.waiting, p.kv_usage, p.kv_usage_max), (Some(0.0), Some(0.0), Some(0.0), None));
    let s = side("vllm-0.32-cpu.prom");
    assert_eq!(s.prefix_cache, Some(PrefixCache { queried_tokens: 9918.0, hit_tokens: 1152.0 }));
    for (name, h) in [
        ("ttft", &s.histograms.ttft),
        ("e2e", &s.histograms.e2e),
        ("queue", &s.histograms.queue),
        ("prefill", &s.histograms.prefill),
        ("decode", &s.histograms.decode),
        ("itl", &s.histograms.itl),
        ("tpot", &s.histograms.tpot),
    ] {
        assert!(h.as_ref().is_some_and(|h| h.count > 0.0), "{name}: {h:?}");
    }
    assert_eq!(s.histograms.ttft.as_ref().unwrap().count, 90.0);
}
