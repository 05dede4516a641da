//! A goodput server over the tiny model with dummy weights on a loopback port, and helpers.
#![allow(dead_code)]

use candle_core::{DType, Device};
use goodput_core::{Catalog, Clock};
use goodput_engine::tokenizer::Tokenizer;
use goodput_engine::weights::DummySource;
use goodput_engine::{Engine, EngineConfig, Llama};
use goodput_server::{AppState, ListenLimits, Policy};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub struct Server {
    pub addr: SocketAddr,
    pub state: Arc<AppState>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    pub task: tokio::task::JoinHandle<std::io::Result<()>>,
    engine: Option<Engine>,
}

pub async fn start(max_waiting: Option<usize>, max_num_seqs: usize, grace: Duration) -> Server {
    let policy = Policy { max_waiting, ..Policy::default() };
    start_with(policy, ListenLimits { grace, ..Default::default() }, max_num_seqs, Duration::ZERO).await
}

/// A server with `policy` and `limits`; the engine waits `step_delay` before each step.
pub async fn start_with(policy: Policy, limits: ListenLimits, max_num_seqs: usize, step_delay: Duration) -> Server {
    let spec = Catalog::builtin().get("tiny").unwrap().clone();
    let mut src = DummySource { seed: 5, dtype: DType::F32, device: Device::Cpu };
    let model = Llama::load(&spec, &mut src, 512, &Device::Cpu, DType::F32).unwrap();
    let cfg = EngineConfig {
        num_blocks: Some(128),
        max_model_len: Some(512),
        max_num_seqs,
        step_delay,
        ..Default::default()
    };
    let engine = Engine::start(model, cfg, Clock::new(), None).unwrap();
    let tok = Arc::new(Tokenizer::byte_level(spec.vocab_size));
    let state = Arc::new(AppState::new(engine.handle(), tok, "tiny".into(), Default::default(), policy).unwrap());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(goodput_server::serve(
        listener,
        state.clone(),
        async move {
            let _ = rx.await;
        },
        limits,
    ));
    Server { addr, state, stop: Some(tx), task, engine: Some(engine) }
}

impl Server {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
    pub async fn shutdown(mut self) {
        let _ = self.stop.take().unwrap().send(());
        tokio::time::timeout(Duration::from_secs(10), &mut self.task).await.expect("server stops").unwrap().unwrap();
        self.engine.take().unwrap().shutdown(false);
    }
    pub async fn wait_idle(&self) {
        let t = Instant::now();
        let g = self.state.engine.gauges();
        while g.running.load(Ordering::Relaxed)
            + g.waiting.load(Ordering::Relaxed)
            + g.blocks_used.load(Ordering::Relaxed)
            > 0
        {
            assert!(t.elapsed() < Duration::from_secs(10), "the engine kept the request");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

pub async fn post(url: &str, body: &str) -> (u16, reqwest::header::HeaderMap, String) {
    let r = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let (status, headers) = (r.status().as_u16(), r.headers().clone());
    (status, headers, r.text().await.unwrap())
}

/// The `data:` payloads of an SSE body.
pub fn events(body: &str) -> Vec<String> {
    body.lines()
        .filter_map(|l| l.strip_prefix("data: ").or_else(|| l.strip_prefix("data:")))
        .map(String::from)
        .collect()
}
