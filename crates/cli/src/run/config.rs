//! `goodput run --config FILE`: the file expanded by [`goodput_bench::config`] (its keys,
//! inline scenario and matrix) into one command line per run, which clap parses here as it
//! parses any: [`Keys`] tells the library what each key's flag is from `run`'s own clap
//! definition. Unknown keys are refused by name, with the nearest flag. Paths are as on the
//! command line (relative to the working directory). A config's run stores the command line
//! it expands to, so `plan --check` re-runs it without the file; an inline scenario is
//! written into the run's directory as `scenario.toml` and named there.

use super::args::{parse_run, RunArgs, RunOnly};
use anyhow::{anyhow, Result};
use clap::parser::ValueSource;
use clap::{Arg, ArgMatches, CommandFactory};
use goodput_bench::command::strip;
pub use goodput_bench::config::{CommandLine, Expanded, Job};
use goodput_bench::config::{Flag, Flags, Shape, Tokens};
use std::path::{Path, PathBuf};

/// The command line beside the file, from `run`'s matches and the process's arguments
/// (`argv`, the program first): its tokens after `run` (without `--config`), the ids of the
/// arguments it set, and its `--out`.
pub fn command_line(matches: &ArgMatches, argv: &[String]) -> CommandLine {
    let at = argv.iter().skip(1).position(|a| a == "run").map_or(argv.len(), |i| i + 2);
    let set = matches
        .ids()
        .map(|id| id.as_str())
        .filter(|id| !matches!(*id, "config" | "color") && matches.value_source(id) == Some(ValueSource::CommandLine))
        .map(String::from)
        .collect();
    let out = matches.try_get_one::<PathBuf>("out").ok().flatten().cloned();
    // `--color` is the whole command line's, not `run`'s.
    CommandLine { tokens: strip(&strip(&argv[at..], "--config"), "--color"), set, out }
}

/// Reads and expands the config file at `path` under the command line `cli`, each run's
/// command line parsed into its arguments.
pub fn expand(path: &Path, cli: &CommandLine) -> Result<Expanded<RunArgs>> {
    let command = RunOnly::command();
    let keys = Keys { command: &command, cli };
    let expanded = goodput_bench::config::expand(path, &keys, cli)?;
    expanded.notes.iter().for_each(|n| eprintln!("note: {n}"));
    expanded.try_map(|t| job_args(path, t))
}

/// One run's arguments from its tokens: refused by clap with the file's name (and the run's
/// directory), the value of any secret flag hidden.
fn job_args(path: &Path, t: Tokens) -> Result<RunArgs> {
    let argv = ["goodput".to_string(), "run".to_string()].into_iter().chain(t.tokens.iter().cloned());
    let mut args = parse_run(argv.clone().skip(1)).map_err(|e| {
        let at = t.out.as_ref().map_or(String::new(), |d| format!(" (the run in {})", d.display()));
        anyhow!("{}{at}: {}", path.display(), without_secrets(&clap_message(&e), &t.tokens))
    })?;
    let mut command: Vec<String> = argv.collect();
    if let (Some(_), Some(dir)) = (&t.inline, &args.out) {
        command.push(format!("--scenario={}", dir.join(goodput_results::files::SCENARIO).display()));
    }
    args.config = None;
    args.scenario_inline = t.inline;
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

/// The flags of `run` (from its clap definition), and which of them the command line decides.
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

    fn conflicts(&self, a: &Arg) -> Vec<String> {
        self.command.get_arg_conflicts_with(a).into_iter().map(|c| c.get_id().to_string()).collect()
    }
}

impl Flags for Keys<'_> {
    fn flag(&self, key: &str) -> Result<Flag, String> {
        if matches!(key, "config" | "help") {
            return Err(format!("`{key}` has no place in a config file"));
        }
        let Some(arg) = self.find(key) else {
            let near = self
                .command
                .get_arguments()
                .filter_map(|a| a.get_long())
                .map(|l| (strsim::levenshtein(l, key), l))
                .min()
                .filter(|(d, _)| *d <= 3)
                .map_or(String::new(), |(_, l)| format!("; did you mean `{l}`?"));
            return Err(format!("unknown key `{key}`: `run` has no flag --{key}{near}"));
        };
        let several = arg.get_num_args().is_some_and(|n| n.max_values() > 1);
        let shape = match arg.get_value_delimiter() {
            _ if !arg.get_action().takes_values() => Shape::Switch,
            Some(d) if d != ' ' => Shape::Delimited(d),
            _ if several => Shape::Several,
            None if matches!(arg.get_action(), clap::ArgAction::Append) => Shape::Repeated,
            _ => Shape::One,
        };
        Ok(Flag { id: arg.get_id().to_string(), long: arg.get_long().unwrap_or(key).to_string(), shape })
    }

    fn overridden(&self, key: &str) -> bool {
        let Some(arg) = self.find(key) else { return false };
        let id = arg.get_id().as_str();
        let set = &self.cli.set;
        set.contains(id)
            || self.conflicts(arg).iter().any(|c| set.contains(c))
            || set
                .iter()
                .filter_map(|s| self.command.get_arguments().find(|a| a.get_id() == s))
                .any(|a| self.conflicts(a).iter().any(|c| c == id))
    }
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
