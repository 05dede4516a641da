//! `goodput run`'s arguments checked into the library's [`RunSpec`] (ripgrep's "low args →
//! high args" step): every check across flags, each refused by its flag's name; nothing after
//! this step reads the arguments. [`load`]: the pacing, the SLOs and the latency columns;
//! [`target`]: the target. The levels are the library's ([`LevelSpec`]'s constructors).

mod load;
mod target;

use super::args::RunArgs;
use crate::workload::{read_dataset, read_trace};
use anyhow::{bail, Result};
use goodput_bench::run::spec::{check_distinct, check_slice, LevelSpec, PerLevel, RefineKind, RunSpec, Search, Span};
use goodput_bench::run::spec::{OutDir, Outputs, Pacing, MAX_DURATION, MAX_RATE, MAX_REQUESTS, MAX_USERS};
use goodput_bench::workload::{build_workload, WorkloadSpec};
use goodput_report::console::latency::LatencyColumns;
use goodput_results::LoadUnit;
use goodput_workload::RetryPolicy;
use std::time::Duration;

/// How the finished run is shown: the final table's latency columns, `--json` (the
/// summary on stdout, the tables on stderr), and `--wide` (every column).
pub struct Shown {
    pub latency_columns: Option<LatencyColumns>,
    pub json: bool,
    pub wide: bool,
}

/// `--request-rate inf` as vLLM means it: every request due at once — a burst of --num-prompts
/// (1000 unless given, as vLLM's), or with --max-concurrency N, N users sending back to back.
fn infinite_rate(mut a: RunArgs) -> Result<RunArgs> {
    let Some(rates) = a.rate.as_ref().filter(|r| r.contains(&f64::INFINITY)) else { return Ok(a) };
    if rates.len() > 1 || a.duration.is_some() {
        bail!("--request-rate inf sends every request at once: give it alone, with --num-prompts, not --duration");
    }
    let n = a.requests.unwrap_or(1000);
    match a.max_concurrency.take() {
        Some(users) => (a.concurrency, a.requests) = (vec![users], Some(n)),
        None => (a.burst, a.requests) = (Some(vec![n]), None),
    }
    a.rate = None;
    Ok(a)
}

/// Checks `a` and takes what every later step needs from it: the run, and how it is shown.
pub fn run_spec(a: RunArgs) -> Result<(RunSpec, Shown)> {
    let mut a = infinite_rate(a)?;
    // `--rate-of-limit`'s multiples stand as the rates until the sweep finds the limit.
    let rate_multiples = a.rate_of_limit.clone();
    let twin = a.predict.is_some() || a.simulate.is_some();
    a.rate = goodput_bench::run::limit::check_multiples(rate_multiples.as_deref(), twin)?.or(a.rate);
    let slos = load::slos(&a)?;
    let model = a.model.source().spec()?;
    if !(a.burstiness.is_finite() && a.burstiness > 0.0) {
        bail!("--burstiness must be a positive number (1 = Poisson), got {}", a.burstiness);
    }
    check_bounds(&a)?;
    check_spans(&a)?;
    let outputs = outputs(&a);
    outputs.check()?;
    let max_len = a.engine.max_model_len.unwrap_or(model.max_position_embeddings).min(model.max_position_embeddings);
    // A nonce per run unless told: the same prompts twice meet a warm prefix cache.
    let (seed, seed_drawn) = match a.seed {
        Some(s) => (s, false),
        None => (u64::from(rand::random::<u32>()), true),
    };
    let lengths = a.lengths.lengths()?;
    let (inline, encoder, open) = (a.scenario_inline.as_deref(), a.encoder.as_deref(), a.rate.is_some());
    let mut workload = build_workload(&a.scenario, inline, lengths.as_ref(), encoder, open, max_len)?;
    workload.dataset = read_dataset(&a.dataset, a.rate.is_some())?;
    workload.trace = read_trace(&a.trace, max_len, seed)?;
    let timed = a.warmup.is_some_and(|w| !w.time().is_zero()) || !a.cooldown.time().is_zero();
    workload.check_units(a.think, timed, a.burst.is_some())?;
    check_shard(&a, &workload)?;
    let reasons =
        matches!(&workload.file, goodput_workload::file::ScenarioFile::Single(s) if s.reasoning_share.is_some());
    let target = target::target_spec(&a, &model, reasons)?;
    let burstiness = (!a.constant_rate).then_some(a.burstiness);
    let (unit, refine) = match (&a.rate, &a.stages) {
        _ if workload.trace.is_some() => (LoadUnit::Rate, RefineKind::None),
        _ if a.burst.is_some() => (LoadUnit::Burst, RefineKind::Burst),
        (Some(_), None) => (LoadUnit::Rate, RefineKind::Rate { burstiness }),
        (None, None) if a.duration.is_none() => (LoadUnit::Users, RefineKind::Users(a.think)),
        _ => (LoadUnit::Users, RefineKind::None),
    };
    let levels = match (&workload.trace, &a.burst, &a.stages, &a.rate) {
        (Some(t), ..) => LevelSpec::trace(t, &a.trace.trace_speedup, a.duration)?,
        (None, Some(sizes), _, _) => LevelSpec::bursts(sizes)?,
        (None, None, Some(stages), _) => LevelSpec::stages(stages, a.think)?,
        (None, None, None, Some(rates)) => LevelSpec::rates(rates, burstiness, a.duration)?,
        (None, None, None, None) => LevelSpec::users(&a.concurrency, a.think, a.duration)?,
    };
    check_distinct(&levels)?;
    let min_requests = goodput_metrics::interval::min_requests(&slos, MAX_REQUESTS);
    let per_level = PerLevel { requests: a.requests, min_requests, warmup: a.warmup, cooldown: a.cooldown };
    let search = search(&a, &workload, unit)?;
    check_slice(a.shard, &per_level, &levels, &workload)?;
    let pacing = Pacing::checked(a.max_concurrency, burstiness, a.ramp, a.think_jitter, a.think, &levels)?;
    let latency_columns = load::latency_columns(&a);
    if levels.iter().any(|l| l.duration.is_some()) && workload.is_sessions() {
        bail!("--duration and --stages apply to single-request scenarios; use --requests for {}", workload.name());
    }
    let cpus = |c: Option<crate::args::CpuList>| c.map(|c| c.0);
    let shown = Shown { latency_columns, json: a.json, wide: a.wide };
    let spec = RunSpec {
        slos,
        model,
        model_args: a.model.source(),
        engine: a.engine.options(),
        max_len,
        workload,
        target,
        unit,
        levels,
        rate_multiples,
        refine,
        refine_levels: if a.shard.is_some() { 0 } else { a.refine },
        stop_at_first_failure: a.stop_at_first_failure,
        soak: a.soak.map(|d| (d, a.soak_windows as usize)),
        search,
        shard: a.shard,
        start_at: a.start_at,
        clock_ref: a.clock_ref.clone(),
        per_level,
        pacing,
        retry: RetryPolicy { max: a.retries, backoff: a.retry_backoff },
        timeout: a.timeout,
        engine_cpus: cpus(a.engine_cpus),
        harness_cpus: cpus(a.harness_cpus),
        scrape_interval: a.scrape_interval,
        series_interval: a.series_interval,
        seed,
        seed_drawn,
        outputs,
        quiet: a.quiet,
        explain: a.explain,
    };
    Ok((spec, shown))
}

fn check_spans(a: &RunArgs) -> Result<()> {
    if a.burst.is_some() && !(a.warmup.is_none_or(Span::is_zero) && a.cooldown.is_zero()) {
        bail!("--burst is a cold start: every request is measured, so --warmup and --cooldown do not apply");
    }
    if (a.duration.is_some() || a.stages.is_some()) && a.cooldown.count() > 0 {
        bail!("--cooldown {}: a level bounded by time has no fixed last request; give the cool-down as a duration (e.g. 5s)", a.cooldown.count());
    }
    Ok(())
}

/// The run's files as given.
fn outputs(a: &RunArgs) -> Outputs {
    Outputs {
        out: a.out.clone().map(|dir| OutDir { dir, overwrite: a.overwrite, report: a.report }),
        export_json: a.export_json.clone(),
        export_csv: a.export_csv.clone(),
        export_markdown: a.export_markdown.clone(),
        command: Some(goodput_client::redact::redacted_command(
            a.command
                .clone()
                .unwrap_or_else(|| std::env::args_os().map(|a| a.to_string_lossy().into_owned()).collect()),
        )),
        scenario_toml: a.scenario_inline.clone(),
        metrics: a.metrics_port.map(|p| std::net::SocketAddr::new(a.metrics_host, p)),
    }
}

/// What only single-request scenarios take.
/// `--shard` splits one schedule of single requests: an open loop, a trace or a burst, the
/// levels decided before the run (no stop at a failure, which each shard would judge alone).
fn check_shard(a: &RunArgs, w: &WorkloadSpec) -> Result<()> {
    let Some(shard) = a.shard else { return Ok(()) };
    if w.is_sessions() {
        bail!(
            "--shard {shard}: {} runs sessions of many turns, which are not split yet; shard single-request scenarios",
            w.name()
        );
    }
    if a.rate.is_none() && a.burst.is_none() && w.trace.is_none() {
        bail!("--shard {shard}: a closed loop's users take their requests as they finish, which no fixed slice splits; shard an open loop (--rate), a trace or a burst");
    }
    if a.rate.as_ref().map_or(0, Vec::len) > 1
        || a.burst.as_ref().map_or(0, Vec::len) > 1
        || (w.trace.is_some() && a.trace.trace_speedup.len() > 1)
    {
        bail!("--shard {shard}: one level per process (each later level would start when this shard's previous one ended, out of step with the others); run a level per --start-at");
    }
    if a.stop_at_first_failure {
        bail!("--shard {shard}: --stop-at-first-failure would stop each shard on its own slice; the merge judges the levels");
    }
    Ok(())
}

/// `--search`, or the default search when no levels are given (`None` for a burst, stages,
/// a trace or a shard, whose levels are a schedule of their own).
fn search(a: &RunArgs, w: &WorkloadSpec, unit: LoadUnit) -> Result<Option<Search>> {
    let given = !a.concurrency.is_empty() || a.rate.is_some() || a.stages.is_some() || a.burst.is_some();
    let schedule = a.stages.is_some() || a.burst.is_some() || w.trace.is_some();
    if a.search && schedule {
        bail!("--search doubles users or rates; --stages, --burst and a trace are schedules of their own");
    }
    if a.soak.is_some() && (a.shard.is_some() || a.stages.is_some() || a.burst.is_some() || w.trace.is_some()) {
        bail!("--soak runs the usable capacity of a sweep of users or rates; not with --shard, --stages, --burst or a trace");
    }
    if a.search && a.shard.is_some() {
        bail!("--search: each shard would search on its own slice; give the shards their levels");
    }
    if (given && !a.search) || schedule || a.shard.is_some() || a.stop_at_first_failure {
        return Ok(None);
    }
    Ok(Some(Search::bounded(unit, a.max_users, a.max_rate, a.search_budget)?))
}

/// Upper bounds on counts, rates and times, each refused with its flag and its limit.
fn check_bounds(a: &RunArgs) -> Result<()> {
    let most = |flag: &str, values: &[usize], max: usize| -> Result<()> {
        match values.iter().find(|&&v| v > max) {
            Some(v) => bail!("{flag}: {v} is more than goodput drives in one level (at most {max})"),
            None => Ok(()),
        }
    };
    most("--concurrency", &a.concurrency, MAX_USERS)?;
    most("--burst", a.burst.as_deref().unwrap_or(&[]), MAX_USERS)?;
    let stage_users: Vec<usize> = a.stages.iter().flatten().map(|s| s.0).collect();
    most("--stages", &stage_users, MAX_USERS)?;
    most("--requests", a.requests.as_slice(), MAX_REQUESTS)?;
    if a.requests == Some(0) {
        bail!("--requests: a level must measure at least 1 request");
    }
    if !(1e-3..=1e3).contains(&a.burstiness) {
        bail!("--burstiness: {} is outside 0.001–1000 (1 = Poisson, below 1 burstier)", a.burstiness);
    }
    most("--warmup", &[a.warmup.map_or(0, Span::count)], MAX_REQUESTS)?;
    most("--cooldown", &[a.cooldown.count()], MAX_REQUESTS)?;
    if let Some(r) = a.rate.iter().flatten().find(|&&r| r > MAX_RATE) {
        bail!("--rate: {r} requests per second is beyond what goodput offers (at most {MAX_RATE})");
    }
    let times = [
        ("--duration", a.duration.unwrap_or_default()),
        ("--think", a.think),
        ("--warmup", a.warmup.map_or(Duration::ZERO, Span::time)),
        ("--cooldown", a.cooldown.time()),
        ("--timeout", a.timeout),
    ];
    let stage_times = a.stages.iter().flatten().map(|s| ("--stages", s.1));
    if let Some((flag, d)) = times.into_iter().chain(stage_times).find(|(_, d)| *d > MAX_DURATION) {
        bail!("{flag}: {d:?} is longer than a week, the longest goodput accepts");
    }
    if a.retries > 100 {
        bail!("--retries: {} retries per request is beyond any sensible policy (at most 100)", a.retries);
    }
    Ok(())
}
