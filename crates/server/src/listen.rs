//! The accept loop: every connection under a limit, a deadline for each of its requests, a
//! host check, and a shutdown that cannot be held open.
//!
//! Written over hyper directly rather than `axum::serve`, which offers none of these:
//! - **`max_connections`**: beyond it a connection is answered `503` (OpenAI's error body,
//!   `connection: close`) and closed, so a flood of idle or slow sockets cannot starve the
//!   process of file descriptors while requests wait unanswered;
//! - **`header_timeout`**: a connection with no request in flight for that long is closed,
//!   whatever it is doing: silent from the start (plain, after its TLS handshake, or after an
//!   HTTP/2 preface), idle between requests (HTTP/1 keep-alive or HTTP/2), or sending a request
//!   head that never ends ([`crate::idle`] says why hyper's own timeouts do not cover these).
//!   HTTP/2 connections are also pinged every `header_timeout`, and closed when a ping goes
//!   unanswered that long, so a peer that vanished during a long stream is found;
//! - **hosts**: a request for a host that is not the server's gets 403 ([`crate::hosts`]);
//! - **shutdown**: the listener closes; every connection is asked to close (HTTP/1 after its
//!   response, HTTP/2 by GOAWAY); a connection with no request in flight is dropped after
//!   [`LINGER`] whether or not its peer answers (an idle one, one that sent half a request
//!   head, a TLS handshake); requests in flight get `grace`; then the engine ends what is
//!   left (those streams end with an error event and `[DONE]`), and [`LAST_WORDS`] later every
//!   connection still open is dropped.
//!
//! With a TLS configuration ([`crate::tls`]) each connection is counted, then its handshake
//! must end within `header_timeout`, then it is served as above.

use crate::idle::{self, Activity, Watched};
use crate::openai::ApiError;
use crate::AppState;
use axum::http::{header, HeaderValue};
use axum::response::IntoResponse;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use prometheus_client::metrics::gauge::Gauge;
use std::convert::Infallible;
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
    /// A connection with no request in flight for this long is closed: it must send its first
    /// request (its whole head, for HTTP/1) within it, and the next one within it of the
    /// previous response. A TLS handshake must also end within it.
    pub header_timeout: Duration,
}

impl Default for ListenLimits {
    fn default() -> Self {
        ListenLimits { grace: Duration::from_secs(30), max_connections: 1024, header_timeout: Duration::from_secs(30) }
    }
}

/// How long the streams ended at the grace deadline get to send their error event.
pub const LAST_WORDS: Duration = Duration::from_secs(1);

/// At shutdown (or at the header timeout), how long a connection with no request in flight
/// gets to close by itself after being asked to (an HTTP/2 client's answer to GOAWAY takes a
/// round trip) before it is dropped.
pub const LINGER: Duration = Duration::from_millis(200);

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

/// What every connection task shares.
#[derive(Clone)]
struct Shared {
    builder: auto::Builder<TokioExecutor>,
    app: axum::Router,
    stop: watch::Receiver<bool>,
    limits: ListenLimits,
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
    let engine = state.engine.clone();
    let open = state.metrics.connections();
    let mut app = crate::router(state.clone());
    if let Some(check) = state.policy.allowed_hosts.check_for(listener.local_addr()?) {
        app = app.layer(axum::middleware::from_fn_with_state(Arc::new(check), crate::hosts::guard));
    }
    let served = Served { app, limits, tls, open };
    serve_router(listener, served, shutdown, move || {
        engine.stop(false);
        LAST_WORDS
    })
    .await
}

/// What [`serve_router`] serves, and under which limits.
pub struct Served {
    pub app: axum::Router,
    pub limits: ListenLimits,
    /// HTTPS with this configuration; plain HTTP without.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// The connections open, counted as they are served.
    pub open: Gauge,
}

/// Serves any router under the accept loop's limits and shutdown (goodput serve's, and the
/// metrics port of `goodput run`): until `shutdown` resolves, then as the module describes.
/// When the grace runs out with requests still in flight, `at_grace` is called (goodput serve's
/// ends its engine's streams) and returns how long those requests get to say their last words
/// ([`LAST_WORDS`], or nothing) before the last connections are dropped. Returns once no
/// connection is left, at the latest `grace` plus that after `shutdown`.
pub async fn serve_router(
    listener: tokio::net::TcpListener,
    served: Served,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    at_grace: impl FnOnce() -> Duration,
) -> std::io::Result<()> {
    let Served { app, limits, tls, open } = served;
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    let (stop_tx, stop_rx) = watch::channel(false);
    let shared = Shared { builder: builder(&limits), app, stop: stop_rx, limits };
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
                let over = usize::try_from(open.get()).unwrap_or(0) >= limits.max_connections;
                let slot = (!over).then(|| Slot::take(&open));
                conns.spawn(handle(shared.clone(), tcp, acceptor.clone(), slot));
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    drop(listener);
    let _ = stop_tx.send(true);
    if tokio::time::timeout(limits.grace, drain(&mut conns)).await.is_err() {
        let last_words = at_grace();
        let _ = tokio::time::timeout(last_words, drain(&mut conns)).await;
        conns.abort_all();
    }
    Ok(())
}

/// The connection builder: HTTP/1 with hyper's header-read timeout (a second guard for heads
/// that trickle in), HTTP/2 with keep-alive pings.
fn builder(limits: &ListenLimits) -> auto::Builder<TokioExecutor> {
    let mut b = auto::Builder::new(TokioExecutor::new());
    b.http1().timer(TokioTimer::new()).header_read_timeout(limits.header_timeout);
    b.http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(limits.header_timeout)
        .keep_alive_timeout(limits.header_timeout);
    b
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
struct Slot(Gauge);

impl Slot {
    fn take(open: &Gauge) -> Self {
        open.inc();
        Slot(open.clone())
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// Resolves when shutdown begins (or the accept loop is gone).
async fn stopping(mut stop: watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// A connection from accept on: its TLS handshake (within the header timeout, and given up
/// at shutdown), then served under its slot, or refused when over the limit (no slot).
async fn handle(
    shared: Shared,
    tcp: tokio::net::TcpStream,
    acceptor: Option<tokio_rustls::TlsAcceptor>,
    slot: Option<Slot>,
) {
    let Some(acceptor) = acceptor else { return served(shared, tcp, slot).await };
    let handshake = tokio::time::timeout(shared.limits.header_timeout, acceptor.accept(tcp));
    tokio::select! {
        tls = handshake => {
            if let Ok(Ok(tls)) = tls {
                served(shared, tls, slot).await;
            }
        }
        _ = stopping(shared.stop.clone()) => {}
    }
}

async fn served<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(shared: Shared, io: S, slot: Option<Slot>) {
    match slot {
        Some(slot) => connection(shared, io, slot).await,
        None => refuse(shared, io).await,
    }
}

/// Serves one connection until it closes, has been quiet for the header timeout, or shutdown
/// begins; then asks it to close, and drops it once it has been quiet for [`LINGER`].
async fn connection<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(shared: Shared, io: S, _slot: Slot) {
    let activity = Activity::new();
    let svc = idle::service(shared.app, activity.clone());
    let io = TokioIo::new(Watched::new(io, activity.clone()));
    let conn = shared.builder.serve_connection_with_upgrades(io, svc);
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => return,
        _ = stopping(shared.stop) => {}
        _ = activity.quiet_for(shared.limits.header_timeout) => {}
    }
    conn.as_mut().graceful_shutdown();
    tokio::select! {
        _ = conn.as_mut() => {}
        _ = activity.quiet_for(LINGER) => {}
    }
}

/// An over-limit connection gets at most this long to send its request head.
const REFUSE_WITHIN: Duration = Duration::from_secs(1);

/// Answers the request of an over-limit connection with 503 and closes it; a connection that
/// sends no whole head within [`REFUSE_WITHIN`] (or the header timeout, if shorter), or is
/// still there at shutdown, is closed without an answer, so refused sockets do not hold file
/// descriptors for long.
async fn refuse<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(shared: Shared, io: S) {
    let max = shared.limits.max_connections;
    let svc = hyper::service::service_fn(move |_req| async move {
        let mut r = ApiError::unavailable(format!(
            "the server has {max} connections open (its --max-connections); retry later"
        ))
        .into_response();
        r.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
        Ok::<_, Infallible>(r)
    });
    let within = shared.limits.header_timeout.min(REFUSE_WITHIN);
    tokio::select! {
        _ = tokio::time::timeout(within, shared.builder.serve_connection(TokioIo::new(io), svc)) => {}
        _ = stopping(shared.stop) => {}
    }
}
