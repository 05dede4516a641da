//! `goodput run --config FILE`: a whole benchmark in one TOML file, as AIPerf's YAML and
//! guidellm's `--config` take one. Every key is a flag of `run` under the same name, so the
//! file is exactly a command line and clap checks it as one:
//!
//! ```toml
//! target = "http-local"
//! concurrency = [1, 4, 16]        # a list: the flag's comma-separated values
//! slo = "ttft_p95=1s,tpot_p95=50ms"
//! no-prefix-caching = true        # a switch: true gives it, false leaves it out
//! out = "results/bench"
//!
//! [scenario]                      # or scenario = "short-qa" / "my-scenario.toml"
//! input = { kind = "fixed", n = 256 }
//! output = { kind = "fixed", n = 64 }
//!
//! [matrix]                        # one run per combination, each under out/
//! max-num-seqs = [8, 64]
//! target = ["in-process", "http-local"]
//! ```
//!
//! A flag on the command line overrides the file's key of the same name, any key it
//! conflicts with (`--rate` drops the file's `concurrency`) and a matrix axis of that name.
//! Unknown keys are refused by name, with the nearest flag. Paths are as on the command line
//! (relative to the working directory). A config's run stores the command line it expands to,
//! so `plan --check` re-runs it without the file; an inline scenario is written into the run's
//! directory as `scenario.toml` and named there.

use super::args::{parse_run, RunArgs, RunOnly};
use anyhow::{anyhow, bail, Result};
use clap::parser::ValueSource;
use clap::{Arg, ArgMatches, CommandFactory};
pub use goodput_bench::command::strip;
use goodput_results::matrix::Axis;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The most runs one matrix expands to.
pub const MAX_RUNS: usize = 1000;

/// The largest config file read: a whole benchmark is a few kilobytes (an inline scenario
/// included). The bound is also the bound on what parsing may cost before any list is
/// checked: TOML values take ~50–150× their text in memory.
pub const MAX_CONFIG_FILE: u64 = 1 << 20;

/// The longest list a key (or a matrix axis) may give, checked before any list is expanded
/// into flags, levels or runs.
pub const MAX_LIST: usize = 10_000;

/// One run of a config file: in a matrix, its directory name and the value of each axis.
pub struct Job {
    pub name: String,
    pub values: Vec<(String, String)>,
    pub args: RunArgs,
}

/// What a config file expands to: its runs, and for a matrix its directory and axes.
pub struct Expanded {
    pub jobs: Vec<Job>,
    pub matrix: Option<(PathBuf, Vec<Axis>)>,
}

/// What the command line gave beside the file: its tokens after `run` (without `--config`),
/// the ids of the arguments it set, and its `--out`.
pub struct CommandLine {
    pub tokens: Vec<String>,
    pub set: BTreeSet<String>,
    pub out: Option<PathBuf>,
}

impl CommandLine {
    /// From `run`'s matches and the process's arguments (`argv`, the program first).
    pub fn of(matches: &ArgMatches, argv: &[String]) -> Self {
        let at = argv.iter().skip(1).position(|a| a == "run").map_or(argv.len(), |i| i + 2);
        let set = matches
            .ids()
            .map(|id| id.as_str())
            .filter(|id| {
                !matches!(*id, "config" | "color") && matches.value_source(id) == Some(ValueSource::CommandLine)
            })
            .map(String::from)
            .collect();
        let out = matches.try_get_one::<PathBuf>("out").ok().flatten().cloned();
        // `--color` is the whole command line's, not `run`'s.
        Self { tokens: strip(&strip(&argv[at..], "--config"), "--color"), set, out }
    }
}

/// Reads and expands the config file at `path` under the command line `cli`.
pub fn expand(path: &Path, cli: &CommandLine) -> Result<Expanded> {
    let file = path.display();
    let text = goodput_core::input::read_to_string(path, "config file", MAX_CONFIG_FILE)
        .map_err(|e| anyhow!("{file}: {e}"))?;
    let mut table: toml::Table = toml::from_str(&text).map_err(|e| anyhow!("{file}: {}", toml_message(&e)))?;
    check_lists(&table, "").map_err(|e| anyhow!("{file}: {e}"))?;
    let command = RunOnly::command();
    let keys = Keys { command: &command, cli };
    let matrix = match table.remove("matrix") {
        None => None,
        Some(toml::Value::Table(m)) => Some(m),
        Some(_) => bail!("{file}: `matrix` must be a table of keys to lists of values ([matrix])"),
    };
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("config");
    let inline = match table.remove("scenario") {
        Some(toml::Value::Table(t)) => Some(inline_scenario(t, stem)),
        Some(v) => {
            table.insert("scenario".into(), v);
            None
        }
        None => None,
    };
    let inline = inline.filter(|_| !keys.overridden("scenario"));
    // Each key by its flag's id (an alias and its flag are one key).
    let mut base = Vec::new();
    for (key, value) in &table {
        let arg = keys.arg(key).map_err(|e| anyhow!("{file}: {e}"))?;
        if !keys.overridden(key) {
            base.push((arg.get_id().to_string(), tokens(arg, key, value).map_err(|e| anyhow!("{file}: {e}"))?));
        }
    }
    let Some(matrix) = matrix else {
        let args = job_args(path, &base, &[], cli, inline, None)?;
        return Ok(Expanded { jobs: vec![Job { name: String::new(), values: Vec::new(), args }], matrix: None });
    };
    let axes = axes(&keys, &matrix).map_err(|e| anyhow!("{file}: {e}"))?;
    let root = match (&cli.out, table.get("out")) {
        (Some(o), _) => o.clone(),
        (None, Some(toml::Value::String(o))) => PathBuf::from(o),
        _ => bail!("{file}: a matrix writes one run per combination under `out`: give out = \"DIR\" (or --out DIR)"),
    };
    let mut base: Vec<_> = base.into_iter().filter(|(k, _)| k != "out").collect();
    // One seed for every run of the matrix, so that runs differ by their axes, not by their
    // prompts: the file's or the command line's, else drawn once here.
    if !base.iter().any(|(k, _)| k == "seed") && !cli.set.contains("seed") && !axes.iter().any(|a| a.id == "seed") {
        base.push(("seed".into(), vec![format!("--seed={}", rand::random::<u32>())]));
    }
    let mut jobs = Vec::new();
    for (i, combo) in combinations(&axes).into_iter().enumerate() {
        let values: Vec<(String, String)> = combo.iter().map(|(a, v)| (a.key.clone(), v.shown.clone())).collect();
        let name = run_name(i, &values);
        let set: Vec<(String, Vec<String>)> = combo.iter().map(|(a, v)| (a.id.clone(), v.tokens.clone())).collect();
        let inline = inline.clone().filter(|_| !set.iter().any(|(k, _)| k == "scenario"));
        let args = job_args(path, &base, &set, cli, inline, Some(&root.join(&name)))?;
        jobs.push(Job { name, values, args });
    }
    let shown =
        axes.iter().map(|a| Axis { key: a.key.clone(), values: a.values.iter().map(|v| v.shown.clone()).collect() });
    Ok(Expanded { jobs, matrix: Some((root, shown.collect())) })
}

/// Every list of `t` (its keys', the matrix's axes', their items') at most [`MAX_LIST`] long,
/// refused by key before anything expands it.
fn check_lists(t: &toml::Table, prefix: &str) -> Result<(), String> {
    for (k, v) in t {
        let key = format!("{prefix}{k}");
        match v {
            toml::Value::Array(items) if items.len() > MAX_LIST => {
                return Err(format!("`{key}` lists {} values; a list may hold at most {MAX_LIST}", items.len()))
            }
            toml::Value::Array(items) => {
                for item in items {
                    if let toml::Value::Array(inner) = item {
                        if inner.len() > MAX_LIST {
                            return Err(format!(
                                "`{key}` holds a list of {} values; a list may hold at most {MAX_LIST}",
                                inner.len()
                            ));
                        }
                    }
                }
            }
            toml::Value::Table(inner) => check_lists(inner, &format!("{key}."))?,
            _ => {}
        }
    }
    Ok(())
}

/// A TOML error as one short message: its line and column, the reason, and the offending
/// line cut to 120 characters (the toml crate echoes the whole line, 200 KB for a long list).
fn toml_message(e: &toml::de::Error) -> String {
    let text = e.to_string();
    let cut: Vec<String> = text
        .lines()
        .map(|l| match l.char_indices().nth(120) {
            Some((i, _)) => format!("{}…", &l[..i]),
            None => l.to_string(),
        })
        .collect();
    cut.join("\n")
}

/// The arguments of one run: the file's keys (less those `set` gives; both by flag id),
/// `set`'s, then the command line's; with `out` (a matrix's run) the run's directory in place of any other.
fn job_args(
    path: &Path,
    base: &[(String, Vec<String>)],
    set: &[(String, Vec<String>)],
    cli: &CommandLine,
    inline: Option<String>,
    out: Option<&Path>,
) -> Result<RunArgs> {
    let kept = base.iter().filter(|(k, _)| !set.iter().any(|(s, _)| s == k));
    let mut tokens: Vec<String> = kept.chain(set).flat_map(|(_, t)| t.iter().cloned()).collect();
    match out {
        Some(dir) => {
            tokens.extend(strip(&cli.tokens, "--out"));
            tokens.push(format!("--out={}", dir.display()));
        }
        None => tokens.extend(cli.tokens.iter().cloned()),
    }
    let argv = ["goodput".to_string(), "run".to_string()].into_iter().chain(tokens.iter().cloned());
    let mut args = parse_run(argv.clone().skip(1)).map_err(|e| {
        let at = out.map_or(String::new(), |d| format!(" (the run in {})", d.display()));
        anyhow!("{}{at}: {}", path.display(), without_secrets(&clap_message(&e), &tokens))
    })?;
    let mut command: Vec<String> = argv.collect();
    if let (Some(_), Some(dir)) = (&inline, &args.out) {
        command.push(format!("--scenario={}", dir.join(goodput_results::files::SCENARIO).display()));
    }
    args.config = None;
    args.scenario_inline = inline;
    args.command = Some(command);
    Ok(args)
}

/// `message` with the value of every secret flag among `tokens` (`--api-key=…`, `--header=…`,
/// `--extra-body=…`, as the file's keys become) replaced by `<redacted>`: clap quotes a value
/// it refuses.
fn without_secrets(message: &str, tokens: &[String]) -> String {
    let secrets = tokens.iter().filter_map(|t| {
        let (flag, v) = t.strip_prefix("--")?.split_once('=')?;
        goodput_client::redact::hides(flag, v).then_some(v).filter(|v| !v.is_empty())
    });
    secrets.fold(message.to_string(), |m, v| m.replace(v, "<redacted>"))
}

/// clap's error without its `error: ` prefix, usage and help lines.
fn clap_message(e: &clap::Error) -> String {
    let text = e.to_string();
    let lines: Vec<&str> =
        text.lines().take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more")).collect();
    lines.join(" ").trim().trim_start_matches("error: ").split_whitespace().collect::<Vec<_>>().join(" ")
}

/// An inline `[scenario]` as a scenario file's text: a single scenario without a name takes
/// the config file's.
fn inline_scenario(mut t: toml::Table, stem: &str) -> String {
    let single = t.get("kind").and_then(|k| k.as_str()).is_none_or(|k| k == "single");
    if single && !t.contains_key("name") {
        t.insert("name".into(), toml::Value::String(stem.into()));
    }
    toml::to_string(&t).expect("a TOML table serializes")
}

/// The flags of `run`, and which of them the command line decides.
struct Keys<'a> {
    command: &'a clap::Command,
    cli: &'a CommandLine,
}

impl Keys<'_> {
    fn find(&self, key: &str) -> Option<&Arg> {
        self.command
            .get_arguments()
            .find(|a| a.get_long() == Some(key) || a.get_all_aliases().is_some_and(|al| al.contains(&key)))
    }

    /// The flag `key` names; refused by name (with the nearest flag) when there is none.
    fn arg(&self, key: &str) -> Result<&Arg, String> {
        if matches!(key, "config" | "help") {
            return Err(format!("`{key}` has no place in a config file"));
        }
        self.find(key).ok_or_else(|| {
            let near = self
                .command
                .get_arguments()
                .filter_map(|a| a.get_long())
                .map(|l| (strsim::levenshtein(l, key), l))
                .min()
                .filter(|(d, _)| *d <= 3)
                .map_or(String::new(), |(_, l)| format!("; did you mean `{l}`?"));
            format!("unknown key `{key}`: `run` has no flag --{key}{near}")
        })
    }

    /// Whether the command line sets `key`'s flag or one it conflicts with.
    fn overridden(&self, key: &str) -> bool {
        let Some(arg) = self.find(key) else { return false };
        let id = arg.get_id().as_str();
        if self.cli.set.contains(id) {
            return true;
        }
        let conflicts = |a: &Arg| {
            self.command.get_arg_conflicts_with(a).into_iter().map(|c| c.get_id().to_string()).collect::<Vec<_>>()
        };
        conflicts(arg).iter().any(|c| self.cli.set.contains(c))
            || self
                .cli
                .set
                .iter()
                .filter_map(|s| self.command.get_arguments().find(|a| a.get_id() == s))
                .any(|a| conflicts(a).iter().any(|c| c == id))
    }
}

/// One value of an axis: its tokens and how it is shown (in the run's name and the index).
#[derive(Clone)]
struct Value {
    tokens: Vec<String>,
    shown: String,
}

struct AxisValues {
    key: String,
    /// The flag's id (an alias's flag).
    id: String,
    values: Vec<Value>,
}

/// The matrix's axes, those the command line decides left out (said so).
fn axes(keys: &Keys, matrix: &toml::Table) -> Result<Vec<AxisValues>, String> {
    let mut axes = Vec::new();
    for (key, v) in matrix {
        let arg = keys.arg(key)?;
        let toml::Value::Array(items) = v else {
            return Err(format!("matrix.{key}: a list of values, one per run (e.g. {key} = [a, b])"));
        };
        if items.is_empty() {
            return Err(format!("matrix.{key}: an empty list would run nothing"));
        }
        if key == "out" {
            return Err("matrix.out: each run's directory is named by the matrix; give `out` once".into());
        }
        if keys.overridden(key) {
            eprintln!("note: the command line sets --{key}: the matrix's `{key}` axis is left out");
            continue;
        }
        let long = arg.get_long().unwrap_or(key);
        let values = items
            .iter()
            .enumerate()
            .map(|(j, item)| Ok(Value { tokens: tokens(arg, key, item)?, shown: shown_secret(long, item, j) }))
            .collect::<Result<Vec<_>, String>>()
            .map_err(|e| format!("matrix.{e}"))?;
        axes.push(AxisValues { key: key.clone(), id: arg.get_id().to_string(), values });
    }
    let sizes: Vec<String> = axes.iter().map(|a| a.values.len().to_string()).collect();
    match axes.iter().try_fold(1usize, |n, a| n.checked_mul(a.values.len())) {
        Some(runs) if runs <= MAX_RUNS => {}
        Some(runs) => {
            return Err(format!("the matrix expands to {} = {runs} runs, more than {MAX_RUNS}", sizes.join(" × ")))
        }
        None => return Err(format!("the matrix expands to {} runs, more than {MAX_RUNS}", sizes.join(" × "))),
    }
    Ok(axes)
}

/// Every combination of the axes' values, the last axis varying fastest.
fn combinations(axes: &[AxisValues]) -> Vec<Vec<(&AxisValues, &Value)>> {
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
fn tokens(arg: &Arg, key: &str, v: &toml::Value) -> Result<Vec<String>, String> {
    let flag = format!("--{key}");
    let takes_values = arg.get_action().takes_values();
    match v {
        toml::Value::Boolean(b) if !takes_values => Ok(if *b { vec![flag] } else { Vec::new() }),
        _ if !takes_values => Err(format!("`{key}` is a switch: give true or false")),
        toml::Value::Array(items) => {
            let parts = items.iter().map(|i| scalar(key, i)).collect::<Result<Vec<_>, _>>()?;
            if parts.is_empty() {
                return Err(format!("`{key}`: an empty list"));
            }
            let several = arg.get_num_args().is_some_and(|n| n.max_values() > 1);
            let repeated = matches!(arg.get_action(), clap::ArgAction::Append);
            match arg.get_value_delimiter() {
                Some(d) if d != ' ' => Ok(vec![format!("{flag}={}", parts.join(&d.to_string()))]),
                _ if several => Ok(std::iter::once(flag).chain(parts).collect()),
                // A flag given once per value (`--header`): the list as that many flags.
                None if repeated => Ok(parts.iter().map(|p| format!("{flag}={p}")).collect()),
                _ => Err(format!("`{key}` takes one value, not a list")),
            }
        }
        other => Ok(vec![format!("{flag}={}", scalar(key, other)?)]),
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
#[path = "config_tests.rs"]
mod tests;
