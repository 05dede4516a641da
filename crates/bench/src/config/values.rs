//! A config file's values as command-line tokens and as a run's name: a key's value by its
//! flag's [`Shape`], the matrix's axes and their combinations, and each value as the run's
//! directory name, the matrix's index and the console show it (a secret's never).

use super::{Flag, Flags, Shape, MAX_RUNS, SERVER_AXIS};

/// One value of an axis: its tokens and how it is shown (in the run's name and the index).
#[derive(Clone, Debug)]
pub struct Value {
    pub tokens: Vec<String>,
    pub shown: String,
}

/// An axis of the matrix: its key, its flag's id (an alias's flag) and its values.
pub(super) struct AxisValues {
    pub key: String,
    pub id: String,
    pub values: Vec<Value>,
}

/// The matrix's axes; those the command line decides are left out, said in `notes`.
pub(super) fn axes(
    flags: &dyn Flags,
    matrix: &toml::Table,
    notes: &mut Vec<String>,
) -> Result<Vec<AxisValues>, String> {
    let mut axes = Vec::new();
    for (key, v) in matrix {
        if let ("server", toml::Value::Table(t)) = (key.as_str(), v) {
            axes.extend(server_axes(t)?);
            continue;
        }
        let flag = flags.flag(key)?;
        let toml::Value::Array(items) = v else {
            return Err(format!("matrix.{key}: a list of values, one per run (e.g. {key} = [a, b])"));
        };
        if items.is_empty() {
            return Err(format!("matrix.{key}: an empty list would run nothing"));
        }
        if key == "out" {
            return Err("matrix.out: each run's directory is named by the matrix; give `out` once".into());
        }
        if flags.overridden(key) {
            notes.push(format!("the command line sets --{key}: the matrix's `{key}` axis is left out"));
            continue;
        }
        let values = items
            .iter()
            .enumerate()
            .map(|(j, item)| Ok(Value { tokens: tokens(&flag, key, item)?, shown: shown_secret(&flag.long, item, j) }))
            .collect::<Result<Vec<_>, String>>()
            .map_err(|e| format!("matrix.{e}"))?;
        axes.push(AxisValues { key: key.clone(), id: flag.id, values });
    }
    let sizes: Vec<String> = axes.iter().map(|a| a.values.len().to_string()).collect();
    match axes.iter().try_fold(1usize, |n, a| n.checked_mul(a.values.len())) {
        Some(runs) if runs <= MAX_RUNS => Ok(axes),
        Some(runs) => Err(format!("the matrix expands to {} = {runs} runs, more than {MAX_RUNS}", sizes.join(" × "))),
        None => Err(format!("the matrix expands to {} runs, more than {MAX_RUNS}", sizes.join(" × "))),
    }
}

/// A matrix's `server.NAME` axes: values of the launched server's placeholders
/// ([`crate::launch::template`]), which no flag of the run takes.
fn server_axes(t: &toml::Table) -> Result<Vec<AxisValues>, String> {
    let mut axes = Vec::new();
    for (name, v) in t {
        let key = format!("{SERVER_AXIS}{name}");
        let toml::Value::Array(items) = v else {
            return Err(format!("matrix.{key}: a list of values, one per run (e.g. {key} = [8, 64])"));
        };
        if items.is_empty() {
            return Err(format!("matrix.{key}: an empty list would run nothing"));
        }
        let values = items
            .iter()
            .map(|item| Ok(Value { tokens: Vec::new(), shown: scalar(&key, item).map_err(|e| format!("matrix.{e}"))? }))
            .collect::<Result<Vec<_>, String>>()?;
        axes.push(AxisValues { id: key.clone(), key, values });
    }
    Ok(axes)
}

/// Every combination of the axes' values, the last axis varying fastest.
pub(super) fn combinations(axes: &[AxisValues]) -> Vec<Vec<(&AxisValues, &Value)>> {
    axes.iter().fold(vec![Vec::new()], |acc, axis| {
        acc.into_iter()
            .flat_map(|prefix| {
                axis.values.iter().map(move |v| {
                    let mut c = prefix.clone();
                    c.push((axis, v));
                    c
                })
            })
            .collect()
    })
}

/// `03-max-num-seqs=64,target=http-local`: the run's number, then each axis's value; only
/// characters safe in a file name.
pub fn run_name(i: usize, values: &[(String, String)]) -> String {
    let pairs: Vec<String> = values.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let safe: String = pairs
        .join(",")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || "._=,+-".contains(c) { c } else { '_' })
        .take(120)
        .collect();
    format!("{:02}-{safe}", i + 1)
}

/// Value `j` of an axis as a run's name, the index and the console show it: a secret flag's
/// value that redaction hides anything of ([`goodput_client::redact::hides`]) as `redacted-J`
/// (its place on the axis, 1-based), so runs stay apart and no secret reaches a directory
/// name, `index.json`, the console or a stored command (through its `--out`).
fn shown_secret(long: &str, v: &toml::Value, j: usize) -> String {
    let values: Vec<String> = match v {
        toml::Value::Array(items) => items.iter().map(|i| scalar(long, i).unwrap_or_default()).collect(),
        other => vec![scalar(long, other).unwrap_or_default()],
    };
    let secret = values.iter().any(|x| goodput_client::redact::hides(long, x));
    if secret {
        format!("redacted-{}", j + 1)
    } else {
        shown(v)
    }
}

fn shown(v: &toml::Value) -> String {
    match v {
        toml::Value::Array(items) => items.iter().map(shown).collect::<Vec<_>>().join("+"),
        toml::Value::String(s) => goodput_client::redact_url(s),
        other => other.to_string(),
    }
}

/// A key's value as command-line tokens: a switch for `true`, nothing for `false`; a list
/// as the flag's delimited values (or one token each for a flag that takes several); any
/// other value as `--key=VALUE`.
pub(super) fn tokens(flag: &Flag, key: &str, v: &toml::Value) -> Result<Vec<String>, String> {
    let name = format!("--{key}");
    match (v, flag.shape) {
        (toml::Value::Boolean(b), Shape::Switch) => Ok(if *b { vec![name] } else { Vec::new() }),
        (_, Shape::Switch) => Err(format!("`{key}` is a switch: give true or false")),
        (toml::Value::Array(items), shape) => {
            let parts = items.iter().map(|i| scalar(key, i)).collect::<Result<Vec<_>, _>>()?;
            if parts.is_empty() {
                return Err(format!("`{key}`: an empty list"));
            }
            match shape {
                Shape::Delimited(d) => Ok(vec![format!("{name}={}", parts.join(&d.to_string()))]),
                Shape::Several => Ok(std::iter::once(name).chain(parts).collect()),
                // A flag given once per value (`--header`): the list as that many flags.
                Shape::Repeated => Ok(parts.iter().map(|p| format!("{name}={p}")).collect()),
                Shape::One | Shape::Switch => Err(format!("`{key}` takes one value, not a list")),
            }
        }
        (other, _) => Ok(vec![format!("{name}={}", scalar(key, other)?)]),
    }
}

fn scalar(key: &str, v: &toml::Value) -> Result<String, String> {
    match v {
        toml::Value::String(s) => Ok(s.clone()),
        toml::Value::Integer(i) => Ok(i.to_string()),
        toml::Value::Float(x) => Ok(x.to_string()),
        toml::Value::Boolean(b) => Ok(b.to_string()),
        toml::Value::Datetime(d) => Ok(d.to_string()),
        toml::Value::Array(_) | toml::Value::Table(_) => Err(format!("`{key}`: a value, not a list or table")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{expand, CommandLine, Problem};
    use std::path::PathBuf;

    /// Three flags: a list, a switch and a one-value flag, `mode` conflicting with `rate`.
    struct Three(Vec<&'static str>);

    impl Flags for Three {
        fn flag(&self, key: &str) -> Result<Flag, String> {
            let shape = match key {
                "concurrency" => Shape::Delimited(','),
                "quiet" => Shape::Switch,
                "out" | "seed" | "mode" | "rate" => Shape::One,
                _ => return Err(format!("unknown key `{key}`")),
            };
            Ok(Flag { id: key.into(), long: key.into(), shape })
        }
        fn overridden(&self, key: &str) -> bool {
            self.0.contains(&key) || (key == "rate" && self.0.contains(&"mode"))
        }
    }

    fn file(name: &str, text: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("goodput-bench-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(format!("{name}.toml"));
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn keys_become_tokens_by_their_flags_shape() {
        let text = "concurrency = [1, 4]\nquiet = true\nrate = 2\n";
        let e = expand(&file("shape", text), &Three(vec!["mode"]), &CommandLine::default()).unwrap();
        let args = &e.jobs[0].args;
        assert_eq!(args.tokens, ["--concurrency=1,4", "--quiet"], "rate conflicts with the command line's mode");
        assert!(e.matrix.is_none() && args.out.is_none() && args.inline.is_none());
        let e = expand(&file("switch", "quiet = 1\n"), &Three(vec![]), &CommandLine::default()).unwrap_err();
        assert!(matches!(e.problem, Problem::Key(_)) && e.to_string().contains("is a switch"), "{e}");
        let e = expand(&file("list", "seed = [1, 2]\n"), &Three(vec![]), &CommandLine::default()).unwrap_err();
        assert!(e.to_string().ends_with("`seed` takes one value, not a list"), "{e}");
    }

    #[test]
    fn a_matrix_is_one_run_per_combination_with_one_seed() {
        let text = "out = \"m\"\n[matrix]\nconcurrency = [[1, 2], [4]]\nrate = [1, 2]\nquiet = [true, false]\n";
        let cli = CommandLine { tokens: vec!["--quiet".into()], set: ["quiet".into()].into(), out: None };
        let e = expand(&file("matrix", text), &Three(vec!["quiet"]), &cli).unwrap();
        assert_eq!(e.notes, ["the command line sets --quiet: the matrix's `quiet` axis is left out"]);
        let (root, axes) = e.matrix.unwrap();
        assert_eq!((root, axes.len()), (PathBuf::from("m"), 2));
        let names: Vec<&str> = e.jobs.iter().map(|j| j.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "01-concurrency=1+2,rate=1",
                "02-concurrency=1+2,rate=2",
                "03-concurrency=4,rate=1",
                "04-concurrency=4,rate=2"
            ]
        );
        let seeds: Vec<&String> =
            e.jobs.iter().flat_map(|j| j.args.tokens.iter().filter(|t| t.starts_with("--seed="))).collect();
        assert!(seeds.len() == 4 && seeds.iter().all(|s| *s == seeds[0]), "{seeds:?}");
        let first = &e.jobs[0].args;
        assert_eq!(first.out, Some(PathBuf::from("m/01-concurrency=1+2,rate=1")));
        assert_eq!(first.tokens.last().unwrap(), "--out=m/01-concurrency=1+2,rate=1");
        assert!(
            first.tokens.contains(&"--concurrency=1,2".to_string()) && first.tokens.contains(&"--quiet".to_string())
        );
        let e = expand(&file("no-out", "[matrix]\nrate = [1, 2]\n"), &Three(vec![]), &CommandLine::default());
        assert!(matches!(e.unwrap_err().problem, Problem::Matrix(m) if m.contains("give out = ")));
    }
}
