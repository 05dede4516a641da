//! A server the run started and stopped (`goodput run --server CMD`, a config file's
//! `[server]`): the exact command it ran, where it was asked for health, how long it took to
//! become healthy and how it ended, stored as `server.json` beside its log (`server.log`) in
//! the run's directory.

use crate::files::{read_json, write_json, SERVER};
use crate::ResultsError;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// `server.json`'s format; a newer one is refused by name.
pub const SERVER_FORMAT: u32 = 1;

/// How a launched server ran.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServerRecord {
    pub format: u32,
    /// The command as run (`sh -c COMMAND`, its placeholders filled).
    pub command: String,
    /// The URL polled until it answered 200.
    pub health: String,
    /// The environment variables set for it: names only (their values may be secrets).
    pub env: Vec<String>,
    /// Seconds from the start until the health URL answered; none when it never did.
    pub healthy_after_s: Option<f64>,
    /// How it ended: [`ServerEnd`].
    pub end: ServerEnd,
    /// Its exit status as the system gave it (`exit status: 1`, `signal: 15 (SIGTERM)`).
    pub exit: Option<String>,
}

/// How a launched server ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerEnd {
    /// It was never started (something answered at its health URL already, or it could not
    /// be spawned).
    NotStarted,
    /// Stopped after the run, by SIGTERM to its process group.
    Stopped,
    /// Killed (SIGKILL) after the run, when SIGTERM left some of its process group running
    /// past the grace.
    Killed,
    /// It exited before it was healthy.
    ExitedAtStart,
    /// It was not healthy within the start timeout (then stopped).
    NotHealthy,
    /// It exited during the run.
    Died,
    /// The run was interrupted while it started.
    Interrupted,
}

impl ServerRecord {
    pub fn write(&self, dir: &Path) -> Result<(), ResultsError> {
        write_json(dir, SERVER, self)
    }

    /// `dir/server.json`; none when the run started no server.
    pub fn read(dir: &Path) -> Result<Option<Self>, ResultsError> {
        read_json(dir, SERVER, SERVER_FORMAT, |r: &Self| r.format)
    }
}
