//! The accept loop: every connection under a limit, a deadline for its request head, and a
//! shutdown that cannot be held open.
//!
//! Written over hyper directly rather than `axum::serve`, which offers none of the three:
//! - **`max_connections`**: beyond it a connection is answered `503` (OpenAI's error body,
//!   `connection: close`) and closed, so a flood of idle or slow sockets cannot starve the
//!   process of file descriptors while requests wait unanswered;
//! - **`header_timeout`**: a connection that has not sent a whole request head within it is
//!   closed (hyper's header-read timeout; it also bounds an idle keep-alive connection);
//! - **shutdown**: the listener closes, idle connections close at once, requests in flight get
//!   `grace`; then the engine ends what is left (those streams end with an error event and
//!   `[DONE]`), a second later every connection still open is dropped — including one that
//!   sent half a request head and nothing more.
//!
//! With a TLS configuration ([`crate::tls`]) each connection is counted, then its handshake
//! must end within `header_timeout`, then it is served as above.

use crate::openai::ApiError;
use crate::AppState;
use axum::http::{header, HeaderValue};
use axum::response::IntoResponse;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::watch;
use tokio::task::JoinSet;

/// Limits of the accept loop.
#[derive(Clone, Copy, Debug)]
pub struct ListenLimits {
    /// After shutdown begins, requests in flight get this long to finish.
    pub grace: Duration,
    /// Connections served at once; more are answered 503 and closed.
    pub max_connections: usize,
    /// A connection must send a whole request head within this (and may stay idle this long
    /// between requests).
    pub header_timeout: Duration,
}

impl Default for ListenLimits {
    fn default() -> Self {
        ListenLimits { grace: Duration::from_secs(30), max_connections: 1024, header_timeout: Duration::from_secs(30) }
    }
}

/// How long the streams ended at the grace deadline get to send their error event.
const LAST_WORDS: Duration = Duration::from_secs(1);

/// Serves `state` on `listener` until `shutdown` resolves, then shuts down as the module
/// describes. Returns once no connection is left.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: Arc<AppState>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    limits: ListenLimits,
) -> std::io::Result<()> {
    serve_tls(listener, state, shutdown, limits, None).await
}

/// [`serve`], over TLS when `tls` is given (HTTPS only: a plain-HTTP request fails the
/// handshake and the connection closes).
pub async fn serve_tls(
    listener: tokio::net::TcpListener,
    state: Arc<AppState>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    limits: ListenLimits,
    tls: Option<Arc<rustls::ServerConfig>>,
) -> std::io::Result<()> {
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    let engine = state.engine.clone();
    let app = crate::router(state);
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(limits.header_timeout);
    let open = Arc::new(AtomicUsize::new(0));
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut conns = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => {
                let tcp = match accepted {
                    Ok((tcp, _)) => tcp,
                    Err(e) => {
                        accept_failed(e).await;
                        continue;
                    }
                };
                // Small SSE events go out as they are written (no Nagle delay).
                let _ = tcp.set_nodelay(true);
                let over = open.load(Ordering::Relaxed) >= limits.max_connections;
                let slot = (!over).then(|| Slot::take(&open));
                let (b, app, stop) = (builder.clone(), app.clone(), stop_rx.clone());
                match &acceptor {
                    None => conns.spawn(accepted_conn(b, tcp, app, stop, slot, limits)),
                    Some(a) => {
                        let handshake = tokio::time::timeout(limits.header_timeout, a.accept(tcp));
                        conns.spawn(async move {
                            if let Ok(Ok(tls)) = handshake.await {
                                accepted_conn(b, tls, app, stop, slot, limits).await;
                            }
                        })
                    }
                };
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    drop(listener);
    let _ = stop_tx.send(true);
    if tokio::time::timeout(limits.grace, drain(&mut conns)).await.is_err() {
        engine.stop(false);
        let _ = tokio::time::timeout(LAST_WORDS, drain(&mut conns)).await;
        conns.abort_all();
    }
    Ok(())
}

async fn drain(conns: &mut JoinSet<()>) {
    while conns.join_next().await.is_some() {}
}

/// An accept error: out of file descriptors (or another resource) clears as connections
/// close, so wait a little rather than spin; anything else is one failed connection.
async fn accept_failed(e: std::io::Error) {
    if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// One counted connection; the count drops with it.
struct Slot(Arc<AtomicUsize>);

impl Slot {
    fn take(open: &Arc<AtomicUsize>) -> Self {
        open.fetch_add(1, Ordering::Relaxed);
        Slot(open.clone())
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Serves a connection under its slot, or refuses it when over the limit (no slot).
async fn accepted_conn<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    builder: auto::Builder<TokioExecutor>,
    io: S,
    app: axum::Router,
    stop: watch::Receiver<bool>,
    slot: Option<Slot>,
    limits: ListenLimits,
) {
    match slot {
        Some(slot) => connection(builder, io, app, stop, slot).await,
        None => refuse(builder, io, limits).await,
    }
}

async fn connection<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    builder: auto::Builder<TokioExecutor>,
    tcp: S,
    app: axum::Router,
    mut stop: watch::Receiver<bool>,
    _slot: Slot,
) {
    let conn = builder.serve_connection_with_upgrades(TokioIo::new(tcp), TowerToHyperService::new(app));
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => return,
        _ = stop.wait_for(|stopping| *stopping) => conn.as_mut().graceful_shutdown(),
    }
    let _ = conn.await;
}

/// An over-limit connection gets at most this long to send its request head.
const REFUSE_WITHIN: Duration = Duration::from_secs(1);

/// Answers the request of an over-limit connection with 503 and closes it; a connection that
/// sends no whole head within [`REFUSE_WITHIN`] (or the header timeout, if shorter) is closed
/// without an answer, so refused sockets do not hold file descriptors for long.
async fn refuse<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    builder: auto::Builder<TokioExecutor>,
    tcp: S,
    limits: ListenLimits,
) {
    let max = limits.max_connections;
    let svc = hyper::service::service_fn(move |_req| async move {
        let mut r = ApiError::unavailable(format!(
            "the server has {max} connections open (its --max-connections); retry later"
        ))
        .into_response();
        r.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
        Ok::<_, Infallible>(r)
    });
    let within = limits.header_timeout.min(REFUSE_WITHIN);
    let _ = tokio::time::timeout(within, builder.serve_connection(TokioIo::new(tcp), svc)).await;
}
