//! The shards table of `goodput merge`: per shard, its level, requests, lost requests, when
//! it started its schedule against the level's first shard, and its clock's measured offset
//! from the reference (before, after, and the round trip that bounds it).

use goodput_results::clock::{Merged, MergedShard};

/// One row per shard, by level and index.
pub fn shards(m: &Merged, unit: &str) -> String {
    let load = format!("load ({unit})");
    let mut t = super::new(&[
        load.as_str(),
        "shard",
        "requests",
        "lost",
        "start after first",
        "clock offset (start → end)",
        "round trip",
        "dir",
    ]);
    for s in &m.shards {
        t.add_row(vec![
            s.load.to_string(),
            s.shard.to_string(),
            s.records.to_string(),
            s.lost.to_string(),
            format!("{:.1} ms", s.start_s * 1e3),
            offsets(s),
            round_trip(s),
            s.dir.display().to_string(),
        ]);
    }
    let how = if m.referenced {
        "stamps on the reference clock's time line (each shard's offset measured before and after its run)"
    } else {
        "stamps on the shards' own wall clocks (no --clock-ref: their offsets were not measured)"
    };
    format!("Shards merged: {} — {how}\n{t}", m.shards.len())
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
