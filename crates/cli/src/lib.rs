//! The `goodput` command line: the clap front end and the wiring of the other crates — each
//! command's arguments checked once, then handed to the crates that do the work. The top
//! floor: it may import every goodput crate and none imports it. What a person reads of a
//! run (tables, the report page, exports, the conclusion) is written by `goodput-report`;
//! the cli only prints it or names the file it goes to.

mod args;
mod calibrate;
mod compare;
mod connect;
mod engine_bench;
mod engine_check;
mod generate;
mod hardware;
mod help;
mod merge;
mod models;
mod plan;
mod profile;
mod report;
mod run;
mod serve;
mod shell;
mod workload;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

/// goodput: how much LLM load this model on this hardware serves within your SLOs, and why not more.
#[derive(Parser, Debug)]
#[command(name = "goodput", version, about, long_about = None)]
struct Cli {
    /// When to color verdicts: auto, always or never.
    ///
    /// When to color the console's verdicts: auto (a terminal, unless NO_COLOR is set),
    /// always or never.
    #[arg(long, global = true, value_enum, hide_possible_values = true, default_value_t = shell::ColorWhen::Auto)]
    color: shell::ColorWhen,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// List the model catalog: shapes, parameters, weight and KV bytes.
    Models(models::ModelsArgs),
    /// Engine microbenchmark: prefill latency per prompt length, decode step per batch size.
    EngineBench(engine_bench::BenchArgs),
    /// Check the engine on a device against the CPU f32 engine from the same weights: greedy
    /// ids (alone, batched, prefix hits, preemption), teacher-forced logits at the device's
    /// dtype, and on CUDA goodput's kernels against candle's ops.
    EngineCheck(engine_check::CheckArgs),
    /// Sweep a scenario's load to its usable capacity under SLOs.
    ///
    /// The load levels of a scenario, each measured in three layers (what users see, what the
    /// engine did, what the system delivered), usable and limit capacity, and the conclusion.
    Run(Box<run::RunArgs>),
    /// Search usable capacity directly: double the users from 1 until an SLO breaks (or
    /// --max-users), then bisect between the last passing and the first failing level.
    Capacity(Box<run::CapacityArgs>),
    /// Measure the engine's step costs on a grid designed for the fit (or fit a run's steps)
    /// and write a profile: coefficients with intervals, residuals, each term against the
    /// machine's roofline. `run --simulate` and `--predict` use it.
    Profile(Box<profile::ProfileArgs>),
    /// List the GPU catalog: memory, bandwidth, dense FLOP/s, links (with --hardware FILE).
    Hardware(hardware::HardwareArgs),
    /// GPUs per model for a load under SLOs: fit, KV, simulated usable capacity per replica,
    /// replicas and cost per GPU × TP, and the written answer. `--check RUN_DIR --profile P`
    /// sets a run's simulated twin beside its measurement.
    Plan(Box<plan::PlanArgs>),
    /// Generate text for one prompt with the in-process engine.
    Generate(generate::GenerateArgs),
    /// Serve the in-process engine over an OpenAI-compatible HTTP API, with /metrics.
    Serve(Box<serve::ServeArgs>),
    /// Measure the HTTP client itself against a mock server with a known schedule: its
    /// timing error and CPU per token at 100s–1000s of concurrent streams.
    Calibrate(calibrate::CalibrateArgs),
    /// Compare two runs metric by metric (ratio, noise, Markdown); non-zero exit on a
    /// regression beyond --fail-on.
    Compare(compare::CompareArgs),
    /// Build one run from the shards of a run split over processes or machines (`run --shard
    /// i/N`): every metric recomputed from their raw records on one time line, the capacity
    /// verdict and the conclusion as for one process; late starts and lost requests named.
    Merge(merge::MergeArgs),
    /// Turn a run's results into one self-contained HTML page with the seeds' charts.
    Report(report::ReportArgs),
    /// Print the shell completion script for bash, zsh, fish, elvish or powershell.
    Completions(shell::CompletionsArgs),
    /// Write the man pages (goodput.1, goodput-run.1, …).
    Man(shell::ManArgs),
}

/// Parses the arguments, runs the command and returns the process's exit code: 0, or 1 for
/// an error — except `compare`, which exits 1 on a regression and 2 on an error, so a CI gate
/// can tell them apart (hyperfine's and critcmp's convention), and `run`/`capacity`, which
/// exit 3 when a level measured no completed request and 130 when interrupted. Errors are printed with their
/// chain; a closed stdout (`goodput models | head`) ends quietly.
pub fn main() -> i32 {
    quiet_on_broken_pipe();
    let matches = help::shaped(Cli::command()).get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    if let Some(("run" | "capacity", m)) = matches.subcommand() {
        help::idle_engine_warning(m).into_iter().for_each(|w| eprintln!("{w}"));
    }
    // `--json` takes stdout for itself, and the tables go to stderr.
    let json =
        matches!(&cli.command, Command::Run(a) if a.json) || matches!(&cli.command, Command::Capacity(c) if c.run.json);
    goodput_report::console::set_color(shell::color_here(cli.color, json));
    let error_code = if matches!(cli.command, Command::Compare(_)) { 2 } else { 1 };
    let result = match cli.command {
        Command::Models(a) => models::run(a).map(|()| 0),
        Command::EngineBench(a) => engine_bench::run(a).map(|()| 0),
        Command::EngineCheck(a) => engine_check::run(a).map(|()| 0),
        Command::Generate(a) => generate::run(a).map(|()| 0),
        Command::Profile(a) => profile::run(*a).map(|()| 0),
        Command::Hardware(a) => hardware::run(a).map(|()| 0),
        Command::Plan(a) => plan::run(*a).map(|()| 0),
        Command::Run(a) => run::main(*a, matches.subcommand_matches("run")),
        Command::Capacity(a) => run::capacity(*a),
        Command::Serve(a) => serve::run(*a).map(|()| 0),
        Command::Calibrate(a) => calibrate::run(a).map(|()| 0),
        Command::Compare(a) => compare::run(a),
        Command::Merge(a) => merge::run(a),
        Command::Report(a) => report::run(a).map(|()| 0),
        Command::Completions(a) => {
            shell::completions(a, help::shaped(Cli::command()));
            Ok(0)
        }
        Command::Man(a) => shell::man(a, help::shaped(Cli::command())).map(|files| {
            files.iter().for_each(|f| eprintln!("wrote {}", f.display()));
            0
        }),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            let broken_pipe = e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            });
            if broken_pipe {
                return 0;
            }
            // No URL's user:password@ is printed, whichever message carries it; each cause once.
            let mut said = goodput_client::redact_url(&e.to_string());
            eprintln!("error: {said}");
            for cause in e.chain().skip(1).map(|c| goodput_client::redact_url(&c.to_string())) {
                if !said.contains(&cause) {
                    eprintln!("  caused by: {cause}");
                    said.push_str(&cause);
                }
            }
            error_code
        }
    }
}

/// `println!` panics when stdout is a closed pipe (`goodput run | head -1`); every such
/// panic, on any thread, ends the process quietly with status 0, as ripgrep does on a broken
/// pipe. Every other panic reaches the default hook as before.
fn quiet_on_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let text = payload.downcast_ref::<String>().map(String::as_str).or(payload.downcast_ref::<&str>().copied());
        if text.is_some_and(|t| t.starts_with("failed printing to stdout") && t.contains("Broken pipe")) {
            std::process::exit(0);
        }
        default(info);
    }));
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        help::shaped(Cli::command()).debug_assert();
        let c =
            Cli::try_parse_from(["goodput", "engine-bench", "--prompt-lens", "16,32", "--batch-sizes", "1,2"]).unwrap();
        let Command::EngineBench(b) = c.command else { panic!() };
        assert_eq!((b.prompt_lens, b.batch_sizes), (vec![16, 32], vec![1, 2]));
        assert!(Cli::try_parse_from(["goodput", "engine-bench", "--prompt-lens", "x"]).is_err());
        assert!(Cli::try_parse_from(["goodput", "generate", "--kv-memory", "lots"]).is_err());
    }
}
