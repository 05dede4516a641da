//! `goodput plan --check RUN_DIR --profile P`: a measured run's stored command line re-read
//! into `run`'s arguments, set to simulate exactly the loads it measured with the profile, and
//! checked by [`goodput_bench::check`]; the simulated run shown as any run, then the
//! prediction beside the measurement.

use crate::run::{parse_run, RunArgs};
use anyhow::{Context, Result};
use goodput_results::{LoadUnit, RunSummary};
use std::path::{Path, PathBuf};

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
        // The rates as run: `--rate-of-limit`'s were resolved against the run's own twin.
        LoadUnit::Rate => (a.rate, a.rate_of_limit) = (Some(loads), None),
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

/// Checks the runs under `dirs`: one run's prediction beside its measurement; several (or a
/// directory of repeats) as the accuracy suite, written to `json` when given.
pub fn run(dirs: &[PathBuf], profile: &Path, json: Option<&Path>) -> Result<()> {
    let simulated = |summary: &RunSummary, out: &Path| {
        crate::run::run_spec(simulated_args(summary, profile, out)?).context("simulating the run's sweep")
    };
    let (stop, runs) = (goodput_bench::run::interrupt::install(), goodput_bench::accuracy::runs_of(dirs)?);
    let (checked, report) =
        goodput_bench::accuracy::check_all(&runs, profile, simulated, stop, &crate::run::Bar::new(true))?;
    match (checked.as_slice(), json) {
        ([c], None) => {
            println!("{}", goodput_report::console::prediction(&c.measured, &c.prediction, c.measured.load_unit))
        }
        _ => println!("{}", goodput_report::console::accuracy(&report)),
    }
    json.map_or(Ok(()), |path| report.write(path).with_context(|| format!("writing {}", path.display())))
}
