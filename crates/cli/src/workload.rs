//! What `goodput run` sends: the scenario named by `--scenario` (built in or a TOML file),
//! checked against the model, and the adapters the RAG workload needs from the engine.

use crate::run::RunArgs;
use anyhow::{bail, Result};
use goodput_workload::{load_scenario, Agent, Embedder, MultiTurn, Rag, Scenario, ScenarioFile, TextTokenizer};
use std::path::PathBuf;
use std::sync::Arc;

/// The scenario named by `--scenario`: a built-in name or a TOML file, checked against the
/// model before anything runs.
pub fn build_workload(a: &RunArgs, max_len: usize) -> Result<Workload> {
    let spec = if a.scenario.ends_with(".toml") {
        load_scenario(std::path::Path::new(&a.scenario)).map_err(anyhow::Error::msg)?
    } else {
        match a.scenario.as_str() {
            "rag" => ScenarioFile::Rag(Rag::builtin()),
            "agent" => ScenarioFile::Agent(Agent::builtin()),
            "multi-turn" => ScenarioFile::MultiTurn(MultiTurn::builtin()),
            name => ScenarioFile::Single(Scenario::builtin(name, max_len).map_err(anyhow::Error::msg)?),
        }
    };
    let closed_only = |what: &str| -> Result<()> {
        if a.rate.is_some() {
            bail!("--scenario {}: {what} run closed-loop: use --concurrency, not --rate", a.scenario);
        }
        Ok(())
    };
    Ok(match spec {
        ScenarioFile::Single(s) => {
            s.validate(max_len).map_err(anyhow::Error::msg)?;
            Workload::Single(Arc::new(s))
        }
        ScenarioFile::MultiTurn(mt) => {
            closed_only("multi-turn sessions")?;
            mt.validate(max_len).map_err(anyhow::Error::msg)?;
            Workload::Sessions(Arc::new(mt))
        }
        ScenarioFile::Agent(ag) => {
            closed_only("agent tasks")?;
            ag.validate(max_len).map_err(anyhow::Error::msg)?;
            Workload::Tasks(Arc::new(ag))
        }
        ScenarioFile::Rag(rag) => {
            closed_only("RAG queries")?;
            rag.validate().map_err(anyhow::Error::msg)?;
            let dir = a.encoder.clone().unwrap_or_else(default_encoder_dir);
            if dir.join("model.safetensors").is_file() {
                Workload::Rag(Some(dir), rag)
            } else if a.encoder.is_some() {
                bail!(
                    "--encoder {}: no model.safetensors there (scripts/fetch-minilm.sh puts all-MiniLM-L6-v2 in place)",
                    dir.display()
                );
            } else {
                eprintln!(
                    "rag: no sentence encoder at {} (scripts/fetch-minilm.sh fetches all-MiniLM-L6-v2); the embed stage is the engine's own prefill-only pass over the query, and retrieval uses hashed bag-of-words vectors",
                    dir.display()
                );
                Workload::Rag(None, rag)
            }
        }
    })
}

/// The engine's sentence encoder as the workload's embedder.
pub struct EncoderEmbedder(pub goodput_engine::encoder::Encoder);
impl Embedder for EncoderEmbedder {
    fn embed(&self, texts: &[&str]) -> std::result::Result<Vec<Vec<f32>>, String> {
        self.0.embed(texts).map_err(|e| e.to_string())
    }
}

/// The model's tokenizer as the workload's prompt tokenizer.
pub struct LlmTokenizer(pub Arc<goodput_engine::tokenizer::Tokenizer>);
impl TextTokenizer for LlmTokenizer {
    fn encode(&self, text: &str) -> std::result::Result<Vec<u32>, String> {
        self.0.encode(text).map_err(|e| e.to_string())
    }
}

/// Where scripts/fetch-minilm.sh puts the encoder.
pub fn default_encoder_dir() -> PathBuf {
    let cache = std::env::var_os("GOODPUT_CACHE").map(PathBuf::from).unwrap_or_else(|| {
        std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache"))
            .join("goodput")
    });
    cache.join("minilm")
}

/// What a run sends: single requests of a scenario, or multi-turn sessions.
pub enum Workload {
    /// The sentence encoder's directory, or `None`: embed by the engine's prefill pass.
    Rag(Option<PathBuf>, Rag),
    Single(Arc<Scenario>),
    Sessions(Arc<MultiTurn>),
    Tasks(Arc<Agent>),
}

impl Workload {
    pub fn is_sessions(&self) -> bool {
        matches!(self, Workload::Sessions(_) | Workload::Tasks(_) | Workload::Rag(..))
    }
    /// Requests per unit of `--requests` (a session is `turns` requests).
    pub fn requests_per_unit(&self) -> usize {
        match self {
            Workload::Single(_) | Workload::Rag(..) => 1,
            Workload::Sessions(mt) => mt.turns as usize,
            Workload::Tasks(ag) => ag.model_calls(),
        }
    }
    pub fn name(&self) -> String {
        match self {
            Workload::Single(s) => s.name.clone(),
            Workload::Sessions(_) => "multi-turn".into(),
            Workload::Tasks(_) => "agent".into(),
            Workload::Rag(..) => "rag".into(),
        }
    }
    pub fn describe(&self) -> String {
        match self {
            Workload::Single(s) => s.describe(),
            Workload::Sessions(mt) => mt.describe(),
            Workload::Tasks(ag) => ag.describe(),
            Workload::Rag(_, r) => r.describe(),
        }
    }
    pub fn describe_lengths(&self) -> String {
        match self {
            Workload::Single(s) => s.describe_lengths(),
            Workload::Sessions(mt) => mt.describe().trim_start_matches("multi-turn: ").to_string(),
            Workload::Tasks(ag) => ag.describe().trim_start_matches("agent: ").to_string(),
            Workload::Rag(_, r) => r.describe().trim_start_matches("rag: ").to_string(),
        }
    }
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Workload::Single(s) => serde_json::json!(s.as_ref()),
            Workload::Sessions(mt) => serde_json::json!({ "name": "multi-turn", "multi_turn": mt.as_ref() }),
            Workload::Tasks(ag) => serde_json::json!({ "name": "agent", "agent": ag.as_ref() }),
            Workload::Rag(dir, r) => serde_json::json!({
                "name": "rag",
                "rag": r,
                "encoder": dir.as_ref().map_or("none: the engine's prefill-only pass".to_string(), |d| d.display().to_string()),
            }),
        }
    }
}
