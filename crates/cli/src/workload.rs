//! What `goodput run` sends: the scenario named by `--scenario` (built in or a TOML file),
//! checked against the model, and the adapters the RAG workload needs from the engine.

use anyhow::{bail, Result};
use goodput_workload::{load_scenario, Agent, Embedder, MultiTurn, Rag, Scenario, ScenarioFile, TextTokenizer};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The scenario named by `--scenario`: a built-in name or a TOML file, checked against the
/// model (`max_len`) and the arrival (`open_loop`: `--rate`) before anything runs; `encoder`
/// is RAG's sentence encoder directory (`--encoder`).
pub fn build_workload(scenario: &str, encoder: Option<&Path>, open_loop: bool, max_len: usize) -> Result<WorkloadSpec> {
    let spec = if scenario.ends_with(".toml") {
        load_scenario(Path::new(scenario))?
    } else {
        match scenario {
            "rag" => ScenarioFile::Rag(Rag::builtin()),
            "agent" => ScenarioFile::Agent(Agent::builtin()),
            "multi-turn" => ScenarioFile::MultiTurn(MultiTurn::builtin()),
            name => ScenarioFile::Single(Scenario::builtin(name, max_len)?),
        }
    };
    let closed_only = |what: &str| -> Result<()> {
        if open_loop {
            bail!("--scenario {scenario}: {what} run closed-loop: use --concurrency, not --rate");
        }
        Ok(())
    };
    Ok(match spec {
        ScenarioFile::Single(s) => {
            s.validate(max_len)?;
            WorkloadSpec::Single(Arc::new(s))
        }
        ScenarioFile::MultiTurn(mt) => {
            closed_only("multi-turn sessions")?;
            mt.validate(max_len)?;
            WorkloadSpec::Sessions(Arc::new(mt))
        }
        ScenarioFile::Agent(ag) => {
            closed_only("agent tasks")?;
            ag.validate(max_len)?;
            WorkloadSpec::Tasks(Arc::new(ag))
        }
        ScenarioFile::Rag(rag) => {
            closed_only("RAG queries")?;
            rag.validate()?;
            let dir = encoder.map(Path::to_path_buf).unwrap_or_else(default_encoder_dir);
            if dir.join("model.safetensors").is_file() {
                WorkloadSpec::Rag(Some(dir), rag)
            } else if encoder.is_some() {
                bail!(
                    "--encoder {}: no model.safetensors there (scripts/fetch-minilm.sh puts all-MiniLM-L6-v2 in place)",
                    dir.display()
                );
            } else {
                eprintln!(
                    "rag: no sentence encoder at {} (scripts/fetch-minilm.sh fetches all-MiniLM-L6-v2); the embed stage is the engine's own prefill-only pass over the query, and retrieval uses hashed bag-of-words vectors",
                    dir.display()
                );
                WorkloadSpec::Rag(None, rag)
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

/// What the scenario asks for, before the run is set up: RAG still needs its encoder loaded
/// and its corpus embedded (the rig turns this into a [`goodput_workload::Workload`]).
pub enum WorkloadSpec {
    /// The sentence encoder's directory, or `None`: embed by the engine's prefill pass.
    Rag(Option<PathBuf>, Rag),
    Single(Arc<Scenario>),
    Sessions(Arc<MultiTurn>),
    Tasks(Arc<Agent>),
}

impl WorkloadSpec {
    /// Units of several requests (sessions, tasks, queries) rather than single requests.
    pub fn is_sessions(&self) -> bool {
        !matches!(self, WorkloadSpec::Single(_))
    }

    pub fn name(&self) -> String {
        match self {
            WorkloadSpec::Single(s) => s.name.clone(),
            WorkloadSpec::Sessions(_) => "multi-turn".into(),
            WorkloadSpec::Tasks(_) => "agent".into(),
            WorkloadSpec::Rag(..) => "rag".into(),
        }
    }
}
