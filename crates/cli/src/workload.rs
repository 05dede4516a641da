//! What `goodput run` sends: the scenario named by `--scenario` (built in or a TOML file),
//! checked against the model, and the adapters the workloads and the HTTP client need from
//! the engine (its sentence encoder, its tokenizer).

use anyhow::{bail, Result};
use goodput_core::TextCodec;
use goodput_workload::scenario::Builtin;
use goodput_workload::{load_scenario, Agent, Embedder, MultiTurn, Rag, Scenario, ScenarioFile};
use goodput_workload::{DatasetFormat, DatasetOptions, Trace, TraceFormat, TraceOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;

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

impl WorkloadSpec {
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

#[derive(clap::Args, Debug, Clone, Default)]
pub struct DatasetArgs {
    /// Prompts from a dataset file instead of --scenario's synthetic ones: ShareGPT JSON (the
    /// first human turn, the reply's length as output length) or JSONL (`prompt` or `messages`,
    /// optional `output_tokens`). Lengths are measured with the model's tokenizer (--tokenizer).
    #[arg(long, value_name = "FILE", conflicts_with = "scenario")]
    pub dataset: Option<PathBuf>,
    /// The dataset's layout: sharegpt, jsonl, or auto (JSONL when it starts with `{`).
    #[arg(long, default_value = "auto", value_parser = ["sharegpt", "jsonl", "auto"], requires = "dataset")]
    pub dataset_format: String,
    /// Dataset: every request asks for this many output tokens (default: the reply's length,
    /// or the line's `output_tokens`).
    #[arg(long, requires = "dataset")]
    pub dataset_output_tokens: Option<usize>,
    /// Dataset: leave out prompts shorter than this many tokens.
    #[arg(long, default_value_t = 4, requires = "dataset")]
    pub dataset_min_input: usize,
    /// Dataset: leave out prompts longer than this many tokens (beyond the model's context
    /// they are always left out).
    #[arg(long, requires = "dataset")]
    pub dataset_max_input: Option<usize>,
    /// Dataset: replay whole conversations as sessions, each turn sent with its history
    /// (closed loop; --requests counts conversations).
    #[arg(long, requires = "dataset")]
    pub dataset_sessions: bool,
}

#[derive(clap::Args, Debug, Clone, Default)]
pub struct TraceArgs {
    /// Replay a trace: requests open loop at its times, with its lengths. Mooncake JSONL
    /// (`timestamp` ms, `input_length`, `output_length`, `hash_ids`: equal ids are equal
    /// prompt blocks, so prefix sharing is replayed) or the Azure LLM inference trace CSV
    /// (`TIMESTAMP`, `ContextTokens`, `GeneratedTokens`). One level per --trace-speedup.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["scenario", "dataset", "rate", "burst", "stages"])]
    pub trace: Option<PathBuf>,
    /// The trace's layout: mooncake, azure, or auto (azure when its header names TIMESTAMP).
    #[arg(long, default_value = "auto", value_parser = ["mooncake", "azure", "auto"], requires = "trace")]
    pub trace_format: String,
    /// Replay this many times faster (a level each: 1,2,4).
    #[arg(long, value_delimiter = ',', default_value = "1", requires = "trace")]
    pub trace_speedup: Vec<f64>,
    /// The part of the trace to replay, in seconds from its first request: FROM..TO, FROM..
    /// or ..TO (e.g. 600..1200 or ..300s).
    #[arg(long, value_parser = parse_window, requires = "trace")]
    pub trace_window: Option<(f64, Option<f64>)>,
    /// Prompt tokens per hash id of a Mooncake trace.
    #[arg(long, default_value_t = 512, requires = "trace")]
    pub trace_block_size: usize,
}

/// `FROM..TO` in seconds (either side may be empty; `s` and `ms` suffixes as elsewhere).
fn parse_window(s: &str) -> Result<(f64, Option<f64>), String> {
    let (from, to) = s.split_once("..").ok_or_else(|| format!("`{s}`: expected FROM..TO, e.g. 600..1200"))?;
    // Bare numbers are seconds.
    let secs = |x: &str| {
        let x = x.trim();
        x.parse::<f64>().ok().or_else(|| goodput_metrics::slo::parse_secs(x)).filter(|v| v.is_finite() && *v >= 0.0)
    };
    let from = if from.trim().is_empty() { 0.0 } else { secs(from).ok_or(format!("`{from}` is not a time"))? };
    let to = if to.trim().is_empty() { None } else { Some(secs(to).ok_or(format!("`{to}` is not a time"))?) };
    if to.is_some_and(|t| t <= from) {
        return Err(format!("`{s}`: the window ends before it starts"));
    }
    Ok((from, to))
}

/// `--trace`, read and cut to its window: `None` without one.
pub fn read_trace(a: &TraceArgs, max_len: usize, seed: u64) -> Result<Option<Arc<Trace>>> {
    let Some(path) = &a.trace else { return Ok(None) };
    if a.trace_speedup.is_empty() || a.trace_speedup.iter().any(|x| !(x.is_finite() && (0.001..=10_000.0).contains(x)))
    {
        bail!("--trace-speedup: every speedup must be a number from 0.001 to 10000, got {:?}", a.trace_speedup);
    }
    let format = match a.trace_format.as_str() {
        "mooncake" => TraceFormat::Mooncake,
        "azure" => TraceFormat::Azure,
        _ => TraceFormat::Auto,
    };
    let all = goodput_workload::trace::read(path, format)?;
    let name = path.file_name().map_or_else(|| "trace".into(), |n| n.to_string_lossy().into_owned());
    let options = TraceOptions { window: a.trace_window.unwrap_or((0.0, None)), block_size: a.trace_block_size };
    Ok(Some(Arc::new(Trace::new(name, all, options, max_len, seed)?)))
}

/// `--dataset`, read and checked: `None` without one.
pub fn read_dataset(a: &DatasetArgs, open_loop: bool) -> Result<Option<DatasetSpec>> {
    let Some(path) = &a.dataset else { return Ok(None) };
    if a.dataset_sessions && open_loop {
        bail!("--dataset-sessions run closed-loop: use --concurrency, not --rate");
    }
    if a.dataset_output_tokens == Some(0) {
        bail!("--dataset-output-tokens must be at least 1");
    }
    let format = match a.dataset_format.as_str() {
        "sharegpt" => DatasetFormat::Sharegpt,
        "jsonl" => DatasetFormat::Jsonl,
        _ => DatasetFormat::Auto,
    };
    let conversations = goodput_workload::dataset::read(path, format)?;
    let name = path.file_name().map_or_else(|| "dataset".into(), |n| n.to_string_lossy().into_owned());
    let options = DatasetOptions {
        output_tokens: a.dataset_output_tokens,
        min_input: a.dataset_min_input,
        max_input: a.dataset_max_input,
        sessions: a.dataset_sessions,
    };
    Ok(Some(DatasetSpec { name, conversations, options }))
}

/// The scenario named by `--scenario` (a built-in name or a TOML file) or given `inline` (a
/// config file's `[scenario]` table as TOML, which then takes its place), checked against
/// the model (`max_len`) and the arrival (`open_loop`: `--rate`) before anything runs;
/// `encoder` is RAG's sentence encoder directory (`--encoder`).
pub fn build_workload(
    scenario: &str,
    inline: Option<&str>,
    encoder: Option<&Path>,
    open_loop: bool,
    max_len: usize,
) -> Result<WorkloadSpec> {
    let file = if let Some(text) = inline {
        goodput_workload::parse_scenario(text, "inline").map_err(|e| anyhow::anyhow!("the config's [scenario]: {e}"))?
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
    Ok(WorkloadSpec { file, encoder, dataset: None, trace: None })
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

/// The model's tokenizer as text ↔ token ids: the HTTP client's codec (text prompts, counts
/// of what it receives) and the workloads' (RAG's assembled prompts, a dataset's lengths).
pub struct ModelCodec(pub Arc<goodput_engine::tokenizer::Tokenizer>);
impl TextCodec for ModelCodec {
    fn encode(&self, text: &str) -> std::result::Result<Vec<u32>, String> {
        self.0.encode(text).map_err(|e| e.to_string())
    }
    fn decode(&self, ids: &[u32]) -> std::result::Result<String, String> {
        self.0.decode(ids).map_err(|e| e.to_string())
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
            build_workload(name, None, None, false, 2048).unwrap_or_else(|e| panic!("{name}: {e:#}"));
        }
        let err = build_workload("long-context", None, None, false, 2048).err().expect("refused").to_string();
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
