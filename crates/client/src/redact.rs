//! The command line as stored in results, with credentials removed: the value of `--api-key`,
//! of every `--header` (its name kept), the secret-looking keys of `--extra-body`, and the
//! `user:password@` of every URL ([`crate::redact_url`]).

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
                    _ => crate::redact_url(&arg),
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
    crate::redact_url(arg)
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
}
