//! The shards table of `goodput merge`: per shard, its level, requests, lost requests, when
//! it started its schedule against the level's first shard, and its clock's measured offset
//! from the reference (before, after, and the round trip that bounds it).

use goodput_results::clock::{Merged, MergedShard};

/// The columns of the shards table after the load's.
pub const SHARD_HEADER: [&str; 7] =
    ["shard", "requests", "lost", "start after first", "clock offset (start → end)", "round trip", "dir"];

/// One row per shard, by level and index.
pub fn shards(m: &Merged, unit: &str) -> String {
    let load = format!("load ({unit})");
    let mut t = super::new(&[[load.as_str()].as_slice(), SHARD_HEADER.as_slice()].concat());
    for row in rows(m) {
        t.add_row(row);
    }
    format!("Shards merged: {} — {}\n{t}", m.shards.len(), time_line(m))
}

/// How the merged stamps were put on one time line.
pub fn time_line(m: &Merged) -> &'static str {
    if m.referenced {
        "stamps on the reference clock's time line (each shard's offset measured before and after its run)"
    } else {
        "stamps on the shards' own wall clocks (no --clock-ref: their offsets were not measured)"
    }
}

/// The table's cells: the load, then [`SHARD_HEADER`]'s.
pub fn rows(m: &Merged) -> Vec<Vec<String>> {
    m.shards
        .iter()
        .map(|s| {
            vec![
                s.load.to_string(),
                s.shard.to_string(),
                s.records.to_string(),
                s.lost.to_string(),
                format!("{:.1} ms", s.start_s * 1e3),
                offsets(s),
                round_trip(s),
                s.dir.display().to_string(),
            ]
        })
        .collect()
}

fn offsets(s: &MergedShard) -> String {
    let Some(r) = s.clock.as_ref().and_then(|c| c.reference.as_ref()) else { return "—".into() };
    let ms = |x: f64| format!("{:+.3} ms", x * 1e3);
    match r.end {
        Some(e) => format!("{} → {}", ms(r.start.offset_s), ms(e.offset_s)),
        None => ms(r.start.offset_s),
    }
}

fn round_trip(s: &MergedShard) -> String {
    let Some(r) = s.clock.as_ref().and_then(|c| c.reference.as_ref()) else { return "—".into() };
    let worst = r.end.map_or(r.start.rtt_s, |e| e.rtt_s.max(r.start.rtt_s));
    format!("{:.3} ms", worst * 1e3)
}
