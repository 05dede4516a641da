//! The shards' records checked before a merge trusts them: each shard's records are its own
//! level's and its own slice's (`id mod N = i`), within the level's schedule, as many as its
//! summary counts, each once across the level, and their stamps in order (`intended ≤ sent ≤
//! every chunk ≤ end`) within the shard's own run (from its level's start to the end of its
//! wall time). A shard that fails is refused by name, before anything is written. Then the
//! requests no shard recorded are counted per shard without listing them (a level of a
//! billion ids costs no memory).

use super::check::{Group, Loaded};
use super::error::refuse;
use super::Result;
use goodput_core::{ClientRecord, Phase};

/// The requests of one shard's slice that no shard recorded: how many, and the first few ids.
pub struct Lost {
    pub count: u64,
    pub first: Vec<u64>,
}

/// How many lost ids a warning names.
const SHOWN: usize = 5;

/// Checks the shards of `g` (each alone, then together) and counts each one's lost requests.
pub fn level(g: &Group) -> Result<Vec<Lost>> {
    let schedule = g.shards.iter().filter_map(|s| s.level().schedule).max();
    let mut ids: Vec<(u64, usize)> = Vec::with_capacity(g.shards.iter().map(|s| s.records.len()).sum());
    for (k, s) in g.shards.iter().enumerate() {
        shard(s, g.load, schedule)?;
        ids.extend(s.records.iter().map(|r| (r.record.id, k)));
    }
    ids.sort_unstable();
    if let Some(w) = ids.windows(2).find(|w| w[0].0 == w[1].0) {
        let (a, b) = (&g.shards[w[0].1], &g.shards[w[1].1]);
        let by = if w[0].1 == w[1].1 {
            format!("by {} twice", a.name())
        } else {
            format!("by {} and {}", a.name(), b.name())
        };
        refuse!(
            Records,
            "request id {} is recorded {by}: a request is sent once; merge the shards of one run, each once",
            w[0].0
        );
    }
    // Without a schedule (results that predate it), the level ran at least to its highest id.
    let top = schedule.unwrap_or_else(|| ids.last().map_or(0, |x| x.0 + 1));
    // Each shard's ids, ascending: one pass over the sorted ids, not one per shard.
    let mut per: Vec<Vec<u64>> = vec![Vec::new(); g.shards.len()];
    ids.iter().for_each(|&(id, k)| per[k].push(id));
    let n = u64::from(g.shards[0].shard.count);
    Ok(g.shards.iter().zip(per).map(|(s, own)| lost(own.into_iter(), u64::from(s.shard.index), n, top)).collect())
}

/// One shard's records against itself: its level, its slice, the schedule, its summary's
/// counts and the order and span of every stamp.
fn shard(s: &Loaded, load: f64, schedule: Option<u64>) -> Result<()> {
    let name = s.name();
    let level = s.level();
    let want = [
        (Phase::Measured, level.summary.requests),
        (Phase::Warmup, level.warmup_requests),
        (Phase::Cooldown, level.cooldown_requests),
    ];
    for (phase, n) in want {
        let got = s.records.iter().filter(|r| r.phase == phase).count();
        if got != n {
            refuse!(
                Records,
                "{name}: its summary counts {n} {} requests, its records.jsonl holds {got}: the shard's files disagree (records.jsonl cut or edited?); rerun that shard",
                phase_name(phase)
            );
        }
    }
    let span = Span::of(s);
    for r in &s.records {
        let id = r.record.id;
        if r.level.to_bits() != load.to_bits() {
            refuse!(Records, "{name}: request id {id} is recorded at level {}, not the shard's level {load}", r.level);
        }
        if !s.shard.takes(id) {
            let owner = id % u64::from(s.shard.count);
            refuse!(Records, "{name}: request id {id} falls to shard {owner}/{}, not to this one: these records are not this shard's", s.shard.count);
        }
        if let Some(top) = schedule.filter(|&top| id >= top) {
            refuse!(
                Records,
                "{name}: request id {id} is beyond the level's schedule of {top} requests (ids 0 to {})",
                top.saturating_sub(1)
            );
        }
        if let Err(why) = span.check(&r.record) {
            refuse!(Records, "{name}: request id {id}: {why}: its stamps cannot be trusted");
        }
    }
    Ok(())
}

fn phase_name(p: Phase) -> &'static str {
    match p {
        Phase::Measured => "measured",
        Phase::Warmup => "warm-up",
        Phase::Cooldown => "cool-down",
    }
}

/// The stretch of the shard's clock its level ran in, seconds: from the level's start to the
/// end of its wall time (a shard's records lie inside it by construction); a year when the
/// results predate what bounds it.
struct Span {
    from: f64,
    to: f64,
}

impl Span {
    /// Stamps are taken by one clock a few microseconds apart from the level's own readings.
    const SLACK_S: f64 = 0.01;

    fn of(s: &Loaded) -> Span {
        let level = s.level();
        let from = level.start_s.unwrap_or(0.0);
        let wall = level.harness.cpu.wall_s;
        let to = if level.start_s.is_some() && wall.is_finite() { from + wall } else { from + 366.0 * 86_400.0 };
        Span { from: from - Self::SLACK_S, to: to + Self::SLACK_S }
    }

    /// Why `r`'s stamps are impossible, if they are.
    fn check(&self, r: &ClientRecord) -> Result<(), String> {
        let s = |x: goodput_core::Stamp| x.as_secs();
        if r.sent < r.intended {
            return Err(format!("sent at {:.9} s, before it was due at {:.9} s", s(r.sent), s(r.intended)));
        }
        if r.end < r.sent {
            return Err(format!("ended at {:.9} s, before it was sent at {:.9} s", s(r.end), s(r.sent)));
        }
        if let Some(c) = r.chunks.iter().find(|c| c.at < r.sent || c.at > r.end) {
            return Err(format!(
                "a chunk at {:.6} s, outside its request's {:.6} to {:.6} s",
                s(c.at),
                s(r.sent),
                s(r.end)
            ));
        }
        if s(r.intended) < self.from || s(r.end) > self.to {
            return Err(format!(
                "due at {:.3} s and ended at {:.3} s, outside the shard's level ({:.3} to {:.3} s on its clock)",
                s(r.intended),
                s(r.end),
                self.from + Self::SLACK_S,
                self.to - Self::SLACK_S
            ));
        }
        Ok(())
    }
}

/// The ids of shard `index` of `n` below `top` missing from `recorded` (ascending, each of
/// the shard's slice and below `top`): counted, and the first [`SHOWN`] of them found by
/// walking the gaps, never by listing the slice.
fn lost(recorded: impl Iterator<Item = u64>, index: u64, n: u64, top: u64) -> Lost {
    let slice = if top > index { (top - 1 - index) / n + 1 } else { 0 };
    let (mut count_recorded, mut first, mut next) = (0u64, Vec::new(), index);
    for id in recorded {
        while next < id && first.len() < SHOWN {
            first.push(next);
            next += n;
        }
        next = id.saturating_add(n);
        count_recorded += 1;
    }
    while next < top && first.len() < SHOWN {
        first.push(next);
        next += n;
    }
    Lost { count: slice.saturating_sub(count_recorded), first }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lost_ids_are_counted_from_the_gaps_without_listing_the_slice() {
        // Shard 1 of 3 below 20: ids 1, 4, 7, 10, 13, 16, 19; recorded 4 and 13.
        let l = lost([4, 13].into_iter(), 1, 3, 20);
        assert_eq!((l.count, l.first), (5, vec![1, 7, 10, 16, 19]));
        // Nothing lost; an empty slice.
        assert_eq!(lost([0, 2, 4].into_iter(), 0, 2, 6).count, 0);
        assert_eq!(lost(std::iter::empty(), 5, 8, 3).count, 0);
        // A schedule of a trillion requests, none recorded: counted at once.
        let huge = lost(std::iter::empty(), 0, 2, 1_000_000_000_002);
        assert_eq!((huge.count, huge.first), (500_000_000_001, vec![0, 2, 4, 6, 8]));
        // The last record missing.
        let last = lost([0, 2, 4].into_iter(), 0, 2, 8);
        assert_eq!((last.count, last.first), (1, vec![6]));
    }
}
