//! Where a run sends its requests: one [`TargetSpec`] per kind of target, with what it
//! needs (the engine's configuration, the HTTP client's settings, a simulation's profile).

use goodput_client::{Api, HttpConfig, MaxTokensField};
use goodput_engine::EngineConfig;
use std::path::{Path, PathBuf};

/// Where requests go, with what each kind of target needs.
pub enum TargetSpec {
    /// goodput's engine in this process, requests handed to it directly (no HTTP); or, with a
    /// `simulation`, its simulated engine in its place or beside it.
    InProcess { engine: EngineConfig, simulation: Option<Simulation> },
    /// goodput's own server started on loopback in this process, in front of its engine,
    /// driven over HTTP.
    HttpLocal { engine: EngineConfig, http: HttpSpec },
    /// Another process's OpenAI-compatible server.
    Url {
        /// `http(s)://HOST:PORT`, without a trailing `/`.
        url: String,
        /// `--target` as given (the summary's `target`, once redacted).
        given: String,
        http: HttpSpec,
    },
}

impl TargetSpec {
    /// The target is another process on this machine (a server on loopback): its CPU shows
    /// as other processes' in the machine's counters.
    pub fn elsewhere_on_this_machine(&self) -> bool {
        let TargetSpec::Url { url, .. } = self else { return false };
        let authority = url.split("://").nth(1).unwrap_or(url).split('/').next().unwrap_or("");
        let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        let host = host.rsplit_once(':').map_or(host, |(h, _)| h);
        matches!(host, "127.0.0.1" | "localhost" | "[::1]" | "::1") || host.starts_with("127.")
    }
}

/// A profile of the engine's steps (`goodput profile`) standing for the in-process engine.
pub enum Simulation {
    /// `--simulate`: the simulated engine runs the sweep in place of the model.
    Simulate(PathBuf),
    /// `--predict`: the sweep is measured and, level by level, simulated beside it.
    Predict(PathBuf),
}

/// An HTTP target's client settings.
pub struct HttpSpec {
    /// Everything the client needs but where the server listens (`base_url`, known for
    /// http-local once its server started) and the codec (the model's tokenizer, loaded by the
    /// rig): the rig fills those in.
    pub config: HttpConfig,
    /// `--served-model-name` was given; without it, a server that serves one model only is
    /// asked for its name.
    pub name_given: bool,
}

/// `--api`'s values and the API each names.
pub const APIS: [(&str, Api); 4] = [
    ("completions", Api::Completions),
    ("completions-text", Api::CompletionsText),
    ("chat", Api::Chat),
    ("responses", Api::Responses),
];

/// `--max-tokens-field`'s values.
pub const MAX_TOKENS_FIELDS: [(&str, MaxTokensField); 3] = [
    ("auto", MaxTokensField::Auto),
    ("max_tokens", MaxTokensField::MaxTokens),
    ("max_completion_tokens", MaxTokensField::MaxCompletionTokens),
];

impl HttpSpec {
    /// The `--api` value of the configured API.
    pub fn api_flag(&self) -> &'static str {
        APIS.iter().find(|(_, api)| *api == self.config.api).map_or("completions", |&(flag, _)| flag)
    }
}

impl TargetSpec {
    /// `--target` as given: `in-process`, `http-local` or the server's URL.
    pub fn label(&self) -> &str {
        match self {
            TargetSpec::InProcess { .. } => "in-process",
            TargetSpec::HttpLocal { .. } => "http-local",
            TargetSpec::Url { given, .. } => given,
        }
    }

    /// `--predict`'s profile: the sweep measured, and simulated beside it.
    pub fn predict(&self) -> Option<(&EngineConfig, &Path)> {
        match self {
            TargetSpec::InProcess { engine, simulation: Some(Simulation::Predict(p)) } => Some((engine, p)),
            _ => None,
        }
    }
}
