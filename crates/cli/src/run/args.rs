//! The arguments of `goodput run` and `goodput capacity` (clap derive; doc comments are the
//! help text), as clap leaves them: `run::spec` consumes them into the checked `RunSpec`, and
//! nothing after it reads them. This module imports nothing from the rest of `run`.

use crate::args::{parse_cpus, parse_duration, parse_duration_or_zero, parse_stage, CpuList, Span};
use crate::args::{EngineArgs, ModelArgs};
use clap::Args;
use goodput_bench::run::spec::parse_start_at;
use goodput_report::console::latency::{parse_percentile, Latency};
use std::path::PathBuf;
use std::time::Duration;

/// Default SLOs: an interactive chat on the tiny model. Override with --slo.
pub const DEFAULT_SLOS: &str = "ttft_p95=1s,tpot_p95=50ms,e2e_p95=10s,error_rate=1%";

#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub engine: EngineArgs,
    /// in-process, http-local, or an OpenAI-compatible URL.
    ///
    /// Where requests go: `in-process` (the engine, no HTTP), `http-local` (goodput's own
    /// server started on loopback in this process and driven over HTTP: TTFT is decomposed
    /// into HTTP, tokenization, queue and prefill), or `http://HOST:PORT` (any
    /// OpenAI-compatible server: vLLM, SGLang, TGI, llama.cpp).
    #[arg(long, default_value = "in-process")]
    pub target: String,
    /// The model name the server expects.
    ///
    /// The model name the HTTP server expects. Default: --model's name, or the one model a
    /// server lists at /v1/models when it serves one only.
    #[arg(long, value_name = "NAME")]
    pub served_model_name: Option<String>,
    /// completions, completions-text, chat or responses.
    ///
    /// HTTP API: `completions` (token ids, exact lengths), `completions-text` (text, for
    /// servers that take no ids), `chat` (one user message through the server's template;
    /// reasoning split out) or `responses` (OpenAI's). Default: completions, or chat for `reasoning`.
    #[arg(long, value_parser = ["completions", "completions-text", "chat", "responses"])]
    pub api: Option<String>,
    /// HTTP targets: the body field of the output length. `auto`: each API's current name
    /// (`max_completion_tokens` for chat, `max_tokens` for completions, `max_output_tokens` for
    /// responses); `max_tokens` for chat servers that know only the old name.
    #[arg(long, default_value = "auto", value_parser = ["auto", "max_tokens", "max_completion_tokens"])]
    pub max_tokens_field: String,
    /// HTTP targets: ignore the per-request engine stamps a server returns (goodput's own
    /// `goodput` object), as for a server that returns none (vLLM, SGLang, TGI's OpenAI
    /// route): queue and prefill then come only from its /metrics. Checks what an HTTP-only
    /// view of a server can explain against what the stamps explain.
    #[arg(long)]
    pub ignore_server_stamps: bool,
    #[command(flatten)]
    pub connection: crate::connect::ConnectionArgs,
    #[command(flatten)]
    pub lengths: crate::workload::LengthArgs,
    #[command(flatten)]
    pub dataset: crate::workload::DatasetArgs,
    #[command(flatten)]
    pub trace: crate::workload::TraceArgs,
    /// A built-in scenario or a scenario file.
    ///
    /// Scenario: a TOML file (docs/scenarios.md has every field), or built in: short-qa,
    /// long-gen, long-context, reasoning (1K in / 8K out, 75 % reasoning), multi-turn
    /// (--requests counts sessions), agent (counts tasks), rag (scripts/fetch-minilm.sh's encoder).
    #[arg(long, default_value = "short-qa")]
    pub scenario: String,
    /// Closed loop: users per level (1,4,16).
    ///
    /// Closed-loop sweep: virtual users per level. Without it (nor --rate, --stages, --burst,
    /// --trace) the sweep searches for the limit: 1, 2, 4, … users, doubling until a level's
    /// SLOs no longer hold with 95 % confidence, then bisecting (see --search).
    #[arg(long, value_name = "USERS", value_delimiter = ',', conflicts_with_all = ["rate", "rate_of_limit"])]
    pub concurrency: Vec<usize>,
    /// Go on doubling the load until an SLO breaks.
    ///
    /// After the levels given, go on doubling the highest one until its SLOs no longer hold
    /// with 95 % confidence (then --refine bisects below it), or until --max-users /
    /// --max-rate or --search-budget is reached: the run finds the limit rather than stopping
    /// where the list did. The default without levels given.
    #[arg(long, conflicts_with_all = ["stages", "burst", "duration"])]
    pub search: bool,
    /// The most users a search goes to.
    ///
    /// The most users a search (and `goodput capacity`) goes to. [default: 4096; capacity: 256]
    #[arg(long, value_name = "N")]
    pub max_users: Option<usize>,
    /// The highest request rate a search over --rate goes to (requests per second).
    #[arg(long, value_name = "R", default_value_t = 1000.0)]
    pub max_rate: f64,
    /// A search adds no level that would end past this long after the sweep started (each
    /// level estimated from the one before it); what it found by then is "at least".
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "10m")]
    pub search_budget: Duration,
    /// Closed loop: wait between a response and the next request.
    ///
    /// Closed loop: each virtual user waits this long after a response before its next
    /// request (think time; 0 by default).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_or_zero, default_value = "0s", conflicts_with_all = ["rate", "rate_of_limit", "burst"])]
    pub think: Duration,
    /// Closed loop with --think: draw each think time uniformly from think × (1 ± F), F
    /// between 0 and 1, seeded by --seed (the same run draws the same times), so that users
    /// who happen to send together drift apart.
    #[arg(long, value_name = "F", default_value_t = 0.0, conflicts_with_all = ["rate", "rate_of_limit", "burst"])]
    pub think_jitter: f64,
    /// Closed loop: start user k of N at k × ramp / N (0: all at once, and in waves after).
    /// Default: user k joins once the level's k-th request ended (after a seeded share of the
    /// time since), so the ramp paces itself to the target. The warm-up covers it; the ramp
    /// used is each level's `harness.ramp_s`.
    #[arg(long, value_parser = parse_duration_or_zero, conflicts_with_all = ["rate", "rate_of_limit", "burst"])]
    pub ramp: Option<Duration>,
    /// Open loop: requests per second per level (inf: a burst).
    ///
    /// Open-loop sweep: requests per second per level (Poisson arrivals).
    #[arg(long, value_name = "REQ/S", visible_alias = "request-rate")]
    #[arg(value_delimiter = ',', allow_negative_numbers = true)]
    pub rate: Option<Vec<f64>>,
    /// Open loop at these multiples of the engine's limit on this workload (needs a profile).
    ///
    /// Open loop at these multiples of the limit: the requests a second the simulated twin
    /// (--predict PROFILE or --simulate PROFILE) completes on this workload with as many
    /// users as the engine batches (at most 256) sending back to back, found in virtual time
    /// before the sweep. `0.25,0.5,1,1.5` puts levels below and past the knee of whatever
    /// machine the profile was measured on, where fixed rates tuned on one flood a slower one.
    #[arg(long, value_name = "M", value_delimiter = ',', conflicts_with = "rate")]
    pub rate_of_limit: Option<Vec<f64>>,
    /// Open loop: at most N requests in flight.
    ///
    /// Open loop (--rate, --trace): at most N requests in flight. Arrivals keep their
    /// schedule; one that finds N in flight waits for a slot (vLLM `bench serve
    /// --max-concurrency`). Its latency still starts at its scheduled arrival, so the wait
    /// is queueing the user sees; it shows in the send lag too.
    #[arg(long, value_name = "N")]
    pub max_concurrency: Option<usize>,
    /// Evenly spaced arrivals instead of Poisson (with --rate or --rate-of-limit).
    #[arg(long)]
    pub constant_rate: bool,
    /// Gamma-distributed arrivals with this shape (with --rate or --rate-of-limit): 1 = Poisson, below 1 burstier.
    #[arg(long, default_value_t = 1.0, conflicts_with = "constant_rate")]
    pub burstiness: f64,
    /// Measured requests per level.
    ///
    /// Measured requests per level (default: 2 × users after the first wave's warm-up, 10 s worth with --rate, and at least
    /// what the SLOs' percentiles need for a 95 % interval closed above: 72 for a P95, 368
    /// for a P99; fewer is warned about).
    #[arg(long, value_name = "N", visible_alias = "num-prompts", conflicts_with = "duration")]
    pub requests: Option<usize>,
    /// Run each level this long (30s) rather than a request count.
    ///
    /// Run each level for this long instead of a number of requests (e.g. 30s).
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Closed-loop stages, USERSxDURATION each: `10x2m,20x2m,40x2m` (the seeds' "start at 10
    /// users, raise every few minutes"). Replaces --concurrency and --duration.
    #[arg(long, value_delimiter = ',', value_parser = parse_stage, conflicts_with_all = ["rate", "rate_of_limit", "duration", "requests"])]
    pub stages: Option<Vec<(usize, Duration)>>,
    /// Burst sweep: requests per level, all due at once.
    ///
    /// Burst (cold-start) sweep: per level, this many requests all due at the level's start,
    /// no warm-up (the first level meets a cold engine).
    #[arg(long, value_name = "N", value_delimiter = ',', conflicts_with_all = ["rate", "rate_of_limit", "stages", "duration", "requests"])]
    pub burst: Option<Vec<usize>>,
    /// Warm-up per level: a count or a duration.
    ///
    /// Warm-up per level, run and left out: a count (requests, or sessions, tasks, queries) or
    /// a duration of send time (5s). Default: one per user, or 2. A closed loop's first wave
    /// (each user's first request, and those sent before the last user started) is warm-up too.
    #[arg(long, value_name = "N|DURATION")]
    pub warmup: Option<Span>,
    /// Cool-down per level, run after the measured part (keeping the load up while it
    /// finishes) and left out: a count, or a duration before the end of sending (5s).
    #[arg(long, default_value = "0")]
    pub cooldown: Span,
    /// A request's time limit.
    ///
    /// A request without its end marker after this long times out; a side request to an HTTP
    /// target (/v1/models, a /metrics scrape) without its whole answer fails, naming its URL.
    #[arg(long, default_value = "120s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Retry a failed or timed-out request up to this many times (refusals are not retried).
    /// Off by default; retries are counted and reported apart, and latency runs from the
    /// first attempt.
    #[arg(long, default_value_t = 0)]
    pub retries: u32,
    /// Back-off before the first retry, doubling for each further one.
    #[arg(long, default_value = "100ms", value_parser = parse_duration)]
    pub retry_backoff: Duration,
    /// Pin the engine to these CPUs (0-1, 0,2).
    ///
    /// Pin the engine thread and its compute threads to these CPUs (0-1, 0,2).
    #[arg(long, value_name = "CPUS", value_parser = parse_cpus)]
    pub engine_cpus: Option<CpuList>,
    /// Pin the load generator (this thread, its timers and bookkeeping) to these CPUs.
    #[arg(long, value_parser = parse_cpus)]
    pub harness_cpus: Option<CpuList>,
    /// HTTP targets: scrape the server's /metrics this often during each level (and before and
    /// after it). Its histograms are taken between the scrapes that bracket the measured
    /// requests, so a shorter interval leaves out warm-up more exactly.
    #[arg(long, default_value = "500ms", value_parser = parse_duration)]
    pub scrape_interval: Duration,
    /// Interval of the engine time series (running, waiting, KV usage) in timeseries.csv.
    #[arg(long, default_value = "250ms", value_parser = parse_duration)]
    pub series_interval: Duration,
    /// SLOs, e.g. ttft_p95=2s,tpot_p95=50ms,e2e_p95=30s.
    ///
    /// SLOs that define usable capacity, e.g. ttft_p95=2s,tpot_p95=50ms,e2e_p95=30s,error_rate=1%.
    /// A request counts toward goodput when it completed and its own values meet every
    /// bound. [default: ttft_p95=1s,tpot_p95=50ms,e2e_p95=10s,error_rate=1%]
    #[arg(long)]
    pub slo: Option<String>,
    /// vLLM's goodput SLOs, METRIC:MS (ttft, tpot, e2el).
    ///
    /// vLLM `bench serve`'s goodput SLOs, METRIC:MS (ttft, tpot, e2el), read as --slo
    /// METRIC_max=MS: goodput is vLLM's request_goodput. Added to --slo, else in place of the
    /// default's latency SLOs (its error_rate=1% stays).
    #[arg(long, value_name = "METRIC:MS", num_args = 1.., value_delimiter = ' ')]
    pub goodput: Option<Vec<String>>,
    /// The latencies the final levels table shows percentiles of, by vLLM's names: ttft,
    /// tpot, itl, e2el (goodput's e2e). With it (or --metric-percentiles) the table's TTFT,
    /// TPOT and E2E columns become one column per chosen latency and percentile; without
    /// either, the table is as always. [default with --metric-percentiles: ttft,tpot,itl]
    #[arg(long, value_name = "METRICS", value_delimiter = ',', value_parser = parse_latency)]
    pub percentile_metrics: Option<Vec<Latency>>,
    /// The percentiles those columns show: 50, 90, 95, 99 (what goodput keeps of every
    /// latency). [default with --percentile-metrics: 99]
    #[arg(long, value_name = "PERCENTILES", value_delimiter = ',', value_parser = parse_percentile)]
    pub metric_percentiles: Option<Vec<u32>>,
    /// After the sweep, run up to this many extra levels between the last passing and the
    /// first failing level (bisection), to pin usable capacity down.
    #[arg(long, default_value_t = 3)]
    pub refine: usize,
    /// Then hold the usable capacity this long (30m).
    ///
    /// After the sweep, run the usable capacity it found for this long (`30m`: the seeds'
    /// long-stability test) and report it in time windows: P95 TTFT, TPOT and E2E with their
    /// intervals, errors and retries, the engine's KV peak and preemptions, and whether
    /// capacity held for the whole soak or from when it degraded.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub soak: Option<Duration>,
    /// The time windows a soak is cut into.
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub soak_windows: u32,
    /// Stop the sweep at the first level whose SLOs break (what `goodput capacity` does).
    #[arg(long)]
    pub stop_at_first_failure: bool,
    /// RAG: directory of the sentence encoder (default: where scripts/fetch-minilm.sh puts it).
    #[arg(long)]
    pub encoder: Option<PathBuf>,
    /// Seed of prompts, lengths and arrivals (default: drawn).
    ///
    /// Seed of the prompts, lengths and arrivals. Default: drawn for each run (and written in
    /// the results), so a second run against the same server sends new prompts instead of
    /// being served from its prefix cache; `--seed N` repeats run N's prompts exactly.
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Write the run's files here.
    ///
    /// Write records (JSONL, CSV), engine steps and the summary JSON here: each request as it
    /// finishes, the rest level by level.
    /// A directory that does not exist or is empty: a run never mixes its files with another
    /// run's (see --overwrite).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Replace the run in --out: its files (summary, records, steps, series, conclusion,
    /// report, prediction) are removed before this run writes its own; a directory holding
    /// other files is still refused.
    #[arg(long, requires = "out")]
    pub overwrite: bool,
    /// Also write the summary as JSON here (as summary.json), after each level.
    #[arg(long)]
    pub export_json: Option<PathBuf>,
    /// Also write the levels table as CSV here.
    ///
    /// Also write the levels table as CSV here (one row per level), after each level.
    #[arg(long, value_name = "FILE")]
    pub export_csv: Option<PathBuf>,
    /// Also write the levels table as Markdown here, after each level.
    #[arg(long)]
    pub export_markdown: Option<PathBuf>,
    /// Also write DIR/report.html.
    ///
    /// At the end, write DIR/report.html (see `goodput report`); needs --out.
    #[arg(long, requires = "out")]
    pub report: bool,
    /// Simulate the sweep from a profile instead.
    ///
    /// Simulate the sweep instead of running it: the real scheduler with this profile's step
    /// costs (`goodput profile`) in place of the model, in virtual time, driven by the same
    /// workload. Everything else — records, metrics, summary, report — is as for a measured run.
    #[arg(long, value_name = "PROFILE", conflicts_with_all = ["engine_cpus", "harness_cpus"])]
    pub simulate: Option<PathBuf>,
    /// Run beside its simulated twin from a profile.
    ///
    /// Run the sweep measured and, level by level, its simulated twin from this profile (the
    /// identical workload on the simulated engine); print and store predicted against measured.
    /// The profile must be measured apart from this run (`goodput profile`), never fitted on it.
    #[arg(long, value_name = "PROFILE", conflicts_with = "simulate")]
    pub predict: Option<PathBuf>,
    /// Send shard INDEX of COUNT (`0/4`, a Kubernetes Indexed Job's index): every process
    /// computes one schedule (same --seed) and sends request j when j mod COUNT = INDEX. Open
    /// loops, traces and bursts, one level each (give each its --start-at), no refinement.
    #[arg(long, value_name = "INDEX/COUNT", requires = "seed")]
    pub shard: Option<goodput_workload::shard::Shard>,
    /// Start the first level at this moment (RFC 3339, `2026-12-02T18:30:00Z`), so shards on
    /// many machines start together; a moment already past starts at once, with a warning.
    /// With --clock-ref the moment is on the reference's clock (this machine's offset from it
    /// corrects the wait).
    #[arg(long, value_name = "RFC3339", value_parser = parse_start_at)]
    pub start_at: Option<std::time::SystemTime>,
    /// Measure this machine's clock offset from a reference before the first level and after
    /// the last (NTP's exchange, the shortest of several round trips), so `goodput merge` puts
    /// shards that ran on different machines on the reference's time line: `ntp://HOST[:PORT]`
    /// (the cluster's time server), or the URL of a `goodput serve` (its /goodput/clock).
    #[arg(long, value_name = "URL")]
    pub clock_ref: Option<goodput_bench::clockref::ClockRef>,
    /// Run the sweep N times: median and spread.
    ///
    /// Run the sweep N times with one seed and report each level's median and spread over the
    /// repeats (the run-to-run noise): each a run under --out (DIR/01-repeat=1, …) beside
    /// index.json and repeats.json, which `goodput compare` takes as a side with its noise.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub repeats: u32,
    /// Print only the final table and conclusion.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// Every column of the levels table.
    ///
    /// Print every column of the levels table (the engine's occupancy, the harness).
    #[arg(long)]
    pub wide: bool,
    /// Each level's three layers as it ends.
    ///
    /// Print each level's three layers (user, engine, system) as it ends.
    #[arg(long)]
    pub explain: bool,
    /// Serve the run's live metrics for Prometheus at http://HOST:PORT/metrics while it runs:
    /// the level and its load, requests ended by phase and outcome, the measured requests'
    /// TTFT, TPOT and E2E histograms, the rolling P50/P95 of the live view
    /// (`goodput_run_*`).
    #[arg(long, value_name = "PORT")]
    pub metrics_port: Option<u16>,
    /// The address --metrics-port listens on (loopback by default; 0.0.0.0 in a container).
    #[arg(long, default_value = "127.0.0.1", requires = "metrics_port")]
    pub metrics_host: std::net::IpAddr,
    /// Print the summary as JSON on stdout.
    ///
    /// Print the run's summary on stdout as JSON (summary.json's content, on one line; a
    /// config's matrix: one line per run), for `jq` and scripts; the tables and the
    /// conclusion go to stderr instead.
    #[arg(long)]
    pub json: bool,
    /// The benchmark from a TOML file (examples/).
    ///
    /// The benchmark from a TOML file: each flag a key (`concurrency = [1, 4, 16]`), the
    /// scenario by name, path or inline (`[scenario]`), and a `[matrix]` of keys to lists run
    /// once per combination under `out`. A flag given overrides its key. See `examples/`.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// CI gate: compare with this baseline run, exit 1 on --fail-on.
    ///
    /// A CI gate: after the run, compare it with this baseline run (`goodput compare BASELINE
    /// OUT`) and exit 1 when a `--fail-on` metric regressed beyond the noise.
    #[arg(long, value_name = "DIR", requires_all = ["out", "fail_on"])]
    pub baseline: Option<PathBuf>,
    /// With --baseline: the regressions that fail the gate, `ttft_p95=+10%,output_throughput=-5%`.
    #[arg(long, value_name = "SPEC", requires = "baseline")]
    pub fail_on: Option<String>,
    /// Start this server for the run and stop it after (`vllm serve … --port {port}`).
    ///
    /// Start the server under test for the run (`sh -c`, its own process group; `{url}`,
    /// `{host}`, `{port}` from --target), run once `{url}/health` answers 200, stop it after;
    /// its log and command kept in --out. A config's `[server]` and `server.NAME` matrix
    /// axes: docs/servers.md.
    #[arg(long, value_name = "CMD", requires = "out")]
    pub server: Option<String>,
    /// Resume the matrix in --out: keep the runs that finished, run the rest.
    #[arg(long)]
    pub resume: bool,
    /// List the runs this command would make (a config's matrix, --repeats), each with its
    /// directory and command line, and run none.
    #[arg(long)]
    pub dry_run: bool,
    /// A config file's inline scenario (TOML), in place of --scenario.
    #[arg(skip)]
    pub scenario_inline: Option<String>,
    /// The command line a config file's run expands to, stored in its summary.
    #[arg(skip)]
    pub command: Option<Vec<String>>,
}

/// Parses `argv` (its first item the program's name) as `goodput run`'s arguments.
pub fn parse_run(argv: impl IntoIterator<Item = String>) -> Result<RunArgs, clap::Error> {
    use clap::Parser;
    Ok(RunOnly::try_parse_from(argv)?.run)
}

/// `goodput run`'s arguments as a command of their own: what a stored command line or a
/// config file is parsed with.
#[derive(clap::Parser, Debug)]
#[command(name = "goodput run")]
pub struct RunOnly {
    #[command(flatten)]
    pub run: RunArgs,
}

fn parse_latency(s: &str) -> Result<Latency, goodput_core::ValueError> {
    s.parse()
}

#[derive(Args, Debug)]
pub struct CapacityArgs {
    #[command(flatten)]
    pub run: RunArgs,
}
