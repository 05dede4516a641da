//! What `goodput merge` takes: shard directories read and checked, grouped by level. Each is
//! the run of one shard (`--shard i/N`) of one level against a server's URL; the shards of a
//! level are the whole split (every index once, none twice) and all of them ran one
//! configuration (seed, model, workload, SLOs, target) and measured their clocks the same way.

use super::error::refuse;
use super::{MergeError, Result};
use goodput_core::shard::Shard;
use goodput_results::files::{read_jsonl, RECORDS};
use goodput_results::{LevelReport, RecordRow, RunSummary};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// One shard's run as read.
pub struct Loaded {
    pub dir: PathBuf,
    pub summary: RunSummary,
    pub shard: Shard,
    pub records: Vec<RecordRow>,
}

impl Loaded {
    /// The shard's one level.
    pub fn level(&self) -> &LevelReport {
        &self.summary.levels[0]
    }

    /// `DIR (shard i/N)`, as errors name it.
    pub fn name(&self) -> String {
        format!("{} (shard {})", self.dir.display(), self.shard)
    }

    /// Stamp 0 of its clock in nanoseconds since the epoch, on the reference's time line when
    /// it measured one.
    pub fn origin_ns(&self) -> i128 {
        self.summary.clock.as_ref().map_or(0, |c| c.origin_ns())
    }

    /// The reference its clock was measured against.
    fn reference(&self) -> Option<&str> {
        Some(self.summary.clock.as_ref()?.reference.as_ref()?.url.as_str())
    }
}

/// Reads the shard in `dir`, refusing what is not one level of a shard against a server.
pub fn load(dir: &Path) -> Result<Loaded> {
    let shown = dir.display();
    let summary = match goodput_results::read_summary(dir) {
        Ok(s) => s,
        Err(goodput_results::ResultsError::NotResults { .. }) => refuse!(
            NotMergeable,
            "{shown}: no summary.json: not a goodput run, or a shard killed before its level ended; rerun that shard"
        ),
        Err(source) => return Err(MergeError::Summary { dir: shown.to_string(), source }),
    };
    let Some(shard) = summary.shard else {
        refuse!(NotMergeable, "{shown}: not a shard (`goodput run` without --shard); merge takes the directories of `goodput run --shard i/N`");
    };
    if summary.merged.is_some() {
        refuse!(NotMergeable, "{shown}: already a merged run; merge the shards it was made of");
    }
    if summary.levels.len() != 1 {
        refuse!(NotMergeable, "{shown} (shard {shard}): {} finished levels where a shard has one (interrupted or killed before its level ended?); rerun that shard", summary.levels.len());
    }
    if summary.target == "in-process" || summary.target == "http-local" {
        refuse!(NotMergeable, "{shown} (shard {shard}): ran the engine in its own process (--target {}), so its shards measured one engine each, not one server; shard a run against a server's URL", summary.target);
    }
    let level = &summary.levels[0];
    if level.agent.is_some() || level.rag.is_some() {
        refuse!(NotMergeable, "{shown} (shard {shard}): an agent or RAG run, whose task records are not in records.jsonl; merge takes runs of single requests");
    }
    if summary.clock.is_none() {
        refuse!(NotMergeable, "{shown} (shard {shard}): written by a goodput that did not keep its clock's wall time; rerun the shard with this one");
    }
    let records = read_jsonl::<RecordRow>(&dir.join(RECORDS))?;
    Ok(Loaded { dir: dir.to_path_buf(), summary, shard, records })
}

/// The shards of one level, by index.
pub struct Group {
    pub load: f64,
    pub shards: Vec<Loaded>,
}

/// The levels' shard sets, by load ascending, once every check passed.
pub struct Plan {
    pub levels: Vec<Group>,
    /// Every shard measured its clock against this reference (all the same one).
    pub reference: Option<String>,
}

/// Checks that `shards` are the whole splits of levels of one configuration and groups them.
pub fn plan(shards: Vec<Loaded>) -> Result<Plan> {
    let first = shards.first().ok_or(MergeError::NoShards)?;
    for s in &shards[1..] {
        same_setup(first, s)?;
    }
    let reference = first.reference().map(String::from);
    if let Some(s) = shards.iter().find(|s| s.reference() != reference.as_deref()) {
        let said = |r: Option<&str>| r.map_or("no --clock-ref".to_string(), |u| format!("--clock-ref {u}"));
        refuse!(
            NotOneRun,
            "{} measured its clock with {}, {} with {}: give every shard the same --clock-ref (or none, to trust the machines' wall clocks)",
            s.name(),
            said(s.reference()),
            first.name(),
            said(reference.as_deref())
        );
    }
    let mut levels: Vec<Group> = Vec::new();
    for s in shards {
        let load = s.level().summary.load;
        match levels.iter_mut().find(|g| g.load == load) {
            Some(g) => g.shards.push(s),
            None => levels.push(Group { load, shards: vec![s] }),
        }
    }
    levels.sort_by(|a, b| a.load.total_cmp(&b.load));
    for g in &mut levels {
        g.shards.sort_by_key(|s| s.shard.index);
        whole_split(g)?;
    }
    Ok(Plan { levels, reference })
}

/// Every index of the level's split once: none given twice, none missing, one count.
fn whole_split(g: &Group) -> Result<()> {
    let level = format!("level {} {}", g.load, g.shards[0].summary.load_unit);
    let n = g.shards[0].shard.count;
    if let Some(s) = g.shards.iter().find(|s| s.shard.count != n) {
        refuse!(
            NotOneRun,
            "{level}: {} and {} split it differently; the shards of a level share one COUNT",
            g.shards[0].name(),
            s.name()
        );
    }
    if let Some(w) = g.shards.windows(2).find(|w| w[0].shard.index == w[1].shard.index) {
        refuse!(
            NotOneRun,
            "{level}: shard {} given twice ({} and {}): the shards overlap; give each index once",
            w[0].shard,
            w[0].dir.display(),
            w[1].dir.display()
        );
    }
    let missing: Vec<String> = (0..n)
        .filter(|i| !g.shards.iter().any(|s| s.shard.index == *i))
        .map(|index| Shard { index, count: n }.to_string())
        .collect();
    if !missing.is_empty() {
        let given: Vec<String> = g.shards.iter().map(Loaded::name).collect();
        refuse!(
            NotOneRun,
            "{level}: shard{} {} missing (given: {}); a merge needs every shard of the split",
            if missing.len() > 1 { "s" } else { "" },
            missing.join(", "),
            given.join(", ")
        );
    }
    Ok(())
}

/// The configuration every shard must share with the first.
fn same_setup(a: &Loaded, b: &Loaded) -> Result<()> {
    let (x, y) = (&a.summary, &b.summary);
    differ("seed", &x.seed, &y.seed, a, b)?;
    differ("model", &x.model, &y.model, a, b)?;
    differ("workload", &x.scenario, &y.scenario, a, b)?;
    differ("load unit", &x.load_unit, &y.load_unit, a, b)?;
    differ("SLOs", &x.slos, &y.slos, a, b)?;
    differ("target", &x.target, &y.target, a, b)?;
    differ("retry policy", &x.retry, &y.retry, a, b)
}

fn differ<T: Serialize + PartialEq>(what: &str, x: &T, y: &T, a: &Loaded, b: &Loaded) -> Result<()> {
    if x == y {
        return Ok(());
    }
    let show = |v: &T| {
        let s = serde_json::to_string(v).unwrap_or_default();
        if s.chars().count() > 120 {
            format!("{}…", s.chars().take(120).collect::<String>())
        } else {
            s
        }
    };
    refuse!(
        NotOneRun,
        "{} and {} ran different runs: {what} {} against {}; merge the shards of one run",
        a.name(),
        b.name(),
        show(x),
        show(y)
    )
}
