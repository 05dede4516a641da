//! `goodput plan --check RUN_DIR --profile P`: a measured run's sweep simulated with a profile
//! (its stored command line, run again with `--simulate` at exactly the loads it measured) and
//! the prediction set beside the measurement, printed and written to `RUN_DIR/prediction.json`.

use crate::run::{parse_run, RunArgs};
use anyhow::{bail, Context, Result};
use goodput_results::prediction::Prediction;
use goodput_results::{LoadUnit, RunSummary};
use std::path::Path;

/// The run's own arguments, set to simulate its measured levels with `profile` into `out`.
fn simulated_args(summary: &RunSummary, profile: &Path, out: &Path) -> Result<RunArgs> {
    let at = summary
        .command
        .iter()
        .position(|a| a == "run" || a == "capacity")
        .context("the run's stored command line names no `run` or `capacity`")?;
    // A capacity search's own flag has no place in `run`'s arguments; its levels are the
    // run's levels anyway.
    let mut rest: Vec<String> = Vec::new();
    let mut args = summary.command[at + 1..].iter();
    while let Some(x) = args.next() {
        match x.as_str() {
            "--max-users" => {
                args.next();
            }
            x if x.starts_with("--max-users=") => {}
            // The whole command line's flag, not `run`'s.
            "--color" => {
                args.next();
            }
            x if x.starts_with("--color=") => {}
            _ => rest.push(x.clone()),
        }
    }
    let argv = std::iter::once("goodput".to_string()).chain(rest);
    let mut a = parse_run(argv).context("re-reading the run's command line")?;
    let loads: Vec<f64> = summary.levels.iter().map(|l| l.summary.load).collect();
    match summary.load_unit {
        LoadUnit::Users => {
            a.concurrency = loads.iter().map(|&l| l as usize).collect();
            a.stages = None;
            // A run from before closed loops recorded their ramp started its users at once.
            if a.ramp.is_none() && summary.levels.iter().all(|l| l.harness.ramp_s.is_none()) {
                a.ramp = Some(std::time::Duration::ZERO);
            }
        }
        LoadUnit::Rate => a.rate = Some(loads),
        LoadUnit::Burst => a.burst = Some(loads.iter().map(|&l| l as usize).collect()),
    }
    // A GPU run is simulated here on the CPU build, its KV pool at the dtype it ran in.
    if a.model.device != "cpu" {
        a.model.dtype.get_or_insert_with(|| "bf16".into());
        a.model.device = "cpu".into();
    }
    a.simulate = Some(profile.to_path_buf());
    a.predict = None;
    a.out = Some(out.to_path_buf());
    (a.quiet, a.report, a.refine, a.stop_at_first_failure, a.search) = (true, false, 0, false, false);
    (a.engine_cpus, a.harness_cpus) = (None, None);
    (a.export_json, a.export_csv, a.export_markdown) = (None, None, None);
    (a.metrics_port, a.json) = (None, false);
    a.target = "in-process".into();
    // The run's own prompts; its connection to a server has no place in a simulation.
    a.seed = Some(summary.seed);
    a.connection = Default::default();
    Ok(a)
}

pub fn run(dir: &Path, profile: &Path) -> Result<()> {
    let summary = goodput_results::read_summary(dir)?;
    if summary.command.is_empty() {
        bail!("{}: the run predates stored command lines; run it again (or with --predict)", dir.display());
    }
    if summary.levels.is_empty() {
        bail!("{}: the run has no finished level to check", dir.display());
    }
    let out = std::env::temp_dir().join(format!("goodput-check-{}", std::process::id()));
    let a = simulated_args(&summary, profile, &out)?;
    let t = std::time::Instant::now();
    let status = crate::run::run(a);
    let wall = t.elapsed().as_secs_f64();
    let sim = status.and_then(|s| Ok((s, goodput_results::read_summary(&out)?)));
    if sim.is_err() {
        let _ = std::fs::remove_dir_all(&out);
    }
    let (status, sim) = sim.context("simulating the run's sweep")?;
    let steps =
        goodput_results::files::read_jsonl::<goodput_results::StepRow>(&out.join(goodput_results::files::STEPS))
            .map(|s| s.len())
            .unwrap_or(0);
    let simulated: f64 = sim.levels.iter().map(|l| l.summary.window_s).sum();
    let mut prediction = Prediction {
        profile: profile.display().to_string(),
        levels: Vec::new(),
        capacity: RunSummary::verdict_of(&[]),
        steps_per_s: steps as f64 / wall,
        speedup: simulated / wall,
    };
    let levels = like_the_measured(&summary, sim.levels, &out);
    for l in levels {
        prediction.push_level(l);
    }
    let _ = std::fs::remove_dir_all(&out);
    println!("{}", goodput_report::console::prediction(&summary, &prediction, summary.load_unit));
    let path = dir.join(goodput_results::files::PREDICTION);
    let text = serde_json::to_string_pretty(&prediction)? + "\n";
    goodput_results::files::write_whole(dir, goodput_results::files::PREDICTION, text.as_bytes())
        .with_context(|| format!("writing {}", path.display()))?;
    eprintln!("prediction written to {} (simulated run exit status {status})", path.display());
    Ok(())
}

/// The simulated levels counted as the measured run counted its own: a run written before the
/// steady window counted its throughputs over the whole measured window (ramp and drain
/// included), so its prediction is summarised over the same window from the simulated
/// records, like with like.
fn like_the_measured(
    measured: &RunSummary,
    mut levels: Vec<goodput_results::LevelReport>,
    out: &Path,
) -> Vec<goodput_results::LevelReport> {
    if measured.levels.iter().any(|l| l.steady.is_some()) {
        return levels;
    }
    let Ok(records) = goodput_results::Results::read(out) else { return levels };
    eprintln!("note: the measured run predates the steady window: its prediction is counted over the whole measured window, as the run's own figures were");
    for l in &mut levels {
        let rs: Vec<&goodput_core::ClientRecord> = records.measured(l.summary.load).collect();
        l.summary = goodput_metrics::level::summarize(l.summary.load, &rs, &measured.slos);
        l.steady = None;
    }
    levels
}
