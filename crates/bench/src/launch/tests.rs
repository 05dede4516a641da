//! The launch's lifecycle with `sh` commands for servers and a loopback listener for their
//! health: a start that exits, one never healthy, one that dies during the run, one stopped by
//! SIGTERM, one that ignores it, and a port something already answers on.

use super::*;
use crate::progress::Lines;
use std::io::{Read, Write};
use std::net::TcpListener;

/// A loopback port that answers 200 once the server's command has made the file `$READY`
/// (closes each connection unanswered before, as a port nothing serves yet), for as long as
/// the test runs.
fn healthy(ready: &Path) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let ready = ready.to_path_buf();
    std::thread::spawn(move || {
        for mut s in listener.incoming().flatten() {
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf);
            if ready.exists() {
                let _ = write!(s, "HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
            }
        }
    });
    format!("http://127.0.0.1:{port}/health")
}

/// A server whose command makes `$READY` (then goes on with `rest`), healthy from then on.
fn ready_then(name: &str, rest: &str) -> Server {
    let ready = dir(&format!("{name}.ready"));
    let s = server(&format!("touch \"$READY\"; {rest}"), healthy(&ready));
    Server { env: vec![("READY".into(), ready.display().to_string())], ..s }
}

/// A loopback port nothing listens on.
fn closed() -> String {
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    format!("http://127.0.0.1:{port}/health")
}

fn server(command: &str, health: String) -> Server {
    let (start_timeout, grace) = (Duration::from_secs(2), Duration::from_millis(500));
    Server { command: command.into(), health, start_timeout, grace, env: vec![("CODE".into(), "3".into())] }
}

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("goodput-launch-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// `around` with `run` for `server`, writing into `out`: its result and the record kept.
fn go(
    server: &Server,
    out: &Path,
    run: impl FnOnce() -> Result<i32, String>,
) -> (Result<i32, LaunchError>, ServerRecord) {
    let r = around(Some(server), Some(out), &Stop::default(), &Lines { quiet: true }, run);
    (r, ServerRecord::read(out).unwrap().expect("server.json"))
}

#[test]
fn a_server_that_exits_at_start_is_an_error_with_its_log() {
    let out = dir("exits");
    let s = server("echo starting; echo bad flag >&2; exit $CODE", closed());
    let (r, rec) = go(&s, &out, || panic!("no run without a healthy server"));
    let e = r.unwrap_err().to_string();
    assert!(e.starts_with("the server exited (exit status: 3) before it was healthy"), "{e}");
    assert!(e.lines().next().unwrap().ends_with("after its start: bad flag"), "{e}");
    assert!(e.ends_with(&format!("({}):\nstarting\nbad flag", out.join(SERVER_LOG).display())), "{e}");
    assert_eq!((rec.end, rec.healthy_after_s, rec.env), (ServerEnd::ExitedAtStart, None, vec!["CODE".to_string()]));
    assert_eq!(rec.command, s.command);
    assert_eq!(std::fs::read_to_string(out.join(SERVER_LOG)).unwrap(), "starting\nbad flag\n");
    assert!(!out.with_file_name("exits.server.log").exists(), "the log moved into the run's directory");
}

#[test]
fn a_server_never_healthy_is_stopped_at_its_timeout() {
    let out = dir("never");
    let s = Server { start_timeout: Duration::from_millis(700), ..server("sleep 30", closed()) };
    let at = Instant::now();
    let (r, rec) = go(&s, &out, || Ok(0));
    assert!(matches!(r, Err(LaunchError::NotHealthy { .. })), "{r:?}");
    assert!(at.elapsed() < Duration::from_secs(10), "stopped, not waited for");
    assert_eq!(rec.end, ServerEnd::NotHealthy);
    assert!(rec.exit.as_deref().is_some_and(|e| e.contains("signal: 15")), "{:?}", rec.exit);
}

#[test]
fn a_server_stopped_after_the_run_gives_the_run_its_result() {
    let out = dir("stopped");
    let (r, rec) = go(&ready_then("stopped", "sleep 30"), &out, || Ok(7));
    assert_eq!(r.unwrap(), 7);
    assert_eq!(rec.end, ServerEnd::Stopped);
    assert!(rec.healthy_after_s.is_some_and(|s| s < 5.0), "{rec:?}");
    // A run's error is the run's, the server stopped all the same.
    let out = dir("failed-run");
    let (r, rec) = go(&ready_then("failed-run", "sleep 30"), &out, || Err("no levels".to_string()));
    assert_eq!(r.unwrap_err().to_string(), "no levels");
    assert_eq!(rec.end, ServerEnd::Stopped);
}

#[test]
fn a_server_that_ignores_sigterm_is_killed_after_the_grace() {
    let out = dir("killed");
    let s = ready_then("killed", "trap '' TERM; while true; do sleep 0.1; done");
    let (r, rec) = go(&s, &out, || Ok(0));
    assert_eq!(r.unwrap(), 0);
    assert_eq!(rec.end, ServerEnd::Killed);
    assert!(rec.exit.as_deref().is_some_and(|e| e.contains("signal: 9")), "{:?}", rec.exit);
}

#[test]
fn the_grace_holds_for_the_whole_group_not_only_its_shell() {
    // `sh` runs the server as its child and exits at SIGTERM; the server takes 0.4 s to stop.
    let out = dir("graceful");
    let s = ready_then("graceful", "sh -c 'trap \"sleep 0.4; exit 0\" TERM; while true; do sleep 0.05; done' & wait");
    let s = Server { grace: Duration::from_secs(5), ..s };
    let (r, rec) = go(&s, &out, || Ok(0));
    assert_eq!(r.unwrap(), 0);
    assert_eq!(rec.end, ServerEnd::Stopped, "stopped within its grace, not killed: {rec:?}");
}

#[test]
fn a_server_that_dies_during_the_run_is_an_error() {
    let out = dir("died");
    // Healthy within 0.5 s, dead at 2 s, the run still going at 3.5 s: room for a busy machine.
    let s = ready_then("died", "sleep 2; exit 4");
    let (r, rec) = go(&s, &out, || {
        std::thread::sleep(Duration::from_millis(3500));
        Ok(0)
    });
    let e = r.unwrap_err().to_string();
    assert!(e.starts_with("the server exited (exit status: 4) during the run"), "{e}");
    assert_eq!(rec.end, ServerEnd::Died);
}

#[test]
fn a_port_already_served_is_refused_before_any_start() {
    // Anything that answers at all, a 404 too.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let health = format!("http://127.0.0.1:{}/health", listener.local_addr().unwrap().port());
    std::thread::spawn(move || {
        for mut s in listener.incoming().flatten() {
            let _ = s.read(&mut [0u8; 1024]);
            let _ = s.write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        }
    });
    let r = around(Some(&server("exit 0", health.clone())), None, &Stop::default(), &Lines { quiet: true }, || {
        Ok::<_, String>(0)
    });
    let e = r.unwrap_err().to_string();
    assert!(e.starts_with(&format!("{health} already answers")), "{e}");
    // Never started: said so in its record.
    let out = dir("busy");
    let (_, rec) = go(&server("exit 0", health.clone()), &out, || Ok(0));
    assert_eq!((rec.end, rec.exit), (ServerEnd::NotStarted, None));
}
