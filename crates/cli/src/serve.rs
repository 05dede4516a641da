//! `goodput serve`: the in-process engine behind goodput's OpenAI-compatible server, until
//! SIGINT or SIGTERM; then in-flight streams get `--shutdown-grace` to finish.

use crate::args::{EngineArgs, ModelArgs};
use anyhow::{bail, Context, Result};
use clap::Args;
use goodput_core::Clock;
use goodput_engine::Engine;
use goodput_server::{AppState, ListenLimits, Policy};
use std::sync::Arc;
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

/// Where the engine and the HTTP runtime run: the given sets, the HTTP runtime defaulting to
/// the allowed CPUs less the engine's (none left: unpinned, said); a warning when they overlap.
pub fn placement(
    engine: Option<&[usize]>,
    http: Option<&[usize]>,
    allowed: &[usize],
) -> (Option<Vec<usize>>, Option<String>) {
    let fmt = goodput_engine::affinity::format_cpu_list;
    match (engine, http) {
        (Some(e), Some(h)) if h.iter().any(|c| e.contains(c)) => (
            Some(h.to_vec()),
            Some(format!(
                "--http-cpus {} overlaps --engine-cpus {}: HTTP work competes with the engine's steps",
                fmt(h),
                fmt(e)
            )),
        ),
        (_, Some(h)) => (Some(h.to_vec()), None),
        (Some(e), None) => {
            let rest: Vec<usize> = allowed.iter().copied().filter(|c| !e.contains(c)).collect();
            if rest.is_empty() {
                let why = format!(
                    "--engine-cpus {} leaves no CPU for the HTTP runtime: it runs unpinned, sharing them",
                    fmt(e)
                );
                (None, Some(why))
            } else {
                (Some(rest), None)
            }
        }
        (None, None) => (None, None),
    }
}

/// Builds the server's state over a started engine.
pub fn state(
    engine: &Engine,
    loaded_tokenizer: Arc<goodput_engine::tokenizer::Tokenizer>,
    name: String,
    chat: goodput_engine::loader::ChatFormat,
    policy: Policy,
    reasoning: goodput_server::reasoning::ReasoningParser,
) -> Result<Arc<AppState>> {
    Ok(Arc::new(AppState::new(engine.handle(), loaded_tokenizer, name, chat, policy)?.with_reasoning(reasoning)))
}

impl ServeArgs {
    fn policy(&self) -> Result<Policy> {
        if self.api_key.as_deref().is_some_and(str::is_empty) {
            bail!("--api-key is empty; give a key or leave the flag out");
        }
        if self.header_timeout.is_zero() || self.body_timeout.is_zero() {
            bail!("--header-timeout and --body-timeout must be positive");
        }
        if let Some(bad) =
            self.allowed_hosts.iter().find(|n| n.trim_matches('.').is_empty() || n.contains([':', '/', ' ']))
        {
            bail!("--allowed-hosts `{bad}`: give host names without ports or schemes, e.g. `gpu1.example.com,.corp.example`");
        }
        Ok(Policy {
            max_waiting: self.max_waiting,
            api_key: self.api_key.clone(),
            body_timeout: self.body_timeout,
            max_body_bytes: usize::try_from(self.max_body).unwrap_or(usize::MAX),
            allowed_hosts: goodput_server::hosts::AllowedHosts {
                any: self.allow_any_host,
                names: self.allowed_hosts.clone(),
            },
        })
    }

    fn limits(&self) -> Result<ListenLimits> {
        let files = goodput_bench::fds::soft_limit();
        // Room for the engine's own files, the listener and the log.
        let room = files.map(|n| n.saturating_sub(64) as usize);
        let max_connections = match (self.max_connections, room) {
            (Some(0), _) => bail!("--max-connections must be at least 1"),
            (Some(n), Some(room)) if n > room => bail!(
                "--max-connections {n} exceeds what the open-file limit allows ({} files, so at most {room} connections); raise `ulimit -n` or lower the flag",
                files.unwrap_or(0)
            ),
            (Some(n), _) => n,
            (None, room) => room.map_or(1024, |r| r.max(1)),
        };
        Ok(ListenLimits { grace: self.shutdown_grace, max_connections, header_timeout: self.header_timeout })
    }
}

/// Resolves on SIGINT or SIGTERM.
pub(crate) async fn signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term => {}
    }
}

pub fn run(a: ServeArgs) -> Result<()> {
    let (policy, limits) = (a.policy()?, a.limits()?);
    let tls = match (&a.tls_cert, &a.tls_key) {
        (Some(cert), Some(key)) => Some(goodput_server::tls::server_config(cert, key)?),
        _ => None,
    };
    let scheme = if tls.is_some() { "https" } else { "http" };
    let spec = a.model.source().spec()?;
    let max_len = a.engine.max_model_len.unwrap_or(spec.max_position_embeddings).min(spec.max_position_embeddings);
    a.engine.options().apply_before_load();
    let loaded = crate::args::load(&a.model.source(), max_len)?;
    let name = a.served_model_name.clone().unwrap_or_else(|| spec.name.clone());
    let mut cfg = a.engine.options().config()?;
    cfg.cpus = a.engine_cpus.as_ref().map(|c| c.0.clone());
    let allowed = goodput_engine::affinity::allowed();
    let (http_cpus, warning) =
        placement(a.engine_cpus.as_ref().map(|c| &c.0[..]), a.http_cpus.as_ref().map(|c| &c.0[..]), &allowed);
    if let Some(w) = warning {
        eprintln!("goodput serve: warning: {w}");
    }
    let (steps_tx, steps_writer) = match &a.steps {
        Some(path) => {
            let (tx, writer) = write_steps(path, http_cpus.clone())?;
            (Some(tx), Some(writer))
        }
        None => (None, None),
    };
    let engine = Engine::start(loaded.model, cfg, Clock::new(), steps_tx)?;
    let has_template = loaded.chat.template.is_some();
    let tokenizer = Arc::new(loaded.tokenizer);
    let parser = goodput_server::reasoning::ReasoningParser::named(&a.reasoning_parser, &tokenizer)?;
    let st = state(&engine, tokenizer, name.clone(), loaded.chat, policy, parser)?;
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    rt.worker_threads(a.threads.max(1)).enable_all();
    if let Some(cpus) = http_cpus.clone() {
        // Every runtime thread (workers and blocking ones) pins itself as it starts; a failure
        // there (the set was checked against the allowed CPUs) leaves that thread unpinned,
        // said on stderr.
        rt.on_thread_start(move || {
            goodput_engine::affinity::pin_current_or_warn(&cpus, "the HTTP runtime");
        });
    }
    let rt = rt.build()?;
    if let Some(cpus) = &http_cpus {
        // This thread runs the accept loop (block_on); the engine's threads are started and
        // pinned already.
        goodput_engine::affinity::pin_current(cpus)?;
    }
    let fmt = |c: Option<&[usize]>| c.map_or("any CPU".to_string(), goodput_engine::affinity::format_cpu_list);
    let placed = (a.engine_cpus.is_some() || http_cpus.is_some()).then(|| {
        format!(
            "goodput serve: engine on {}, HTTP runtime on {}",
            fmt(a.engine_cpus.as_ref().map(|c| &c.0[..])),
            fmt(http_cpus.as_deref())
        )
    });
    let addr = format!("{}:{}", a.host, a.port);
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind(&addr).await.with_context(|| format!("listening on {addr}"))?;
        eprintln!(
            "goodput serve: `{name}` ({} weights) on {scheme}://{} — /v1/completions, /v1/chat/completions ({} chat template), /v1/models, /health, /metrics",
            loaded.weights_kind,
            listener.local_addr()?,
            if has_template { "the model's" } else { "ChatML" }
        );
        if let Some(line) = &placed {
            eprintln!("{line}");
        }
        // A second signal while shutting down ends everything at once.
        let grace = limits.grace;
        let shutdown = async move {
            signal().await;
            eprintln!("goodput serve: stopping (in-flight requests get {grace:?}; signal again to end them now)");
        };
        tokio::select! {
            r = goodput_server::serve_tls(listener, st, shutdown, limits, tls) => r.context("serving"),
            _ = async { signal().await; signal().await } => {
                eprintln!("goodput serve: second signal, ending every request now");
                Ok(())
            }
        }
    })?;
    eprintln!("goodput serve: stopped");
    engine.shutdown(false);
    if let Some(writer) = steps_writer {
        // The engine's sender is gone with it: the writer drains what is left and ends.
        writer.join().map_err(|_| anyhow::anyhow!("the steps writer panicked"))??;
    }
    Ok(())
}

/// The thread of [`write_steps`]: its result once the engine's sender is gone.
type StepsWriter = std::thread::JoinHandle<Result<()>>;

/// A thread writing each step record it receives to `path` as one JSON line, flushed per
/// line so that a replica stopped by a signal keeps every step it ran. The file is created
/// (truncated) before the engine starts, so a path that cannot be written fails the start.
/// It runs where the HTTP runtime does (`cpus`), off the engine's CPUs.
fn write_steps(
    path: &std::path::Path,
    cpus: Option<Vec<usize>>,
) -> Result<(flume::Sender<goodput_core::StepRecord>, StepsWriter)> {
    use std::io::Write;
    let file = std::fs::File::create(path).with_context(|| format!("creating --steps {}", path.display()))?;
    let (tx, rx) = flume::unbounded::<goodput_core::StepRecord>();
    let shown = path.display().to_string();
    let writer = std::thread::Builder::new().name("steps-writer".into()).spawn(move || -> Result<()> {
        if let Some(cpus) = &cpus {
            // Unpinned, it would take a share of the steps it records.
            goodput_engine::affinity::pin_current_or_warn(cpus, "the --steps writer");
        }
        let mut out = std::io::LineWriter::new(file);
        for step in rx.iter() {
            serde_json::to_writer(&mut out, &step)?;
            out.write_all(b"\n").with_context(|| format!("writing {shown}"))?;
        }
        out.flush().with_context(|| format!("writing {shown}"))
    })?;
    Ok((tx, writer))
}

#[cfg(test)]
mod tests {
    use super::placement;

    #[test]
    fn the_http_runtime_keeps_off_the_engine_s_cpus() {
        let all = [0, 1, 2, 3];
        assert_eq!(placement(Some(&[0]), None, &all), (Some(vec![1, 2, 3]), None));
        assert_eq!(placement(Some(&[0]), Some(&[2]), &all), (Some(vec![2]), None));
        assert_eq!(placement(None, Some(&[1]), &all), (Some(vec![1]), None));
        assert_eq!(placement(None, None, &all), (None, None));
        let (cpus, w) = placement(Some(&[0, 1]), Some(&[1, 2]), &all);
        assert_eq!(cpus, Some(vec![1, 2]));
        assert!(w.unwrap().contains("--http-cpus 1-2 overlaps --engine-cpus 0-1"));
        let (cpus, w) = placement(Some(&[0, 1]), None, &[0, 1]);
        assert!(cpus.is_none() && w.unwrap().contains("leaves no CPU for the HTTP runtime"));
    }
}
