//! The client against hostile servers on loopback: one that accepts and never answers (every
//! side request fails at the deadline, naming its URL), one that redirects elsewhere (nothing
//! is followed, no header reaches the other server), and a URL with `user:password@` (sent as
//! Basic auth, never shown). Bounded: a few connections each, deadlines of a fraction of a second.

mod common;

use goodput_client::{ClientError, Connection, HttpConfig, HttpTarget, Secret};
use goodput_core::{Clock, FailureKind, Outcome, SamplingParams, Target, WorkRequest};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

/// What a test server does with each request it reads.
#[derive(Clone, Copy)]
enum Answer {
    /// Holds the connection open and says nothing.
    Never,
    /// `307` to this port on loopback, same path.
    RedirectTo(u16),
}

/// A server on loopback; returns its port and the heads of the requests it read.
async fn server(answer: Answer) -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let log = seen.clone();
    tokio::spawn(async move {
        while let Ok((conn, _)) = listener.accept().await {
            tokio::spawn(serve(conn, answer, log.clone()));
        }
    });
    (port, seen)
}

async fn serve(mut conn: TcpStream, answer: Answer, seen: Arc<Mutex<Vec<String>>>) {
    let mut buf = Vec::new();
    loop {
        let Some(head) = common::read_request(&mut conn, &mut buf).await else { return };
        seen.lock().unwrap().push(head.clone());
        match answer {
            Answer::Never => {
                tokio::time::sleep(Duration::from_secs(30)).await;
                return;
            }
            Answer::RedirectTo(port) => {
                let path = head.split(' ').nth(1).unwrap_or("/");
                let reply = format!(
                    "HTTP/1.1 307 Temporary Redirect\r\nlocation: http://127.0.0.1:{port}{path}\r\ncontent-length: 0\r\n\r\n"
                );
                if conn.write_all(reply.as_bytes()).await.is_err() {
                    return;
                }
            }
        }
    }
}

fn target(url: String, connection: Connection, timeout: Duration) -> HttpTarget {
    HttpTarget::new(HttpConfig { connection, timeout, ..HttpConfig::new(url, "m") }, Clock::new()).unwrap()
}

async fn one(t: &HttpTarget) -> goodput_core::ClientRecord {
    let req = WorkRequest { session: None, id: 1, prompt: vec![5, 6, 7], params: SamplingParams::greedy_exact(2) };
    t.run(req, t.clock().now()).await
}

#[tokio::test]
async fn side_requests_to_a_server_that_never_answers_fail_at_the_deadline_naming_url_and_timeout() {
    let (port, seen) = server(Answer::Never).await;
    let t = target(format!("http://127.0.0.1:{port}"), Connection::default(), Duration::from_millis(300));
    let started = Instant::now();
    let bounded = Duration::from_secs(5);
    let err = tokio::time::timeout(bounded, t.models()).await.expect("still waiting past the deadline").unwrap_err();
    assert!(matches!(err, ClientError::Timeout { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        format!("GET http://127.0.0.1:{port}/v1/models: no complete answer within 300ms (--timeout)")
    );
    let err = tokio::time::timeout(bounded, t.scrape()).await.expect("still waiting").unwrap_err().to_string();
    assert!(err.contains(&format!("http://127.0.0.1:{port}/metrics")) && err.contains("300ms"), "{err}");
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(600) && took < Duration::from_secs(5), "{took:?}");
    assert_eq!(seen.lock().unwrap().len(), 2, "both requests reached the server");
}

#[tokio::test]
async fn a_redirect_to_another_server_is_not_followed_and_no_header_goes_there() {
    let (elsewhere, seen_elsewhere) = server(Answer::Never).await;
    let (port, seen) = server(Answer::RedirectTo(elsewhere)).await;
    let connection = Connection {
        headers: vec![("X-Api-Key".into(), Secret::new("hk-S3CRET")), ("api-key".into(), Secret::new("hk2-S3CRET"))],
        ..Default::default()
    };
    let t = target(format!("http://u5er:pw-S3CRET@127.0.0.1:{port}"), connection, Duration::from_secs(5));
    let bounded = Duration::from_secs(5);
    let err = tokio::time::timeout(bounded, t.models()).await.expect("the redirect was followed").unwrap_err();
    let err = err.to_string();
    let to = format!("server answered 307 redirect to http://127.0.0.1:{elsewhere}/v1/models");
    assert!(err.contains(&to) && err.contains("goodput does not follow redirects"), "{err}");
    let rec = tokio::time::timeout(bounded, one(&t)).await.expect("the redirect was followed");
    let Outcome::Refused(f) = &rec.outcome else { panic!("{:?}", rec.outcome) };
    assert_eq!(f.kind, FailureKind::Http(307));
    assert!(f.message.contains(&format!("redirect to http://127.0.0.1:{elsewhere}/v1/completions")), "{}", f.message);
    for text in [err, f.message.clone(), t.describe(), t.config().base_url.clone()] {
        assert!(!text.contains("S3CRET") && !text.contains("u5er"), "{text}");
    }
    assert!(seen_elsewhere.lock().unwrap().is_empty(), "the other server was reached");
    // The URL's credentials went, as Basic auth, to the server named, with the headers.
    let heads = seen.lock().unwrap().clone();
    assert_eq!(heads.len(), 2);
    for h in &heads {
        let h = h.to_ascii_lowercase();
        assert!(h.contains("authorization: basic dtvlcjpwdy1tm0nsrvq="), "{h}");
        assert!(h.contains("x-api-key: hk-s3cret"), "{h}");
    }
}

#[tokio::test]
async fn a_urls_password_is_in_no_message_when_the_server_is_not_there() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("http://adm1n:pw-S3CRET@127.0.0.1:{closed}/");
    let t = target(url, Connection::default(), Duration::from_secs(5));
    let rec = one(&t).await;
    let Outcome::Error(f) = &rec.outcome else { panic!("{:?}", rec.outcome) };
    assert!(f.message.contains(&format!("POST http://127.0.0.1:{closed}/v1/completions")), "{}", f.message);
    let side = t.models().await.unwrap_err().to_string();
    for text in [&f.message, &side, &t.describe()] {
        assert!(!text.contains("S3CRET") && !text.contains("adm1n"), "{text}");
    }
    // Credentials in the URL and a key are one too many.
    let both = Connection { api_key: Some(Secret::new("k")), ..Default::default() };
    let cfg = HttpConfig { connection: both, ..HttpConfig::new("http://u:p@127.0.0.1:1", "m") };
    let err = HttpTarget::new(cfg, Clock::new()).err().unwrap().to_string();
    assert!(err.contains("keep one") && !err.contains("p@"), "{err}");
}
