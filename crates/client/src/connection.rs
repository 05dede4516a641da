//! How the client reaches a server: TLS (rustls: the system's roots and webpki-roots, a CA
//! file added to them, or no verification with `insecure`), headers sent with every request,
//! and the API key as `Authorization: Bearer`.

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

/// TLS and what every request carries beside its body.
#[derive(Clone, Debug, Default)]
pub struct Connection {
    /// Sent with every request (the measured ones, `/v1/models`, `/metrics`), in order.
    pub headers: Vec<(String, Secret)>,
    /// Sent as `Authorization: Bearer KEY`.
    pub api_key: Option<Secret>,
    /// Accept any certificate and host name (self-signed test servers).
    pub insecure: bool,
    /// PEM certificates trusted beside the system's roots (a private CA).
    pub ca_cert: Option<PathBuf>,
}

/// Names whose values are credentials: never written anywhere.
pub fn is_sensitive(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    ["authorization", "cookie", "key", "token", "secret", "password", "session", "auth"].iter().any(|s| n.contains(s))
}

/// `scheme://user:password@host…` without the password.
pub fn redact_url(s: &str) -> String {
    let Some((scheme, rest)) = s.split_once("://") else { return s.to_string() };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split_once(':').map_or(userinfo, |(u, _)| u);
            format!("{scheme}://{user}:<redacted>@{host}{}", &rest[authority_end..])
        }
        None => s.to_string(),
    }
}

impl Connection {
    /// Parses a `--header` argument, `Name: value`.
    pub fn parse_header(s: &str) -> Result<(String, Secret), String> {
        let (name, value) = s.split_once(':').ok_or_else(|| {
            format!("header `{}`: expected `Name: value`", if is_sensitive(s) { "<redacted>" } else { s })
        })?;
        let name = name.trim();
        HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("header name `{name}` is not a valid HTTP name"))?;
        let value = value.trim();
        HeaderValue::from_str(value).map_err(|_| format!("the value of header `{name}` is not a valid HTTP value"))?;
        Ok((name.to_string(), Secret::new(value)))
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

    /// The HTTP client: keep-alive pools without a cap, no Nagle delay, these headers and TLS.
    pub fn client(&self) -> Result<reqwest::Client, ClientError> {
        let mut b = reqwest::Client::builder()
            .pool_max_idle_per_host(usize::MAX)
            .tcp_nodelay(true)
            .default_headers(self.header_map()?)
            .use_rustls_tls()
            .danger_accept_invalid_certs(self.insecure);
        if let Some(path) = &self.ca_cert {
            let pem = std::fs::read(path)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_parse_and_secrets_stay_hidden() {
        let (n, v) = Connection::parse_header("X-Api-Key:  abc123 ").unwrap();
        assert_eq!((n.as_str(), v.expose()), ("X-Api-Key", "abc123"));
        assert_eq!(format!("{v:?} {v}"), "<redacted> <redacted>");
        assert!(Connection::parse_header("no colon").unwrap_err().contains("Name: value"));
        assert!(Connection::parse_header("bad name: x").unwrap_err().contains("not a valid HTTP name"));
        assert!(Connection::parse_header("X-A: line\nbreak").unwrap_err().contains("not a valid HTTP value"));
        // A malformed credential header is not echoed.
        assert!(!Connection::parse_header("Authorization Bearer sk-1").unwrap_err().contains("sk-1"));
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
}
