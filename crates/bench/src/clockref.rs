//! `--clock-ref`: this machine's wall-clock offset from a reference clock, as NTP measures
//! it. Each exchange stamps the send (t0) and the answer (t1) on this machine's wall clock
//! around the reference's time T; the offset is T − (t0 + t1)/2, exact to within half the
//! round trip t1 − t0, so of several exchanges the one of the shortest round trip is kept
//! (NTP's clock filter). The reference is an NTP server (`ntp://HOST[:PORT]`, SNTP through
//! `rsntp`) or a `goodput serve` (`http(s)://HOST:PORT`, its [`CLOCK_PATH`]).

use goodput_core::http::{WallClock, CLOCK_PATH};
use goodput_results::clock::ClockOffset;
use std::time::Duration;

/// Exchanges per measurement.
const SAMPLES: usize = 8;
/// The largest offset believed: machines whose clocks differ by more than a day are not
/// synchronised at all (or the reference is not a clock), and no merge can line them up.
pub const MAX_OFFSET_S: f64 = 86_400.0;
/// The largest answer of a `goodput serve` clock read (it is one number).
const MAX_ANSWER: usize = 4096;
/// How long one exchange may take.
const TIMEOUT: Duration = Duration::from_secs(3);

/// Why a reference clock could not be read, or was not believed.
#[derive(Debug, thiserror::Error)]
pub enum ClockRefError {
    #[error("ntp://{host}: SNTP exchange")]
    Ntp { host: String, source: rsntp::SynchronizationError },
    /// The exchange's HTTP client or runtime could not be built.
    #[error("{what}")]
    Setup { what: &'static str, source: Box<dyn std::error::Error + Send + Sync> },
    /// The request failed, or its answer could not be read.
    #[error("{url}")]
    Request { url: String, source: reqwest::Error },
    #[error("{url}: HTTP {status} (is it a `goodput serve`?)")]
    Status { url: String, status: reqwest::StatusCode },
    #[error("{url}: an answer over {MAX_ANSWER} bytes: not a goodput clock (whose answer is one number)")]
    TooLong { url: String },
    #[error("{url}: not a goodput clock")]
    NotAClock { url: String, source: serde_json::Error },
    #[error("{reference}: no exchange answered")]
    NoAnswer { reference: String },
    /// The message carries the reason (not a `#[source]`: a chain printer would repeat it).
    #[error("{reference}: {reason}")]
    Unbelievable { reference: String, reason: Unbelievable },
}

/// An offset beyond [`MAX_OFFSET_S`] (or not a number): the clocks are not synchronised at
/// all, or the reference is not a clock.
#[derive(Clone, Copy, Debug, PartialEq, thiserror::Error)]
#[error(
    "this machine's clock is {offset_s:+.3e} s ({:+.1} years) from the reference's, more than the day goodput believes: fix this machine's clock, or name a reference that is a clock",
    offset_s / (365.25 * 86_400.0)
)]
pub struct Unbelievable {
    pub offset_s: f64,
}

type Result<T, E = ClockRefError> = std::result::Result<T, E>;

/// A reference clock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClockRef {
    /// An NTP server, `host:port`.
    Ntp(String),
    /// A `goodput serve`'s base URL.
    Http(String),
}

impl std::str::FromStr for ClockRef {
    type Err = goodput_core::ValueError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || {
            goodput_core::ValueError::new(s, "expected ntp://HOST[:PORT] or the http(s):// URL of a `goodput serve`")
        };
        if let Some(host) = s.strip_prefix("ntp://") {
            let host = host.trim_end_matches('/');
            if host.is_empty() || host.contains('/') {
                return Err(bad());
            }
            let has_port = host.rsplit_once(':').is_some_and(|(_, p)| p.parse::<u16>().is_ok()) && !host.ends_with(']');
            return Ok(ClockRef::Ntp(if has_port { host.to_string() } else { format!("{host}:123") }));
        }
        if (s.starts_with("http://") || s.starts_with("https://")) && s.len() > "https://".len() {
            return Ok(ClockRef::Http(s.trim_end_matches('/').to_string()));
        }
        Err(bad())
    }
}

impl std::fmt::Display for ClockRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClockRef::Ntp(host) => write!(f, "ntp://{host}"),
            ClockRef::Http(url) => f.write_str(&goodput_client::redact_url(url)),
        }
    }
}

/// One exchange: sent at `t0`, answered at `t1` (this machine's wall clock, ns since the
/// epoch), the reference reading `reference` in between.
pub fn exchange(t0: u64, reference: u64, t1: u64) -> ClockOffset {
    let mid = (t0 as f64 + t1 as f64) / 2.0;
    ClockOffset { offset_s: (reference as f64 - mid) * 1e-9, rtt_s: t1.saturating_sub(t0) as f64 * 1e-9 }
}

/// The exchange of the shortest round trip.
pub fn best(samples: &[ClockOffset]) -> Option<ClockOffset> {
    samples.iter().copied().min_by(|a, b| a.rtt_s.total_cmp(&b.rtt_s))
}

/// Measures this machine's offset from `r`.
pub fn measure(r: &ClockRef) -> Result<ClockOffset> {
    let samples = match r {
        ClockRef::Ntp(host) => ntp(host)?,
        ClockRef::Http(url) => http(url)?,
    };
    let o = best(&samples).ok_or_else(|| ClockRefError::NoAnswer { reference: r.to_string() })?;
    believable(o).map_err(|reason| ClockRefError::Unbelievable { reference: r.to_string(), reason })
}

/// `o` when its offset is within [`MAX_OFFSET_S`] (and a number at all).
pub fn believable(o: ClockOffset) -> Result<ClockOffset, Unbelievable> {
    let within = o.offset_s.is_finite() && o.offset_s.abs() <= MAX_OFFSET_S;
    if !within || !o.rtt_s.is_finite() {
        return Err(Unbelievable { offset_s: o.offset_s });
    }
    Ok(o)
}

fn ntp(host: &str) -> Result<Vec<ClockOffset>> {
    let mut client = rsntp::SntpClient::new();
    client.set_timeout(TIMEOUT);
    // Fewer than over HTTP: public servers rate-limit bursts.
    (0..SAMPLES / 2)
        .map(|_| {
            let r = client.synchronize(host).map_err(|source| ClockRefError::Ntp { host: host.into(), source })?;
            Ok(ClockOffset { offset_s: r.clock_offset().as_secs_f64(), rtt_s: r.round_trip_delay().as_secs_f64() })
        })
        .collect()
}

fn http(base: &str) -> Result<Vec<ClockOffset>> {
    let url = format!("{}{CLOCK_PATH}", goodput_client::redact_url(base));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| ClockRefError::Setup { what: "a runtime", source: Box::new(e) })?;
    rt.block_on(async {
        let client = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .build()
            .map_err(|e| ClockRefError::Setup { what: "the HTTP client", source: Box::new(e) })?;
        let request = |source| ClockRefError::Request { url: url.clone(), source };
        let get = || async {
            let t0 = WallClock::now().unix_ns;
            let mut resp = client.get(format!("{base}{CLOCK_PATH}")).send().await.map_err(request)?;
            if !resp.status().is_success() {
                return Err(ClockRefError::Status { url: url.clone(), status: resp.status() });
            }
            let (bytes, more) = goodput_client::read_capped(&mut resp, MAX_ANSWER).await.map_err(request)?;
            if more {
                return Err(ClockRefError::TooLong { url: url.clone() });
            }
            let body: WallClock = serde_json::from_slice(&bytes)
                .map_err(|source| ClockRefError::NotAClock { url: url.clone(), source })?;
            Ok(exchange(t0, body.unix_ns, WallClock::now().unix_ns))
        };
        // The first exchange opens the connection; its round trip is not the clock's.
        get().await?;
        let mut samples = Vec::with_capacity(SAMPLES);
        for _ in 0..SAMPLES {
            samples.push(get().await?);
        }
        Ok(samples)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_offset_is_the_reference_against_the_midpoint_of_the_round_trip() {
        // Sent at 1000 ns, answered at 1400: the reference read 1500 at the midpoint 1200.
        let o = exchange(1000, 1500, 1400);
        assert!((o.offset_s - 300e-9).abs() < 1e-15 && (o.rtt_s - 400e-9).abs() < 1e-15, "{o:?}");
        let behind = exchange(1_000_000, 0, 1_000_010);
        assert!((behind.offset_s + 1_000_005e-9).abs() < 1e-12, "{behind:?}");
        let samples = [exchange(0, 900, 1000), exchange(0, 60, 100), exchange(0, 500, 2000)];
        assert_eq!(best(&samples), Some(samples[1]), "the shortest round trip");
        assert_eq!(best(&[]), None);
    }

    #[test]
    fn offsets_beyond_a_day_are_not_believed() {
        let ok = ClockOffset { offset_s: -3600.0, rtt_s: 1e-3 };
        assert_eq!(believable(ok), Ok(ok));
        for offset_s in [-57.0 * 365.25 * 86_400.0, 527.0 * 365.25 * 86_400.0, f64::NAN] {
            let e = believable(ClockOffset { offset_s, rtt_s: 1e-3 }).unwrap_err();
            assert!(e.offset_s.is_nan() || e.offset_s == offset_s, "{e:?}");
            assert!(e.to_string().contains("more than the day"), "{e}");
        }
        assert!(believable(ClockOffset { offset_s: 1.0, rtt_s: f64::INFINITY }).is_err());
    }

    #[test]
    fn references_are_parsed_by_scheme_and_refused_by_name() {
        assert_eq!("ntp://pool.ntp.org".parse(), Ok(ClockRef::Ntp("pool.ntp.org:123".into())));
        assert_eq!("ntp://10.0.0.1:1123/".parse(), Ok(ClockRef::Ntp("10.0.0.1:1123".into())));
        assert_eq!("http://h:8000/".parse(), Ok(ClockRef::Http("http://h:8000".into())));
        for bad in ["pool.ntp.org", "ntp://", "ftp://x", "http://", "ntp://a/b"] {
            let e = bad.parse::<ClockRef>().unwrap_err();
            assert!(e.value == bad && e.expected.contains("ntp://HOST"), "{e}");
        }
    }

    #[test]
    fn a_goodput_serve_is_a_reference_and_other_servers_are_named() {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let app = axum::Router::new()
            .route(CLOCK_PATH, axum::routing::get(|| async { axum::Json(WallClock::now()) }))
            .route("/other/goodput/clock", axum::routing::get(|| async { "not a clock" }));
        let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
        let addr = listener.local_addr().unwrap();
        rt.spawn(async move { axum::serve(listener, app).await });
        let o = measure(&ClockRef::Http(format!("http://{addr}"))).unwrap();
        // One machine, one clock: the offset is within the round trip.
        assert!(o.offset_s.abs() <= o.rtt_s.max(1e-3), "{o:?}");
        let e = measure(&ClockRef::Http(format!("http://{addr}/other"))).unwrap_err();
        assert!(matches!(e, ClockRefError::NotAClock { .. }), "{e:?}");
        assert!(e.to_string().contains("not a goodput clock"), "{e}");
        let e = measure(&ClockRef::Http(format!("http://{addr}/none"))).unwrap_err();
        assert!(matches!(e, ClockRefError::Status { status, .. } if status == 404), "{e:?}");
        assert!(e.to_string().contains("HTTP 404"), "{e}");
    }

    /// An answer that never ends is read up to its bound, not for as long as it streams.
    #[test]
    fn an_endless_answer_is_refused_at_its_bound() {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let endless = || async {
            let mib = axum::body::Bytes::from(vec![b'1'; 1 << 20]);
            axum::body::Body::from_stream(futures_util::stream::repeat_with(move || {
                Ok::<_, std::io::Error>(mib.clone())
            }))
        };
        let app = axum::Router::new().route(CLOCK_PATH, axum::routing::get(endless));
        let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
        let addr = listener.local_addr().unwrap();
        rt.spawn(async move { axum::serve(listener, app).await });
        let t = std::time::Instant::now();
        let e = measure(&ClockRef::Http(format!("http://{addr}"))).unwrap_err();
        assert!(matches!(e, ClockRefError::TooLong { .. }), "{e:?}");
        assert!(e.to_string().contains("an answer over 4096 bytes"), "{e}");
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    }
}
