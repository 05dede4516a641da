//! A server under test started for a run and stopped after it, as vLLM's `bench sweep serve`
//! does per configuration: its command run by `sh -c` in a process group of its own, its
//! output into a log, its health URL polled until it answers 200 (refused when something
//! already answers there, which would be measured in its place), then the run, then SIGTERM
//! to the group, a grace, and SIGKILL. A server that exits before it is healthy, is not
//! healthy in time, or exits during the run is an error that says so with the end of its log;
//! the run's directory keeps the log (`server.log`) and how it went (`server.json`).
//!
//! The command's template and placeholders are [`template`]'s.

pub mod template;

pub use template::{Server, ServerTemplate};

use crate::progress::Progress;
use goodput_results::files::SERVER_LOG;
use goodput_results::server::{ServerEnd, ServerRecord, SERVER_FORMAT};
use goodput_workload::Stop;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How often the health URL is asked while the server starts.
const POLL: Duration = Duration::from_millis(500);

/// How many of the log's last lines an error shows.
const TAIL_LINES: usize = 15;

/// Why a launched server did not serve the run.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("{0} already answers: something is serving there, which the run would measure in the launched server's place; stop it or give the server another port")]
    Busy(String),
    #[error("the server's log {0}: {1}")]
    Log(PathBuf, std::io::Error),
    #[error("the server (`sh -c {0}`) could not be started: {1}")]
    Spawn(String, std::io::Error),
    #[error("the server exited ({status}) {when}: {}\nthe end of its log ({log}):\n{tail}", last_line(tail))]
    Exited { status: String, when: String, log: String, tail: String },
    #[error("the server was not healthy at {health} within {timeout:?} (then stopped): {}\nthe end of its log ({log}):\n{tail}", last_line(tail))]
    NotHealthy { health: String, timeout: Duration, log: String, tail: String },
    #[error("interrupted while the server started")]
    Interrupted,
    #[error(transparent)]
    Run(Box<dyn std::error::Error + Send + Sync>),
}

/// Runs `run` with `server` launched for it (without a server, `run` alone). The server's log
/// goes beside the run's directory `out` as it runs and into it after (`server.log`, with
/// `server.json`); without `out`, into the system's temporary directory.
pub fn around<T, E: Into<Box<dyn std::error::Error + Send + Sync>>>(
    server: Option<&Server>,
    out: Option<&Path>,
    stop: &Stop,
    progress: &dyn Progress,
    run: impl FnOnce() -> Result<T, E>,
) -> Result<T, LaunchError> {
    let Some(server) = server else { return run().map_err(|e| LaunchError::Run(e.into())) };
    let log = match out {
        Some(dir) => dir
            .with_file_name(format!("{}.{SERVER_LOG}", dir.file_name().map_or("run".into(), |n| n.to_string_lossy()))),
        None => std::env::temp_dir().join(format!("goodput-{}.{SERVER_LOG}", std::process::id())),
    };
    let mut record = ServerRecord {
        format: SERVER_FORMAT,
        command: goodput_client::redact_url(&server.command),
        health: goodput_client::redact_url(&server.health),
        env: server.env.iter().map(|(k, _)| k.clone()).collect(),
        healthy_after_s: None,
        end: ServerEnd::NotStarted,
        exit: None,
    };
    let shown = out.map_or(log.clone(), |d| d.join(SERVER_LOG));
    let result = launched(server, (&log, &shown), stop, progress, &mut record, run);
    let kept = keep(&log, out, &record);
    match (result, kept) {
        (Err(e), _) => Err(e),
        (Ok(_), Err(e)) => Err(e),
        (Ok(t), Ok(())) => Ok(t),
    }
}

/// The server started, waited for, the run, and the server stopped; `record` filled as it goes.
fn launched<T, E: Into<Box<dyn std::error::Error + Send + Sync>>>(
    server: &Server,
    (log, shown): (&Path, &Path),
    stop: &Stop,
    progress: &dyn Progress,
    record: &mut ServerRecord,
    run: impl FnOnce() -> Result<T, E>,
) -> Result<T, LaunchError> {
    if let Some(parent) = log.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| LaunchError::Log(log.to_path_buf(), e))?;
    }
    let health = Health::new()?;
    if health.answers(&server.health) {
        return Err(LaunchError::Busy(goodput_client::redact_url(&server.health)));
    }
    progress.line(&format!("server: starting `{}` (its log: {})", record.command, shown.display()), false);
    let mut group = Group::spawn(server, log)?;
    let started = Instant::now();
    let end = |status: ExitStatus, when: String| LaunchError::Exited {
        status: status.to_string(),
        when,
        log: shown.display().to_string(),
        tail: tail(log),
    };
    loop {
        if let Some(status) = group.exited() {
            (record.end, record.exit) = (ServerEnd::ExitedAtStart, Some(status.to_string()));
            return Err(end(
                status,
                format!("before it was healthy, {:.1} s after its start", started.elapsed().as_secs_f64()),
            ));
        }
        if health.ok(&server.health) {
            break;
        }
        if stop.raised() {
            (record.end, record.exit) = (ServerEnd::Interrupted, group.stop(server.grace).1);
            return Err(LaunchError::Interrupted);
        }
        if started.elapsed() > server.start_timeout {
            (record.end, record.exit) = (ServerEnd::NotHealthy, group.stop(server.grace).1);
            let (health, timeout, tail) = (server.health.clone(), server.start_timeout, tail(log));
            return Err(LaunchError::NotHealthy { health, timeout, log: shown.display().to_string(), tail });
        }
        std::thread::sleep(POLL);
    }
    record.healthy_after_s = Some(started.elapsed().as_secs_f64());
    progress
        .line(&format!("server: healthy at {} after {:.1} s", record.health, started.elapsed().as_secs_f64()), false);
    let result = run();
    if let Some(status) = group.exited() {
        (record.end, record.exit) = (ServerEnd::Died, Some(status.to_string()));
        let run = result
            .err()
            .map_or(String::new(), |e| format!(" (and the run: {})", goodput_client::causes(e.into().as_ref())));
        return Err(end(status, format!("during the run{run}")));
    }
    let (killed, exit) = group.stop(server.grace);
    (record.end, record.exit) = (if killed { ServerEnd::Killed } else { ServerEnd::Stopped }, exit);
    result.map_err(|e| LaunchError::Run(e.into()))
}

/// The log moved into the run's directory `out` and `server.json` written there (created
/// for a run that never started); without `out`, the log stays where it is.
fn keep(log: &Path, out: Option<&Path>, record: &ServerRecord) -> Result<(), LaunchError> {
    let Some(dir) = out else { return Ok(()) };
    let io = |e| LaunchError::Log(dir.join(SERVER_LOG), e);
    std::fs::create_dir_all(dir).map_err(io)?;
    // A rename, or across file systems (an --out that links elsewhere) a copy.
    if log.exists() && std::fs::rename(log, dir.join(SERVER_LOG)).is_err() {
        std::fs::copy(log, dir.join(SERVER_LOG)).map_err(io)?;
        let _ = std::fs::remove_file(log);
    }
    record.write(dir).map_err(|e| LaunchError::Log(dir.to_path_buf(), std::io::Error::other(e.to_string())))
}

/// The log's last line that says something (the reason, where a server says one).
fn last_line(tail: &str) -> &str {
    let said = |l: &&str| !l.trim().is_empty() && !l.starts_with("For more information");
    tail.lines().rev().find(said).map_or("it wrote nothing", str::trim)
}

/// The last [`TAIL_LINES`] lines of the log.
fn tail(log: &Path) -> String {
    let text = std::fs::read(log).map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(TAIL_LINES)..].join("\n")
}

/// A GET of the health URL, with its own small runtime (the run builds its own after).
struct Health {
    rt: tokio::runtime::Runtime,
    client: reqwest::Client,
}

impl Health {
    fn new() -> Result<Self, LaunchError> {
        let io = |e| LaunchError::Spawn("(the health check)".into(), e);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(io)?;
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .no_proxy()
            .build()
            .map_err(|e| io(std::io::Error::other(e.to_string())))?;
        Ok(Self { rt, client })
    }

    /// Whether `url` answers 200.
    fn ok(&self, url: &str) -> bool {
        self.rt.block_on(async { self.client.get(url).send().await }).is_ok_and(|r| r.status().is_success())
    }

    /// Whether anything answers at `url`, whatever its status.
    fn answers(&self, url: &str) -> bool {
        self.rt.block_on(async { self.client.get(url).send().await }).is_ok()
    }
}

/// The process groups of the servers running now, for [`kill_all`].
static LIVE: std::sync::Mutex<Vec<libc::pid_t>> = std::sync::Mutex::new(Vec::new());

/// Kills (SIGKILL) every launched server still running: for a process that quits at once (a
/// second interrupt), where no [`Group`] is dropped. The servers run in groups of their own,
/// which a terminal's Ctrl-C does not reach.
pub fn kill_all() {
    for pgid in LIVE.lock().unwrap_or_else(|e| e.into_inner()).drain(..) {
        // SAFETY: as in `Group::stop`.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
    }
}

/// The server's process group: stopped when dropped, so an early return or a panic leaves no
/// server behind.
struct Group {
    child: Child,
    stopped: bool,
}

impl Group {
    fn spawn(server: &Server, log: &Path) -> Result<Self, LaunchError> {
        let file = std::fs::File::create(log).map_err(|e| LaunchError::Log(log.to_path_buf(), e))?;
        let err = file.try_clone().map_err(|e| LaunchError::Log(log.to_path_buf(), e))?;
        let child = Command::new("sh")
            .arg("-c")
            .arg(&server.command)
            .envs(server.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(file)
            .stderr(err)
            .process_group(0)
            .spawn()
            .map_err(|e| LaunchError::Spawn(server.command.clone(), e))?;
        LIVE.lock().unwrap_or_else(|e| e.into_inner()).push(child.id() as libc::pid_t);
        Ok(Self { child, stopped: false })
    }

    /// Whether any process of the group is left running: one that has exited but is not yet
    /// reaped (a zombie, which a container's init may never reap) is not; without `/proc`,
    /// whether the group exists at all.
    fn alive(&self) -> bool {
        let pgid = self.child.id() as libc::pid_t;
        let Ok(procs) = std::fs::read_dir("/proc") else {
            // SAFETY: kill(2) with signal 0 only checks that the group exists.
            return unsafe { libc::kill(-pgid, 0) == 0 };
        };
        procs.flatten().any(|p| {
            let stat = std::fs::read_to_string(p.path().join("stat")).unwrap_or_default();
            // `pid (comm) state ppid pgrp …`; the name may hold spaces and parentheses.
            let mut fields = stat.rsplit_once(')').map_or("", |(_, rest)| rest).split_whitespace();
            let (state, pgrp) = (fields.next(), fields.nth(1));
            pgrp.and_then(|g| g.parse::<libc::pid_t>().ok()) == Some(pgid) && !matches!(state, Some("Z" | "X"))
        })
    }

    /// The status of the group's leader, once it has exited.
    fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// SIGTERM to the group, up to `grace` for the leader to exit, then SIGKILL to the group:
    /// whether it was killed, and the leader's status.
    /// The grace holds for the whole group: `sh` may exit at SIGTERM while the server it
    /// started is still shutting down.
    fn stop(&mut self, grace: Duration) -> (bool, Option<String>) {
        self.stopped = true;
        let pgid = self.child.id() as libc::pid_t;
        // SAFETY: kill(2) with a process group id and a signal number has no memory effects.
        unsafe { libc::kill(-pgid, libc::SIGTERM) };
        let at = Instant::now();
        let mut status = None;
        while at.elapsed() < grace {
            status = status.or_else(|| self.exited());
            if status.is_some() && !self.alive() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let killed = self.alive();
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
        let status = status.or_else(|| self.child.wait().ok());
        LIVE.lock().unwrap_or_else(|e| e.into_inner()).retain(|&g| g != pgid);
        (killed, status.map(|s| s.to_string()))
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        if !self.stopped {
            self.stop(Duration::from_secs(5));
        }
    }
}

#[cfg(test)]
mod tests;
