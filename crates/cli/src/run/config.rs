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
    // The run's own command: `--resume` is the matrix's.
    let mut command: Vec<String> = argv.filter(|t| t != "--resume").collect();
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
mod tests {
    use super::*;
    use goodput_bench::config::{run_name, MAX_RUNS};
    use std::time::Duration;

    fn file(name: &str, text: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("goodput-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(format!("{name}.toml"));
        std::fs::write(&p, text).unwrap();
        p
    }

    /// The command line `goodput run ARGS…` as `main` sees it.
    fn cli(args: &[&str]) -> CommandLine {
        let argv: Vec<String> = ["goodput", "run"].iter().chain(args).map(|s| s.to_string()).collect();
        let matches = RunOnly::command().try_get_matches_from(&argv[1..]).unwrap();
        command_line(&matches, &argv)
    }

    fn one(name: &str, text: &str, args: &[&str]) -> RunArgs {
        let e = expand(&file(name, text), &cli(args)).unwrap_or_else(|e| panic!("{e:#}"));
        assert!(e.matrix.is_none());
        e.jobs.into_iter().next().unwrap().args
    }

    fn error(name: &str, text: &str, args: &[&str]) -> String {
        match expand(&file(name, text), &cli(args)) {
            Ok(_) => panic!("{text} was taken"),
            Err(e) => format!("{e:#}"),
        }
    }

    #[test]
    fn every_key_is_the_flag_of_its_name() {
        let text = r#"
        concurrency = [1, 4, 16]
        slo = "ttft_p95=2s,tpot_p95=40ms"
        no-prefix-caching = true
        ignore-server-stamps = false
        max-num-seqs = 64
        timeout = "30s"
        model = "tiny"
        num-prompts = 9
    "#;
        let a = one("keys", text, &[]);
        assert_eq!(a.concurrency, vec![1, 4, 16]);
        assert_eq!(a.requests, Some(9), "a visible alias is a key too");
        assert_eq!(a.slo.as_deref(), Some("ttft_p95=2s,tpot_p95=40ms"));
        assert!(a.engine.no_prefix_caching && !a.ignore_server_stamps);
        assert_eq!((a.engine.max_num_seqs, a.timeout), (64, Duration::from_secs(30)));
        assert!(a.config.is_none() && a.scenario_inline.is_none());
        let command = a.command.unwrap();
        assert_eq!(&command[..2], ["goodput", "run"]);
        assert!(command.contains(&"--concurrency=1,4,16".to_string()), "{command:?}");
        assert!(command.contains(&"--no-prefix-caching".to_string()), "{command:?}");
        assert!(!command.iter().any(|t| t.contains("ignore-server-stamps")), "false leaves a switch out");
    }

    /// Issue 48's keys: a search with its bounds, and a soak after it.
    #[test]
    fn the_search_and_the_soak_are_keys_too() {
        let text = r#"
        search = true
        concurrency = [1, 2]
        max-users = 64
        search-budget = "5m"
        soak = "30m"
        soak-windows = 6
    "#;
        let a = one("search-soak", text, &[]);
        assert!(a.search && a.max_users == Some(64));
        assert_eq!(
            (a.search_budget, a.soak, a.soak_windows),
            (Duration::from_secs(300), Some(Duration::from_secs(1800)), 6)
        );
    }

    #[test]
    fn the_command_line_overrides_a_key_and_the_keys_it_conflicts_with() {
        let text = "concurrency = [1, 2]\nmax-num-seqs = 64\nout = \"from-file\"\n";
        let a = one("over", text, &["--config", "x.toml", "--max-num-seqs", "8"]);
        assert_eq!((a.engine.max_num_seqs, a.concurrency.clone()), (8, vec![1, 2]));
        assert_eq!(a.out, Some(PathBuf::from("from-file")));
        // --rate conflicts with the file's concurrency: the file's key gives way.
        let a = one("over", text, &["--rate=2,4"]);
        assert_eq!(a.rate, Some(vec![2.0, 4.0]));
        let command = a.command.unwrap();
        assert!(!command.iter().any(|t| t.starts_with("--concurrency")), "{command:?}");
        assert!(!command.iter().any(|t| t.contains("x.toml")), "--config itself is not stored");
    }

    #[test]
    fn a_key_that_needs_an_overridden_key_does_not_break_the_run() {
        let text = "rate = [2.0, 4.0]\nburstiness = 0.5\nrequests = 8\n";
        // --concurrency replaces the file's rate; the burstiness that requires a rate is then
        // unused, as clap takes it on a command line (a requirement of a conflicting flag lapses).
        let a = one("needs", text, &["--concurrency", "1,2"]);
        assert_eq!((a.rate.clone(), a.concurrency.clone(), a.requests), (None, vec![1, 2], Some(8)));
        // With the rate on the command line, the file's burstiness stays.
        let a = one("needs", text, &["--rate", "3"]);
        assert_eq!((a.rate.clone(), a.burstiness), (Some(vec![3.0]), 0.5));
    }

    #[test]
    fn bad_files_are_refused_by_name() {
        let e = error("typo", "concurency = [1, 2]\n", &[]);
        assert!(e.contains("unknown key `concurency`") && e.contains("did you mean `concurrency`"), "{e}");
        assert!(e.contains("typo.toml"), "the file is named: {e}");
        let e = error("switch", "no-prefix-caching = \"yes\"\n", &[]);
        assert!(e.contains("`no-prefix-caching` is a switch"), "{e}");
        let e = error("list", "slo = [\"ttft_p95=1s\", \"tpot_p95=1s\"]\n", &[]);
        assert!(e.contains("`slo` takes one value, not a list"), "{e}");
        let e = error("table", "[target]\nurl = \"x\"\n", &[]);
        assert!(e.contains("`target`: a value, not a list or table"), "{e}");
        let e = error("syntax", "concurrency = [1, \n", &[]);
        assert!(e.contains("syntax.toml") && e.contains("line"), "{e}");
        let e = error("clap", "concurrency = [1]\nrate = [2.0]\n", &[]);
        assert!(e.contains("clap.toml") && e.contains("--rate"), "clap's own check, the file named: {e}");
        let e = error("nested", "config = \"other.toml\"\n", &[]);
        assert!(e.contains("`config` has no place"), "{e}");
        let e = error("value", "max-num-seqs = \"many\"\n", &[]);
        assert!(e.contains("value.toml") && e.contains("many"), "{e}");
    }

    #[test]
    fn an_inline_scenario_runs_and_is_stored_as_a_file_of_the_run() {
        let text = "out = \"runs/inline\"\n[scenario]\ninput = { kind = \"fixed\", n = 20 }\noutput = { kind = \"fixed\", n = 4 }\n";
        let a = one("qa-inline", text, &[]);
        let scenario = a.scenario_inline.clone().unwrap();
        let parsed = goodput_workload::parse_scenario(&scenario, "unused").unwrap();
        assert_eq!(parsed.name(), "qa-inline", "named after the config file");
        let command = a.command.unwrap();
        assert_eq!(command.last().unwrap(), "--scenario=runs/inline/scenario.toml");
        // The command line's --scenario takes its place.
        let a = one("qa-inline", text, &["--scenario", "long-gen"]);
        assert!(a.scenario_inline.is_none());
        assert_eq!(a.scenario, "long-gen");
    }

    #[test]
    fn a_matrix_expands_to_one_run_per_combination_under_out() {
        let text = r#"
        out = "runs/m"
        requests = 4
        [matrix]
        max-num-seqs = [8, 64]
        concurrency = [[1, 2], [4]]
    "#;
        let e = expand(&file("m", text), &cli(&[])).unwrap();
        let (root, axes) = e.matrix.unwrap();
        assert_eq!(root, PathBuf::from("runs/m"));
        let keys: Vec<&str> = axes.iter().map(|a| a.key.as_str()).collect();
        assert_eq!(keys, ["concurrency", "max-num-seqs"]);
        assert_eq!(axes[0].values, ["1+2", "4"]);
        let names: Vec<&str> = e.jobs.iter().map(|j| j.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "01-concurrency=1+2,max-num-seqs=8",
                "02-concurrency=1+2,max-num-seqs=64",
                "03-concurrency=4,max-num-seqs=8",
                "04-concurrency=4,max-num-seqs=64"
            ]
        );
        let last = &e.jobs[3].args;
        assert_eq!((last.concurrency.clone(), last.engine.max_num_seqs, last.requests), (vec![4], 64, Some(4)));
        assert_eq!(last.out, Some(PathBuf::from("runs/m").join(&e.jobs[3].name)));
        assert_eq!(
            e.jobs[1].values,
            vec![("concurrency".to_string(), "1+2".to_string()), ("max-num-seqs".into(), "64".into())]
        );
        // One seed for every run, drawn once when the file gives none.
        let seeds: Vec<Option<u64>> = e.jobs.iter().map(|j| j.args.seed).collect();
        assert!(seeds[0].is_some() && seeds.iter().all(|s| *s == seeds[0]), "{seeds:?}");
        // The command line's --out moves the matrix, and its flag drops an axis.
        let e = expand(&file("m", text), &cli(&["--out", "elsewhere", "--max-num-seqs", "16"])).unwrap();
        assert_eq!(e.jobs.len(), 2);
        assert!(e.jobs.iter().all(|j| j.args.engine.max_num_seqs == 16));
        assert_eq!(e.jobs[0].args.out, Some(PathBuf::from("elsewhere/01-concurrency=1+2")));
    }

    #[test]
    fn an_axis_replaces_the_key_of_its_flag_under_any_name_and_lists_repeat_a_flag() {
        let text = "out = \"m\"\nrequests = 4\nheader = [\"X-A: 1\", \"X-B: 2\"]\n[matrix]\nnum-prompts = [1, 2]\n";
        let e = expand(&file("alias", text), &cli(&[])).unwrap_or_else(|e| panic!("{e:#}"));
        let requests: Vec<Option<usize>> = e.jobs.iter().map(|j| j.args.requests).collect();
        assert_eq!(requests, [Some(1), Some(2)]);
        let names: Vec<&str> = e.jobs[0].args.connection.headers.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["X-A", "X-B"]);
    }

    #[test]
    fn a_bad_matrix_is_refused_by_name() {
        let e = error("no-out", "[matrix]\nmax-num-seqs = [8, 64]\n", &[]);
        assert!(e.contains("give out = \"DIR\""), "{e}");
        let e = error("empty", "out = \"x\"\n[matrix]\nmax-num-seqs = []\n", &[]);
        assert!(e.contains("matrix.max-num-seqs: an empty list"), "{e}");
        let e = error("scalar", "out = \"x\"\n[matrix]\nmax-num-seqs = 8\n", &[]);
        assert!(e.contains("matrix.max-num-seqs: a list of values"), "{e}");
        let e = error("big", "out = \"x\"\n[matrix]\nmax-num-seqs = [1,2,3,4,5,6,7,8,9,10,11]\nblock-size = [1,2,3,4,5,6,7,8,9,10]\nseed = [1,2,3,4,5,6,7,8,9,10]\n", &[]);
        assert!(e.contains("1100 runs, more than 1000"), "{e}");
        let e = error("axis-typo", "out = \"x\"\n[matrix]\nmax-num-seq = [8]\n", &[]);
        assert!(e.contains("unknown key `max-num-seq`"), "{e}");
        let e = error("out-axis", "out = \"x\"\n[matrix]\nout = [\"a\", \"b\"]\n", &[]);
        assert!(e.contains("matrix.out"), "{e}");
    }

    #[test]
    fn run_names_keep_to_safe_characters() {
        let name = run_name(0, &[("target".into(), "http://127.0.0.1:8000".into())]);
        assert_eq!(name, "01-target=http___127.0.0.1_8000");
        assert_eq!(
            strip(&["--config".into(), "a".into(), "--out=b".into(), "-q".into()], "--out"),
            ["--config", "a", "-q"]
        );
    }

    /// A matrix over secret flags: every place a run is named (its directory, the index's values,
    /// the console's `matrix: run N` line, the stored command through its --out) shows
    /// `redacted-N`, never the value; a non-secret extra body is shown as it is.
    #[test]
    fn secrets_of_a_matrix_are_shown_redacted_everywhere() {
        let text = r#"out = "m"
target = "http://127.0.0.1:9"
[matrix]
api-key = ["sk-SECRET-AAAA", "sk-SECRET-BBBB"]
header = [["X-Token: HDR-SECRET-1"], ["X-Token: HDR-SECRET-2"]]
extra-body = ['{"api_key": "EB-SECRET-1"}', '{"temperature": 0.5}']
"#;
        let e = expand(&file("secrets", text), &cli(&[])).unwrap_or_else(|e| panic!("{e:#}"));
        assert_eq!(e.jobs.len(), 8);
        let (root, axes) = e.matrix.as_ref().unwrap();
        let index = serde_json::to_string(axes).unwrap();
        assert!(!index.contains("SECRET"), "{index}");
        assert!(index.contains("redacted-1") && index.contains("temperature"), "{index}");
        for j in &e.jobs {
            let shown = format!("{} {:?}", j.name, j.values);
            assert!(!shown.contains("SECRET") && shown.contains("redacted-"), "{shown}");
            let stored = goodput_client::redact::redacted_command(j.args.command.clone().unwrap()).join(" ");
            assert!(!stored.contains("SECRET"), "{stored}");
            assert!(stored.contains(&format!("--out={}", root.join(&j.name).display())), "{stored}");
            // The run itself gets the real value.
            assert!(j.args.connection.api_key.as_deref().unwrap().starts_with("sk-SECRET-"));
        }
        assert_eq!(e.jobs[0].name, "01-api-key=redacted-1,extra-body=redacted-1,header=redacted-1");
        assert_eq!(e.jobs[2].name, "03-api-key=redacted-1,extra-body=__temperature___0.5_,header=redacted-1");
    }

    /// Lists are bounded before anything expands them; a matrix too large to count says its
    /// axes' sizes, not a wrapped number; a TOML error does not echo a 200 KB line.
    #[test]
    fn lists_are_bounded_before_expansion_and_errors_stay_short() {
        let long: Vec<String> = (0..20_000).map(|i| i.to_string()).collect();
        let e = error("long-list", &format!("concurrency = [{}]\n", long.join(",")), &[]);
        assert!(e.contains("`concurrency` lists 20000 values; a list may hold at most 10000"), "{e}");
        let e = error("long-axis", &format!("out = \"x\"\n[matrix]\nseed = [{}]\n", long.join(",")), &[]);
        assert!(e.contains("`matrix.seed` lists 20000 values"), "{e}");
        let axis: Vec<String> = (0..10_000).map(|i| i.to_string()).collect();
        let axes: String = ["seed", "max-num-seqs", "block-size", "requests", "warmup"]
            .iter()
            .map(|k| format!("{k} = [{}]\n", axis.join(",")))
            .collect();
        let e = error("huge", &format!("out = \"x\"\n[matrix]\n{axes}"), &[]);
        assert!(e.contains("10000 × 10000 × 10000 × 10000 × 10000 runs, more than 1000"), "{e}");
        assert!(!e.contains("18446744073709551615"), "{e}");
        let e = error("bad-line", &format!("concurrency = [{}, ]]\n", long.join(",")), &[]);
        assert!(e.len() < 2000, "{} bytes: {}", e.len(), &e[..200]);
        let big = file("big-file", &"# padding\n".repeat(200_000));
        let e = format!("{:#}", expand(&big, &cli(&[])).err().unwrap());
        assert!(e.contains("a config file may be at most 1 MiB"), "{e}");
    }

    /// Config files mutated structurally (keys deleted, renamed, added; values replaced by other
    /// types, integers at every type's edge, deep nesting, huge lists from the seeds) and at the
    /// byte level: expanding one returns its runs or an error, never panics, and what it returns
    /// keeps the bounds: at most [`MAX_RUNS`] runs, names of safe characters no longer than their
    /// bound, no secret in a name.
    mod fuzz {
        use super::*;
        use goodput_fuzzing::toml::mutated;
        use goodput_fuzzing::{config, temp_path};
        use proptest::prelude::*;

        const SEEDS: [&str; 4] = [
        "concurrency = [1, 4]\nrequests = 8\nslo = \"ttft_p95=1s\"\nmodel = \"tiny\"\n",
        "out = \"m\"\nseed = 3\n[matrix]\nmax-num-seqs = [8, 64]\nconcurrency = [[1, 2], [4]]\n",
        "out = \"m\"\ntarget = \"http://127.0.0.1:9\"\n[matrix]\napi-key = [\"sk-SECRET-A\", \"sk-SECRET-B\"]\nheader = [[\"X-T: SECRET-1\"], [\"X-T: SECRET-2\"]]\n",
        "rate = [2, 4]\nrequests = 4\n[scenario]\ninput = { kind = \"fixed\", n = 24 }\noutput = { kind = \"uniform\", min = 2, max = 9 }\n",
    ];

        const KEYS: &[&str] = &[
            "out",
            "matrix",
            "scenario",
            "concurrency",
            "rate",
            "requests",
            "warmup",
            "seed",
            "max-num-seqs",
            "block-size",
            "api-key",
            "header",
            "extra-body",
            "target",
            "slo",
            "model",
            "input",
            "output",
            "kind",
            "n",
            "min",
            "max",
            "repeats",
            "config",
            "burst",
            "duration",
        ];

        proptest! {
            #![proptest_config(config())]
            #[test]
            fn any_config_expands_or_is_refused_within_bounds(text in mutated(SEEDS.to_vec(), KEYS)) {
                let path = temp_path("config", "toml");
                std::fs::write(&path, &text).unwrap();
                let expanded = expand(&path, &cli(&[]));
                let _ = std::fs::remove_file(&path);
                if let Ok(e) = expanded {
                    prop_assert!(e.jobs.len() <= MAX_RUNS, "{} runs", e.jobs.len());
                    for j in &e.jobs {
                        prop_assert!(j.name.chars().count() <= 124, "{}", j.name);
                        // No value of a secret flag reaches the run's name or its values.
                        let shown = format!("{} {:?}", j.name, j.values);
                        let c = &j.args.connection;
                        let secrets = c.api_key.iter().cloned().chain(c.headers.iter().map(|(_, v)| v.expose().to_string()));
                        for secret in secrets.filter(|v| v.len() >= 4) {
                            prop_assert!(!shown.contains(&secret), "{secret} in {shown}");
                        }
                    }
                }
            }
        }
    }
}
