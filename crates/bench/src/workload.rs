//! What a run sends: the scenario (built in or a TOML file), checked against the model, and
//! the adapters the workloads and the HTTP client need from the engine (its sentence
//! encoder, its tokenizer).

use goodput_core::{CodecError, TextCodec, ValueError};
use goodput_workload::lengths::Lengths;
use goodput_workload::scenario::Builtin;
use goodput_workload::{load_scenario, Agent, Embedder, MultiTurn, Rag, Scenario, ScenarioFile};
use goodput_workload::{DatasetFormat, DatasetOptions, Trace, TraceFormat, TraceOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Why the scenario, its dataset or its trace was refused.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("the config's [scenario]: {0}")]
    Inline(goodput_workload::ScenarioTomlError),
    /// A file that cannot be read, a built-in that is not, a scenario that does not fit.
    #[error(transparent)]
    Workload(#[from] goodput_workload::WorkloadError),
    #[error("--scenario {scenario}: {units} run closed-loop: use --concurrency, not --rate")]
    ClosedLoop { scenario: String, units: &'static str },
    #[error("--dataset-output-tokens must be at least 1")]
    ZeroOutput,
    #[error("--dataset-sessions run closed-loop: use --concurrency, not --rate")]
    SessionsOpenLoop,
    #[error(
        "--encoder {}: no model.safetensors there (scripts/fetch-minilm.sh puts all-MiniLM-L6-v2 in place)",
        dir.display()
    )]
    NoEncoder { dir: PathBuf },
    #[error("--think applies to single-request scenarios; {0} has its own think time in its scenario file")]
    UnitsThink(String),
    #[error("--warmup and --cooldown as durations apply to single-request scenarios; give a count of {0} units")]
    UnitsTimedSpan(String),
    #[error("--burst applies to single-request scenarios; {0} runs closed-loop with --concurrency")]
    UnitsBurst(String),
}

type Result<T, E = ScenarioError> = std::result::Result<T, E>;

/// What the scenario asks for, checked before the run is set up: RAG still needs its encoder
/// loaded and its corpus embedded (the rig builds the [`goodput_workload::Workload`]).
pub struct WorkloadSpec {
    pub file: ScenarioFile,
    /// RAG: the sentence encoder's directory, or `None`: embed by the engine's prefill pass.
    pub encoder: Option<PathBuf>,
    /// `--dataset`: its conversations as read (tokenized once the model's tokenizer is loaded).
    pub dataset: Option<DatasetSpec>,
    /// `--trace`: its requests in the window.
    pub trace: Option<Arc<Trace>>,
}

/// A dataset read and checked, waiting for the tokenizer.
pub struct DatasetSpec {
    pub name: String,
    pub conversations: Vec<Vec<goodput_workload::dataset::Turn>>,
    pub options: DatasetOptions,
}

impl DatasetSpec {
    /// The dataset file at `path`, read in `format` with `options`; named by its file name.
    /// Sessions run closed-loop (`open_loop`: refused), and ask for at least one token.
    pub fn read(path: &Path, format: DatasetFormat, options: DatasetOptions, open_loop: bool) -> Result<DatasetSpec> {
        if options.sessions && open_loop {
            return Err(ScenarioError::SessionsOpenLoop);
        }
        if options.output_tokens == Some(0) {
            return Err(ScenarioError::ZeroOutput);
        }
        let conversations = goodput_workload::dataset::read(path, format)?;
        Ok(DatasetSpec { name: file_name(path, "dataset"), conversations, options })
    }
}

/// The trace file at `path`, read in `format`, its window of `options` ready to replay with
/// prompts of at most `max_len` tokens drawn with `seed`; named by its file name.
pub fn read_trace(
    path: &Path,
    format: TraceFormat,
    options: TraceOptions,
    max_len: usize,
    seed: u64,
) -> Result<Arc<Trace>> {
    let all = goodput_workload::trace::read(path, format)?;
    Ok(Arc::new(Trace::new(file_name(path, "trace"), all, options, max_len, seed)?))
}

fn file_name(path: &Path, or: &str) -> String {
    path.file_name().map_or_else(|| or.into(), |n| n.to_string_lossy().into_owned())
}

/// A trace's window `FROM..TO` (`600..1200`, `10m..`, `..30m`): seconds from its first
/// request, bare numbers as seconds.
pub fn parse_window(s: &str) -> Result<(f64, Option<f64>), ValueError> {
    let bad = |why: String| ValueError::new(s, why);
    let (from, to) = s.split_once("..").ok_or_else(|| bad("expected FROM..TO, e.g. 600..1200".into()))?;
    let secs = |x: &str| {
        let x = x.trim();
        x.parse::<f64>().ok().or_else(|| goodput_metrics::slo::parse_secs(x)).filter(|v| v.is_finite() && *v >= 0.0)
    };
    let time = |x: &str| secs(x).ok_or_else(|| bad(format!("`{x}` is not a time")));
    let from = if from.trim().is_empty() { 0.0 } else { time(from)? };
    let to = if to.trim().is_empty() { None } else { Some(time(to)?) };
    if to.is_some_and(|t| t <= from) {
        return Err(bad("the window ends before it starts".into()));
    }
    Ok((from, to))
}

impl WorkloadSpec {
    /// What a scenario of units (sessions, tasks, queries) refuses: a `--think` time (its
    /// file has its own), a warm-up or cool-down given as a duration (`timed_span`), a burst.
    pub fn check_units(&self, think: std::time::Duration, timed_span: bool, burst: bool) -> Result<()> {
        if !self.is_sessions() {
            return Ok(());
        }
        if !think.is_zero() {
            return Err(ScenarioError::UnitsThink(self.name()));
        }
        if timed_span {
            return Err(ScenarioError::UnitsTimedSpan(self.name()));
        }
        if burst {
            return Err(ScenarioError::UnitsBurst(self.name()));
        }
        Ok(())
    }

    /// Units of several requests (sessions, tasks, queries) rather than single requests.
    pub fn is_sessions(&self) -> bool {
        match &self.dataset {
            Some(d) => d.options.sessions,
            None => !matches!(self.file, ScenarioFile::Single(_)),
        }
    }

    pub fn name(&self) -> String {
        match (&self.dataset, &self.trace) {
            (Some(d), _) => d.name.clone(),
            (None, Some(t)) => t.name.clone(),
            (None, None) => self.file.name(),
        }
    }
}

/// The scenario named by `--scenario` (a built-in name or a TOML file), given `inline` (a
/// config file's `[scenario]` table as TOML, which then takes its place) or by its `lengths`
/// (`--input-len`, `--output-len`), checked against the model (`max_len`) and the arrival
/// (`open_loop`: `--rate`) before anything runs; `encoder` is RAG's sentence encoder
/// directory (`--encoder`).
pub fn build_workload(
    scenario: &str,
    inline: Option<&str>,
    lengths: Option<&Lengths>,
    encoder: Option<&Path>,
    open_loop: bool,
    max_len: usize,
) -> Result<WorkloadSpec> {
    let file = if let Some(l) = lengths {
        ScenarioFile::Single(l.scenario())
    } else if let Some(text) = inline {
        goodput_workload::parse_scenario(text, "inline").map_err(ScenarioError::Inline)?
    } else if scenario.ends_with(".toml") {
        load_scenario(Path::new(scenario))?
    } else {
        match Builtin::named(scenario) {
            Some(Builtin::Rag) => ScenarioFile::Rag(Rag::builtin()),
            Some(Builtin::Agent) => ScenarioFile::Agent(Agent::builtin()),
            Some(Builtin::MultiTurn) => ScenarioFile::MultiTurn(MultiTurn::builtin()),
            _ => ScenarioFile::Single(Scenario::builtin(scenario, max_len)?),
        }
    };
    let units = match &file {
        ScenarioFile::Single(_) => None,
        ScenarioFile::MultiTurn(_) => Some("multi-turn sessions"),
        ScenarioFile::Agent(_) => Some("agent tasks"),
        ScenarioFile::Rag(_) => Some("RAG queries"),
    };
    if let Some(units) = units.filter(|_| open_loop) {
        return Err(ScenarioError::ClosedLoop { scenario: scenario.into(), units });
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
    Ok(WorkloadSpec { file, encoder, dataset: None, trace: None })
}

/// RAG's sentence encoder: `--encoder`, else where scripts/fetch-minilm.sh puts it; `None`
/// when there is none there (the rig says so, through the run's progress).
fn rag_encoder(encoder: Option<&Path>) -> Result<Option<PathBuf>> {
    let dir = encoder.map(Path::to_path_buf).unwrap_or_else(default_encoder_dir);
    if dir.join("model.safetensors").is_file() {
        return Ok(Some(dir));
    }
    if encoder.is_some() {
        return Err(ScenarioError::NoEncoder { dir });
    }
    Ok(None)
}

/// The engine's sentence encoder as the workload's embedder.
pub struct EncoderEmbedder(pub goodput_engine::encoder::Encoder);
impl Embedder for EncoderEmbedder {
    fn embed(&self, texts: &[&str]) -> std::result::Result<Vec<Vec<f32>>, CodecError> {
        self.0.embed(texts).map_err(CodecError::new)
    }
}

/// The model's tokenizer as text ↔ token ids: the HTTP client's codec (text prompts, counts
/// of what it receives) and the workloads' (RAG's assembled prompts, a dataset's lengths).
pub struct ModelCodec(pub Arc<goodput_engine::tokenizer::Tokenizer>);
impl TextCodec for ModelCodec {
    fn encode(&self, text: &str) -> std::result::Result<Vec<u32>, CodecError> {
        self.0.encode(text).map_err(CodecError::new)
    }
    fn decode(&self, ids: &[u32]) -> std::result::Result<String, CodecError> {
        self.0.decode(ids).map_err(CodecError::new)
    }
    fn writable(&self, ids: &[u32]) -> Vec<u32> {
        if self.0.kind() != "bytes" {
            return ids.to_vec();
        }
        // The byte scheme's id of byte b is 3 + b: onto the 95 printable ASCII bytes.
        ids.iter().map(|&id| 3 + 32 + id % 95).collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every built-in runs on the built-in `tiny` (2048 positions), fitted to it where it has
    /// to be, or names the model to use.
    #[test]
    fn every_builtin_fits_the_default_model_or_names_one_that_it_does() {
        for b in Builtin::ALL.into_iter().filter(|&b| b != Builtin::LongContext) {
            let name = b.name();
            build_workload(name, None, None, None, false, 2048).unwrap_or_else(|e| panic!("{name}: {e:#}"));
        }
        let err = build_workload("long-context", None, None, None, false, 2048).err().expect("refused").to_string();
        assert!(err.contains("--model qwen2.5-0.5b"), "{err}");
    }

    /// Random ids written as byte-scheme text read back as themselves, one token a byte, and
    /// equal ids stay equal: a prefix shared by token is shared by text.
    #[test]
    fn byte_scheme_prompts_round_trip_as_text() {
        let codec = ModelCodec(Arc::new(goodput_engine::tokenizer::Tokenizer::byte_level(32_000)));
        let ids: Vec<u32> = (0..400).map(|i| (i * 7919 + 13) % 32_000).collect();
        let w = codec.writable(&ids);
        let text = codec.decode(&w).unwrap();
        assert_eq!(codec.encode(&text).unwrap(), w);
        assert_eq!(text.len(), 400);
        let other = codec.writable(&[&ids[..200], &[5, 6, 7]].concat());
        assert_eq!(other[..200], w[..200]);
    }
}
