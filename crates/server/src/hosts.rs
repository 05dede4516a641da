//! Which `Host` names the server answers: a guard against DNS rebinding, after Jupyter's
//! `allow_remote_access` and vite's `server.allowedHosts`.
//!
//! A web page on `evil.example` can have the browser resolve that name to 127.0.0.1 and then
//! call a server on loopback as its own origin; the requests then carry
//! `Host: evil.example:8000`. An IP literal, `localhost` or a `*.localhost` name cannot be
//! rebound that way (browsers resolve `localhost` themselves), so they are always served; any
//! other name only when [`AllowedHosts::names`] lists it. On a loopback bind (the default) the
//! check is on. On any other bind (a wildcard or an interface's address) the server is meant to
//! be reached by names it cannot know, so, as Jupyter does, every name is served unless
//! `names` lists some (vite's opt-in list). [`AllowedHosts::any`] turns the check off.
//!
//! The port is not compared (a forwarded port, `ssh -L 9000:localhost:8000`, arrives as
//! `localhost:9000`), and a request without any host is served: browsers always send one.
//! HTTP/2's `:authority` is checked as `Host` is.

use crate::openai::ApiError;
use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

/// The names, besides IP literals and `localhost`, that requests may give as their host.
#[derive(Clone, Debug, Default)]
pub struct AllowedHosts {
    /// Serve any host (no check).
    pub any: bool,
    /// Host names served, case-insensitive; `.example.com` also serves its subdomains. When
    /// empty, the check is on for loopback binds only.
    pub names: Vec<String>,
}

impl AllowedHosts {
    /// The check for a listener bound to `bound`; `None` when every host is served.
    pub(crate) fn check_for(&self, bound: SocketAddr) -> Option<HostCheck> {
        let remote = !bound.ip().is_loopback();
        if self.any || (remote && self.names.is_empty()) {
            return None;
        }
        let names = self.names.iter().map(|n| normal(n)).collect();
        Some(HostCheck { names, bound })
    }
}

/// A listener's host check.
#[derive(Clone, Debug)]
pub(crate) struct HostCheck {
    names: Vec<String>,
    bound: SocketAddr,
}

/// Lower case, without the trailing dot of a fully qualified name.
fn normal(name: &str) -> String {
    name.trim().trim_end_matches('.').to_ascii_lowercase()
}

/// The host of an authority (`name`, `name:port`, `1.2.3.4:port`, `[::1]:port`), normalised;
/// `None` when it is malformed.
fn host_of(authority: &str) -> Option<String> {
    let digits = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
    if let Some(rest) = authority.strip_prefix('[') {
        let (host, tail) = rest.split_once(']')?;
        let port_ok = tail.is_empty() || tail.strip_prefix(':').is_some_and(digits);
        return (port_ok && host.parse::<Ipv6Addr>().is_ok()).then(|| host.to_ascii_lowercase());
    }
    let host = match authority.rsplit_once(':') {
        Some((host, port)) if digits(port) => host,
        Some(_) => return None,
        None => authority,
    };
    let valid = !host.is_empty() && host.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b));
    valid.then(|| normal(host))
}

impl HostCheck {
    /// Whether a request whose host is `authority` is served.
    pub(crate) fn allows(&self, authority: &str) -> bool {
        let Some(host) = host_of(authority) else { return false };
        host.parse::<IpAddr>().is_ok()
            || host == "localhost"
            || host.ends_with(".localhost")
            || self.names.iter().any(|n| *n == host || (n.starts_with('.') && host.ends_with(n.as_str())))
    }
}

/// Refuses (403) a request whose host the check does not allow, naming the host.
pub(crate) async fn guard(State(check): State<Arc<HostCheck>>, req: Request, next: Next) -> Response {
    // HTTP/2 (and an absolute-form HTTP/1 target) carry the host in the URI.
    let host = match req.uri().authority() {
        Some(a) => Some(a.as_str().to_string()),
        None => req.headers().get(header::HOST).map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned()),
    };
    match host {
        Some(h) if !check.allows(&h) => ApiError::forbidden(format!(
            "the host `{h}` is not a name of this server (bound to {}); a web page that rebinds its \
             DNS name to this address is refused this way. Serve the name with --allowed-hosts, or \
             any name with --allow-any-host",
            check.bound
        ))
        .into_response(),
        _ => next.run(req).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(names: &[&str]) -> HostCheck {
        let hosts = AllowedHosts { any: false, names: names.iter().map(|s| s.to_string()).collect() };
        hosts.check_for("127.0.0.1:8000".parse().unwrap()).unwrap()
    }

    #[test]
    fn ip_literals_and_localhost_are_served_other_names_only_when_listed() {
        let c = check(&["Bench.Internal.", ".corp.example"]);
        for ok in [
            "127.0.0.1:8000",
            "127.0.0.1",
            "10.1.2.3:9000",
            "[::1]:8000",
            "[::1]",
            "localhost:8000",
            "LOCALHOST",
            "localhost.:8000",
            "api.localhost:8000",
            "bench.internal:8000",
            "gpu1.corp.example",
        ] {
            assert!(c.allows(ok), "{ok}");
        }
        for bad in [
            "evil.example:8000",
            "localhost.evil.example",
            "corp.example",
            "bench.internal.evil",
            "::1",
            "[::1",
            "[nope]:80",
            "127.0.0.1:80x",
            "",
            "user@localhost",
            "a b",
        ] {
            assert!(!c.allows(bad), "{bad}");
        }
    }

    #[test]
    fn loopback_binds_check_other_binds_only_with_a_list_and_any_turns_it_off() {
        let none = AllowedHosts::default();
        assert!(none.check_for("127.0.0.1:1".parse().unwrap()).is_some());
        assert!(none.check_for("[::1]:1".parse().unwrap()).is_some());
        assert!(none.check_for("0.0.0.0:1".parse().unwrap()).is_none());
        assert!(none.check_for("[::]:1".parse().unwrap()).is_none());
        assert!(none.check_for("192.168.1.5:1".parse().unwrap()).is_none());
        let listed = AllowedHosts { any: false, names: vec!["gpu1".into()] };
        assert!(!listed.check_for("0.0.0.0:1".parse().unwrap()).unwrap().allows("evil.example"));
        let any = AllowedHosts { any: true, names: vec!["gpu1".into()] };
        assert!(any.check_for("127.0.0.1:1".parse().unwrap()).is_none());
    }
}
