//! A goodput server over the tiny model with dummy weights on a loopback port (plain or TLS,
//! with the test CA of `tls/`), and helpers: raw sockets, HTTP/2 clients.
#![allow(dead_code)]

use axum::body::Bytes;
use candle_core::{DType, Device};
use goodput_core::{Catalog, Clock};
use goodput_engine::tokenizer::Tokenizer;
use goodput_engine::weights::DummySource;
use goodput_engine::{Engine, EngineConfig, Llama};
use goodput_server::{AppState, ListenLimits, Policy};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::net::TcpStream;

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
    start_full(policy, limits, max_num_seqs, step_delay, None).await
}

/// [`start_with`] over HTTPS with the certificate of `tls/cert.pem` (localhost, 127.0.0.1).
pub async fn start_tls(policy: Policy, limits: ListenLimits) -> Server {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/common/tls");
    let cfg = goodput_server::tls::server_config(&dir.join("cert.pem"), &dir.join("key.pem")).unwrap();
    start_full(policy, limits, 8, Duration::ZERO, Some(cfg)).await
}

/// A plain server whose tokenizer is `tok` and whose chat outputs split by `reasoning`.
pub async fn start_with_tokenizer(
    tok: Arc<Tokenizer>,
    reasoning: goodput_server::reasoning::ReasoningParser,
) -> Server {
    let opts = Opts { tok: Some(tok), reasoning };
    start_opts(Policy::default(), ListenLimits::default(), 8, Duration::ZERO, None, opts).await
}

#[derive(Default)]
struct Opts {
    tok: Option<Arc<Tokenizer>>,
    reasoning: goodput_server::reasoning::ReasoningParser,
}

async fn start_full(
    policy: Policy,
    limits: ListenLimits,
    max_num_seqs: usize,
    step_delay: Duration,
    tls: Option<Arc<rustls::ServerConfig>>,
) -> Server {
    start_opts(policy, limits, max_num_seqs, step_delay, tls, Opts::default()).await
}

async fn start_opts(
    policy: Policy,
    limits: ListenLimits,
    max_num_seqs: usize,
    step_delay: Duration,
    tls: Option<Arc<rustls::ServerConfig>>,
    opts: Opts,
) -> Server {
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
    let tok = opts.tok.unwrap_or_else(|| Arc::new(Tokenizer::byte_level(spec.vocab_size)));
    let state = AppState::new(engine.handle(), tok, "tiny".into(), Default::default(), policy).unwrap();
    let state = Arc::new(state.with_reasoning(opts.reasoning));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(goodput_server::serve_tls(
        listener,
        state.clone(),
        async move {
            let _ = rx.await;
        },
        limits,
        tls,
    ));
    Server { addr, state, stop: Some(tx), task, engine: Some(engine) }
}

impl Server {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
    /// Connections the server holds now.
    pub fn open(&self) -> i64 {
        self.state.metrics.open_connections()
    }
    /// Waits (at most `within`) until the server holds `n` connections; false if it never did.
    pub async fn open_becomes(&self, n: i64, within: Duration) -> bool {
        let t = Instant::now();
        while self.open() != n {
            if t.elapsed() > within {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        true
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

/// Reads until the peer closes; `None` when it is still open after `within`.
pub async fn closed_within<S: AsyncRead + Unpin>(sock: &mut S, within: Duration) -> Option<Vec<u8>> {
    let mut got = Vec::new();
    let read = async {
        let mut buf = [0u8; 4096];
        loop {
            match sock.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(within, read).await.ok().map(|_| got)
}

/// The HTTP/2 connection preface and an empty SETTINGS frame: what an h2c client sends first.
pub const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";

/// A connection to `addr` that has sent `first` and then says nothing.
pub async fn silent(addr: SocketAddr, first: &[u8]) -> TcpStream {
    use tokio::io::AsyncWriteExt;
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(first).await.unwrap();
    s
}

/// An HTTP/2 client connection over `io` (h2c with prior knowledge, or TLS with ALPN `h2`);
/// the task ends when the connection closes.
pub async fn h2<I: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    io: I,
) -> (SendRequest<Full<Bytes>>, tokio::task::JoinHandle<()>) {
    let (send, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(io)).await.unwrap();
    let task = tokio::spawn(async move {
        let _ = conn.await;
    });
    (send, task)
}

/// A request over an HTTP/2 connection: `body` POSTed as JSON, or a GET when `None`.
pub async fn h2_request(
    send: &mut SendRequest<Full<Bytes>>,
    authority: &str,
    path: &str,
    body: Option<&str>,
) -> (u16, String) {
    let req = hyper::Request::builder().uri(format!("http://{authority}{path}"));
    let req = match body {
        Some(b) => req.method("POST").header("content-type", "application/json").body(Full::from(b.to_string())),
        None => req.body(Full::default()),
    };
    send.ready().await.unwrap();
    let resp = send.send_request(req.unwrap()).await.unwrap();
    let status = resp.status().as_u16();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// A TLS connection to the test server's `addr`, trusting `tls/ca.pem`, offering `alpn`.
pub async fn tls_connect(addr: SocketAddr, alpn: &[&[u8]]) -> tokio_rustls::client::TlsStream<TcpStream> {
    use rustls::pki_types::pem::PemObject;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/common/tls");
    let mut roots = rustls::RootCertStore::empty();
    roots.add(rustls::pki_types::CertificateDer::from_pem_file(dir.join("ca.pem")).unwrap()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let tcp = TcpStream::connect(addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    tokio_rustls::TlsConnector::from(Arc::new(cfg)).connect(name, tcp).await.unwrap()
}
