//! A whole benchmark in one TOML file (`goodput run --config FILE`), as AIPerf's YAML and
//! guidellm's `--config` take one. Every key names a flag of `run`, so the file is exactly a
//! command line:
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
//! Here: the file read and bounded, its inline scenario and its matrix taken out, and the
//! whole expanded into one command line (tokens) per run, each run of a matrix named by its
//! axes' values ([`values`]). What a key's flag is — its id, whether it is a switch or takes
//! a list, what the command line already decides — is the caller's [`Flags`]: the command
//! line parses each run's tokens with its own parser. A flag on the command line overrides
//! the file's key of the same name, any key it conflicts with and a matrix axis of that name.
//!
//! Imports nothing of `run` or of the matrix runner, which import it.

mod values;

pub use values::{run_name, Value};

use crate::command::strip;
use crate::launch::{Server, ServerTemplate};
use goodput_results::matrix::Axis;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use values::{axes, combinations, tokens, AxisValues};

/// The prefix of a matrix's axes over the launched server's placeholders (`[matrix]
/// server.max-num-seqs = [8, 64]`): a run's values under it fill the `[server]` command.
pub const SERVER_AXIS: &str = "server.";

/// The most runs one matrix expands to.
pub const MAX_RUNS: usize = 1000;

/// The largest config file read: a whole benchmark is a few kilobytes (an inline scenario
/// included). The bound is also the bound on what parsing may cost before any list is
/// checked: TOML values take ~50–150× their text in memory.
pub const MAX_CONFIG_FILE: u64 = 1 << 20;

/// The longest list a key (or a matrix axis) may give, checked before any list is expanded
/// into flags, levels or runs.
pub const MAX_LIST: usize = 10_000;

/// How a flag takes its value, and so how a key's TOML value becomes its tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// No value: `true` gives the flag, `false` leaves it out.
    Switch,
    /// One value; a list is refused.
    One,
    /// A list joined by this delimiter: `--flag=a,b`.
    Delimited(char),
    /// Several values after one flag: `--flag a b`.
    Several,
    /// The flag once per value: `--flag=a --flag=b`.
    Repeated,
}

/// The flag a key names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Flag {
    /// The flag's id: an alias and its flag are one key.
    pub id: String,
    /// Its long name, as a secret's redaction knows it.
    pub long: String,
    pub shape: Shape,
}

/// What the command line knows of its flags.
pub trait Flags {
    /// The flag `key` names, or why there is none (an unknown key, with the nearest flag).
    fn flag(&self, key: &str) -> Result<Flag, String>;
    /// Whether the command line decides `key`: it sets `key`'s flag or one it conflicts with.
    fn overridden(&self, key: &str) -> bool;
}

/// What the command line gave beside the file: its tokens after `run` (without `--config`),
/// the ids of the arguments it set, and its `--out`.
#[derive(Clone, Debug, Default)]
pub struct CommandLine {
    pub tokens: Vec<String>,
    pub set: BTreeSet<String>,
    pub out: Option<PathBuf>,
}

/// One run's command line, as the file and the command line give it.
#[derive(Clone, Debug, PartialEq)]
pub struct Tokens {
    /// The flags after `run`.
    pub tokens: Vec<String>,
    /// A matrix's run: its directory (its `--out` among the tokens).
    pub out: Option<PathBuf>,
    /// The file's inline `[scenario]` as a scenario file's text, when the run takes it.
    pub inline: Option<String>,
}

/// One run of a config file: in a matrix, its directory name and the value of each axis;
/// `args` its command line ([`Tokens`]), or what the caller parsed it into.
#[derive(Clone, Debug)]
pub struct Job<A> {
    pub name: String,
    pub values: Vec<(String, String)>,
    pub args: A,
}

/// What a config file expands to: its runs, for a matrix its directory and axes, and notes on
/// what the command line took over.
#[derive(Debug)]
pub struct Expanded<A> {
    pub jobs: Vec<Job<A>>,
    pub matrix: Option<(PathBuf, Vec<Axis>)>,
    pub notes: Vec<String>,
    /// The file's `[server]`: how each run starts the server it measures.
    pub server: Option<ServerTemplate>,
}

impl<A> Expanded<A> {
    /// What `run --dry-run` prints: the runs, each with its directory (`.` for a run of its
    /// own) and its command line as `command` gives it, less `--dry-run`, secrets redacted;
    /// then the server it launches, as `server` gives it.
    pub fn dry_run(&self, command: impl Fn(&A) -> Vec<String>, server: impl Fn(&A) -> Option<String>) -> String {
        let at = self.matrix.as_ref().map_or(String::new(), |(root, _)| format!(" under {}", root.display()));
        let n = self.jobs.len();
        let mut out = format!("{n} run{}{at}:", if n == 1 { "" } else { "s" });
        for j in &self.jobs {
            let argv = command(&j.args).into_iter().filter(|t| t != "--dry-run");
            let shown = goodput_client::redact::redacted_command(argv).join(" ");
            out += &format!("\n  {}: {shown}", if j.name.is_empty() { "." } else { &j.name });
            if let Some(s) = server(&j.args) {
                out += &format!("\n    server: {}", goodput_client::redact_url(&s));
            }
        }
        out
    }

    /// Each run with the server it launches: the file's `[server]` with the run's
    /// `server.NAME` values, under what `of` reads from the run's arguments (the command
    /// line's `--server`, and the run's `--target` URL); none for a run that launches none.
    pub fn servers(
        self,
        of: impl Fn(&A) -> (Option<&str>, Option<&str>),
    ) -> Result<Expanded<(A, Option<Server>)>, String> {
        let mut jobs = Vec::new();
        for j in self.jobs {
            let (flag, url) = of(&j.args);
            let server = match (&self.server, flag) {
                (None, None) => match j.values.iter().find(|(k, _)| k.starts_with(SERVER_AXIS)) {
                    Some((k, _)) => {
                        return Err(format!(
                            "matrix.{k}: no server to fill: give [server] command = \"…\" (or --server CMD)"
                        ))
                    }
                    None => None,
                },
                (template, flag) => {
                    let axes: Vec<(String, String)> = j
                        .values
                        .iter()
                        .filter_map(|(k, v)| Some((k.strip_prefix(SERVER_AXIS)?.to_string(), v.clone())))
                        .collect();
                    let at = if j.name.is_empty() { String::new() } else { format!(" (the run {})", j.name) };
                    let t = template.clone().unwrap_or_default();
                    Some(t.render(flag, &axes, url).map_err(|e| format!("the server to launch{at}: {e}"))?)
                }
            };
            jobs.push(Job { name: j.name, values: j.values, args: (j.args, server) });
        }
        Ok(Expanded { jobs, matrix: self.matrix, notes: self.notes, server: self.server })
    }

    /// One run, not from a file.
    pub fn one(args: A) -> Self {
        let jobs = vec![Job { name: String::new(), values: Vec::new(), args }];
        Self { jobs, matrix: None, notes: Vec::new(), server: None }
    }

    /// Each run's arguments parsed by `f`; the first refusal is the whole expansion's.
    pub fn try_map<B, E>(self, mut f: impl FnMut(A) -> Result<B, E>) -> Result<Expanded<B>, E> {
        let jobs = self
            .jobs
            .into_iter()
            .map(|j| Ok(Job { name: j.name, values: j.values, args: f(j.args)? }))
            .collect::<Result<_, E>>()?;
        Ok(Expanded { jobs, matrix: self.matrix, notes: self.notes, server: self.server })
    }
}

/// Why a config file was refused: the file, and what is wrong with it.
#[derive(Debug, thiserror::Error)]
#[error("{file}: {problem}")]
pub struct ConfigError {
    pub file: String,
    pub problem: Problem,
}

/// What is wrong with a config file.
#[derive(Debug, thiserror::Error)]
pub enum Problem {
    /// It could not be read (missing, too large, not text).
    #[error("{0}")]
    Read(String),
    /// It is not TOML: its line and column, cut short.
    #[error("{0}")]
    Syntax(String),
    /// A key (or a list) is not what its flag takes, or names no flag.
    #[error("{0}")]
    Key(String),
    /// The matrix is malformed, too large, or has no `out` to write its runs under.
    #[error("{0}")]
    Matrix(String),
}

/// Reads and expands the config file at `path` under the command line `cli`, whose flags
/// `flags` describes.
pub fn expand(path: &Path, flags: &dyn Flags, cli: &CommandLine) -> Result<Expanded<Tokens>, ConfigError> {
    let fail = |problem| ConfigError { file: path.display().to_string(), problem };
    let text = goodput_core::input::read_to_string(path, "config file", MAX_CONFIG_FILE)
        .map_err(|e| fail(Problem::Read(e.to_string())))?;
    let mut table: toml::Table = toml::from_str(&text).map_err(|e| fail(Problem::Syntax(toml_message(&e))))?;
    check_lists(&table, "").map_err(|e| fail(Problem::Key(e)))?;
    let matrix = match table.remove("matrix") {
        None => None,
        Some(toml::Value::Table(m)) => Some(m),
        Some(_) => {
            return Err(fail(Problem::Matrix("`matrix` must be a table of keys to lists of values ([matrix])".into())))
        }
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
    let inline = inline.filter(|_| !flags.overridden("scenario"));
    // `[server]`, a table; `server = "CMD"` is the --server flag's key.
    let server = match table.remove("server") {
        Some(toml::Value::Table(t)) => Some(ServerTemplate::from_table(&t).map_err(|e| fail(Problem::Key(e)))?),
        Some(v) => {
            table.insert("server".into(), v);
            None
        }
        None => None,
    };
    // Each key by its flag's id (an alias and its flag are one key).
    let mut base = Vec::new();
    for (key, value) in &table {
        let flag = flags.flag(key).map_err(|e| fail(Problem::Key(e)))?;
        if !flags.overridden(key) {
            base.push((flag.id.clone(), tokens(&flag, key, value).map_err(|e| fail(Problem::Key(e)))?));
        }
    }
    let Some(matrix) = matrix else {
        let args = job_tokens(&base, &[], cli, inline, None);
        return Ok(Expanded { server, ..Expanded::one(args) });
    };
    let mut notes = Vec::new();
    let axes = axes(flags, &matrix, &mut notes).map_err(|e| fail(Problem::Matrix(e)))?;
    let root = match (&cli.out, table.get("out")) {
        (Some(o), _) => o.clone(),
        (None, Some(toml::Value::String(o))) => PathBuf::from(o),
        _ => {
            return Err(fail(Problem::Matrix(
                "a matrix writes one run per combination under `out`: give out = \"DIR\" (or --out DIR)".into(),
            )))
        }
    };
    let jobs = matrix_jobs(base, &axes, cli, &inline, &root, seed_of(&text));
    let shown =
        axes.iter().map(|a| Axis { key: a.key.clone(), values: a.values.iter().map(|v| v.shown.clone()).collect() });
    Ok(Expanded { jobs, matrix: Some((root, shown.collect())), notes, server })
}

/// One run per combination of the axes, each under `root`.
fn matrix_jobs(
    base: Vec<(String, Vec<String>)>,
    axes: &[AxisValues],
    cli: &CommandLine,
    inline: &Option<String>,
    root: &Path,
    seed: u32,
) -> Vec<Job<Tokens>> {
    let mut base: Vec<_> = base.into_iter().filter(|(k, _)| k != "out").collect();
    // One seed for every run of the matrix, so that runs differ by their axes, not by their
    // prompts: the file's or the command line's, else `seed` (the file's own, so that a
    // matrix resumed sends the prompts its finished runs sent).
    if !base.iter().any(|(k, _)| k == "seed") && !cli.set.contains("seed") && !axes.iter().any(|a| a.id == "seed") {
        base.push(("seed".into(), vec![format!("--seed={seed}")]));
    }
    let mut jobs = Vec::new();
    for (i, combo) in combinations(axes).into_iter().enumerate() {
        let values: Vec<(String, String)> = combo.iter().map(|(a, v)| (a.key.clone(), v.shown.clone())).collect();
        let name = run_name(i, &values);
        let set: Vec<(String, Vec<String>)> = combo.iter().map(|(a, v)| (a.id.clone(), v.tokens.clone())).collect();
        let inline = inline.clone().filter(|_| !set.iter().any(|(k, _)| k == "scenario"));
        let args = job_tokens(&base, &set, cli, inline, Some(&root.join(&name)));
        jobs.push(Job { name, values, args });
    }
    jobs
}

/// The matrix's seed when neither the file nor the command line gives one: the file's text
/// hashed (FNV-1a), the same for the same file, another for an edited one.
fn seed_of(text: &str) -> u32 {
    text.bytes().fold(0x811c_9dc5u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193))
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

/// The tokens of one run: the file's keys (less those `set` gives; both by flag id), `set`'s,
/// then the command line's; with `out` (a matrix's run) the run's directory in place of any
/// other.
fn job_tokens(
    base: &[(String, Vec<String>)],
    set: &[(String, Vec<String>)],
    cli: &CommandLine,
    inline: Option<String>,
    out: Option<&Path>,
) -> Tokens {
    let kept = base.iter().filter(|(k, _)| !set.iter().any(|(s, _)| s == k));
    let mut tokens: Vec<String> = kept.chain(set).flat_map(|(_, t)| t.iter().cloned()).collect();
    match out {
        Some(dir) => {
            tokens.extend(strip(&cli.tokens, "--out"));
            tokens.push(format!("--out={}", dir.display()));
        }
        None => tokens.extend(cli.tokens.iter().cloned()),
    }
    Tokens { tokens, out: out.map(Path::to_path_buf), inline }
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
