//! When a connection is quiet: no request in flight on it and no write waiting on its socket.
//!
//! hyper has no idle timeout that covers every stage of a connection. Its HTTP/1 header-read
//! timeout is armed by the HTTP/1 state machine, which hyper-util's auto builder creates only
//! after it has sniffed the first bytes for the HTTP/2 preface: a socket that sends nothing
//! (plain, or after its TLS handshake) waits in that sniffing forever. HTTP/2 has no idle
//! timeout at all; its keep-alive pings find peers that are gone, not peers that are silent,
//! and its graceful shutdown waits for the peer to acknowledge a PING, which a silent peer
//! never does.
//!
//! So the accept loop watches each connection itself (the idea of nginx's
//! `keepalive_timeout`/`lingering_close`): [`Activity`] counts the requests in flight (from the
//! service call until the response body is dropped, see [`service`]) and whether the socket
//! refused a write (see [`Watched`]); a connection quiet for `header_timeout` is closed, and at
//! shutdown one quiet for a short linger is dropped. A response whose body is done but whose
//! bytes the client has not yet taken is not quiet, so it is never cut off.

use axum::body::{Body, Bytes};
use hyper::body::{Body as HttpBody, Frame, Incoming, SizeHint};
use hyper::service::Service;
use hyper_util::service::TowerToHyperService;
use std::convert::Infallible;
use std::future::Future;
use std::io::IoSlice;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::watch;

#[derive(Clone, Copy, Debug, Default)]
struct State {
    in_flight: usize,
    write_blocked: bool,
    /// Requests started and writes blocked so far: a wait that sees this change was not
    /// quiet, even when a request came and went between two looks (a watch keeps only the
    /// latest value).
    events: u64,
}

impl State {
    fn quiet(&self) -> bool {
        self.in_flight == 0 && !self.write_blocked
    }
}

/// One connection's activity, shared by its service, its socket and its task.
#[derive(Clone)]
pub(crate) struct Activity(Arc<watch::Sender<State>>);

impl Activity {
    pub(crate) fn new() -> Self {
        Activity(Arc::new(watch::Sender::new(State::default())))
    }

    /// Counts a request in flight until the returned guard is dropped.
    fn enter(&self) -> InFlight {
        self.0.send_modify(|s| {
            s.in_flight += 1;
            s.events += 1;
        });
        InFlight(self.clone())
    }

    fn set_write_blocked(&self, blocked: bool) {
        self.0.send_if_modified(|s| {
            let changed = std::mem::replace(&mut s.write_blocked, blocked) != blocked;
            s.events += u64::from(changed && blocked);
            changed
        });
    }

    /// Resolves once the connection has been quiet for `d` without a break; every request
    /// (or blocked write) starts the wait again after it ends.
    pub(crate) async fn quiet_for(&self, d: Duration) {
        let mut rx = self.0.subscribe();
        loop {
            // `self` holds the sender, so neither wait can fail.
            let since = rx.wait_for(State::quiet).await.map(|s| s.events).unwrap_or_default();
            tokio::select! {
                _ = tokio::time::sleep(d) => return,
                _ = rx.wait_for(|s| !s.quiet() || s.events != since) => {}
            }
        }
    }
}

/// A request in flight on its connection.
struct InFlight(Activity);

impl Drop for InFlight {
    fn drop(&mut self) {
        (self.0).0.send_modify(|s| s.in_flight -= 1);
    }
}

/// `app` as one connection's hyper service: each request is in flight from the call until
/// hyper drops its response body (it has been written whole, or the stream was reset).
pub(crate) fn service(
    app: axum::Router,
    activity: Activity,
) -> impl Service<
    hyper::Request<Incoming>,
    Response = hyper::Response<Guarded>,
    Error = Infallible,
    Future = impl Future<Output = Result<hyper::Response<Guarded>, Infallible>> + Send,
> + Clone {
    let inner = TowerToHyperService::new(app);
    hyper::service::service_fn(move |req| {
        let in_flight = activity.enter();
        let call = inner.call(req);
        async move {
            let response = call.await?;
            Ok(response.map(|body| Guarded { body, _in_flight: in_flight }))
        }
    })
}

/// A response body that keeps its request counted while hyper holds it.
pub(crate) struct Guarded {
    body: Body,
    _in_flight: InFlight,
}

impl HttpBody for Guarded {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A socket that reports to its [`Activity`] whether its last write or flush was refused
/// (the client is not reading): bytes still owed to a client keep the connection open.
pub(crate) struct Watched<S> {
    io: S,
    activity: Activity,
    blocked: bool,
}

impl<S> Watched<S> {
    pub(crate) fn new(io: S, activity: Activity) -> Self {
        Watched { io, activity, blocked: false }
    }

    fn note<T>(&mut self, r: Poll<T>) -> Poll<T> {
        let blocked = r.is_pending();
        if blocked != self.blocked {
            self.blocked = blocked;
            self.activity.set_write_blocked(blocked);
        }
        r
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write(cx, buf);
        self.note(r)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.note(r)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let r = Pin::new(&mut self.io).poll_flush(cx);
        self.note(r)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[tokio::test]
    async fn quiet_means_no_request_in_flight_and_no_blocked_write_for_the_whole_wait() {
        let ms = Duration::from_millis;
        let a = Activity::new();
        let t = Instant::now();
        a.quiet_for(ms(200)).await;
        assert!((ms(200)..ms(350)).contains(&t.elapsed()), "{:?}", t.elapsed());
        // A request from 100 to 300 ms, then a write blocked until 400 ms: quiet from 400 ms,
        // so a wait of 200 ms ends at 600 ms.
        let b = a.clone();
        let t = Instant::now();
        let busy = tokio::spawn(async move {
            tokio::time::sleep(ms(100)).await;
            let g = b.enter();
            tokio::time::sleep(ms(200)).await;
            drop(g);
            b.set_write_blocked(true);
            tokio::time::sleep(ms(100)).await;
            b.set_write_blocked(false);
        });
        a.quiet_for(ms(200)).await;
        assert!((ms(600)..ms(800)).contains(&t.elapsed()), "{:?}", t.elapsed());
        busy.await.unwrap();
        // Requests that come and go at once, every 100 ms until 500 ms: quiet from 500 ms.
        let b = a.clone();
        let t = Instant::now();
        let blips = tokio::spawn(async move {
            for _ in 0..5 {
                tokio::time::sleep(ms(100)).await;
                drop(b.enter());
            }
        });
        a.quiet_for(ms(200)).await;
        assert!((ms(700)..ms(900)).contains(&t.elapsed()), "{:?}", t.elapsed());
        blips.await.unwrap();
    }
}
