//! What real deployments need, end to end through the binary: `goodput serve` over HTTPS with
//! an API key (a certificate from a private CA made here with rcgen), driven by `goodput run`
//! with the CA, the key and a header; refused without the key or the CA, with messages that
//! say why; the key written nowhere.

use crate::common::{goodput, goodput_env, summary_of, temp, Served};
use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
use std::path::{Path, PathBuf};

/// Writes ca.pem, cert.pem and key.pem (a certificate for 127.0.0.1 signed by the CA) in `dir`.
fn certificates(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    std::fs::create_dir_all(dir).unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().unwrap();
    let ca = ca.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap().signed_by(&key, &ca, &ca_key).unwrap();
    let files = (dir.join("ca.pem"), dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&files.0, ca.pem()).unwrap();
    std::fs::write(&files.1, leaf.pem()).unwrap();
    std::fs::write(&files.2, key.serialize_pem()).unwrap();
    files
}

/// `goodput serve ARGS`; returns it and its `https://` URL.
fn serve(args: &[&str]) -> (Served, String) {
    let (s, addr) = crate::common::serve(args);
    (s, format!("https://{addr}"))
}

#[test]
fn https_with_a_key_a_header_and_a_private_ca() {
    let dir = temp("tls");
    let (ca, cert, key) = certificates(&dir.join("pki"));
    let (_server, url) = serve(&[
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
        "--api-key",
        "sk-e2e-secret",
        "--served-model-name",
        "my-tiny",
    ]);
    let ca = ca.to_str().unwrap();
    let out = dir.join("run");
    let base = ["run", "--target", &url, "--concurrency", "2", "--requests", "4", "--warmup", "1", "--refine", "0"];
    // The CA, the key, a header; the model name comes from the server's /v1/models.
    let args = [&base[..], &["--ca-cert", ca, "--api-key", "sk-e2e-secret", "-H", "X-Team: infra"]].concat();
    let (ok, _, err) = goodput(&[&args[..], &["--out", out.to_str().unwrap()]].concat());
    assert!(ok, "{err}");
    assert!(err.contains("serves `my-tiny`"), "{err}");
    let s = summary_of(&out);
    let level = &s["levels"][0];
    assert_eq!(
        (level["summary"]["errors"].as_u64(), level["summary"]["completed"].as_u64()),
        (Some(0), Some(4)),
        "{level}"
    );
    let command = s["command"].as_array().unwrap().iter().map(|c| c.as_str().unwrap()).collect::<Vec<_>>().join(" ");
    assert!(command.contains("--api-key <redacted>"), "{command}");
    for f in std::fs::read_dir(&out).unwrap() {
        let text = std::fs::read(f.unwrap().path()).unwrap();
        assert!(!String::from_utf8_lossy(&text).contains("sk-e2e-secret"), "the key was written");
    }
    // The key from OPENAI_API_KEY, the certificate not checked.
    let (ok, _, err) =
        goodput_env(&[&base[..], &["--insecure", "-q"]].concat(), &[("OPENAI_API_KEY", "sk-e2e-secret")]);
    assert!(ok, "{err}");
    // No key: the server's 401, named.
    let (ok, _, err) = goodput_env(&[&base[..], &["--ca-cert", ca]].concat(), &[("OPENAI_API_KEY", "")]);
    assert!(!ok && err.contains("401"), "{err}");
    // No CA: the certificate is not trusted, and the message says so.
    let (ok, _, err) = goodput(&[&base[..], &["--api-key", "sk-e2e-secret"]].concat());
    assert!(!ok && err.contains("certificate"), "{err}");
    assert!(!err.contains("sk-e2e-secret"));
}

#[test]
fn connection_flags_are_refused_where_there_is_no_http() {
    let (ok, _, err) = goodput(&["run", "--insecure", "--extra-body", "{}", "-q"]);
    assert!(!ok && err.contains("--insecure, --extra-body apply to HTTP targets"), "{err}");
    let (ok, _, err) = goodput(&["run", "--target", "http://127.0.0.1:1", "--extra-body", r#"{"stream":false}"#]);
    assert!(!ok && err.contains("may not set `stream`"), "{err}");
    let (ok, _, err) = goodput(&["run", "--target", "http://127.0.0.1:1", "-H", "no colon"]);
    assert!(!ok && err.contains("Name: value"), "{err}");
    let (ok, _, err) = goodput(&["serve", "--tls-cert", "/nonexistent.pem", "--tls-key", "/nonexistent.key"]);
    assert!(!ok && err.contains("--tls-cert /nonexistent.pem"), "{err}");
}

/// `goodput serve` over plain HTTP on a free port.
fn serve_plain() -> (Served, String) {
    let (s, url) = serve(&[]);
    (s, url.replace("https://", "http://"))
}

#[test]
fn a_repeated_seed_is_served_from_the_cache_and_said_so_and_a_drawn_one_is_not() {
    let dir = temp("contamination");
    let (_server, url) = serve_plain();
    let run = |name: &str, seed: Option<&str>| {
        let out = dir.join(name);
        let mut args = vec!["run", "--target", &url, "--concurrency", "2", "--requests", "6", "--warmup", "0"];
        args.extend(["--refine", "0", "--out", out.to_str().unwrap()]);
        if let Some(s) = seed {
            args.extend(["--seed", s]);
        }
        let (ok, _, err) = goodput(&args);
        assert!(ok, "{err}");
        (summary_of(&out), err)
    };
    let hit_rate = |s: &serde_json::Value| {
        let h = &s["levels"][0]["prefix_cache"];
        assert_eq!(h["source"], "engine", "{h}");
        h["cached_tokens"].as_f64().unwrap() / h["prompt_tokens"].as_f64().unwrap()
    };
    let (first, err) = run("first", Some("7"));
    assert!(hit_rate(&first) < 0.1 && !err.contains("came from the prefix cache"), "{err}");
    // The same prompts again: most of every prompt is in the server's cache.
    let (again, err) = run("again", Some("7"));
    assert!(hit_rate(&again) > 0.5, "{}", again["levels"][0]["prefix_cache"]);
    assert!(err.contains("came from the prefix cache") && err.contains("--seed"), "{err}");
    // No --seed: one is drawn, stored, and the prompts are new to the server.
    let (fresh, err) = run("fresh", None);
    assert!(hit_rate(&fresh) < 0.1 && !err.contains("came from the prefix cache"), "{err}");
    assert_eq!(fresh["seed_drawn"], true);
    assert_ne!(fresh["seed"], 7);
}
