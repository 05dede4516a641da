//! The targets `goodput run` drives: the in-process engine, or an HTTP server (goodput's own
//! started in this process on loopback, or any OpenAI-compatible one), and what is read from
//! an HTTP server's /metrics around each level.

use anyhow::{Context, Result};
use goodput_core::{ClientRecord, Clock, Stamp, Target, WorkRequest};
use std::sync::Arc;
use std::time::Duration;

pub enum AnyTarget {
    Engine(goodput_engine::EngineHandle),
    Http(goodput_client::HttpTarget),
}

impl Target for AnyTarget {
    fn clock(&self) -> Clock {
        match self {
            AnyTarget::Engine(e) => e.clock(),
            AnyTarget::Http(h) => h.clock(),
        }
    }

    fn describe(&self) -> String {
        match self {
            AnyTarget::Engine(e) => e.describe(),
            AnyTarget::Http(h) => h.describe(),
        }
    }

    async fn run(&self, req: WorkRequest, intended: Stamp) -> ClientRecord {
        match self {
            AnyTarget::Engine(e) => e.run(req, intended).await,
            AnyTarget::Http(h) => h.run(req, intended).await,
        }
    }
}

/// The model's tokenizer as the HTTP client's codec.
pub struct Codec(pub std::sync::Arc<goodput_engine::tokenizer::Tokenizer>);

impl goodput_client::TextCodec for Codec {
    fn encode(&self, text: &str) -> Result<Vec<u32>, String> {
        self.0.encode(text).map_err(|e| e.to_string())
    }
    fn decode(&self, ids: &[u32]) -> Result<String, String> {
        self.0.decode(ids).map_err(|e| e.to_string())
    }
}

/// What a server's /metrics said about one level.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct ServerSide {
    pub scrapes: usize,
    /// The two scrapes the histograms are the difference of, in seconds since the level's
    /// first scrape: those bracketing the measured requests ([`Scraper::finish`]).
    pub histogram_window_s: (f64, f64),
    /// Percentiles of the level's requests from histogram deltas (after − before).
    pub histograms: std::collections::BTreeMap<String, goodput_metrics::prom::HistogramStats>,
    /// The level's measured window (first measured intended send to last measured end), in
    /// seconds since the first scrape: occupancy is taken over the scrapes inside it.
    pub measured_window_s: Option<(f64, f64)>,
    /// Gauges at each scrape: seconds since the level started, running, waiting, KV usage.
    pub series: Vec<(f64, f64, f64, f64)>,
    /// Why scraping failed, if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The histograms compared before and after a level.
const SERVER_HISTOGRAMS: [&str; 6] = [
    "time_to_first_token_seconds",
    "e2e_request_latency_seconds",
    "request_queue_time_seconds",
    "request_prefill_time_seconds",
    "request_decode_time_seconds",
    "request_inference_time_seconds",
];

/// Scrapes a target's /metrics before a level, every `interval` during it, and after it.
pub struct Scraper {
    target: Arc<AnyTarget>,
    before: Result<goodput_client::ServerScrape, String>,
    during: Arc<std::sync::Mutex<Vec<goodput_client::ServerScrape>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Scraper {
    pub fn start(rt: &tokio::runtime::Runtime, target: Arc<AnyTarget>, interval: Duration) -> Self {
        let scrape = |t: Arc<AnyTarget>| async move {
            match &*t {
                AnyTarget::Http(h) => h.scrape().await,
                AnyTarget::Engine(_) => Err("not an HTTP target".to_string()),
            }
        };
        let before = rt.block_on(scrape(target.clone()));
        let during = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (t, d) = (target.clone(), during.clone());
        // Runs while the level runs on the same (current-thread) runtime.
        let task = rt.spawn(async move {
            loop {
                tokio::time::sleep(interval).await;
                if let Ok(s) = scrape(t.clone()).await {
                    d.lock().unwrap_or_else(|e| e.into_inner()).push(s);
                }
            }
        });
        Scraper { target, before, during, task }
    }

    /// Ends the scraping. Histograms count requests as they finish, so the histograms are the
    /// difference of the first scrape at or after the last warm-up request ended and the first
    /// at or after the last measured one ended (`measured`: those two moments): warm-up is
    /// left out as far as the scrape interval allows, and a measured request that ended
    /// before the last warm-up one is lost (compare `count` with the measured requests).
    /// Without warm-up, from the level's first scrape; without two such scrapes, the whole
    /// level's.
    pub fn finish(
        self,
        rt: &tokio::runtime::Runtime,
        measured: Option<(Option<Stamp>, Stamp)>,
        window: Option<(Stamp, Stamp)>,
    ) -> Option<ServerSide> {
        self.task.abort();
        let after = rt.block_on(async {
            match &*self.target {
                AnyTarget::Http(h) => h.scrape().await,
                AnyTarget::Engine(_) => Err("not an HTTP target".to_string()),
            }
        });
        let (before, after) = match (self.before, after) {
            (Ok(b), Ok(a)) => (b, a),
            (Err(e), _) | (_, Err(e)) => return Some(ServerSide { error: Some(e), ..Default::default() }),
        };
        let during = std::mem::take(&mut *self.during.lock().unwrap_or_else(|e| e.into_inner()));
        let all: Vec<&goodput_client::ServerScrape> =
            std::iter::once(&before).chain(&during).chain(std::iter::once(&after)).collect();
        let (from, to) = bracket(&all.iter().map(|s| s.at).collect::<Vec<_>>(), measured);
        let (b_scrape, a_scrape) = (all[from], all[to]);
        let mut side = ServerSide {
            histogram_window_s: (b_scrape.at.secs_since(before.at), a_scrape.at.secs_since(before.at)),
            measured_window_s: window.map(|(a, b)| (a.secs_since(before.at), b.secs_since(before.at))),
            ..Default::default()
        };
        for name in SERVER_HISTOGRAMS {
            let (before, after) = (b_scrape, a_scrape);
            if let (Some(b), Some(a)) = (before.histograms.get(name), after.histograms.get(name)) {
                let dsum = after.sums.get(name).zip(before.sums.get(name)).map(|(a, b)| a - b);
                if let Some(st) = goodput_metrics::prom::stats(&goodput_metrics::prom::delta(b, a), dsum) {
                    side.histograms.insert(name.to_string(), st);
                }
            }
        }
        side.scrapes = all.len();
        let g = |s: &goodput_client::ServerScrape, k: &str| s.gauges.get(k).copied().unwrap_or(f64::NAN);
        for s in all.iter().copied() {
            let kv = s.gauges.get("kv_cache_usage_perc").or_else(|| s.gauges.get("gpu_cache_usage_perc")).copied();
            side.series.push((
                s.at.secs_since(before.at),
                g(s, "num_requests_running"),
                g(s, "num_requests_waiting"),
                kv.unwrap_or(f64::NAN),
            ));
        }
        Some(side)
    }
}

/// The scrapes (indices into their stamps `at`, ascending) whose histogram difference counts
/// the measured requests ([`Scraper::finish`]): the first at or after the last warm-up end
/// (the first scrape without warm-up) and the first at or after the last measured end;
/// without two such, the first and the last.
fn bracket(at: &[Stamp], measured: Option<(Option<Stamp>, Stamp)>) -> (usize, usize) {
    measured
        .and_then(|(warm, end)| {
            let from = match warm {
                Some(w) => at.iter().position(|&s| s >= w)?,
                None => 0,
            };
            let to = at.iter().position(|&s| s >= end)?;
            (to > from).then_some((from, to))
        })
        .unwrap_or((0, at.len().saturating_sub(1)))
}

/// goodput's server on loopback in this process, on a runtime of its own.
pub struct LocalServer {
    pub url: String,
    rt: tokio::runtime::Runtime,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl LocalServer {
    /// `cpus`: pin the server's threads there (the harness's CPUs: the HTTP layer is the
    /// client side of the measurement, not the engine's).
    pub fn start(state: Arc<goodput_server::AppState>, cpus: Option<Vec<usize>>) -> Result<Self> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("goodput-server")
            .on_thread_start(move || {
                if let Some(c) = &cpus {
                    let _ = goodput_engine::affinity::pin_current(c);
                }
            })
            .enable_all()
            .build()?;
        let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).context("binding 127.0.0.1")?;
        let url = format!("http://{}", listener.local_addr()?);
        let (stop, rx) = tokio::sync::oneshot::channel::<()>();
        let task = rt.spawn(goodput_server::serve(
            listener,
            state,
            async move {
                let _ = rx.await;
            },
            Duration::from_secs(5),
        ));
        Ok(LocalServer { url, rt, stop, task })
    }

    pub fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.rt.block_on(self.task);
    }
}

#[cfg(test)]
mod tests {
    use super::bracket;
    use goodput_core::Stamp;

    #[test]
    fn the_histogram_window_brackets_the_measured_requests() {
        let at: Vec<Stamp> = [0, 5, 10, 15, 20].map(Stamp).to_vec();
        // Warm-up ended at 7, the last measured request at 16: scrapes 10 and 20.
        assert_eq!(bracket(&at, Some((Some(Stamp(7)), Stamp(16)))), (2, 4));
        // A scrape exactly at the moment counts.
        assert_eq!(bracket(&at, Some((Some(Stamp(5)), Stamp(15)))), (1, 3));
        // No warm-up: from the level's first scrape.
        assert_eq!(bracket(&at, Some((None, Stamp(12)))), (0, 3));
        // No scrape between the two moments, or nothing measured: the whole level.
        assert_eq!(bracket(&at, Some((Some(Stamp(11)), Stamp(14)))), (0, 4));
        assert_eq!(bracket(&at, None), (0, 4));
    }
}
