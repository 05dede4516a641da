//! The client over HTTPS on loopback: a TLS server with a certificate from a private CA
//! (rcgen), which records the headers of every request it gets. Trusted through `--ca-cert`
//! or `--insecure` the run goes through with the key and headers on every request; untrusted,
//! or in plain HTTP, it fails with a message that says so.

use axum::http::HeaderMap;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use goodput_client::{Connection, HttpConfig, HttpTarget, Secret};
use goodput_core::{Clock, FailureKind, Outcome, SamplingParams, Target, WorkRequest};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use std::sync::{Arc, Mutex};

type Seen = Arc<Mutex<Vec<HeaderMap>>>;

/// A CA, and a certificate for 127.0.0.1 and localhost signed by it: (CA PEM, leaf DER, key).
fn certificates() -> (String, CertificateDer<'static>, PrivateKeyDer<'static>) {
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().unwrap();
    let ca = ca.self_signed(&ca_key).unwrap();
    let leaf_key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
        .unwrap()
        .signed_by(&leaf_key, &ca, &ca_key)
        .unwrap();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der()));
    (ca.pem(), leaf.der().clone(), key)
}

const STREAM: &str = "data: {\"choices\":[{\"index\":0,\"text\":\"hi\"}]}\n\n\
    data: {\"choices\":[{\"index\":0,\"text\":\" there\"}]}\n\n\
    data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\n\n\
    data: [DONE]\n\n";

/// An HTTPS server on loopback; returns its port, the CA's PEM and the headers it saw.
async fn server() -> (u16, String, Seen) {
    let (ca, leaf, key) = certificates();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![leaf], key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(cfg));
    let seen: Seen = Arc::default();
    let record = |seen: Seen| {
        move |h: HeaderMap| {
            seen.lock().unwrap().push(h);
            async {}
        }
    };
    let (s1, s2, s3) = (seen.clone(), seen.clone(), seen.clone());
    let app = axum::Router::new()
        .route(
            "/v1/completions",
            post(move |h: HeaderMap| {
                let r = record(s1.clone())(h);
                async move {
                    r.await;
                    ([("content-type", "text/event-stream")], STREAM).into_response()
                }
            }),
        )
        .route(
            "/v1/models",
            get(move |h: HeaderMap| {
                let r = record(s2.clone())(h);
                async move {
                    r.await;
                    axum::Json(serde_json::json!({"data": [{"id": "m"}]}))
                }
            }),
        )
        .route(
            "/metrics",
            get(move |h: HeaderMap| {
                let r = record(s3.clone())(h);
                async move {
                    r.await;
                    "vllm:num_requests_running 1\n"
                }
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            let (acceptor, app) = (acceptor.clone(), app.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else { return };
                let svc = TowerToHyperService::new(app);
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), svc)
                    .await;
            });
        }
    });
    (port, ca, seen)
}

fn target(url: String, connection: Connection) -> Result<HttpTarget, goodput_client::ClientError> {
    HttpTarget::new(HttpConfig { connection, ..HttpConfig::new(url, "m") }, Clock::new())
}

async fn one(t: &HttpTarget) -> goodput_core::ClientRecord {
    let req = WorkRequest { session: None, id: 1, prompt: vec![5, 6, 7], params: SamplingParams::greedy_exact(2) };
    t.run(req, t.clock().now()).await
}

fn ca_file(pem: &str) -> (std::path::PathBuf, impl Drop) {
    struct Gone(std::path::PathBuf);
    impl Drop for Gone {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
    let path =
        std::env::temp_dir().join(format!("goodput-ca-{}-{:?}.pem", std::process::id(), std::thread::current().id()));
    std::fs::write(&path, pem).unwrap();
    (path.clone(), Gone(path))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trusted_ca_carries_the_key_and_headers_on_every_request() {
    let (port, ca, seen) = server().await;
    let (path, _gone) = ca_file(&ca);
    let connection = Connection {
        headers: vec![("X-Team".into(), Secret::new("infra")), ("X-Gateway-Token".into(), Secret::new("gw-9"))],
        api_key: Some(Secret::new("sk-live-1")),
        insecure: false,
        ca_cert: Some(path),
        ..Default::default()
    };
    let t = target(format!("https://127.0.0.1:{port}"), connection).unwrap();
    assert_eq!(t.models().await.unwrap(), ["m"]);
    let rec = one(&t).await;
    assert!(matches!(rec.outcome, Outcome::Ok), "{:?}", rec.outcome);
    assert_eq!(rec.output_tokens, 2);
    assert_eq!(t.scrape().await.unwrap().gauges["num_requests_running"], 1.0);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 3, "models, the request, metrics");
    for h in seen.iter() {
        assert_eq!(h["authorization"], "Bearer sk-live-1");
        assert_eq!(h["x-team"], "infra");
        assert_eq!(h["x-gateway-token"], "gw-9");
    }
    assert!(seen[1].contains_key("x-request-id"));
    // The key is in no description of the target.
    assert!(!format!("{} {:?}", t.describe(), t.config().connection).contains("sk-live-1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_certificate_fails_unless_insecure() {
    let (port, _ca, seen) = server().await;
    let url = format!("https://127.0.0.1:{port}");
    let strict = target(url.clone(), Connection::default()).unwrap();
    let rec = one(&strict).await;
    match &rec.outcome {
        Outcome::Error(f) if f.kind == FailureKind::Connect => {
            assert!(f.message.contains(&url) && f.message.contains("certificate"), "{}", f.message);
        }
        other => panic!("an unknown CA must fail the connection: {other:?}"),
    }
    assert!(strict.models().await.is_err());
    assert!(seen.lock().unwrap().is_empty(), "no request reached the server");
    let insecure = target(url, Connection { insecure: true, ..Default::default() }).unwrap();
    assert!(matches!(one(&insecure).await.outcome, Outcome::Ok));
    // Plain HTTP to the TLS port: no answer a client could take for one.
    let plain = target(format!("http://127.0.0.1:{port}"), Connection::default()).unwrap();
    assert!(!matches!(one(&plain).await.outcome, Outcome::Ok));
}

#[test]
fn a_ca_file_without_certificates_is_refused_by_name() {
    let (path, _gone) = ca_file("not a certificate");
    let err = target("https://127.0.0.1:1".into(), Connection { ca_cert: Some(path.clone()), ..Default::default() })
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("--ca-cert") && err.contains(&path.display().to_string()), "{err}");
    let missing = Connection { ca_cert: Some("/nonexistent/ca.pem".into()), ..Default::default() };
    assert!(target("https://x".into(), missing).err().unwrap().to_string().contains("reading --ca-cert"));
}
