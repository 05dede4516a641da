//! How `goodput run` reaches an HTTP server: TLS, headers, the API key, extra body fields and
//! strict OpenAI bodies; and the command line as stored in results, with credentials removed.

use anyhow::{bail, Result};
use clap::Args;
use goodput_client::{Connection, Secret};
use std::path::PathBuf;

#[derive(Args, Debug, Clone, Default)]
pub struct ConnectionArgs {
    /// HTTP targets: a header sent with every request (the measured ones, /v1/models,
    /// /metrics), `Name: value`; repeat for more. Values of credential-like headers
    /// (Authorization, *key*, *token*, cookies) are never printed or written.
    #[arg(long = "header", short = 'H', value_name = "NAME: VALUE", value_parser = parse_header)]
    pub headers: Vec<(String, Secret)>,
    /// HTTP targets: send `Authorization: Bearer KEY` (also read from OPENAI_API_KEY). Never
    /// printed or written to results.
    #[arg(long, env = "OPENAI_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// HTTPS targets: accept any certificate and host name (self-signed test servers).
    #[arg(long, conflicts_with = "ca_cert")]
    pub insecure: bool,
    /// HTTPS targets: also trust the certificates in this PEM file (a private CA).
    #[arg(long, value_name = "PEM")]
    pub ca_cert: Option<PathBuf>,
    /// HTTP targets: a JSON object merged into every request body, over goodput's own fields
    /// (e.g. '{"temperature":0.7,"chat_template_kwargs":{"enable_thinking":false}}').
    #[arg(long, value_name = "JSON", value_parser = parse_extra_body)]
    pub extra_body: Option<serde_json::Map<String, serde_json::Value>>,
    /// HTTP targets: send only OpenAI's own fields, none of vLLM's extensions (`ignore_eos`,
    /// `min_tokens`, `top_k`, `return_token_ids`), for gateways that refuse unknown fields.
    /// Outputs may then end before their requested length; they are counted as short outputs.
    #[arg(long)]
    pub strict_openai: bool,
}

fn parse_header(s: &str) -> Result<(String, Secret), String> {
    Connection::parse_header(s)
}

fn parse_extra_body(s: &str) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    match serde_json::from_str::<serde_json::Value>(s) {
        Ok(serde_json::Value::Object(m)) => Ok(m),
        Ok(other) => Err(format!("--extra-body must be a JSON object, got {other}")),
        Err(e) => Err(format!("--extra-body is not JSON: {e}")),
    }
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
        ];
        given.into_iter().filter(|g| g.0).map(|g| g.1).collect()
    }
}

/// The command line with credentials replaced by `<redacted>`: the value of `--api-key`,
/// credential-like `--header` values, and a password in a URL.
pub fn redacted_command(args: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut next_is: Option<&str> = None;
    for arg in args {
        let redacted = match next_is.take() {
            Some("key") => "<redacted>".to_string(),
            Some("header") => redact_header(&arg),
            _ => match arg.split_once('=') {
                Some(("--api-key", _)) => "--api-key=<redacted>".into(),
                Some((flag @ ("--header" | "-H"), h)) => format!("{flag}={}", redact_header(h)),
                _ => {
                    next_is = match arg.as_str() {
                        "--api-key" => Some("key"),
                        "--header" | "-H" => Some("header"),
                        _ => None,
                    };
                    goodput_client::redact_url(&arg)
                }
            },
        };
        out.push(redacted);
    }
    out
}

fn redact_header(h: &str) -> String {
    match h.split_once(':') {
        Some((name, _)) if goodput_client::is_sensitive(name) => format!("{name}: <redacted>"),
        Some(_) => h.to_string(),
        None => "<redacted>".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(s: &str) -> Vec<String> {
        redacted_command(s.split(' ').map(String::from))
    }

    #[test]
    fn credentials_never_reach_the_stored_command() {
        let joined = cmd("goodput run --api-key sk-1 --header X-Team:infra -H Authorization:Bearer-sk-2 --target https://u:pw@h:1/v1").join(" ");
        assert_eq!(
            joined,
            "goodput run --api-key <redacted> --header X-Team:infra -H Authorization: <redacted> --target https://u:<redacted>@h:1/v1"
        );
        let joined = cmd("run --api-key=sk-3 --header=X-Api-Key:sk-4 --target http://h:1").join(" ");
        assert_eq!(joined, "run --api-key=<redacted> --header=X-Api-Key: <redacted> --target http://h:1");
        assert!(!cmd("run --api-key sk-1").join(" ").contains("sk-1"));
    }

    #[test]
    fn extra_bodies_are_objects() {
        assert!(parse_extra_body(r#"{"temperature":0.5}"#).unwrap().contains_key("temperature"));
        assert!(parse_extra_body("[1]").unwrap_err().contains("JSON object"));
        assert!(parse_extra_body("{").unwrap_err().contains("not JSON"));
    }
}
