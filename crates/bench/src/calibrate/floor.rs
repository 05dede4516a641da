//! `goodput calibrate --floor`: the same streams read as bare bytes — an HTTP/1.1 request
//! written by hand on a kept-alive socket, its response read until the chunked body's last
//! chunk, the `data:` events counted, nothing parsed. What that costs per token is the floor
//! of any client on this runtime and kernel (the reads, epoll, the ACKs a loopback reader
//! sends); the client's cost above it is what its own code (HTTP, SSE, JSON, stamps, records)
//! adds.

use goodput_core::{Clock, Stamp};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The end of a chunked body: the last data chunk's CRLF, then the zero-size chunk.
const LAST_CHUNK: &[u8] = b"\r\n0\r\n\r\n";

/// One floor level's counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counts {
    /// SSE events read (tokens, the usage event and `[DONE]`).
    pub events: usize,
    /// Socket reads that returned bytes.
    pub reads: usize,
}

impl std::ops::Add for Counts {
    type Output = Counts;
    fn add(self, o: Counts) -> Counts {
        Counts { events: self.events + o.events, reads: self.reads + o.reads }
    }
}

/// When each event of one request was read (every event of a read stamped when it returned),
/// by the request's `x-request-id`.
pub type Reads = Vec<(String, Vec<Stamp>)>;

/// `streams` connections to the mock at `addr`, each sending `requests` streamed completions
/// of `tokens` tokens one after the other; stream k starts after `stagger` × k / streams.
pub async fn level(
    addr: SocketAddr,
    streams: usize,
    requests: usize,
    tokens: usize,
    stagger: Duration,
    clock: Clock,
) -> std::io::Result<(Counts, Reads)> {
    let tasks: Vec<_> = (0..streams)
        .map(|k| {
            let delay = stagger.mul_f64(k as f64 / streams.max(1) as f64);
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                stream(addr, k, requests, tokens, clock).await
            })
        })
        .collect();
    let (mut total, mut reads) = (Counts::default(), Vec::new());
    for t in tasks {
        let (counts, stamps) = t.await.map_err(std::io::Error::other)??;
        total = total + counts;
        reads.extend(stamps);
    }
    Ok((total, reads))
}

async fn stream(
    addr: SocketAddr,
    k: usize,
    requests: usize,
    tokens: usize,
    clock: Clock,
) -> std::io::Result<(Counts, Reads)> {
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    s.set_nodelay(true)?;
    let body = format!(r#"{{"model":"mock","prompt":[1,2,3,4],"max_tokens":{tokens},"stream":true}}"#);
    let mut buf = vec![0u8; 16 * 1024];
    let mut counts = Counts::default();
    let mut reads = Vec::with_capacity(requests);
    for r in 0..requests {
        let mut stamps = Vec::with_capacity(tokens + 2);
        let head = format!(
            "POST /v1/completions HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\nx-request-id: floor-{k}-{r}\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        s.write_all(format!("{head}{body}").as_bytes()).await?;
        // The last bytes seen, for a terminator split across reads.
        let mut tail: Vec<u8> = Vec::with_capacity(2 * LAST_CHUNK.len());
        loop {
            let n = s.read(&mut buf).await?;
            let at = clock.now();
            if n == 0 {
                return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the mock closed the stream"));
            }
            counts.reads += 1;
            let e = events(&buf[..n]);
            counts.events += e;
            stamps.extend(std::iter::repeat_n(at, e));
            tail.extend_from_slice(&buf[n.saturating_sub(LAST_CHUNK.len())..n]);
            tail.drain(..tail.len().saturating_sub(LAST_CHUNK.len()));
            if tail == LAST_CHUNK {
                break;
            }
        }
        reads.push((format!("floor-{k}-{r}"), stamps));
    }
    Ok((counts, reads))
}

/// `data:` fields in `bytes` (each chunk of the mock holds one whole event).
fn events(bytes: &[u8]) -> usize {
    bytes.windows(5).filter(|w| *w == b"data:").count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use goodput_core::Clock;
    use goodput_server::mock::Mock;
    use std::sync::Arc;

    #[test]
    fn the_floor_reads_every_event_of_every_kept_alive_stream() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let mock = Arc::new(Mock::new(Clock::new(), Duration::from_millis(5), Duration::from_millis(1), 7));
        let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
        let addr = listener.local_addr().unwrap();
        rt.spawn(goodput_server::mock::serve(listener, mock, std::future::pending()));
        let (c, reads) = rt.block_on(level(addr, 3, 2, 7, Duration::from_millis(2), Clock::new())).unwrap();
        // Each response: 7 tokens, the usage event, [DONE].
        assert_eq!(c.events, 3 * 2 * 9, "{c:?}");
        assert!(c.reads >= 6, "{c:?}");
        assert_eq!(reads.len(), 6);
        assert!(reads.iter().all(|(_, s)| s.len() == 9 && s.windows(2).all(|w| w[0] <= w[1])), "{reads:?}");
    }
}
