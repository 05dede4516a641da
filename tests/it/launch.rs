//! Server configurations in a matrix (issue 52): `[server]` starts `goodput serve` once per
//! value of `server.max-num-seqs`, one value that it refuses; the matrix goes on past that
//! one, each run keeps the exact command and the server's log, `--resume` keeps the finished
//! runs and reruns the failed one; a single run launches its `--server` too.

use crate::common::{goodput, goodput_code, temp};
use goodput_results::matrix::MatrixIndex;
use goodput_results::read_summary;
use goodput_results::server::{ServerEnd, ServerRecord};
use std::net::TcpListener;

/// A loopback port free now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Whether anything answers on the port.
fn answers(port: u16) -> bool {
    std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
}

#[test]
fn a_server_matrix_starts_each_configuration_survives_a_failed_one_and_resumes() {
    let dir = temp("server-matrix");
    std::fs::create_dir_all(&dir).unwrap();
    let (out, config, port) = (dir.join("runs"), dir.join("servers.toml"), free_port());
    let text = format!(
        r#"
target = "http://127.0.0.1:{port}"
concurrency = [2]
requests = 6
input-len = 24
output-len = 6
out = "{}"

[server]
command = "{{goodput}} serve -m tiny --port {{port}} --max-num-seqs {{max-num-seqs}} --threads 1"
start-timeout = "60s"
grace = "5s"

[matrix]
server.max-num-seqs = [1, "none", 4]
"#,
        out.display()
    );
    std::fs::write(&config, text).unwrap();
    let cfg = config.to_str().unwrap();
    let (code, stdout, err) = goodput_code(&["run", "--config", cfg, "-q"]);
    assert_eq!(code, 1, "the failed configuration's exit: {err}");
    let index = MatrixIndex::read(&out).unwrap().expect("index.json");
    let names: Vec<&str> = index.runs.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["01-server.max-num-seqs=1", "02-server.max-num-seqs=none", "03-server.max-num-seqs=4"]);
    for (run, seqs) in index.runs.iter().zip(["1", "none", "4"]) {
        let d = out.join(&run.dir);
        let rec = ServerRecord::read(&d).unwrap().expect("server.json");
        assert!(rec.command.ends_with(&format!("--port {port} --max-num-seqs {seqs} --threads 1")), "{rec:?}");
        let log = std::fs::read_to_string(d.join("server.log")).unwrap();
        if seqs == "none" {
            assert_eq!((run.exit, rec.end, run.outcome.is_none()), (1, ServerEnd::ExitedAtStart, true));
            let e = run.error.as_deref().unwrap();
            assert!(e.starts_with("the server exited (exit status: 2) before it was healthy"), "{e}");
            assert!(e.contains("invalid value 'none' for '--max-num-seqs <N>'") && log.contains("'none'"), "{e}");
        } else {
            assert_eq!((run.exit, &run.error, rec.end), (0, &None, ServerEnd::Stopped), "{run:?}");
            assert!(log.contains("goodput serve: `tiny`"), "{log}");
            assert_eq!(read_summary(&d).unwrap().levels.len(), 1);
        }
    }
    assert!(!answers(port), "every server stopped");
    let said = "02-server.max-num-seqs=none: the server exited (exit status: 2) before it was healthy";
    assert!(stdout.contains(said) && stdout.contains("invalid value 'none' for '--max-num-seqs <N>'"), "{stdout}");
    assert!(stdout.contains("Most usable capacity") || stdout.contains("none is shown usable"), "{stdout}");
    // Resumed: the finished runs kept as they are, the failed one run again (and failing again).
    let (code, _, err) = goodput_code(&["run", "--config", cfg, "-q", "--resume"]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(err.matches("finished before (--resume)").count(), 2, "{err}");
    let resumed = MatrixIndex::read(&out).unwrap().unwrap();
    assert_eq!((&resumed.runs[0], &resumed.runs[2]), (&index.runs[0], &index.runs[2]));
    assert!(resumed.runs[1].error.as_deref().unwrap().contains("before it was healthy"));
    // A resume whose file no longer makes some of the old runs is refused before any start.
    let fewer = dir.join("fewer.toml");
    std::fs::write(&fewer, std::fs::read_to_string(&config).unwrap().replace(r#"[1, "none", 4]"#, "[1, 4]")).unwrap();
    let (code, _, err) = goodput_code(&["run", "--config", fewer.to_str().unwrap(), "-q", "--resume"]);
    assert!(
        code == 1
            && err
                .contains("holds runs this one does not make (02-server.max-num-seqs=none, 03-server.max-num-seqs=4)"),
        "{err}"
    );
    assert_eq!(MatrixIndex::read(&out).unwrap().unwrap(), resumed, "nothing touched");
    // Without --resume (or --overwrite) the matrix's directory is refused, as any matrix's.
    let (code, _, err) = goodput_code(&["run", "--config", cfg, "-q"]);
    assert!(code == 1 && err.contains("holds a matrix's runs"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_single_run_launches_its_server_and_refuses_a_port_already_served() {
    let dir = temp("server-run");
    let port = free_port();
    let server = "{goodput} serve -m tiny --port {port} --threads 1";
    let target = format!("http://127.0.0.1:{port}");
    let out = dir.join("run");
    let args = ["run", "--target", &target, "--server", server, "--concurrency", "1", "--requests", "3"];
    let (ok, _, err) = goodput(&[&args[..], &["--input-len", "16", "--output-len", "4", "-q"]].concat());
    assert!(!ok && err.contains("--out"), "a run keeps the server's log in --out, or says where: {err}");
    let (ok, _, err) = goodput(
        &[&args[..], &["--input-len", "16", "--output-len", "4", "-q", "--out", out.to_str().unwrap()]].concat(),
    );
    assert!(ok, "{err}");
    let rec = ServerRecord::read(&out).unwrap().unwrap();
    assert_eq!((rec.end, rec.health), (ServerEnd::Stopped, format!("{target}/health")));
    assert!(!answers(port));
    // Something already on the port would be measured in the server's place: refused.
    let _held = TcpListener::bind(("127.0.0.1", port)).unwrap();
    let busy = std::thread::spawn(move || {
        for s in _held.incoming().flatten().take(1) {
            use std::io::{Read, Write};
            let mut s = s;
            let _ = s.read(&mut [0u8; 512]);
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        }
    });
    let (ok, _, err) = goodput(&[&args[..], &["-q", "--out", dir.join("busy").to_str().unwrap()]].concat());
    assert!(!ok && err.contains("already answers"), "{err}");
    busy.join().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
