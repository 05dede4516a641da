//! `/metrics`: the engine's histograms, gauges and counters in Prometheus text format, with
//! vLLM's metric names and meanings under the `goodput_` prefix (a vLLM dashboard works after
//! replacing `vllm:` with `goodput_`), through `prometheus-client`.

use goodput_core::{EngineRecord, Stamp};
use goodput_engine::EngineHandle;
use goodput_metrics::engine as em;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// vLLM's time-to-first-token buckets (seconds), used here for every request-time histogram.
/// vLLM's own e2e, queue, prefill, decode and inference histograms start at 0.3 s, too
/// coarse for the millisecond queue and prefill times of a small model; bucket bounds do not
/// change what a histogram means, so its dashboards still work.
const LATENCY_BUCKETS: [f64; 22] = [
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
    160.0, 640.0, 2560.0,
];
/// vLLM's inter-token-latency buckets (seconds).
const ITL_BUCKETS: [f64; 18] =
    [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0];

pub struct Metrics {
    registry: Registry,
    ttft: Histogram,
    itl: Histogram,
    e2e: Histogram,
    queue: Histogram,
    prefill: Histogram,
    decode: Histogram,
    inference: Histogram,
    prompt_tokens: Counter,
    generation_tokens: Counter,
    success: Counter,
    running: Gauge,
    waiting: Gauge,
    kv_usage: Gauge<f64, AtomicU64>,
    /// The part of `kv_usage` held by sliding-window layers (0 for models without them).
    kv_sliding_usage: Gauge<f64, AtomicU64>,
    preemptions: Counter,
    prefix_queries: Counter,
    prefix_hits: Counter,
    /// Connections open, each counted against `max_connections` by the accept loop.
    connections: Gauge,
    /// The process's memory and file descriptors, under Prometheus's own process-collector
    /// names (`process_resident_memory_bytes`, `process_open_fds`, as vLLM exposes them).
    process: Registry,
    rss: Gauge<f64, AtomicU64>,
    fds: Gauge,
    /// Serialises scrapes (the engine's cumulative counters are copied in as deltas).
    scrape: Mutex<()>,
}

/// This process's resident memory (bytes: `/proc/self/statm`'s second field × the page size)
/// and open file descriptors (`/proc/self/fd`); `None` where there is no `/proc`.
pub fn process_gauges() -> (Option<f64>, Option<f64>) {
    // SAFETY: sysconf reads a constant of the system; it has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as f64;
    let statm = std::fs::read_to_string("/proc/self/statm").ok();
    let rss = statm.and_then(|s| s.split_whitespace().nth(1)?.parse::<f64>().ok()).map(|p| p * page);
    let fds = std::fs::read_dir("/proc/self/fd").ok().map(|d| d.count() as f64);
    (rss, fds)
}

impl Metrics {
    pub fn new(model: &str) -> Self {
        let labels = [(Cow::Borrowed("model_name"), Cow::Owned(model.to_string()))];
        let mut registry = Registry::with_prefix_and_labels("goodput", labels.into_iter());
        let hist = |b: &[f64]| Histogram::new(b.iter().copied());
        let m = Metrics {
            ttft: hist(&LATENCY_BUCKETS),
            itl: hist(&ITL_BUCKETS),
            e2e: hist(&LATENCY_BUCKETS),
            queue: hist(&LATENCY_BUCKETS),
            prefill: hist(&LATENCY_BUCKETS),
            decode: hist(&LATENCY_BUCKETS),
            inference: hist(&LATENCY_BUCKETS),
            prompt_tokens: Counter::default(),
            generation_tokens: Counter::default(),
            success: Counter::default(),
            running: Gauge::default(),
            waiting: Gauge::default(),
            kv_usage: Gauge::default(),
            kv_sliding_usage: Gauge::default(),
            preemptions: Counter::default(),
            prefix_queries: Counter::default(),
            prefix_hits: Counter::default(),
            connections: Gauge::default(),
            registry: Registry::default(),
            process: Registry::with_prefix("process"),
            rss: Gauge::default(),
            fds: Gauge::default(),
            scrape: Mutex::new(()),
        };
        let mut process = Registry::with_prefix("process");
        process.register("resident_memory_bytes", "Resident memory size in bytes", m.rss.clone());
        process.register("open_fds", "Number of open file descriptors", m.fds.clone());
        use goodput_metrics::names;
        let r = &mut registry;
        r.register(
            names::TTFT_SECONDS,
            "Histogram of time to first token (server receipt to first token sampled)",
            m.ttft.clone(),
        );
        r.register(names::ITL_SECONDS, "Histogram of the time between consecutive tokens of a request", m.itl.clone());
        r.register(
            names::E2E_SECONDS,
            "Histogram of end-to-end request latency (server receipt to finish)",
            m.e2e.clone(),
        );
        r.register(names::QUEUE_SECONDS, "Histogram of time spent waiting in the scheduler queue", m.queue.clone());
        r.register(names::PREFILL_SECONDS, "Histogram of time from first scheduled to first token", m.prefill.clone());
        r.register(names::DECODE_SECONDS, "Histogram of time from first to last token", m.decode.clone());
        r.register(
            names::INFERENCE_SECONDS,
            "Histogram of time from first scheduled to last token",
            m.inference.clone(),
        );
        r.register("prompt_tokens", "Number of prefill tokens processed", m.prompt_tokens.clone());
        r.register("generation_tokens", "Number of generation tokens processed", m.generation_tokens.clone());
        r.register("request_success", "Requests that finished (length or stop)", m.success.clone());
        r.register(names::RUNNING, "Requests in the running batch", m.running.clone());
        r.register(names::WAITING, "Requests waiting to be scheduled", m.waiting.clone());
        r.register(names::KV_USAGE, "KV-cache block usage: 1 is full", m.kv_usage.clone());
        r.register(
            names::KV_SLIDING_USAGE,
            "KV-cache blocks held by sliding-window layers, as a share of the pool (within kv_cache_usage_perc)",
            m.kv_sliding_usage.clone(),
        );
        r.register("num_preemptions", "Cumulative number of preemptions", m.preemptions.clone());
        r.register("prefix_cache_queries", "Prompt tokens looked up in the prefix cache", m.prefix_queries.clone());
        r.register("prefix_cache_hits", "Prompt tokens found in the prefix cache", m.prefix_hits.clone());
        r.register(
            "http_connections",
            "HTTP connections open (counted against --max-connections)",
            m.connections.clone(),
        );
        Metrics { registry, process, ..m }
    }

    /// HTTP connections served now, idle ones and TLS handshakes included (an over-limit
    /// connection, answered 503, is not counted).
    pub fn open_connections(&self) -> i64 {
        self.connections.get()
    }

    /// The gauge the accept loop counts its connections in.
    pub(crate) fn connections(&self) -> Gauge {
        self.connections.clone()
    }

    /// Records a finished request received at `received`.
    pub fn observe(&self, received: Stamp, r: &EngineRecord) {
        if let Some(t) = r.first_token {
            self.ttft.observe(t.secs_since(received));
        }
        for w in r.token_times.windows(2) {
            self.itl.observe(w[1].secs_since(w[0]));
        }
        self.e2e.observe(r.finished.secs_since(received));
        let obs = |h: &Histogram, x: Option<f64>| {
            if let Some(x) = x {
                h.observe(x)
            }
        };
        obs(&self.queue, em::queue_time(r));
        obs(&self.prefill, em::prefill_time(r));
        obs(&self.decode, em::decode_time(r));
        obs(&self.inference, em::inference_time(r));
        self.prompt_tokens.inc_by(r.prompt_tokens as u64);
        self.generation_tokens.inc_by(r.generated_tokens as u64);
        if matches!(r.finish_reason, goodput_core::FinishReason::Length | goodput_core::FinishReason::Stop) {
            self.success.inc();
        }
    }

    /// The exposition text, with the engine's gauges and counters read now.
    pub fn render(&self, engine: &EngineHandle) -> String {
        let _guard = self.scrape.lock().unwrap_or_else(|e| e.into_inner());
        let g = engine.gauges();
        let load = |a: &std::sync::atomic::AtomicUsize| a.load(Ordering::Relaxed);
        self.running.set(load(&g.running) as i64);
        self.waiting.set(load(&g.waiting) as i64);
        let usable = load(&g.usable_blocks);
        let share = |blocks: usize| if usable == 0 { 0.0 } else { blocks as f64 / usable as f64 };
        self.kv_usage.set(share(load(&g.blocks_used)));
        self.kv_sliding_usage.set(share(load(&g.blocks_sliding)));
        let catch_up = |c: &Counter, total: &AtomicU64| {
            let t = total.load(Ordering::Relaxed);
            c.inc_by(t.saturating_sub(c.get()));
        };
        catch_up(&self.preemptions, &g.preemptions_total);
        catch_up(&self.prefix_queries, &g.prefix_query_tokens_total);
        catch_up(&self.prefix_hits, &g.prefix_hit_tokens_total);
        let (rss, fds) = process_gauges();
        self.rss.set(rss.unwrap_or(0.0));
        self.fds.set(fds.unwrap_or(0.0) as i64);
        let (mut out, mut process) = (String::new(), String::new());
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        let _ = prometheus_client::encoding::text::encode(&mut process, &self.process);
        // One exposition: the process's families before the engine's closing `# EOF`.
        let body = |t: &str| t.strip_suffix("# EOF\n").unwrap_or(t).to_string();
        format!("{}{}# EOF\n", body(&out), body(&process))
    }
}
