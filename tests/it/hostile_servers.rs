//! `goodput run` against hostile servers on loopback: one that accepts and never answers (the
//! run fails at `--timeout`, naming the URL), one that hangs its `/metrics` (an interrupt ends
//! the run at its deadline, a second one at once), and one that redirects the measured
//! requests to another port (nothing follows them, and no credential given on the command
//! line reaches a file, a message or the other server). Each test is a few requests and is
//! bounded in time; the servers are plain threads that answer by hand.

use crate::common::{goodput_code, read_request, signal, spawn, summary_of, temp, wait};
use std::io::{BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;

use std::sync::mpsc;
use std::time::{Duration, Instant};

/// What a test server answers.
#[derive(Clone, Copy)]
enum Answer {
    /// Nothing, to any request: the connection is held open.
    Never,
    /// `GET /v1/models` lists `tiny`; every other request is held without an answer.
    ModelsOnly,
    /// `GET /v1/models` lists `tiny`, `GET /metrics` is a 404, and every `POST` is a 307 to
    /// this port on loopback.
    RedirectPosts(u16),
}

/// A server on loopback answering `answer`; returns its address and the request lines it
/// read, as they come.
fn server(answer: Answer) -> (String, mpsc::Receiver<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let tx = tx.clone();
            std::thread::spawn(move || serve(conn, answer, tx));
        }
    });
    (addr, rx)
}

fn serve(conn: TcpStream, answer: Answer, seen: mpsc::Sender<String>) {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut writer = conn;
    loop {
        let Some(head) = read_request(&mut reader) else { return };
        let _ = seen.send(head.clone());
        let reply = |w: &mut TcpStream, status: &str, extra: &str, body: &str| {
            let _ = write!(w, "HTTP/1.1 {status}\r\n{extra}content-length: {}\r\n\r\n{body}", body.len());
        };
        let models = r#"{"object":"list","data":[{"id":"tiny","object":"model"}]}"#;
        match answer {
            Answer::ModelsOnly | Answer::RedirectPosts(_) if head.starts_with("GET /v1/models") => {
                reply(&mut writer, "200 OK", "content-type: application/json\r\n", models)
            }
            Answer::RedirectPosts(_) if head.starts_with("GET") => reply(&mut writer, "404 Not Found", "", "no"),
            Answer::RedirectPosts(port) => {
                let path = head.split(' ').nth(1).unwrap_or("/");
                reply(
                    &mut writer,
                    "307 Temporary Redirect",
                    &format!("location: http://127.0.0.1:{port}{path}\r\n"),
                    "",
                );
            }
            Answer::Never | Answer::ModelsOnly => {
                // Held, unanswered, for longer than any test here runs.
                std::thread::sleep(Duration::from_secs(90));
                return;
            }
        }
    }
}

/// Waits until the server has read a request whose line starts with `prefix`.
fn wait_for_request(seen: &mpsc::Receiver<String>, prefix: &str, limit: Duration) {
    let t = Instant::now();
    loop {
        let left = limit.checked_sub(t.elapsed()).unwrap_or_else(|| panic!("no `{prefix}` after {limit:?}"));
        match seen.recv_timeout(left) {
            Ok(head) if head.starts_with(prefix) => return,
            Ok(_) => {}
            Err(e) => panic!("no `{prefix}` after {limit:?}: {e}"),
        }
    }
}

#[test]
fn a_server_that_never_answers_fails_the_run_at_its_timeout_naming_the_url() {
    let (addr, _seen) = server(Answer::Never);
    let out = temp("never-answers");
    let started = Instant::now();
    let url = format!("http://{addr}");
    let run = spawn(&["run", "--target", &url, "--timeout", "2s", "--requests", "2", "--out", out.to_str().unwrap()]);
    let (code, err) = wait(run, Duration::from_secs(15));
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("asking the server for its models"), "{err}");
    assert!(err.contains(&format!("GET {url}/v1/models: no complete answer within 2s (--timeout)")), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(started.elapsed() >= Duration::from_secs(2), "it failed before its timeout: {err}");
}

#[test]
fn an_interrupted_run_stuck_on_a_scrape_quits_at_its_deadline_and_a_second_interrupt_quits_at_once() {
    let (addr, seen) = server(Answer::ModelsOnly);
    let url = format!("http://{addr}");
    let (one, two) = (temp("stuck-once"), temp("stuck-twice"));
    // The default --timeout (120 s) leaves the first /metrics scrape hanging well past the test.
    let args = |out: &Path| {
        let out = out.to_str().unwrap().to_string();
        ["run", "--target", &url, "--requests", "2", "--warmup", "0", "--out", &out].map(String::from)
    };
    let a = args(&one);
    let run = spawn(&a.each_ref().map(String::as_str));
    wait_for_request(&seen, "GET /metrics", Duration::from_secs(30));
    let interrupted = Instant::now();
    signal(&run, "-INT");
    let (code, err) = wait(run, Duration::from_secs(30));
    let took = interrupted.elapsed();
    assert_eq!(code, Some(130), "{err}");
    assert!(err.contains("still not done 15s after the interrupt") && !err.contains("panicked"), "{err}");
    assert!((Duration::from_secs(5)..Duration::from_secs(25)).contains(&took), "it quit {took:?} after the interrupt");
    assert!(one.join("records.jsonl").exists(), "the run's files are kept");

    while seen.try_recv().is_ok() {}
    let b = args(&two);
    let run = spawn(&b.each_ref().map(String::as_str));
    wait_for_request(&seen, "GET /metrics", Duration::from_secs(30));
    signal(&run, "-INT");
    std::thread::sleep(Duration::from_millis(500));
    let again = Instant::now();
    signal(&run, "-INT");
    let (code, err) = wait(run, Duration::from_secs(10));
    assert_eq!(code, Some(130), "{err}");
    assert!(err.contains("interrupted again: quitting"), "{err}");
    assert!(again.elapsed() < Duration::from_secs(3), "it took {:?} after the second interrupt", again.elapsed());
}

/// Every file under `dir`, as text.
fn every_file(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(every_file(&path));
        } else {
            out.push((path.display().to_string(), String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into()));
        }
    }
    out
}

#[test]
fn credentials_reach_no_file_no_message_and_no_other_server_when_the_server_redirects() {
    let (elsewhere, seen_elsewhere) = server(Answer::Never);
    let port: u16 = elsewhere.rsplit(':').next().unwrap().parse().unwrap();
    let (addr, _seen) = server(Answer::RedirectPosts(port));
    let out = temp("redirected");
    let target = format!("http://u5er:pw-S3CRET@{addr}");
    #[rustfmt::skip]
    let args = [
        "run", "--target", &target, "-H", "X-Api-Key: hk-S3CRET", "--header=api-key: hk2-S3CRET",
        "--extra-body", r#"{"api_key":"eb-S3CRET","temperature":0.5}"#,
        "--requests", "2", "--concurrency", "1", "--warmup", "0", "--refine", "0", "--timeout", "10s",
        "--out", out.to_str().unwrap(),
    ];
    let (code, stdout, err) = goodput_code(&args);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains(&format!("server answered 307 redirect to http://{elsewhere}/v1/completions")), "{err}");
    assert!(err.contains("goodput does not follow redirects"), "{err}");
    let mut texts = every_file(&out);
    assert!(texts.iter().any(|(p, _)| p.ends_with("records.jsonl")) && texts.len() >= 4, "{texts:?}");
    texts.push(("stdout".into(), stdout));
    texts.push(("stderr".into(), err));
    for (name, text) in &texts {
        assert!(!text.contains("S3CRET") && !text.contains("u5er"), "{name} holds a credential:\n{text}");
    }
    let s = summary_of(&out);
    assert_eq!(s["target"], format!("http://<redacted>@{addr}"));
    let command = s["command"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect::<Vec<_>>().join(" ");
    for kept in ["-H X-Api-Key: <redacted>", "--header=api-key: <redacted>", r#""temperature":0.5"#] {
        assert!(command.contains(kept), "{kept} not in {command}");
    }
    assert!(command.contains(r#""api_key":"<redacted>""#), "{command}");
    assert!(seen_elsewhere.try_recv().is_err(), "a request went to the server redirected to");
}
