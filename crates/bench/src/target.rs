//! The targets `goodput run` drives: the in-process engine, or an HTTP server (goodput's own
//! started in this process on loopback, or any OpenAI-compatible one), and what is read from
//! an HTTP server's /metrics around each level.

use goodput_client::HttpTarget;
use goodput_core::{ClientRecord, Clock, ServerScrape, Stamp, Target, WorkRequest};
use goodput_metrics::server::ServerSide;
use std::sync::Arc;
use std::time::Duration;

pub enum AnyTarget {
    Engine(goodput_engine::EngineHandle),
    Http(Arc<HttpTarget>),
    /// The simulated engine (`--simulate`).
    Sim(crate::simulate::SimTarget),
}

impl Target for AnyTarget {
    fn clock(&self) -> Clock {
        match self {
            AnyTarget::Engine(e) => e.clock(),
            AnyTarget::Http(h) => h.clock(),
            AnyTarget::Sim(s) => s.clock(),
        }
    }

    fn describe(&self) -> String {
        match self {
            AnyTarget::Engine(e) => e.describe(),
            AnyTarget::Http(h) => h.describe(),
            AnyTarget::Sim(s) => s.describe(),
        }
    }

    /// The record of `req`; the engine and the simulator know which of their tokens a
    /// reasoning workload asked to be reasoning ([`SamplingParams::reasoning_tokens`]), an HTTP
    /// server says so in its stream.
    ///
    /// [`SamplingParams::reasoning_tokens`]: goodput_core::SamplingParams::reasoning_tokens
    async fn run(&self, req: WorkRequest, intended: Stamp) -> ClientRecord {
        let reasoning = req.params.reasoning_tokens;
        let mut rec = match self {
            AnyTarget::Engine(e) => e.run(req, intended).await,
            AnyTarget::Http(h) => return h.run(req, intended).await,
            AnyTarget::Sim(s) => s.run(req, intended).await,
        };
        rec.reasoning = goodput_core::Reasoning::prefix(&rec.chunks, reasoning);
        rec
    }
}

/// Scrapes an HTTP server's /metrics before a level, every `interval` during it, and after it.
pub struct Scraper {
    target: Arc<HttpTarget>,
    before: Result<ServerScrape, goodput_client::ClientError>,
    during: Arc<std::sync::Mutex<Vec<ServerScrape>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Scraper {
    pub fn start(rt: &tokio::runtime::Runtime, target: Arc<HttpTarget>, interval: Duration) -> Self {
        let before = rt.block_on(target.scrape());
        let during = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (t, d) = (target.clone(), during.clone());
        // Runs while the level runs on the same (current-thread) runtime.
        let task = rt.spawn(async move {
            loop {
                tokio::time::sleep(interval).await;
                if let Ok(s) = t.scrape().await {
                    d.lock().unwrap_or_else(|e| e.into_inner()).push(s);
                }
            }
        });
        Scraper { target, before, during, task }
    }

    /// Ends the scraping and turns the scrapes into the level's server side
    /// ([`ServerSide::of`]: `measured` is when the last warm-up and the last measured
    /// request ended, `window` the measured window), and gives them back.
    pub fn finish(
        self,
        rt: &tokio::runtime::Runtime,
        measured: Option<(Option<Stamp>, Stamp)>,
        window: Option<(Stamp, Stamp)>,
    ) -> (ServerSide, Vec<ServerScrape>) {
        self.task.abort();
        let after = rt.block_on(self.target.scrape());
        let during = std::mem::take(&mut *self.during.lock().unwrap_or_else(|e| e.into_inner()));
        let (before, after) = match (self.before, after) {
            (Ok(b), Ok(a)) => (b, a),
            (Err(e), _) | (_, Err(e)) => return (ServerSide::failed(e.to_string()), during),
        };
        let all: Vec<ServerScrape> = std::iter::once(before).chain(during).chain(std::iter::once(after)).collect();
        (ServerSide::of(&all, measured, window), all)
    }
}

/// goodput's server on loopback in this process, on a runtime of its own.
/// goodput's own server on loopback could not start: what was being done.
#[derive(Debug, thiserror::Error)]
#[error("the local server: {what}")]
pub struct LocalServerError {
    what: &'static str,
    source: std::io::Error,
}

pub struct LocalServer {
    pub url: String,
    rt: tokio::runtime::Runtime,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl LocalServer {
    /// `cpus`: pin the server's threads there (the harness's CPUs: the HTTP layer is the
    /// client side of the measurement, not the engine's).
    pub fn start(state: Arc<goodput_server::AppState>, cpus: Option<Vec<usize>>) -> Result<Self, LocalServerError> {
        let io = |what| move |source| LocalServerError { what, source };
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("goodput-server")
            .on_thread_start(move || {
                if let Some(c) = &cpus {
                    goodput_engine::affinity::pin_current_or_warn(c, "the local server");
                }
            })
            .enable_all()
            .build()
            .map_err(io("its runtime"))?;
        let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).map_err(io("binding 127.0.0.1"))?;
        let url = format!("http://{}", listener.local_addr().map_err(io("its address"))?);
        let (stop, rx) = tokio::sync::oneshot::channel::<()>();
        let task = rt.spawn(goodput_server::serve(
            listener,
            state,
            async move {
                let _ = rx.await;
            },
            // The harness's own server: as many connections as the sweep opens.
            goodput_server::ListenLimits {
                grace: Duration::from_secs(5),
                max_connections: usize::MAX,
                ..Default::default()
            },
        ));
        Ok(LocalServer { url, rt, stop, task })
    }

    pub fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.rt.block_on(self.task);
    }
}
