//! What load generators drive: anything that takes a request and streams tokens back — the
//! in-process engine, goodput's own HTTP server, an external OpenAI-compatible server.
//! Workloads never know which.

use crate::client::ClientRecord;
use crate::clock::{Clock, Stamp};
use crate::request::{SamplingParams, TokenId};
use std::future::Future;

/// One request of a workload.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkRequest {
    /// Workload-wide request number (also the client record's id).
    pub id: u64,
    pub prompt: Vec<TokenId>,
    pub params: SamplingParams,
    /// The session (conversation, agent task) the request is a turn of: an HTTP target sends
    /// it in `--session-header` so a router can keep a session on one replica.
    pub session: Option<u64>,
}

/// A system under test.
pub trait Target: Send + Sync + 'static {
    /// The clock every stamp of the run is read from.
    fn clock(&self) -> Clock;

    /// Sends `req` (due at `intended`) and follows it to its end. Never fails: errors and
    /// refusals end up in the record's outcome. Dropping the future abandons the request
    /// (the target should then cancel it).
    fn run(&self, req: WorkRequest, intended: Stamp) -> impl Future<Output = ClientRecord> + Send;

    /// A short description for reports (`in-process engine`, `http://…`).
    fn describe(&self) -> String;
}
