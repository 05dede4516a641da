//! `goodput serve`: the in-process engine behind goodput's OpenAI-compatible server, until
//! SIGINT or SIGTERM; then in-flight streams get `--shutdown-grace` to finish.

use crate::args::{EngineArgs, ModelArgs};
use anyhow::{Context, Result};
use clap::Args;
use goodput_core::Clock;
use goodput_engine::Engine;
use goodput_server::AppState;
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
    /// Answer 429 while this many requests wait in the engine's queue.
    #[arg(long)]
    pub max_waiting: Option<usize>,
    /// After SIGINT/SIGTERM, in-flight requests get this long before they are ended.
    #[arg(long, default_value = "30s", value_parser = crate::args::parse_duration)]
    pub shutdown_grace: Duration,
    /// Server threads (the engine has its own).
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
}

/// Builds the server's state over a started engine.
pub fn state(
    engine: &Engine,
    loaded_tokenizer: Arc<goodput_engine::tokenizer::Tokenizer>,
    name: String,
    chat_template: Option<String>,
    max_waiting: Option<usize>,
) -> Result<Arc<AppState>> {
    Ok(Arc::new(AppState::new(engine.handle(), loaded_tokenizer, name, chat_template, max_waiting)?))
}

/// Resolves on SIGINT or SIGTERM.
async fn signal() {
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
    let spec = a.model.spec()?;
    let max_len = a.engine.max_model_len.unwrap_or(spec.max_position_embeddings).min(spec.max_position_embeddings);
    let loaded = a.model.load(max_len)?;
    let name = a.served_model_name.clone().unwrap_or_else(|| spec.name.clone());
    let engine = Engine::start(loaded.model, a.engine.config()?, Clock::new(), None)?;
    let has_template = loaded.chat_template.is_some();
    let st = state(&engine, Arc::new(loaded.tokenizer), name.clone(), loaded.chat_template, a.max_waiting)?;
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(a.threads.max(1)).enable_all().build()?;
    let addr = format!("{}:{}", a.host, a.port);
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind(&addr).await.with_context(|| format!("listening on {addr}"))?;
        eprintln!(
            "goodput serve: `{name}` ({} weights) on http://{} — /v1/completions, /v1/chat/completions ({} chat template), /v1/models, /health, /metrics",
            loaded.weights_kind,
            listener.local_addr()?,
            if has_template { "the model's" } else { "ChatML" }
        );
        goodput_server::serve(listener, st, signal(), a.shutdown_grace).await.context("serving")
    })?;
    eprintln!("goodput serve: stopped");
    engine.shutdown(false);
    Ok(())
}
