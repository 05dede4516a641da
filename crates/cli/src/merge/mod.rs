//! `goodput merge DIR… --out RUN`: one run built from the shards of a run split over
//! processes or machines (`goodput run --shard i/N`). The shards are checked to be whole
//! splits of one configuration ([`check`]); each level is rebuilt from the shards' raw records
//! on one time line ([`level`]); the capacity verdict and the conclusion come from the merged
//! levels as for one process. Locust merges its workers' bucketed histograms and k6 its
//! instances' summaries; goodput keeps every request's stamps, so its merge is exact.

mod check;
#[cfg(test)]
mod fuzz;
mod level;
mod verify;

use anyhow::{Context, Result};
use goodput_report::console as table;
use goodput_report::Conclusion;
use goodput_results::clock::{ClockInfo, Merged};
use goodput_results::{RunSummary, RunWriter};
use std::path::{Path, PathBuf};

/// `goodput merge`'s arguments.
#[derive(clap::Args, Debug)]
pub struct MergeArgs {
    /// The shards' results directories (`goodput run --shard i/N --out DIR`): every shard of
    /// each level, the levels of one sweep (`results/*`).
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// The merged run's directory: summary, records, conclusion, as `goodput run --out`
    /// writes them.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Replace a run already in --out.
    #[arg(long)]
    pub overwrite: bool,
    /// Also write report.html into --out.
    #[arg(long)]
    pub report: bool,
    /// Print the merged summary on stdout as JSON (one line); the tables go to stderr.
    #[arg(long)]
    pub json: bool,
}

/// Merges the shards; exits as `goodput run` does (3 when a level measured no completed
/// request). Every shard is read and checked before `--out` is touched; a merge that fails
/// after it created `--out` removes it again.
pub fn run(a: MergeArgs) -> Result<i32> {
    not_an_input(&a.out, &a.dirs)?;
    goodput_results::files::check_out_dir(&a.out, a.overwrite)?;
    let loaded = a.dirs.iter().map(|d| check::load(d)).collect::<Result<Vec<_>>>()?;
    let plan = check::plan(loaded)?;
    let lost = plan.levels.iter().map(verify::level).collect::<Result<Vec<_>>>()?;
    let new_dir = !a.out.exists();
    let merged = write(&a, &plan, &lost);
    if merged.is_err() && new_dir {
        let _ = std::fs::remove_dir_all(&a.out);
    }
    merged
}

/// `--out` may not be one of the shards (`--overwrite` would remove the shard's own files
/// before reading them) nor hold one (it would be refused as foreign files, or worse).
fn not_an_input(out: &Path, dirs: &[PathBuf]) -> Result<()> {
    let Ok(out_c) = out.canonicalize() else { return Ok(()) };
    for d in dirs {
        let Ok(c) = d.canonicalize() else { continue };
        if c == out_c || c.starts_with(&out_c) {
            anyhow::bail!(
                "--out {} is {} shard {}: the merged run goes to a directory of its own",
                out.display(),
                if c == out_c { "the" } else { "a directory above the" },
                d.display()
            );
        }
    }
    Ok(())
}

/// Writes the merged run into `--out`.
fn write(a: &MergeArgs, plan: &check::Plan, lost: &[Vec<verify::Lost>]) -> Result<i32> {
    let origin = plan.levels.iter().flat_map(|g| &g.shards).map(check::Loaded::origin_ns).min().unwrap_or(0);
    let mut summary = base_summary(plan, origin, &a.out);
    let unit = summary.load_unit.to_string();
    let (mut writer, mut log) = RunWriter::create(&a.out, a.overwrite)?;
    let mut shards = Vec::new();
    for (g, lost) in plan.levels.iter().zip(lost) {
        let m = level::merge(g, lost, origin, &summary.slos, &unit);
        m.warnings.iter().for_each(|w| eprintln!("warning: {w}"));
        for r in &m.rows {
            log.append(g.load, r.phase, &r.record)?;
        }
        log.flush()?;
        writer.append_level(g.load, &[], &[])?;
        summary.push_level(m.report);
        shards.extend(m.shards);
    }
    summary.merged = Some(Merged { shards, referenced: plan.reference.is_some() });
    writer.write_summary(&summary)?;
    say(&summary, &unit, a.json)?;
    let conclusion = Conclusion::of(&summary).render();
    writer.write_conclusion(&conclusion)?;
    if a.report {
        let page = a.out.join(goodput_results::files::REPORT);
        goodput_report::html::write(&goodput_results::Results::read(&a.out)?, &page)?;
        eprintln!("report in {}", page.display());
    }
    eprintln!("merged run in {}", a.out.display());
    let empty = summary.levels.iter().any(|l| l.summary.completed == 0);
    Ok(if empty { goodput_bench::run::EXIT_NOTHING_COMPLETED } else { goodput_bench::run::EXIT_OK })
}

/// The tables, the shards and the conclusion (on stderr with `--json`, whose line is stdout's).
fn say(s: &RunSummary, unit: &str, json: bool) -> Result<()> {
    let mut parts = vec![table::levels(&s.levels, s.load_unit, &s.model, &s.workload.description)];
    parts.extend([table::http(&s.levels, s.load_unit), table::server(&s.levels, s.load_unit)].into_iter().flatten());
    if let Some(m) = &s.merged {
        parts.push(table::shards(m, unit));
    }
    parts.push(Conclusion::of(s).render());
    for p in parts {
        if json {
            eprintln!("{p}");
        } else {
            println!("{p}");
        }
    }
    if json {
        println!("{}", serde_json::to_string(s).context("the merged summary as JSON")?);
    }
    Ok(())
}

/// The merged run's summary before its levels: the first shard's setup, its clock the common
/// time line's, its command line the single process's run (without the shard flags, with
/// every level).
fn base_summary(plan: &check::Plan, origin: i128, out: &Path) -> RunSummary {
    let first = &plan.levels[0].shards[0];
    let mut s = first.summary.clone();
    s.levels.clear();
    s.capacity = None;
    s.complete = plan.levels.iter().flat_map(|g| &g.shards).all(|x| x.summary.complete);
    s.shard = None;
    s.start_at = None;
    s.prediction = None;
    s.clock = Some(ClockInfo { origin_unix_ns: u64::try_from(origin).unwrap_or(0), reference: None });
    let loads: Vec<String> = plan.levels.iter().map(|g| g.load.to_string()).collect();
    s.command = single_command(&s.command, &loads.join(","), out);
    s
}

/// A shard's command line as the single process's: `--shard`, `--start-at`, `--clock-ref`
/// and `--out` dropped, the levels' flag given every merged level, `--out` the merged run.
fn single_command(shard: &[String], loads: &str, out: &Path) -> Vec<String> {
    use crate::run::strip;
    let mut c = ["--shard", "--start-at", "--clock-ref", "--out"].iter().fold(shard.to_vec(), |c, f| strip(&c, f));
    for flag in ["--rate", "--burst", "--trace-speedup"] {
        let had = c.len();
        c = strip(&c, flag);
        if c.len() < had {
            c.push(format!("{flag}={loads}"));
        }
    }
    c.push(format!("--out={}", out.display()));
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shards_command_becomes_the_single_processs() {
        let shard: Vec<String> =
            "goodput run --target http://h:8000 --rate 4 --seed 7 --shard 1/4 --start-at=2026-12-02T18:30:00Z --clock-ref ntp://t --out s1"
                .split(' ')
                .map(String::from)
                .collect();
        let c = single_command(&shard, "2,4", Path::new("merged"));
        assert_eq!(c.join(" "), "goodput run --target http://h:8000 --seed 7 --rate=2,4 --out=merged");
    }
}
