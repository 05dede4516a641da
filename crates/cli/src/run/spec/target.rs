//! Where `goodput run` sends its requests, checked: `--target` and the flags that go with it
//! (the engine's configuration, the HTTP client's settings, a simulation's profile) as one
//! [`TargetSpec`] per kind of target.

use crate::run::args::RunArgs;
use anyhow::{bail, Result};
use goodput_client::{Api, HttpConfig, MaxTokensField};
use goodput_core::ModelSpec;
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
const APIS: [(&str, Api); 4] = [
    ("completions", Api::Completions),
    ("completions-text", Api::CompletionsText),
    ("chat", Api::Chat),
    ("responses", Api::Responses),
];

/// `--max-tokens-field`'s values.
const MAX_TOKENS_FIELDS: [(&str, MaxTokensField); 3] = [
    ("auto", MaxTokensField::Auto),
    ("max_tokens", MaxTokensField::MaxTokens),
    ("max_completion_tokens", MaxTokensField::MaxCompletionTokens),
];

impl HttpSpec {
    /// `reasons`: the scenario asks for reasoning, which servers split out of chat streams
    /// only, so `--api` defaults to chat for it.
    fn new(a: &RunArgs, model: &ModelSpec, in_process: bool, reasons: bool) -> Result<Self> {
        let mut config =
            HttpConfig::new(String::new(), a.served_model_name.clone().unwrap_or_else(|| model.name.clone()));
        let api = a.api.as_deref().unwrap_or(if reasons { "chat" } else { "completions" });
        config.api = APIS.iter().find(|(flag, _)| *flag == api).map_or(Api::Completions, |&(_, api)| api);
        config.max_tokens_field = MAX_TOKENS_FIELDS
            .iter()
            .find(|(flag, _)| *flag == a.max_tokens_field)
            .map_or_else(Default::default, |f| f.1);
        config.exact_lengths = true;
        // goodput's own server returns token ids and stamps with this process's clock.
        (config.return_token_ids, config.same_clock) = (in_process, in_process);
        config.server_stamps = !a.ignore_server_stamps;
        config.strict_openai = a.connection.strict_openai;
        config.own_http1 = !a.connection.hyper_client;
        config.extra_body = a.connection.extra_body.clone().unwrap_or_default();
        config.connection = a.connection.connection()?;
        config.timeout = a.timeout;
        Ok(HttpSpec { config, name_given: a.served_model_name.is_some() })
    }

    /// The `--api` value of the configured API.
    pub fn api_flag(&self) -> &'static str {
        APIS.iter().find(|(_, api)| *api == self.config.api).map_or("completions", |&(flag, _)| flag)
    }
}

impl TargetSpec {
    /// `--target` (with the engine and HTTP flags it takes) checked: each flag that has no
    /// place with the target is refused, then the engine's and the client's settings checked.
    pub(super) fn new(a: &RunArgs, model: &ModelSpec, reasons: bool) -> Result<Self> {
        let engine = || -> Result<EngineConfig> {
            let mut cfg = a.engine.options().config()?;
            cfg.cpus = a.engine_cpus.as_ref().map(|c| c.0.clone());
            Ok(cfg)
        };
        let no_simulation = || -> Result<()> {
            if a.simulate.is_some() || a.predict.is_some() {
                bail!(
                    "--simulate and --predict model goodput's in-process engine (its scheduler and a profile of its steps), not the HTTP path of --target {}; drop --target",
                    a.target
                );
            }
            Ok(())
        };
        Ok(match a.target.as_str() {
            "in-process" => {
                let http_only = a.connection.http_only_flags();
                if !http_only.is_empty() {
                    bail!("{} apply to HTTP targets; with --target in-process there is no HTTP", http_only.join(", "));
                }
                let simulation = match (&a.simulate, &a.predict) {
                    (Some(p), _) => Some(Simulation::Simulate(p.clone())),
                    (None, Some(p)) => Some(Simulation::Predict(p.clone())),
                    (None, None) => None,
                };
                TargetSpec::InProcess { engine: engine()?, simulation }
            }
            "http-local" => {
                no_simulation()?;
                TargetSpec::HttpLocal { engine: engine()?, http: HttpSpec::new(a, model, true, reasons)? }
            }
            t if t.starts_with("http://") || t.starts_with("https://") => {
                if a.engine_cpus.is_some() {
                    bail!("--engine-cpus pins goodput's own engine; with --target {t} there is none in this process");
                }
                no_simulation()?;
                let (url, given) = (t.trim_end_matches('/').to_string(), t.to_string());
                TargetSpec::Url { url, given, http: HttpSpec::new(a, model, false, reasons)? }
            }
            t => bail!("--target {t}: expected in-process, http-local or http://HOST:PORT"),
        })
    }

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
