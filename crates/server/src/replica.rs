//! One replica served until a signal (`goodput serve`): the model loaded, the engine started
//! (pinned where asked, its steps written where asked), goodput's OpenAI-compatible server in
//! front of it on a runtime of its own, and on SIGINT or SIGTERM the in-flight streams given
//! their grace (a second signal ends them at once).

use crate::{AppState, ListenLimits, Policy};
use goodput_core::{Clock, StepRecord};
use goodput_engine::source::{EngineOptions, ModelSource, SourceError};
use goodput_engine::{Engine, EngineError};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Why a replica could not start or serve.
#[derive(Debug, thiserror::Error)]
pub enum ReplicaError {
    #[error(transparent)]
    Source(Box<SourceError>),
    #[error(transparent)]
    Engine(Box<EngineError>),
    #[error(transparent)]
    Server(#[from] crate::ServerError),
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
    #[error(transparent)]
    Reasoning(#[from] crate::reasoning::ReasoningError),
    /// The policy or the listener's limits cannot be served.
    #[error(transparent)]
    Limits(#[from] crate::LimitError),
    /// A file, a socket or a thread: what was being done, and why it failed.
    #[error("{what}")]
    Io {
        what: String,
        #[source]
        cause: std::io::Error,
    },
    /// The `--steps` writer failed or panicked.
    #[error("the steps writer: {0}")]
    Steps(String),
}

impl From<SourceError> for ReplicaError {
    fn from(e: SourceError) -> Self {
        Self::Source(Box::new(e))
    }
}

impl From<EngineError> for ReplicaError {
    fn from(e: EngineError) -> Self {
        Self::Engine(Box::new(e))
    }
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> ReplicaError {
    let what = what.into();
    move |cause| ReplicaError::Io { what, cause }
}

/// A replica to serve: the model and its engine, where it listens and how, and where its
/// threads run.
#[derive(Clone, Debug)]
pub struct ReplicaSpec {
    pub model: ModelSource,
    pub engine: EngineOptions,
    pub host: String,
    pub port: u16,
    /// The name the API serves the model under (`None`: the model's own).
    pub served_model_name: Option<String>,
    pub policy: Policy,
    pub limits: ListenLimits,
    /// A PEM certificate chain and its key: HTTPS.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// The HTTP runtime's worker threads.
    pub threads: usize,
    /// `none` or `think-tags`.
    pub reasoning_parser: String,
    pub engine_cpus: Option<Vec<usize>>,
    pub http_cpus: Option<Vec<usize>>,
    /// Write every engine step here, a JSON line each.
    pub steps: Option<PathBuf>,
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

/// Resolves on SIGINT or SIGTERM.
pub async fn signal() {
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

/// Serves `a` until a signal, saying what it does through `say`.
pub fn serve_replica(a: &ReplicaSpec, say: &(dyn Fn(&str) + Sync)) -> Result<(), ReplicaError> {
    a.policy.check()?;
    a.limits.check()?;
    let tls = a.tls.as_ref().map(|(cert, key)| crate::tls::server_config(cert, key)).transpose()?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    let spec = a.model.spec()?;
    let max_len = a.engine.max_model_len.unwrap_or(spec.max_position_embeddings).min(spec.max_position_embeddings);
    a.engine.apply_before_load();
    let mut warnings = Vec::new();
    let loaded = a.model.load(max_len, &mut warnings)?;
    warnings.iter().for_each(|w| say(&format!("goodput: warning: {w}")));
    let name = a.served_model_name.clone().unwrap_or_else(|| spec.name.clone());
    let mut cfg = a.engine.config()?;
    cfg.cpus = a.engine_cpus.clone();
    let allowed = goodput_engine::affinity::allowed();
    let (http_cpus, warning) = placement(a.engine_cpus.as_deref(), a.http_cpus.as_deref(), &allowed);
    if let Some(w) = warning {
        say(&format!("goodput serve: warning: {w}"));
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
    let parser = crate::reasoning::ReasoningParser::named(&a.reasoning_parser, &tokenizer)?;
    let st = Arc::new(
        AppState::new(engine.handle(), tokenizer, name.clone(), loaded.chat, a.policy.clone())?.with_reasoning(parser),
    );
    let rt = runtime(a.threads, http_cpus.clone())?;
    if let Some(cpus) = &http_cpus {
        // This thread runs the accept loop (block_on); the engine's threads are started and
        // pinned already.
        goodput_engine::affinity::pin_current(cpus)?;
    }
    let fmt = |c: Option<&[usize]>| c.map_or("any CPU".to_string(), goodput_engine::affinity::format_cpu_list);
    let placed = (a.engine_cpus.is_some() || http_cpus.is_some()).then(|| {
        format!(
            "goodput serve: engine on {}, HTTP runtime on {}",
            fmt(a.engine_cpus.as_deref()),
            fmt(http_cpus.as_deref())
        )
    });
    let addr = format!("{}:{}", a.host, a.port);
    let limits = a.limits;
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind(&addr).await.map_err(io(format!("listening on {addr}")))?;
        let local = listener.local_addr().map_err(io("the listener's address"))?;
        say(&format!(
            "goodput serve: `{name}` ({} weights) on {scheme}://{local} — /v1/completions, /v1/chat/completions ({} chat template), /v1/models, /health, /metrics",
            loaded.weights_kind,
            if has_template { "the model's" } else { "ChatML" }
        ));
        if let Some(line) = &placed {
            say(line);
        }
        // A second signal while shutting down ends everything at once.
        let grace = limits.grace;
        let stopping =
            format!("goodput serve: stopping (in-flight requests get {grace:?}; signal again to end them now)");
        let shutdown = async move {
            signal().await;
            eprintln!("{stopping}");
        };
        tokio::select! {
            r = crate::serve_tls(listener, st, shutdown, limits, tls) => r.map_err(io("serving")),
            _ = async { signal().await; signal().await } => {
                say("goodput serve: second signal, ending every request now");
                Ok(())
            }
        }
    })?;
    say("goodput serve: stopped");
    engine.shutdown(false);
    if let Some(writer) = steps_writer {
        // The engine's sender is gone with it: the writer drains what is left and ends.
        writer.join().map_err(|_| ReplicaError::Steps("it panicked".into()))??;
    }
    Ok(())
}

/// The HTTP runtime: `threads` workers, every thread pinned to `cpus` as it starts (a failure
/// there leaves that thread unpinned, said on stderr).
fn runtime(threads: usize, cpus: Option<Vec<usize>>) -> Result<tokio::runtime::Runtime, ReplicaError> {
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    rt.worker_threads(threads.max(1)).enable_all();
    if let Some(cpus) = cpus {
        rt.on_thread_start(move || {
            goodput_engine::affinity::pin_current_or_warn(&cpus, "the HTTP runtime");
        });
    }
    rt.build().map_err(io("starting the HTTP runtime"))
}

/// The thread of [`write_steps`]: its result once the engine's sender is gone.
type StepsWriter = std::thread::JoinHandle<Result<(), ReplicaError>>;

/// A thread writing each step record it receives to `path` as one JSON line, flushed per
/// line so that a replica stopped by a signal keeps every step it ran. The file is created
/// (truncated) before the engine starts, so a path that cannot be written fails the start.
/// It runs where the HTTP runtime does (`cpus`), off the engine's CPUs.
fn write_steps(
    path: &Path,
    cpus: Option<Vec<usize>>,
) -> Result<(flume::Sender<StepRecord>, StepsWriter), ReplicaError> {
    use std::io::Write;
    let file = std::fs::File::create(path).map_err(io(format!("creating --steps {}", path.display())))?;
    let (tx, rx) = flume::unbounded::<StepRecord>();
    let shown = path.display().to_string();
    let writer = std::thread::Builder::new()
        .name("steps-writer".into())
        .spawn(move || -> Result<(), ReplicaError> {
            if let Some(cpus) = &cpus {
                // Unpinned, it would take a share of the steps it records.
                goodput_engine::affinity::pin_current_or_warn(cpus, "the --steps writer");
            }
            let mut out = std::io::LineWriter::new(file);
            for step in rx.iter() {
                serde_json::to_writer(&mut out, &step).map_err(|e| ReplicaError::Steps(format!("{shown}: {e}")))?;
                out.write_all(b"\n").map_err(io(format!("writing {shown}")))?;
            }
            out.flush().map_err(io(format!("writing {shown}")))
        })
        .map_err(io("starting the steps writer"))?;
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
