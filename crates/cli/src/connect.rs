//! How `goodput run` reaches an HTTP server: TLS, headers, the API key, extra body fields and
//! strict OpenAI bodies (the command line stored in results is redacted by
//! `goodput_client::redact`).

use anyhow::{bail, Result};
use clap::Args;
use goodput_client::{Connection, Secret};
use std::path::PathBuf;

#[derive(Args, Debug, Clone, Default)]
pub struct ConnectionArgs {
    /// A header sent with every request, `Name: value`.
    ///
    /// HTTP targets: a header sent with every request (the measured ones, /v1/models,
    /// /metrics), `Name: value`; repeat for more. Values are never printed or written (the
    /// command stored in results says `<redacted>`); none is sent on across a redirect, since
    /// none is followed.
    #[arg(long = "header", short = 'H', value_name = "NAME: VALUE", value_parser = parse_header)]
    pub headers: Vec<(String, Secret)>,
    /// Send `Authorization: Bearer KEY`.
    ///
    /// HTTP targets: send `Authorization: Bearer KEY` (also read from OPENAI_API_KEY). Never
    /// printed or written to results.
    #[arg(long, value_name = "KEY", env = "OPENAI_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// HTTPS targets: accept any certificate and host name (self-signed test servers).
    #[arg(long, conflicts_with = "ca_cert")]
    pub insecure: bool,
    /// HTTPS targets: also trust the certificates in this PEM file (a private CA).
    #[arg(long, value_name = "PEM")]
    pub ca_cert: Option<PathBuf>,
    /// JSON merged into every request body.
    ///
    /// HTTP targets: a JSON object merged into every request body, over goodput's own fields
    /// (e.g. '{"temperature":0.7,"chat_template_kwargs":{"enable_thinking":false}}').
    #[arg(long, value_name = "JSON", value_parser = Connection::parse_extra_body)]
    pub extra_body: Option<serde_json::Map<String, serde_json::Value>>,
    /// HTTP targets: send only OpenAI's own fields, none of vLLM's extensions (`ignore_eos`,
    /// `min_tokens`, `top_k`, `return_token_ids`), for gateways that refuse unknown fields.
    /// Outputs may then end before their requested length; they are counted as short outputs.
    #[arg(long)]
    pub strict_openai: bool,
    /// HTTP targets: send the measured requests through hyper, as every other request, rather
    /// than goodput's own HTTP/1.1 path, which plain-HTTP targets take (about 2 µs less client
    /// CPU a token; `goodput calibrate --hyper` shows the two). HTTPS, proxies and
    /// `user:password@` URLs always go through hyper.
    #[arg(long)]
    pub hyper_client: bool,
    /// Send each request's session in this header (X-Session-ID): a router pins sessions.
    ///
    /// Send each request's session (multi-turn, agent, dataset or trace) in this header, as
    /// AIPerf does, so a router (vllm-router's `consistent_hash`) keeps a session on one replica.
    #[arg(long, value_name = "NAME")]
    pub session_header: Option<String>,
}

fn parse_header(s: &str) -> Result<(String, Secret), goodput_client::ArgError> {
    Connection::parse_header(s)
}

impl ConnectionArgs {
    /// The client's connection settings.
    pub fn connection(&self) -> Result<Connection> {
        if let Some(p) = self.ca_cert.as_ref().filter(|p| !p.is_file()) {
            bail!("--ca-cert {}: no such file", p.display());
        }
        Ok(Connection {
            headers: self.headers.clone(),
            // An empty key (OPENAI_API_KEY= , or --api-key "$UNSET") is no key: a server that
            // wants one answers 401, and says so.
            api_key: self.api_key.clone().filter(|k| !k.trim().is_empty()).map(Secret::new),
            insecure: self.insecure,
            ca_cert: self.ca_cert.clone(),
            session_header: self.session_header.clone(),
            // A URL's user:password@, moved here by the target that takes the URL.
            basic_auth: None,
        })
    }

    /// The flags that only an HTTP target reads (the key is left out: OPENAI_API_KEY may be
    /// set for other tools).
    pub fn http_only_flags(&self) -> Vec<&'static str> {
        let given = [
            (!self.headers.is_empty(), "--header"),
            (self.insecure, "--insecure"),
            (self.ca_cert.is_some(), "--ca-cert"),
            (self.extra_body.is_some(), "--extra-body"),
            (self.strict_openai, "--strict-openai"),
            (self.hyper_client, "--hyper-client"),
            (self.session_header.is_some(), "--session-header"),
        ];
        given.into_iter().filter(|g| g.0).map(|g| g.1).collect()
    }
}
