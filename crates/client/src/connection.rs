//! How the client reaches a server: TLS (rustls: the system's roots and webpki-roots, a CA
//! file added to them, or no verification with `insecure`), headers sent with every request,
//! the API key as `Authorization: Bearer`, a URL's `user:password@` as `Authorization: Basic`
//! (taken out of the URL, so the URL can be shown), and no redirects followed (curl's default:
//! a hop to another server would carry the headers there and be timed as the server's).

use crate::ClientError;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, AUTHORIZATION};
use std::path::PathBuf;

/// A value that must not be printed: its `Debug` and `Display` show `<redacted>`.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Self {
        Secret(s.into())
    }
    /// The value itself, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

impl std::fmt::Display for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// Credentials for `Authorization: Basic`: a user and maybe a password.
pub type BasicAuth = (Secret, Option<Secret>);

/// TLS and what every request carries beside its body.
#[derive(Clone, Debug, Default)]
pub struct Connection {
    /// Sent with every request (the measured ones, `/v1/models`, `/metrics`), in order.
    pub headers: Vec<(String, Secret)>,
    /// Sent as `Authorization: Bearer KEY`.
    pub api_key: Option<Secret>,
    /// Sent as `Authorization: Basic` (user, password): a URL's `user:password@`, taken out of
    /// it by [`split_credentials`].
    pub basic_auth: Option<BasicAuth>,
    /// Accept any certificate and host name (self-signed test servers).
    pub insecure: bool,
    /// PEM certificates trusted beside the system's roots (a private CA).
    pub ca_cert: Option<PathBuf>,
    /// The header that carries each request's session (`--session-header X-Session-ID`), as
    /// AIPerf and SGLang's bench send one, so a router can keep a session on one replica.
    pub session_header: Option<String>,
}

/// Names whose values are credentials: never written anywhere.
pub fn is_sensitive(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    ["authorization", "cookie", "key", "token", "secret", "password", "session", "auth"].iter().any(|s| n.contains(s))
}

/// `text` with the userinfo of every URL in it (`scheme://user:password@host…`) replaced by
/// `<redacted>`: for a URL, a command-line argument or a message that holds URLs. Everything
/// after `://` up to the last `@` before the first `?`, `#`, space or quote goes, so a
/// password with an unescaped `/` or `@` goes too.
pub fn redact_url(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        let end = tail.find(|c: char| matches!(c, '?' | '#' | '"' | '\'') || c.is_whitespace()).unwrap_or(tail.len());
        rest = match tail[..end].rfind('@') {
            Some(at) => {
                out.push_str("<redacted>");
                &tail[at..]
            }
            None => tail,
        };
    }
    out.push_str(rest);
    out
}

/// `url` without its `user:password@`, and those (percent-decoded) for `Authorization: Basic`.
/// A URL without them, or one that does not parse, comes back as it is.
pub fn split_credentials(url: &str) -> (String, Option<BasicAuth>) {
    let Ok(mut parsed) = reqwest::Url::parse(url) else { return (url.to_string(), None) };
    if parsed.username().is_empty() && parsed.password().is_none() {
        return (url.to_string(), None);
    }
    let user = Secret::new(percent_decode(parsed.username()));
    let password = parsed.password().map(|p| Secret::new(percent_decode(p)));
    // A URL with an authority (`http`, `https`) can always lose its userinfo.
    let _ = parsed.set_username("");
    let _ = parsed.set_password(None);
    let mut clean = parsed.to_string();
    // The parser adds `/` to a bare host; the caller's URL had none.
    if !url.ends_with('/') && parsed.path() == "/" && parsed.query().is_none() {
        clean.pop();
    }
    (clean, Some((user, password)))
}

/// `%XX` escapes decoded (invalid UTF-8 replaced): how a URL carries `@`, `:` or `/` in a
/// password.
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = b
            .get(i + 1..i + 3)
            .filter(|h| b[i] == b'%' && h.iter().all(u8::is_ascii_hexdigit))
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match hex {
            Some(byte) => {
                out.push(byte);
                i += 3;
            }
            None => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A `--header` or `--extra-body` refused. Neither echoes the value: it may be a credential.
#[derive(Debug, thiserror::Error)]
pub enum ArgError {
    #[error("a header without `:`: expected `Name: value`")]
    HeaderWithoutColon,
    #[error("header name `{0}` is not a valid HTTP name")]
    HeaderName(String),
    #[error("the value of header `{0}` is not a valid HTTP value")]
    HeaderValue(String),
    #[error("--extra-body must be a JSON object, got {0}")]
    ExtraBodyNotObject(&'static str),
    #[error("--extra-body is not JSON: {0}")]
    ExtraBodyNotJson(serde_json::Error),
}

impl Connection {
    /// Parses a `--header` argument, `Name: value`.
    pub fn parse_header(s: &str) -> Result<(String, Secret), ArgError> {
        // Not echoed: what was meant as a value may be a credential.
        let (name, value) = s.split_once(':').ok_or(ArgError::HeaderWithoutColon)?;
        let name = name.trim();
        HeaderName::from_bytes(name.as_bytes()).map_err(|_| ArgError::HeaderName(name.into()))?;
        let value = value.trim();
        HeaderValue::from_str(value).map_err(|_| ArgError::HeaderValue(name.into()))?;
        Ok((name.to_string(), Secret::new(value)))
    }

    /// Parses an `--extra-body` argument: a JSON object whose fields every request body
    /// carries. Not echoed when refused: it may hold a key.
    pub fn parse_extra_body(s: &str) -> Result<serde_json::Map<String, serde_json::Value>, ArgError> {
        use serde_json::Value;
        match serde_json::from_str::<Value>(s) {
            Ok(Value::Object(m)) => Ok(m),
            Ok(other) => {
                let kind = match other {
                    Value::Null => "null",
                    Value::Bool(_) => "a boolean",
                    Value::Number(_) => "a number",
                    Value::String(_) => "a string",
                    Value::Array(_) => "an array",
                    Value::Object(_) => "an object",
                };
                Err(ArgError::ExtraBodyNotObject(kind))
            }
            Err(e) => Err(ArgError::ExtraBodyNotJson(e)),
        }
    }

    /// The headers every request carries, the key's included.
    pub fn header_map(&self) -> Result<HeaderMap, ClientError> {
        let bad = |what: String| ClientError::Connection(what);
        let mut map = HeaderMap::new();
        for (name, value) in &self.headers {
            let n =
                HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad(format!("header name `{name}` is invalid")))?;
            let mut v = HeaderValue::from_str(value.expose())
                .map_err(|_| bad(format!("the value of header `{name}` is not a valid HTTP value")))?;
            v.set_sensitive(is_sensitive(name));
            map.append(n, v);
        }
        if let Some(name) = &self.session_header {
            // The headers goodput writes itself are not a session's to set.
            let own = ["host", "content-length", "content-type", "accept", "authorization", "x-request-id"];
            let own = own.iter().chain(&["transfer-encoding", "connection", "te", "upgrade"]);
            let n = HeaderName::from_bytes(name.as_bytes());
            if n.as_ref().map_or(true, |n| map.contains_key(n) || own.clone().any(|o| n.as_str() == *o)) {
                return Err(bad(format!(
                    "--session-header `{name}`: not a header name, one --header sends too, or one goodput writes itself"
                )));
            }
        }
        if self.basic_auth.is_some() && (self.api_key.is_some() || map.contains_key(AUTHORIZATION)) {
            return Err(bad(
                "both a user:password@ in the URL and --api-key or an Authorization header given; keep one".into(),
            ));
        }
        if let Some(key) = &self.api_key {
            if map.contains_key(AUTHORIZATION) {
                return Err(bad("both --api-key and an Authorization header given; keep one".into()));
            }
            let mut v = HeaderValue::from_str(&format!("Bearer {}", key.expose()))
                .map_err(|_| bad("the API key holds characters an HTTP header cannot carry".into()))?;
            v.set_sensitive(true);
            map.insert(AUTHORIZATION, v);
        }
        Ok(map)
    }

    /// The HTTP client: keep-alive pools without a cap, no Nagle delay, these headers and TLS,
    /// and no redirects followed (the 3xx comes back; [`crate::redirect`] says why it stops).
    pub fn client(&self) -> Result<reqwest::Client, ClientError> {
        let mut b = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .pool_max_idle_per_host(usize::MAX)
            .tcp_nodelay(true)
            .default_headers(self.header_map()?)
            .use_rustls_tls()
            .danger_accept_invalid_certs(self.insecure);
        if let Some(path) = &self.ca_cert {
            let pem = goodput_core::input::read_bytes(path)
                .map_err(|e| ClientError::Connection(format!("reading --ca-cert {}: {e}", path.display())))?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| {
                ClientError::Connection(format!("--ca-cert {} holds no PEM certificate: {e}", path.display()))
            })?;
            if certs.is_empty() {
                return Err(ClientError::Connection(format!("--ca-cert {} holds no PEM certificate", path.display())));
            }
            for c in certs {
                b = b.add_root_certificate(c);
            }
        }
        b.build().map_err(ClientError::Build)
    }
}

/// Why a redirect is not followed, naming where it pointed; `None` for an answer that is not
/// one. Following it would send the request's headers (keys included) to wherever the server
/// points, and time the extra hop as the server's.
pub(crate) fn redirect(resp: &reqwest::Response) -> Option<String> {
    let location = resp.headers().get(reqwest::header::LOCATION).and_then(|v| v.to_str().ok());
    redirect_why(resp.status().as_u16(), location, resp.url())
}

/// Why an answer `status` with `location` to a request for `url` is not followed, if it is a
/// redirect.
pub(crate) fn redirect_why(status: u16, location: Option<&str>, url: &reqwest::Url) -> Option<String> {
    if !(300..400).contains(&status) {
        return None;
    }
    let to = match location {
        Some(l) => redact_url(url.join(l).map_or(l.to_string(), |u| u.to_string()).as_str()),
        None => "nowhere (no Location)".into(),
    };
    Some(format!(
        "server answered {status} redirect to {to}; goodput does not follow redirects (the request's headers would go \
         there and the hop would be timed as the server's): give the final URL as --target"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extra_bodies_are_objects() {
        assert!(Connection::parse_extra_body(r#"{"temperature":0.5}"#).unwrap().contains_key("temperature"));
        assert!(matches!(Connection::parse_extra_body("[1]"), Err(ArgError::ExtraBodyNotObject("an array"))));
        assert!(!Connection::parse_extra_body(r#""sk-1""#).unwrap_err().to_string().contains("sk-1"));
        assert!(matches!(Connection::parse_extra_body("{"), Err(ArgError::ExtraBodyNotJson(_))));
    }

    #[test]
    fn headers_parse_and_secrets_stay_hidden() {
        let (n, v) = Connection::parse_header("X-Api-Key:  abc123 ").unwrap();
        assert_eq!((n.as_str(), v.expose()), ("X-Api-Key", "abc123"));
        assert_eq!(format!("{v:?} {v}"), "<redacted> <redacted>");
        assert!(matches!(Connection::parse_header("no colon"), Err(ArgError::HeaderWithoutColon)));
        assert!(matches!(Connection::parse_header("bad name: x"), Err(ArgError::HeaderName(n)) if n == "bad name"));
        assert!(matches!(Connection::parse_header("X-A: line\nbreak"), Err(ArgError::HeaderValue(n)) if n == "X-A"));
        // A malformed credential header is not echoed.
        assert!(!Connection::parse_header("Authorization Bearer sk-1").unwrap_err().to_string().contains("sk-1"));
    }

    #[test]
    fn the_key_goes_as_a_bearer_token_and_not_twice() {
        let mut c = Connection { api_key: Some(Secret::new("sk-1")), ..Default::default() };
        c.headers.push(("X-Team".into(), Secret::new("infra")));
        let map = c.header_map().unwrap();
        assert_eq!(map[AUTHORIZATION], "Bearer sk-1");
        assert!(map[AUTHORIZATION].is_sensitive());
        assert_eq!(map["x-team"], "infra");
        assert!(!format!("{c:?}").contains("sk-1"));
        c.headers.push(("authorization".into(), Secret::new("Bearer other")));
        assert!(c.header_map().unwrap_err().to_string().contains("both --api-key"));
    }

    #[test]
    fn a_urls_user_and_password_are_redacted_wherever_it_is_written() {
        assert_eq!(redact_url("https://u:pw@h:1/v1"), "https://<redacted>@h:1/v1");
        assert_eq!(redact_url("--target=http://admin@h"), "--target=http://<redacted>@h");
        assert_eq!(redact_url("http://h:1/v1?x=a@b"), "http://h:1/v1?x=a@b");
        // An unescaped `/` or `@` in the password, and two URLs in one message.
        let msg = redact_url("POST http://a:p/w@x@h/v1: see http://b:q@g (http://g/)");
        assert_eq!(msg, "POST http://<redacted>@h/v1: see http://<redacted>@g (http://g/)");
        assert_eq!(redact_url("no url here"), "no url here");
    }

    #[test]
    fn credentials_leave_the_url_for_basic_auth() {
        let (url, auth) = split_credentials("http://ad%40min:p%3Aw@127.0.0.1:8000");
        assert_eq!(url, "http://127.0.0.1:8000");
        let (user, pw) = auth.unwrap();
        assert_eq!((user.expose(), pw.unwrap().expose()), ("ad@min", "p:w"));
        let (url, auth) = split_credentials("https://tok@h/prefix/");
        assert_eq!((url.as_str(), auth.unwrap().1), ("https://h/prefix/", None));
        assert_eq!(split_credentials("http://h:1").0, "http://h:1");
        assert!(split_credentials("http://h:1").1.is_none());
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
        let c = Connection {
            basic_auth: Some((Secret::new("u"), None)),
            api_key: Some(Secret::new("k")),
            ..Default::default()
        };
        assert!(c.header_map().unwrap_err().to_string().contains("user:password@"));
    }
}
