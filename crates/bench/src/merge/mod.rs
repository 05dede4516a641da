//! The merge (`goodput merge DIR… --out RUN`): one run built from the shards of a run split over
//! processes or machines (`goodput run --shard i/N`). The shards are checked to be whole
//! splits of one configuration ([`check`]); each level is rebuilt from the shards' raw records
//! on one time line ([`level`]); the capacity verdict and the conclusion come from the merged
//! levels as for one process. Locust merges its workers' bucketed histograms and k6 its
//! instances' summaries; goodput keeps every request's stamps, so its merge is exact.

mod check;
mod error;
#[cfg(test)]
mod fuzz;
mod level;
mod verify;

use error::refuse;
pub use error::MergeError;

type Result<T, E = MergeError> = std::result::Result<T, E>;
use goodput_report::Conclusion;
use goodput_results::clock::ClockInfo;
use goodput_results::{RunSummary, RunWriter};
use std::path::{Path, PathBuf};

/// What to merge: the shards' results directories, and the merged run's directory.
#[derive(Clone, Debug)]
pub struct MergeSpec {
    /// The shards' results directories (`goodput run --shard i/N --out DIR`).
    pub dirs: Vec<PathBuf>,
    /// The merged run's directory.
    pub out: PathBuf,
    /// Replace a run already in `out`.
    pub overwrite: bool,
    /// Also write report.html into `out`.
    pub report: bool,
}

/// The merged run as written: its summary and conclusion, the report page when asked for,
/// what the merge found wrong with the shards, and the exit status a run of it would have.
pub struct Merged {
    pub summary: RunSummary,
    pub conclusion: String,
    pub report: Option<PathBuf>,
    /// A line each: late starts, lost requests, clocks that disagree.
    pub warnings: Vec<String>,
    /// [`crate::run::EXIT_OK`], or [`crate::run::EXIT_NOTHING_COMPLETED`] when a level
    /// measured no completed request.
    pub exit: i32,
}

/// Merges the shards into `a.out`. Every shard is read and checked before `out` is touched;
/// a merge that fails after it created `out` removes it again.
pub fn merge(a: &MergeSpec) -> Result<Merged> {
    not_an_input(&a.out, &a.dirs)?;
    goodput_results::files::check_out_dir(&a.out, a.overwrite)?;
    let loaded = a.dirs.iter().map(|d| check::load(d)).collect::<Result<Vec<_>>>()?;
    let plan = check::plan(loaded)?;
    let lost = plan.levels.iter().map(verify::level).collect::<Result<Vec<_>>>()?;
    let new_dir = !a.out.exists();
    let merged = write(a, &plan, &lost);
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
            refuse!(
                Out,
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
fn write(a: &MergeSpec, plan: &check::Plan, lost: &[Vec<verify::Lost>]) -> Result<Merged> {
    let origin = plan.levels.iter().flat_map(|g| &g.shards).map(check::Loaded::origin_ns).min().unwrap_or(0);
    let mut summary = base_summary(plan, origin, &a.out);
    let unit = summary.load_unit.to_string();
    let (mut writer, mut log) = RunWriter::create(&a.out, a.overwrite)?;
    let (mut shards, mut warnings) = (Vec::new(), Vec::new());
    for (g, lost) in plan.levels.iter().zip(lost) {
        let m = level::merge(g, lost, origin, &summary.slos, &unit);
        warnings.extend(m.warnings.iter().map(|w| format!("warning: {w}")));
        for r in &m.rows {
            log.append(g.load, r.phase, &r.record)?;
        }
        log.flush()?;
        writer.append_level(g.load, &[], &[])?;
        summary.push_level(m.report);
        shards.extend(m.shards);
    }
    summary.merged = Some(goodput_results::clock::Merged { shards, referenced: plan.reference.is_some() });
    writer.write_summary(&summary)?;
    let conclusion = Conclusion::of(&summary).render();
    writer.write_conclusion(&conclusion)?;
    let report = if a.report {
        let page = a.out.join(goodput_results::files::REPORT);
        goodput_report::html::write(&goodput_results::Results::read(&a.out)?, &page)?;
        Some(page)
    } else {
        None
    };
    let empty = summary.levels.iter().any(|l| l.summary.completed == 0);
    let exit = if empty { crate::run::EXIT_NOTHING_COMPLETED } else { crate::run::EXIT_OK };
    Ok(Merged { summary, conclusion, report, warnings, exit })
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
    use crate::command::strip;
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

    /// What failed is the error's variant.
    #[test]
    fn refusals_are_typed_by_what_failed() {
        let dir = std::env::temp_dir().join(format!("goodput-merge-typed-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert!(matches!(check::plan(Vec::new()), Err(MergeError::NoShards)));
        let e = check::load(&dir).err().unwrap();
        assert!(matches!(&e, MergeError::NotMergeable(m) if m.contains("no summary.json")), "{e}");
        let spec = MergeSpec { dirs: vec![dir.join("shard")], out: dir.clone(), overwrite: false, report: false };
        std::fs::create_dir_all(dir.join("shard")).unwrap();
        assert!(matches!(merge(&spec), Err(MergeError::Out(_))), "--out above a shard");
        let _ = std::fs::remove_dir_all(&dir);
    }

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
