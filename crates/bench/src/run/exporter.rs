//! `goodput run --metrics-port P`: the run itself as Prometheus metrics while it runs, so a
//! long sweep can be watched on a dashboard beside the server it measures: the level running
//! and its load, the requests ended by phase and outcome, the measured requests' TTFT, TPOT
//! and E2E as histograms (for `histogram_quantile` over any range), and the live view's
//! rolling P50/P95 over the last requests to end. Served at `http://HOST:P/metrics` by a
//! thread of its own (prometheus-client's text format), stopped when the run ends.

use super::error::{io, RunError};
use super::live::{Rolling, WINDOW};
use goodput_core::{ClientRecord, Phase};
use goodput_metrics::names;
use goodput_server::listen::{serve_router, ListenLimits, Served};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// The bounds of the request-time histograms, seconds (goodput serve's and vLLM's TTFT
/// buckets).
const BUCKETS: [f64; 22] = [
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
    160.0, 640.0, 2560.0,
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Ended {
    phase: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Quantile {
    quantile: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Info {
    model: String,
    scenario: String,
    target: String,
    unit: String,
}

/// What the run reports, shared by the record sink (writing) and the scrapes (reading).
struct Series {
    level: Gauge<f64, AtomicU64>,
    level_number: Gauge,
    requests: Family<Ended, Counter>,
    output_tokens: Counter,
    ttft: Histogram,
    tpot: Histogram,
    e2e: Histogram,
    rolling_ttft: Family<Quantile, Gauge<f64, AtomicU64>>,
    rolling_tpot: Family<Quantile, Gauge<f64, AtomicU64>>,
    window: Mutex<Rolling>,
    start: std::time::Instant,
}

/// The run's metrics: [`Exporter::ended`] for each request, [`Exporter::level`] as each level
/// starts, and [`Exporter::encode`] for a scrape.
#[derive(Clone)]
pub struct Exporter {
    series: Arc<Series>,
    registry: Arc<Registry>,
}

impl Exporter {
    /// The metrics of a run of `model` on `scenario` against `target`, its load in `unit`.
    pub fn new(model: &str, scenario: &str, target: &str, unit: &str) -> Self {
        let hist = || Histogram::new(BUCKETS.iter().copied());
        let s = Series {
            level: Gauge::default(),
            level_number: Gauge::default(),
            requests: Family::default(),
            output_tokens: Counter::default(),
            ttft: hist(),
            tpot: hist(),
            e2e: hist(),
            rolling_ttft: Family::default(),
            rolling_tpot: Family::default(),
            window: Mutex::new(Rolling::new(WINDOW)),
            start: std::time::Instant::now(),
        };
        let mut r = Registry::with_prefix("goodput_run");
        let info: Family<Info, Gauge> = Family::default();
        let labels = Info { model: model.into(), scenario: scenario.into(), target: target.into(), unit: unit.into() };
        info.get_or_create(&labels).set(1);
        r.register("info", "The run: its model, scenario, target and load unit (always 1)", info);
        r.register("level", "The load of the level running, in the unit of goodput_run_info", s.level.clone());
        r.register("level_number", "The level running: 1 for the first (0 before it)", s.level_number.clone());
        r.register("requests", "Requests ended, by phase and outcome (ok or error)", s.requests.clone());
        r.register("output_tokens", "Output tokens of the requests ended", s.output_tokens.clone());
        r.register(
            names::TTFT_SECONDS,
            "Time to first token of the measured requests (intended send to first token)",
            s.ttft.clone(),
        );
        r.register(
            names::TPOT_SECONDS,
            "Time per output token of the measured requests (first to last token over tokens - 1)",
            s.tpot.clone(),
        );
        r.register(
            names::E2E_SECONDS,
            "End-to-end latency of the measured requests (intended send to end)",
            s.e2e.clone(),
        );
        let window = format!("over the last {WINDOW} requests to end (the live view's)");
        r.register("rolling_ttft_seconds", format!("TTFT quantiles {window}"), s.rolling_ttft.clone());
        r.register("rolling_tpot_seconds", format!("TPOT quantiles {window}"), s.rolling_tpot.clone());
        Exporter { series: Arc::new(s), registry: Arc::new(r) }
    }

    /// Level `number` (1-based) at `load` starts.
    pub fn level(&self, number: usize, load: f64) {
        self.series.level_number.set(number as i64);
        self.series.level.set(load);
    }

    /// A request of `phase` ended.
    pub fn ended(&self, r: &ClientRecord, phase: Phase) {
        let s = &self.series;
        let phase_name = match phase {
            Phase::Warmup => "warmup",
            Phase::Measured => "measured",
            Phase::Cooldown => "cooldown",
        };
        let outcome = if r.is_ok() { "ok" } else { "error" };
        s.requests.get_or_create(&Ended { phase: phase_name, outcome }).inc();
        s.output_tokens.inc_by(r.output_tokens as u64);
        let (ttft, tpot) = if r.is_ok() {
            (goodput_metrics::request::ttft(r), goodput_metrics::request::tpot(r))
        } else {
            (None, None)
        };
        if phase == Phase::Measured {
            let e2e = if r.is_ok() { goodput_metrics::request::e2e(r) } else { None };
            for (h, v) in [(&s.ttft, ttft), (&s.tpot, tpot), (&s.e2e, e2e)] {
                if let Some(v) = v {
                    h.observe(v);
                }
            }
        }
        let mut w = s.window.lock().unwrap_or_else(PoisonError::into_inner);
        w.push(s.start.elapsed().as_secs_f64(), ttft, tpot);
    }

    /// The metrics in the OpenMetrics text format (prometheus-client's). The rolling
    /// quantiles are taken here, once a scrape, not once a request.
    pub fn encode(&self) -> String {
        let s = &self.series;
        let w = s.window.lock().unwrap_or_else(PoisonError::into_inner);
        for (q, p) in [("0.5", 50.0), ("0.95", 95.0)] {
            let set = |f: &Family<Quantile, Gauge<f64, AtomicU64>>, v: Option<f64>| {
                f.get_or_create(&Quantile { quantile: q }).set(v.unwrap_or(f64::NAN));
            };
            set(&s.rolling_ttft, w.percentile(false, p));
            set(&s.rolling_tpot, w.percentile(true, p));
        }
        drop(w);
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry).expect("writing to a String");
        out
    }

    /// Serves [`Exporter::encode`] at `http://addr/metrics` on a thread of its own until the
    /// returned guard is dropped; the address it bound (port 0: a free one). Served by goodput
    /// serve's accept loop ([`goodput_server::listen::serve_router`]) under [`LIMITS`]: a
    /// scraper that sends half a request, or sends and never reads, cannot keep the run from
    /// ending.
    pub fn serve(&self, addr: SocketAddr) -> Result<(Serving, SocketAddr), RunError> {
        let listener = std::net::TcpListener::bind(addr).map_err(|source| RunError::MetricsPort { addr, source })?;
        listener.set_nonblocking(true).map_err(io("the metrics listener"))?;
        let bound = listener.local_addr().map_err(io("the metrics listener's address"))?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let me = self.clone();
        let thread = std::thread::Builder::new().name("goodput-metrics".into()).spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return };
            rt.block_on(async move {
                let Ok(listener) = tokio::net::TcpListener::from_std(listener) else { return };
                let app = axum::Router::new().route(
                    "/metrics",
                    axum::routing::get(move || {
                        let body = me.encode();
                        async move {
                            ([("content-type", "application/openmetrics-text; version=1.0.0; charset=utf-8")], body)
                        }
                    }),
                );
                let served = Served { app, limits: LIMITS, tls: None, open: Gauge::default() };
                let _ = serve_router(listener, served, async { stopped.await.unwrap_or(()) }, || Duration::ZERO).await;
            });
        });
        let thread = thread.map_err(io("starting the metrics server"))?;
        Ok((Serving { stop: Some(stop), thread: Some(thread) }, bound))
    }
}

/// The metrics port's limits: a scrape is one small answer, so a connection that has sent no
/// whole request for 10 s is closed, at most 64 are served at once (more are answered 503),
/// and at the run's end a scrape still being written gets 1 s: the port is down within about
/// 1 s of the run's end whatever its clients do.
pub const LIMITS: ListenLimits =
    ListenLimits { grace: Duration::from_secs(1), max_connections: 64, header_timeout: Duration::from_secs(10) };

/// The metrics server: stopped (and its thread joined) when dropped, within about 1 s
/// ([`LIMITS`]).
pub struct Serving {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Serving {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use goodput_core::{RecordBuilder, Stamp};

    /// Sent at 0, first token after `ttft_ms`, then one token every 10 ms.
    fn record(id: u64, ttft_ms: u64, tokens: u64) -> ClientRecord {
        let at = |i: u64| Stamp((ttft_ms + 10 * i) * 1_000_000);
        RecordBuilder::new(id).tokens_at((0..tokens).map(at)).end(at(tokens - 1)).build()
    }

    #[test]
    fn the_run_s_metrics_by_hand() {
        let e = Exporter::new("tiny", "short-qa", "in-process", "users");
        e.level(2, 4.0);
        // Two measured requests: TTFT 100 and 300 ms, 11 tokens 10 ms apart (TPOT 10 ms); a
        // warm-up one, not in the histograms.
        e.ended(&record(1, 100, 11), Phase::Measured);
        e.ended(&record(2, 300, 11), Phase::Measured);
        e.ended(&record(3, 50, 11), Phase::Warmup);
        let text = e.encode();
        let has = |line: &str| text.lines().any(|l| l == line);
        assert!(has("goodput_run_level 4.0") && has("goodput_run_level_number 2"), "{text}");
        assert!(
            has(r#"goodput_run_info{model="tiny",scenario="short-qa",target="in-process",unit="users"} 1"#),
            "{text}"
        );
        assert!(has(r#"goodput_run_requests_total{phase="measured",outcome="ok"} 2"#), "{text}");
        assert!(has(r#"goodput_run_requests_total{phase="warmup",outcome="ok"} 1"#), "{text}");
        assert!(has("goodput_run_output_tokens_total 33"), "{text}");
        assert!(has("goodput_run_time_to_first_token_seconds_count 2"), "measured only: {text}");
        assert!(has("goodput_run_time_to_first_token_seconds_sum 0.4"), "{text}");
        assert!(has(r#"goodput_run_time_to_first_token_seconds_bucket{le="0.25"} 1"#), "{text}");
        // The rolling window holds all three: TTFTs 50, 100, 300 ms: P50 100 ms, P95
        // 100 + 0.9 · (300 − 100) = 280 ms (rank 0.95 · 2 = 1.9).
        assert!(has(r#"goodput_run_rolling_ttft_seconds{quantile="0.5"} 0.1"#), "{text}");
        let p95 = text.lines().find(|l| l.starts_with(r#"goodput_run_rolling_ttft_seconds{quantile="0.95"}"#)).unwrap();
        let v: f64 = p95.rsplit(' ').next().unwrap().parse().unwrap();
        assert!((v - 0.28).abs() < 1e-9, "{p95}");
    }

    /// A scraper that sent half a request head, and one that sends requests and never reads
    /// their answers, do not hold the port open: dropping it returns within the limits' 1 s
    /// (and a little).
    #[test]
    fn the_port_closes_whatever_its_scrapers_do() {
        use std::io::Write;
        let e = Exporter::new("tiny", "short-qa", "in-process", "users");
        (0..2000).for_each(|i| e.ended(&record(i, 100, 11), Phase::Measured));
        let (serving, addr) = e.serve("127.0.0.1:0".parse().unwrap()).unwrap();
        let mut half = std::net::TcpStream::connect(addr).unwrap();
        half.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n").unwrap();
        let mut greedy = std::net::TcpStream::connect(addr).unwrap();
        greedy.set_nonblocking(true).unwrap();
        let ask = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n".repeat(64);
        // Requests written until the socket refuses more: the answers pile up unread.
        let t = std::time::Instant::now();
        while t.elapsed() < Duration::from_millis(500) {
            if greedy.write_all(&ask).is_err() {
                break;
            }
        }
        let t = std::time::Instant::now();
        drop(serving);
        assert!(t.elapsed() < Duration::from_secs(2), "the port took {:?} to close", t.elapsed());
        drop((half, greedy));
    }
}
