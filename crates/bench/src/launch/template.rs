//! A server's command as a config file gives it (`[server]`, a matrix's `server.KEY` axes,
//! `run --server CMD`), and the command one run launches, its placeholders filled.
//!
//! `{name}` takes the value of `name` (`-` and `_` alike): the run's `server.NAME` axis, else
//! the `[server]` table's key, else what the run itself gives — `{url}` (its `--target`),
//! `{host}`, `{port}` and `{goodput}` (this program). Values are quoted for the
//! shell; `{{` and `}}` are braces, and `${VAR}` is left to the shell.

use std::time::Duration;

/// How long a server may take to answer its health URL, unless `start-timeout` says: vLLM
/// compiles and warms its graphs before it answers, minutes for a large model.
pub const START_TIMEOUT: Duration = Duration::from_secs(600);

/// How long a server is given to exit after SIGTERM before its process group is killed.
pub const GRACE: Duration = Duration::from_secs(30);

/// The `[server]` table of a config file, as given.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServerTemplate {
    pub command: Option<String>,
    /// The health URL, placeholders allowed; default `{url}/health`.
    pub health: Option<String>,
    pub start_timeout: Option<Duration>,
    pub grace: Option<Duration>,
    pub env: Vec<(String, String)>,
    /// The placeholders' values: the table's other keys.
    pub values: Vec<(String, String)>,
}

/// The server one run launches: its command and health URL filled.
#[derive(Clone, Debug, PartialEq)]
pub struct Server {
    pub command: String,
    pub health: String,
    pub start_timeout: Duration,
    pub grace: Duration,
    pub env: Vec<(String, String)>,
}

impl ServerTemplate {
    /// The `[server]` table: `command`, `health`, `start-timeout`, `grace`, `env` (a table of
    /// strings) and any other key, a placeholder's value (a string, number or boolean).
    pub fn from_table(t: &toml::Table) -> Result<Self, String> {
        let mut s = Self::default();
        for (key, v) in t {
            let text = || scalar(v).ok_or_else(|| format!("server.{key}: a string, number or boolean"));
            match key.as_str() {
                "command" => s.command = Some(text()?),
                "health" => s.health = Some(text()?),
                "start-timeout" | "start_timeout" => s.start_timeout = Some(duration(key, &text()?)?),
                "grace" => s.grace = Some(duration(key, &text()?)?),
                "env" => {
                    let toml::Value::Table(env) = v else {
                        return Err("server.env: a table of variables, env = { NAME = \"value\" }".into());
                    };
                    for (name, value) in env {
                        let value = scalar(value).ok_or_else(|| format!("server.env.{name}: a string"))?;
                        s.env.push((name.clone(), value));
                    }
                }
                _ => s.values.push((key.clone(), text()?)),
            }
        }
        Ok(s)
    }

    /// The server of one run: `command` (the command line's `--server`) in place of the
    /// table's, `axes` (the run's `server.NAME` values) over the table's values, `url` the
    /// run's `--target` when it is a URL.
    pub fn render(
        &self,
        command: Option<&str>,
        axes: &[(String, String)],
        url: Option<&str>,
    ) -> Result<Server, String> {
        let template = command.or(self.command.as_deref()).ok_or(
            "[server] has no `command`: give command = \"vllm serve {model} --port {port} …\" (or --server CMD)",
        )?;
        // What the run gives first; the table's keys, then the run's axes, over it.
        let mut values: Vec<(String, String)> = Vec::new();
        if let Some(url) = url {
            let parsed = reqwest::Url::parse(url).map_err(|e| format!("--target {url}: {e}"))?;
            values.push(("url".into(), url.trim_end_matches('/').into()));
            values.push(("host".into(), parsed.host_str().unwrap_or("127.0.0.1").into()));
            values.push(("port".into(), parsed.port_or_known_default().unwrap_or(80).to_string()));
        }
        if let Ok(exe) = std::env::current_exe() {
            values.push(("goodput".into(), exe.display().to_string()));
        }
        values.extend(self.values.iter().cloned());
        values.extend(axes.iter().cloned());
        let health = match (&self.health, url) {
            (Some(h), _) => fill(h, &values, false)?,
            (None, Some(u)) => format!("{}/health", u.trim_end_matches('/')),
            (None, None) => return Err("a launched server needs the run's --target http://HOST:PORT (where requests go, and {url}/health where its health is asked), or [server] health = URL".into()),
        };
        Ok(Server {
            command: fill(template, &values, true)?,
            health,
            start_timeout: self.start_timeout.unwrap_or(START_TIMEOUT),
            grace: self.grace.unwrap_or(GRACE),
            env: self.env.clone(),
        })
    }
}

/// A TOML scalar as text.
fn scalar(v: &toml::Value) -> Option<String> {
    match v {
        toml::Value::String(s) => Some(s.clone()),
        toml::Value::Integer(i) => Some(i.to_string()),
        toml::Value::Float(f) => Some(f.to_string()),
        toml::Value::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

fn duration(key: &str, text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text).map_err(|e| format!("server.{key}: `{text}`: {e} (e.g. \"10m\", \"30s\")"))
}

/// `template` with each `{name}` replaced by its value (the last one given wins; quoted for
/// the shell when `quote`), `{{`/`}}` as braces, `${…}` as written.
fn fill(template: &str, values: &[(String, String)], quote: bool) -> Result<String, String> {
    let norm = |k: &str| k.replace('-', "_");
    let mut out = String::new();
    let mut rest = template;
    while let Some(i) = rest.find(['{', '}']) {
        out += &rest[..i];
        let tail = &rest[i..];
        if tail.starts_with("{{") || tail.starts_with("}}") {
            out.push(tail.as_bytes()[0] as char);
            rest = &tail[2..];
        } else if tail.starts_with('}') || out.ends_with('$') {
            out.push(tail.as_bytes()[0] as char);
            rest = &tail[1..];
        } else {
            let end = tail.find('}').ok_or_else(|| format!("`{template}`: a `{{` without its `}}`"))?;
            let name = &tail[1..end];
            let Some((_, v)) = values.iter().rev().find(|(k, _)| norm(k) == norm(name)) else {
                let known: Vec<&str> = values.iter().map(|(k, _)| k.as_str()).collect();
                return Err(format!("`{{{name}}}` has no value: give it in [server] ({name} = …) or as a matrix axis (server.{name} = [ … ]); known: {}", known.join(", ")));
            };
            out += &if quote { shell_quote(v) } else { v.clone() };
            rest = &tail[end + 1..];
        }
    }
    Ok(out + rest)
}

/// `s` as one shell word: as it is when it holds only safe characters, else single-quoted.
fn shell_quote(s: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "_-./:=,+@%".contains(c);
    if !s.is_empty() && s.chars().all(safe) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> ServerTemplate {
        ServerTemplate::from_table(&toml::from_str(text).unwrap()).unwrap()
    }

    #[test]
    fn placeholders_take_the_axis_then_the_table_then_the_url() {
        let t = table(
            r#"command = "vllm serve {model} --port {port} --max-num-seqs {max-num-seqs} --x ${HOME} {{a}}"
               model = "/m/my model"
               max_num_seqs = 4
               start-timeout = "2m"
               env = { VLLM_CPU_KVCACHE_SPACE = "1" }"#,
        );
        let axes = [("max-num-seqs".to_string(), "16".to_string())];
        let s = t.render(None, &axes, Some("http://127.0.0.1:8011/")).unwrap();
        assert_eq!(s.command, "vllm serve '/m/my model' --port 8011 --max-num-seqs 16 --x ${HOME} {a}");
        assert_eq!(s.health, "http://127.0.0.1:8011/health");
        assert_eq!((s.start_timeout, s.grace), (Duration::from_secs(120), GRACE));
        assert_eq!(s.env, [("VLLM_CPU_KVCACHE_SPACE".to_string(), "1".to_string())]);
        // The command line's --server in place of the table's.
        let s = t.render(Some("goodput serve --port {port}"), &[], Some("http://h:9/")).unwrap();
        assert_eq!((s.command.as_str(), s.health.as_str()), ("goodput serve --port 9", "http://h:9/health"));
    }

    #[test]
    fn what_cannot_be_filled_is_refused_by_name() {
        let t = table(r#"command = "vllm serve {modle}""#);
        let e = t.render(None, &[], Some("http://127.0.0.1:8000")).unwrap_err();
        assert!(e.contains("`{modle}` has no value") && e.contains("known: url, host, port, goodput"), "{e}");
        assert!(table("").render(None, &[], Some("http://h:1")).unwrap_err().contains("no `command`"));
        let e = table(r#"command = "x""#).render(None, &[], None).unwrap_err();
        assert!(e.contains("--target http://HOST:PORT"), "{e}");
        let e = ServerTemplate::from_table(&toml::from_str(r#"grace = "soon""#).unwrap()).unwrap_err();
        assert!(e.starts_with("server.grace: `soon`"), "{e}");
        assert!(table(r#"command = "a {b""#).render(None, &[("b".into(), "1".into())], Some("http://h:1")).is_err());
    }
}
