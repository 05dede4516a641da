//! How `goodput run` reaches an HTTP server: TLS, headers, the API key, extra body fields and
//! strict OpenAI bodies; and the command line as stored in results, with credentials removed.

use anyhow::{bail, Result};
use clap::Args;
use goodput_client::{Connection, Secret};
use std::path::PathBuf;

#[derive(Args, Debug, Clone, Default)]
pub struct ConnectionArgs {
    /// HTTP targets: a header sent with every request (the measured ones, /v1/models,
    /// /metrics), `Name: value`; repeat for more. Values are never printed or written (the
    /// command stored in results says `<redacted>`); none is sent on across a redirect, since
    /// none is followed.
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
    /// HTTP targets: send the measured requests through hyper, as every other request, rather
    /// than goodput's own HTTP/1.1 path, which plain-HTTP targets take (about 2 µs less client
    /// CPU a token; `goodput calibrate --hyper` shows the two). HTTPS, proxies and
    /// `user:password@` URLs always go through hyper.
    #[arg(long)]
    pub hyper_client: bool,
}

fn parse_header(s: &str) -> Result<(String, Secret), String> {
    Connection::parse_header(s)
}

fn parse_extra_body(s: &str) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    match serde_json::from_str::<serde_json::Value>(s) {
        Ok(serde_json::Value::Object(m)) => Ok(m),
        // Not echoed: it may hold a key.
        Ok(other) => Err(format!("--extra-body must be a JSON object, got {}", json_kind(&other))),
        Err(e) => Err(format!("--extra-body is not JSON: {e}")),
    }
}

/// What a JSON value is, in words.
fn json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
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
        ];
        given.into_iter().filter(|g| g.0).map(|g| g.1).collect()
    }
}

/// The command line with credentials replaced by `<redacted>`: the value of `--api-key`, the
/// value of every `--header` (its name kept), the values of secret-looking keys of
/// `--extra-body` ([`is_secret_field`]), and the `user:password@` of every URL.
pub fn redacted_command(args: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut next_is: Option<Arg> = None;
    for arg in args {
        let redacted = match next_is.take() {
            Some(kind) => kind.redact(&arg),
            None => match arg.split_once('=') {
                Some((flag @ "--api-key", v)) => format!("{flag}={}", Arg::Key.redact(v)),
                Some((flag @ "--header", v)) => format!("{flag}={}", Arg::Header.redact(v)),
                Some((flag @ "--extra-body", v)) => format!("{flag}={}", Arg::ExtraBody.redact(v)),
                _ => match arg.as_str() {
                    "--api-key" => Arg::Key.next(&mut next_is, arg),
                    "--header" => Arg::Header.next(&mut next_is, arg),
                    "--extra-body" => Arg::ExtraBody.next(&mut next_is, arg),
                    short if short.starts_with('-') && !short.starts_with("--") => short_flags(short, &mut next_is),
                    _ => goodput_client::redact_url(&arg),
                },
            },
        };
        out.push(redacted);
    }
    out
}

/// Whether [`redacted_command`]'s rule hides any of `value` as the value of `--{long}`: every
/// key and header value; an `--extra-body` that is not JSON or has a secret-looking field
/// ([`is_secret_field`]) at any depth. Other flags hide nothing.
pub fn hides(long: &str, value: &str) -> bool {
    match long {
        "api-key" | "header" => true,
        "extra-body" => serde_json::from_str::<serde_json::Value>(value).map_or(true, |v| has_secret_fields(&v)),
        _ => false,
    }
}

fn has_secret_fields(v: &serde_json::Value) -> bool {
    match v {
        serde_json::Value::Object(m) => m.iter().any(|(k, v)| is_secret_field(k) || has_secret_fields(v)),
        serde_json::Value::Array(a) => a.iter().any(has_secret_fields),
        _ => false,
    }
}

/// What an argument's value is, by its flag.
#[derive(Clone, Copy)]
enum Arg {
    Key,
    Header,
    ExtraBody,
}

impl Arg {
    fn redact(self, v: &str) -> String {
        match self {
            Arg::Key => "<redacted>".into(),
            Arg::Header => match v.split_once(':') {
                Some((name, _)) => format!("{name}: <redacted>"),
                None => "<redacted>".into(),
            },
            Arg::ExtraBody => match serde_json::from_str::<serde_json::Value>(v) {
                Ok(mut body) => {
                    redact_secret_fields(&mut body);
                    body.to_string()
                }
                Err(_) => "<redacted>".into(),
            },
        }
    }

    /// The flag itself, its value the next argument.
    fn next(self, next_is: &mut Option<Arg>, flag: String) -> String {
        *next_is = Some(self);
        flag
    }
}

/// A cluster of short flags (`-qH 'Name: value'`, `-HName:value`, `-H=…`): `-q` takes no value,
/// `-H` a header, the rest of the cluster or the next argument; any other letter ends it.
fn short_flags(arg: &str, next_is: &mut Option<Arg>) -> String {
    for (i, c) in arg.char_indices().skip(1) {
        match c {
            'q' => continue,
            'H' => {
                let (head, value) = arg.split_at(i + 1);
                if value.is_empty() {
                    return Arg::Header.next(next_is, arg.to_string());
                }
                let (eq, v) = value.strip_prefix('=').map_or(("", value), |v| ("=", v));
                return format!("{head}{eq}{}", Arg::Header.redact(v));
            }
            _ => break,
        }
    }
    goodput_client::redact_url(arg)
}

/// Whether an `--extra-body` key names a credential: `api_key`, `key`, `access_token`,
/// `clientSecret`, `password`, `authorization`… (its last word is `key`, `token`, `auth`,
/// or any word is a password, secret, credential, cookie or session; `max_tokens` is none).
pub fn is_secret_field(name: &str) -> bool {
    let mut words: Vec<String> = Vec::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if !c.is_alphanumeric() {
            prev_lower = false;
            words.push(String::new());
            continue;
        }
        if words.is_empty() || (c.is_uppercase() && prev_lower) {
            words.push(String::new());
        }
        prev_lower = c.is_lowercase() || c.is_numeric();
        if let Some(w) = words.last_mut() {
            w.extend(c.to_lowercase());
        }
    }
    words.retain(|w| !w.is_empty());
    let anywhere = "password passwd secret secrets credential credentials cookie session apikey authorization bearer";
    let last = "key keys token auth pwd pass";
    let is = |list: &str, w: &String| list.split(' ').any(|x| x == w);
    words.iter().any(|w| is(anywhere, w)) || words.last().is_some_and(|w| is(last, w))
}

/// The values of secret-looking keys ([`is_secret_field`]) replaced by `<redacted>`, at any depth.
fn redact_secret_fields(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, v) in m.iter_mut() {
                if is_secret_field(k) {
                    *v = serde_json::Value::String("<redacted>".into());
                } else {
                    redact_secret_fields(v);
                }
            }
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(redact_secret_fields),
        _ => {}
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
            "goodput run --api-key <redacted> --header X-Team: <redacted> -H Authorization: <redacted> --target https://<redacted>@h:1/v1"
        );
        let joined = cmd("run --api-key=sk-3 --header=X-Api-Key:sk-4 --target=http://u@h:1").join(" ");
        assert_eq!(joined, "run --api-key=<redacted> --header=X-Api-Key: <redacted> --target=http://<redacted>@h:1");
        assert!(!cmd("run --api-key sk-1").join(" ").contains("sk-1"));
        // Every header value, in each form clap takes; a model name after -m is kept.
        let joined = cmd("run -HX-A:v1 -H=X-B:v2 -qH X-C:v3 -qHX-D:v4 -H nocolon -m tiny").join(" ");
        assert_eq!(
            joined,
            "run -HX-A: <redacted> -H=X-B: <redacted> -qH X-C: <redacted> -qHX-D: <redacted> -H <redacted> -m tiny"
        );
    }

    #[test]
    fn secret_looking_keys_of_the_extra_body_are_redacted_in_the_stored_command() {
        let args = [
            "run",
            "--extra-body",
            r#"{"api_key":"s1","max_tokens":5,"nested":{"accessToken":"s2","list":[{"Password":"s3"}]},"temperature":0.5}"#,
            r#"--extra-body={"client_secret":"s4","return_token_ids":true}"#,
            "--extra-body",
            "{not json s5",
        ];
        let out = redacted_command(args.map(String::from));
        assert_eq!(
            out[2],
            r#"{"api_key":"<redacted>","max_tokens":5,"nested":{"accessToken":"<redacted>","list":[{"Password":"<redacted>"}]},"temperature":0.5}"#
        );
        assert_eq!(out[3], r#"--extra-body={"client_secret":"<redacted>","return_token_ids":true}"#);
        assert_eq!(out[5], "<redacted>");
        for k in ["key", "token", "secret", "password", "authorization", "X-API-KEY", "apiKey", "session_id", "auth"] {
            assert!(is_secret_field(k), "{k}");
        }
        for k in ["max_tokens", "min_tokens", "top_k", "return_token_ids", "temperature", "user", "monkey_tokens"] {
            assert!(!is_secret_field(k), "{k}");
        }
    }

    #[test]
    fn extra_bodies_are_objects() {
        assert!(parse_extra_body(r#"{"temperature":0.5}"#).unwrap().contains_key("temperature"));
        assert!(parse_extra_body("[1]").unwrap_err().contains("JSON object, got an array"));
        assert!(!parse_extra_body(r#""sk-1""#).unwrap_err().contains("sk-1"));
        assert!(parse_extra_body("{").unwrap_err().contains("not JSON"));
    }
}
