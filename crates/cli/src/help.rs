//! The help of `run` and `capacity` as a newcomer reads it: every flag under a heading, `-h`
//! one line a flag for the flags most runs need, `--help` every flag with its whole text.
//! The headings are given here by clap id rather than on each field, so that one table shows
//! the whole layout; a test checks that it names every flag once.

use clap::Command;

/// The headings of `run`'s flags in the order `--help` prints them, a line each: the heading,
/// `: `, its flags by clap id; a `*` marks the flags `-h` shows (the others only `--help`).
const RUN_HEADINGS: &str = "\
Workload: *scenario *input_len *output_len range_ratio *prefix_len *dataset dataset_format dataset_output_tokens \
  dataset_min_input dataset_max_input dataset_sessions *trace trace_format trace_speedup trace_window \
  trace_block_size max_model_len encoder *seed
Load: *concurrency *rate rate_of_limit *max_concurrency constant_rate burstiness *requests *duration stages *burst *search \
  *max_users max_rate search_budget *think think_jitter ramp *warmup cooldown refine stop_at_first_failure *repeats \
  *soak soak_windows shard start_at clock_ref
SLOs: *slo *goodput
Target and HTTP: *target *server *model catalog *tokenizer *served_model_name *api max_tokens_field ignore_server_stamps \
  *headers *api_key insecure ca_cert *extra_body strict_openai hyper_client session_header *timeout retries retry_backoff \
  scrape_interval harness_cpus
Engine (in-process and http-local targets): *weights *device *dtype kv_blocks *kv_memory block_size \
  *max_num_batched_tokens max_prefill_tokens *max_num_seqs no_prefix_caching *engine_cpus series_interval
CUDA engine: no_cuda_graphs no_mixed_graphs no_flash_prefill no_pdl
Simulated twin: *simulate *predict
Output: *out overwrite *report export_json *export_csv export_markdown *json *quiet *wide *explain percentile_metrics \
  metric_percentiles metrics_port metrics_host *config resume dry_run *baseline fail_on";

/// The headings whose flags set goodput's own engine: they do nothing against a URL.
pub const ENGINE: [&str; 2] = ["Engine (in-process and http-local targets)", "CUDA engine"];

/// `(heading, flags)` of [`RUN_HEADINGS`], the flags by clap id, `*` kept.
fn headings() -> impl Iterator<Item = (&'static str, impl Iterator<Item = &'static str>)> {
    RUN_HEADINGS.lines().filter_map(|l| l.split_once(": ")).map(|(h, ids)| (h, ids.split_whitespace()))
}

const RUN_AFTER: &str = "Every flag with its whole text: --help. Scenario files: docs/scenarios.md.";

/// `goodput`'s command with the help of `run` and `capacity` laid out by [`RUN_HEADINGS`].
pub fn shaped(cmd: Command) -> Command {
    cmd.mut_subcommand("run", run).mut_subcommand("capacity", run)
}

/// One command's flags put under their headings, the unmarked ones left out of `-h`.
pub fn run(mut cmd: Command) -> Command {
    for (heading, ids) in headings() {
        for id in ids {
            let (id, short) = id.strip_prefix('*').map_or((id, false), |id| (id, true));
            cmd = cmd.mut_arg(id, |a| long_without_summary(a.help_heading(heading).hide_short_help(!short)));
        }
    }
    cmd.after_help(RUN_AFTER)
}

/// `--help` without the summary `-h` shows, where the whole text goes on from it; possible
/// values left to the text, which names them.
fn long_without_summary(a: clap::Arg) -> clap::Arg {
    let long = a.get_long_help().map(ToString::to_string);
    let short = a.get_help().map(|h| format!("{h}.\n\n"));
    let rest = long.zip(short).and_then(|(l, s)| l.strip_prefix(&s).map(str::to_string));
    let takes = a.get_action().takes_values();
    let a = a.hide_possible_values(takes);
    match rest {
        Some(rest) => a.long_help(rest),
        None => a,
    }
}

/// Every flag of `run` under `heading`, by clap id.
pub fn under(heading: &str) -> impl Iterator<Item = &'static str> + '_ {
    headings().filter(move |(h, _)| *h == heading).flat_map(|(_, ids)| ids.map(|id| id.trim_start_matches('*')))
}

/// The warning for the engine's flags given on `run`'s (or `capacity`'s) command line where
/// `--target` is a URL: they set goodput's own engine, which then does not run.
pub fn idle_engine_warning(m: &clap::ArgMatches) -> Option<String> {
    let url = m.get_one::<String>("target").is_some_and(|t| t.contains("://"));
    let given = |id: &&str| m.value_source(id) == Some(clap::parser::ValueSource::CommandLine);
    let ids: Vec<String> =
        ENGINE.iter().flat_map(|h| under(h)).filter(given).map(|id| format!("--{}", id.replace('_', "-"))).collect();
    let said =
        format!("warning: {}: flags of goodput's own engine, which a URL target does not run: ignored", ids.join(", "));
    (url && !ids.is_empty()).then_some(said)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn run_command() -> Command {
        let mut cli = shaped(crate::Cli::command());
        cli.build();
        cli.find_subcommand("run").unwrap().clone()
    }

    #[test]
    fn every_flag_of_run_is_under_one_heading() {
        let named: Vec<&str> = headings().flat_map(|(_, ids)| ids.map(|id| id.trim_start_matches('*'))).collect();
        let mut once = named.clone();
        once.sort_unstable();
        once.dedup();
        assert_eq!(once.len(), named.len(), "a flag named twice");
        let run = run_command();
        for a in run.get_arguments().filter(|a| !a.is_hide_set() && !["help", "color"].contains(&a.get_id().as_str())) {
            assert!(a.get_help_heading().is_some(), "--{} has no heading", a.get_id());
        }
        assert!(under(ENGINE[1]).eq(["no_cuda_graphs", "no_mixed_graphs", "no_flash_prefill", "no_pdl"]));
    }

    #[test]
    fn short_help_is_a_screen_of_one_line_a_flag() {
        let mut run = run_command();
        let short = run.render_help().to_string();
        let lines: Vec<&str> = short.lines().collect();
        assert!(lines.len() <= 80, "`run -h` is {} lines:\n{short}", lines.len());
        // A flag's line never goes on below it (clap indents a continuation past the flags).
        let continued: Vec<&&str> = lines.iter().filter(|l| l.starts_with("          ")).collect();
        assert!(continued.is_empty(), "lines that go on: {continued:?}\n{short}");
        for h in ["Workload:", "Load:", "SLOs:", "Target and HTTP:", "Output:", "--input-len", "--rate"] {
            assert!(short.contains(h), "{h} in\n{short}");
        }
        assert!(!short.contains("--no-pdl") && !short.contains("CUDA engine:"), "the CUDA knobs only in --help");
        let long = run.render_long_help().to_string();
        assert!(long.contains("CUDA engine:") && long.contains("--no-pdl") && long.contains("--trace-block-size"));
        // The summary is said once: `--help` goes on from it rather than repeating it.
        assert!(!long.contains("Prompt tokens: N, MEAN±SD or MIN..MAX.\n"), "{long}");
    }

    #[test]
    fn engine_flags_against_a_url_are_named() {
        let run = run_command();
        let m = |args: &[&str]| run.clone().try_get_matches_from(args).unwrap();
        let url = m(&["run", "--target", "http://127.0.0.1:9", "--kv-memory", "2GiB", "--no-pdl", "--model", "tiny"]);
        let said = idle_engine_warning(&url).unwrap();
        assert!(said.starts_with("warning: --kv-memory, --no-pdl: flags of goodput's own engine"), "{said}");
        assert!(idle_engine_warning(&m(&["run", "--kv-memory", "2GiB", "--target", "http-local"])).is_none());
        assert!(
            idle_engine_warning(&m(&["run", "--target", "http://127.0.0.1:9"])).is_none(),
            "defaults are not given"
        );
    }
}
