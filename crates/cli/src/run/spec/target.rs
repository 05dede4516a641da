//! Where `goodput run` sends its requests, from the flags: `--target` and the flags that go
//! with it (the engine's configuration, the HTTP client's settings, a simulation's profile)
//! checked into the library's [`TargetSpec`].

use crate::run::args::RunArgs;
use anyhow::{bail, Result};
use goodput_bench::run::spec::{HttpSpec, Simulation, TargetSpec, APIS, MAX_TOKENS_FIELDS};
use goodput_client::{Api, HttpConfig};
use goodput_core::ModelSpec;
use goodput_engine::EngineConfig;

/// `reasons`: the scenario asks for reasoning, which servers split out of chat streams
/// only, so `--api` defaults to chat for it.
fn http_spec(a: &RunArgs, model: &ModelSpec, in_process: bool, reasons: bool) -> Result<HttpSpec> {
    let mut config = HttpConfig::new(String::new(), a.served_model_name.clone().unwrap_or_else(|| model.name.clone()));
    let api = a.api.as_deref().unwrap_or(if reasons { "chat" } else { "completions" });
    config.api = APIS.iter().find(|(flag, _)| *flag == api).map_or(Api::Completions, |&(_, api)| api);
    config.max_tokens_field =
        MAX_TOKENS_FIELDS.iter().find(|(flag, _)| *flag == a.max_tokens_field).map_or_else(Default::default, |f| f.1);
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

/// `--target` (with the engine and HTTP flags it takes) checked: each flag that has no
/// place with the target is refused, then the engine's and the client's settings checked.
pub(super) fn target_spec(a: &RunArgs, model: &ModelSpec, reasons: bool) -> Result<TargetSpec> {
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
            TargetSpec::HttpLocal { engine: engine()?, http: http_spec(a, model, true, reasons)? }
        }
        t if t.starts_with("http://") || t.starts_with("https://") => {
            if a.engine_cpus.is_some() {
                bail!("--engine-cpus pins goodput's own engine; with --target {t} there is none in this process");
            }
            no_simulation()?;
            let (url, given) = (t.trim_end_matches('/').to_string(), t.to_string());
            TargetSpec::Url { url, given, http: http_spec(a, model, false, reasons)? }
        }
        t => bail!("--target {t}: expected in-process, http-local or http://HOST:PORT"),
    })
}
