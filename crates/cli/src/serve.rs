//! `goodput serve`: the in-process engine behind goodput's OpenAI-compatible server, until
//! SIGINT or SIGTERM; then in-flight streams get `--shutdown-grace` to finish. The flags are
//! checked into a [`ReplicaSpec`] (the server's policy and limits included) and served by
//! [`goodput_server::replica`].

use crate::args::{EngineArgs, ModelArgs};
use anyhow::Result;
use clap::Args;
use goodput_server::hosts::AllowedHosts;
use goodput_server::replica::{serve_replica, ReplicaSpec};
use goodput_server::{ListenLimits, Policy};
use std::time::Duration;

#[derive(Args, Debug)]
pub struct ServeArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Address to listen on (loopback unless told otherwise).
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
    /// The model name clients send (default: the catalog name).
    #[arg(long)]
    pub served_model_name: Option<String>,
    /// Answer 429 while this many requests wait for the engine (counted as they are submitted).
    #[arg(long)]
    pub max_waiting: Option<usize>,
    /// Require `Authorization: Bearer KEY` on /v1/* (401 otherwise); /health and /metrics
    /// stay open. Also read from GOODPUT_API_KEY.
    #[arg(long, env = "GOODPUT_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// Connections served at once; beyond it a connection gets 503 and is closed. Default:
    /// what the open-file limit allows (it less 64 for the engine's own files), else 1024.
    #[arg(long)]
    pub max_connections: Option<usize>,
    /// A connection with no request in flight for this long is closed: it must send its first
    /// request (the whole head, for HTTP/1) within it, and each next one within it of the
    /// previous response, over HTTP/1, HTTP/2 or TLS alike (a TLS handshake too). HTTP/2
    /// connections are pinged this often and closed when a ping goes unanswered this long.
    #[arg(long, default_value = "30s", value_parser = crate::args::parse_duration)]
    pub header_timeout: Duration,
    /// A request body must arrive within this (408 otherwise).
    #[arg(long, default_value = "30s", value_parser = crate::args::parse_duration)]
    pub body_timeout: Duration,
    /// The largest request body accepted (413 beyond it).
    #[arg(long, default_value = "16MiB", value_parser = crate::args::parse_bytes)]
    pub max_body: u64,
    /// After SIGINT/SIGTERM, in-flight requests get this long before they are ended; idle and
    /// half-sent connections close at once. A second signal ends them all at once.
    #[arg(long, default_value = "30s", value_parser = crate::args::parse_duration)]
    pub shutdown_grace: Duration,
    /// Also serve requests whose Host (HTTP/2 `:authority`) is one of these names
    /// (comma-separated; `.example.com` also serves its subdomains). IP literals, `localhost`
    /// and `*.localhost` are always served. A loopback --host answers other names 403 (a guard
    /// against DNS rebinding, as Jupyter's and vite's); any other --host (0.0.0.0, ::, an
    /// interface's address) serves every name unless this list is given.
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    pub allowed_hosts: Vec<String>,
    /// Serve any Host, also on loopback (turns the DNS-rebinding guard off).
    #[arg(long, conflicts_with = "allowed_hosts")]
    pub allow_any_host: bool,
    /// Serve HTTPS with this certificate chain (PEM, the leaf first); needs --tls-key.
    #[arg(long, value_name = "PEM", requires = "tls_key")]
    pub tls_cert: Option<std::path::PathBuf>,
    /// The private key of --tls-cert (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    pub tls_key: Option<std::path::PathBuf>,
    /// Server threads (the engine has its own).
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// How chat outputs split into reasoning (`delta.reasoning`, usage's `reasoning_tokens`)
    /// and answer: `none`, or `think-tags` (Qwen3 / DeepSeek-R1 style, as vLLM's
    /// `deepseek_r1`: the output before `</think>` is reasoning; needs a tokenizer with that
    /// token). Whatever this says, a request's `"goodput": {"reasoning_tokens": N}` marks its
    /// first N output tokens as reasoning (the `reasoning` scenario on dummy weights).
    #[arg(long, default_value = "none", value_parser = ["none", "think-tags"])]
    pub reasoning_parser: String,
    /// Pin the engine thread and its compute threads to these CPUs (0-1, 0,2). The HTTP
    /// runtime then stays off them (the CPUs left, unless --http-cpus says), as production
    /// servers keep their API front end off the engine's cores (vLLM v1 runs it as its own
    /// process): parsing, tokenizing and writing every stream's chunks never take a step's time.
    #[arg(long, value_parser = crate::args::parse_cpus)]
    pub engine_cpus: Option<crate::args::CpuList>,
    /// Pin the HTTP runtime's threads (accepting, parsing, tokenizing, writing streams) to
    /// these CPUs. Overlapping --engine-cpus is allowed but said, since the two then compete.
    #[arg(long, value_parser = crate::args::parse_cpus)]
    pub http_cpus: Option<crate::args::CpuList>,
    /// Write every engine step's record to this file as it ends (JSON lines, as `profile
    /// --save-steps`): the steps a replica ran under its real load, for `profile --from-steps`.
    #[arg(long, value_name = "FILE")]
    pub steps: Option<std::path::PathBuf>,
}

pub fn run(a: ServeArgs) -> Result<()> {
    let spec = ReplicaSpec {
        model: a.model.source(),
        engine: a.engine.options(),
        host: a.host.clone(),
        port: a.port,
        served_model_name: a.served_model_name.clone(),
        policy: Policy {
            max_waiting: a.max_waiting,
            api_key: a.api_key.clone(),
            body_timeout: a.body_timeout,
            max_body_bytes: usize::try_from(a.max_body).unwrap_or(usize::MAX),
            allowed_hosts: AllowedHosts { any: a.allow_any_host, names: a.allowed_hosts.clone() },
        },
        limits: ListenLimits {
            grace: a.shutdown_grace,
            max_connections: ListenLimits::max_connections(a.max_connections, goodput_bench::fds::soft_limit())?,
            header_timeout: a.header_timeout,
        },
        tls: a.tls_cert.clone().zip(a.tls_key.clone()),
        threads: a.threads,
        reasoning_parser: a.reasoning_parser.clone(),
        engine_cpus: a.engine_cpus.as_ref().map(|c| c.0.clone()),
        http_cpus: a.http_cpus.as_ref().map(|c| c.0.clone()),
        steps: a.steps.clone(),
    };
    Ok(serve_replica(&spec, &|line| eprintln!("{line}"))?)
}
