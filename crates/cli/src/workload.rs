//! What `goodput run` sends: the scenario named by `--scenario` (built in or a TOML file),
//! checked against the model, and the adapters the RAG workload needs from the engine.

use anyhow::{bail, Result};
use goodput_workload::{load_scenario, Agent, Embedder, MultiTurn, Rag, Scenario, ScenarioFile, TextTokenizer};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What the scenario asks for, checked before the run is set up: RAG still needs its encoder
/// loaded and its corpus embedded (the rig builds the [`goodput_workload::Workload`]).
pub struct WorkloadSpec {
    pub file: ScenarioFile,
    /// RAG: the sentence encoder's directory, or `None`: embed by the engine's prefill pass.
    pub encoder: Option<PathBuf>,
}

impl WorkloadSpec {
    /// Units of several requests (sessions, tasks, queries) rather than single requests.
    pub fn is_sessions(&self) -> bool {
        !matches!(self.file, ScenarioFile::Single(_))
    }

    pub fn name(&self) -> String {
        self.file.name()
    }
}

/// The scenario named by `--scenario`: a built-in name or a TOML file, checked against the
/// model (`max_len`) and the arrival (`open_loop`: `--rate`) before anything runs; `encoder`
/// is RAG's sentence encoder directory (`--encoder`).
pub fn build_workload(scenario: &str, encoder: Option<&Path>, open_loop: bool, max_len: usize) -> Result<WorkloadSpec> {
    let file = if scenario.ends_with(".toml") {
        load_scenario(Path::new(scenario))?
    } else {
        match scenario {
            "rag" => ScenarioFile::Rag(Rag::builtin()),
            "agent" => ScenarioFile::Agent(Agent::builtin()),
            "multi-turn" => ScenarioFile::MultiTurn(MultiTurn::builtin()),
            name => ScenarioFile::Single(Scenario::builtin(name, max_len)?),
        }
    };
    let units = match &file {
        ScenarioFile::Single(_) => None,
        ScenarioFile::MultiTurn(_) => Some("multi-turn sessions"),
        ScenarioFile::Agent(_) => Some("agent tasks"),
        ScenarioFile::Rag(_) => Some("RAG queries"),
    };
    if let Some(units) = units.filter(|_| open_loop) {
        bail!("--scenario {scenario}: {units} run closed-loop: use --concurrency, not --rate");
    }
    match &file {
        ScenarioFile::Single(s) => s.validate(max_len)?,
        ScenarioFile::MultiTurn(mt) => mt.validate(max_len)?,
        ScenarioFile::Agent(ag) => ag.validate(max_len)?,
        ScenarioFile::Rag(rag) => rag.validate()?,
    }
    let encoder = match &file {
        ScenarioFile::Rag(_) => rag_encoder(encoder)?,
        _ => None,
    };
    Ok(WorkloadSpec { file, encoder })
}

/// RAG's sentence encoder: `--encoder`, else where scripts/fetch-minilm.sh puts it; `None`
/// (said so) when there is none there.
fn rag_encoder(encoder: Option<&Path>) -> Result<Option<PathBuf>> {
    let dir = encoder.map(Path::to_path_buf).unwrap_or_else(default_encoder_dir);
    if dir.join("model.safetensors").is_file() {
        return Ok(Some(dir));
    }
    if encoder.is_some() {
        bail!(
            "--encoder {}: no model.safetensors there (scripts/fetch-minilm.sh puts all-MiniLM-L6-v2 in place)",
            dir.display()
        );
    }
    eprintln!(
        "rag: no sentence encoder at {} (scripts/fetch-minilm.sh fetches all-MiniLM-L6-v2); the embed stage is the engine's own prefill-only pass over the query, and retrieval uses hashed bag-of-words vectors",
        dir.display()
    );
    Ok(None)
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
