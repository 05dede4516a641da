//! `goodput merge`'s inputs fuzzed: two shards of a small open-loop level written as a run
//! writes them, then one record line of one shard mutated structurally and at the byte level
//! (ids and stamps at every integer's edge, fields deleted, renamed or retyped), and, in half
//! the cases, the shard's summary too (its schedule, start, wall time, counts, shard index).
//! Reading, checking and merging the level returns a merge or an error naming the shard, never
//! panics, and never counts or lists more than it may: lost requests counted without memory,
//! at most five ids named.

use super::{check, level, verify};
use goodput_core::shard::Shard;
use goodput_core::{ClientRecord, Phase, RecordBuilder, Stamp};
use goodput_fuzzing::json::{mutate_json, mutated};
use goodput_fuzzing::{config, temp_path};
use goodput_results::{RecordRow, RunWriter};
use proptest::prelude::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

const MS: u64 = 1_000_000;
const LOAD: f64 = 2.0;

const KEYS: &[&str] = &[
    "id",
    "intended",
    "sent",
    "end",
    "at",
    "tokens",
    "chunks",
    "level",
    "phase",
    "outcome",
    "schedule",
    "start_s",
    "wall_s",
    "requests",
    "warmup_requests",
    "cooldown_requests",
    "index",
    "count",
    "load",
    "origin_unix_ns",
    "shard",
    "levels",
    "clock",
    "harness",
    "cpu",
];

/// Request `id`: due every 100 ms from 1 s, four tokens 10 ms apart after 30 ms.
fn record(id: u64) -> ClientRecord {
    let t0 = 1_000 * MS + id * 100 * MS;
    let times: Vec<Stamp> = (0..4).map(|i| Stamp(t0 + (30 + 10 * i) * MS)).collect();
    RecordBuilder::new(id).intended(Stamp(t0)).sent(Stamp(t0)).tokens_at(times.clone()).end(times[3]).build()
}

/// Shard `k` of 2 of a level of 8 requests, written into `dir` as `goodput run --shard` does.
fn write_shard(dir: &Path, k: u32) -> PathBuf {
    let shard = Shard { index: k, count: 2 };
    let rows: Vec<ClientRecord> = (0..8).filter(|&id| shard.takes(id)).map(record).collect();
    let (mut writer, mut log) = RunWriter::create(dir, false).unwrap();
    for r in &rows {
        log.append(LOAD, Phase::Measured, r).unwrap();
    }
    log.flush().unwrap();
    writer.append_level(LOAD, &[], &[]).unwrap();
    let mut s = goodput_results::testing::run_summary();
    s.target = "http://10.0.0.1:8000".into();
    s.shard = Some(shard);
    s.clock = Some(goodput_results::clock::ClockInfo { origin_unix_ns: 1_800_000_000_000_000_000, reference: None });
    let mut level = goodput_results::testing::level(LOAD, &rows);
    (level.start_s, level.schedule, level.warmup_requests) = (Some(1.0), Some(8), 0);
    level.harness.cpu.wall_s = 1.5;
    s.push_level(level);
    writer.write_summary(&s).unwrap();
    dir.to_path_buf()
}

/// Reads, checks and merges `dirs` as `goodput merge` does, without writing: the merged rows.
fn merge_rows(dirs: &[PathBuf]) -> Result<Vec<RecordRow>, super::MergeError> {
    let loaded = dirs.iter().map(|d| check::load(d)).collect::<Result<Vec<_>, _>>()?;
    let plan = check::plan(loaded)?;
    let mut rows = Vec::new();
    for g in &plan.levels {
        let lost = verify::level(g)?;
        for l in &lost {
            assert!(l.first.len() <= 5, "at most five lost ids named");
        }
        rows.extend(level::merge(g, &lost, 0, &[], "req/s").rows);
    }
    Ok(rows)
}

fn merge(dirs: &[PathBuf]) -> Result<usize, super::MergeError> {
    merge_rows(dirs).map(|r| r.len())
}

/// A u64 at an edge: 0, small, around the level's ids and stamps, 2^63, `u64::MAX`.
fn edge() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        0u64..20,
        (1_000 * MS)..(2_000 * MS),
        Just(1u64 << 63),
        Just(u64::MAX - 1),
        Just(u64::MAX),
        any::<u64>(),
    ]
}

/// The seeds of the record mutations: the level's records as their lines are written.
fn record_seeds() -> Vec<Value> {
    (0..8)
        .map(|id| serde_json::to_value(RecordRow { level: LOAD, phase: Phase::Measured, record: record(id) }).unwrap())
        .collect()
}

proptest! {
    #![proptest_config(config())]
    #[test]
    fn any_shard_merges_or_is_refused_by_name(
        line in mutated(record_seeds(), KEYS),
        at in 0usize..4,
        shard in 0u32..2,
        summary_edits in prop::option::of(prop::collection::vec((any::<prop::sample::Index>(), goodput_fuzzing::json::edit(KEYS)), 1..4)),
    ) {
        let root = temp_path("merge", "d");
        let dirs: Vec<PathBuf> = (0..2).map(|k| write_shard(&root.join(format!("s{k}")), k)).collect();
        let target = &dirs[shard as usize];
        let records = target.join(goodput_results::files::RECORDS);
        let text = std::fs::read_to_string(&records).unwrap();
        let split = line.iter().filter(|&&b| b == b'\n').count();
        let mut lines: Vec<Vec<u8>> = text.lines().map(|l| l.as_bytes().to_vec()).collect();
        lines[at] = line;
        std::fs::write(&records, lines.join(&b'\n').into_iter().chain([b'\n']).collect::<Vec<u8>>()).unwrap();
        if let Some(edits) = summary_edits {
            let path = target.join(goodput_results::files::SUMMARY);
            let v: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
            std::fs::write(&path, mutate_json(v, &edits)).unwrap();
        }
        let merged = merge(&dirs);
        let _ = std::fs::remove_dir_all(&root);
        if let Ok(rows) = merged {
            // Byte edits may split the line in two; nothing else adds a record.
            prop_assert!(rows <= 8 + split, "{rows} rows from 8 requests");
        }
    }
}

proptest! {
    #![proptest_config(config())]
    /// Typed edits that keep every file readable: a record's id and stamps, and the level's
    /// schedule, start and wall time, at their edges. What merges has every check's property:
    /// ids once each, stamps in order.
    #[test]
    fn edge_ids_and_stamps_merge_checked_or_are_refused(
        at in 0usize..4,
        shard in 0u32..2,
        id in prop::option::of(edge()),
        stamps in prop::collection::vec(prop::option::of(edge()), 3),
        schedule in prop::option::of(prop::option::of(edge())),
        start_s in prop::option::of(prop_oneof![Just(-1e300), Just(0.0), Just(1.0), Just(1e300)]),
        wall_s in prop::option::of(prop_oneof![Just(0.0), Just(1.5), Just(1e300), Just(-5.0)]),
    ) {
        let root = temp_path("merge-edge", "d");
        let dirs: Vec<PathBuf> = (0..2).map(|k| write_shard(&root.join(format!("s{k}")), k)).collect();
        let target = &dirs[shard as usize];
        let path = target.join(goodput_results::files::RECORDS);
        let mut rows: Vec<RecordRow> = goodput_results::files::read_jsonl(&path).unwrap();
        let r = &mut rows[at].record;
        r.id = id.unwrap_or(r.id);
        let [intended, sent, end] = [stamps[0], stamps[1], stamps[2]];
        (r.intended, r.sent, r.end) =
            (intended.map_or(r.intended, Stamp), sent.map_or(r.sent, Stamp), end.map_or(r.end, Stamp));
        let text: String = rows.iter().map(|r| serde_json::to_string(r).unwrap() + "\n").collect();
        std::fs::write(&path, text).unwrap();
        let mut s = goodput_results::read_summary(target).unwrap();
        let level = &mut s.levels[0];
        level.schedule = schedule.unwrap_or(level.schedule);
        level.start_s = start_s.or(level.start_s);
        level.harness.cpu.wall_s = wall_s.unwrap_or(level.harness.cpu.wall_s);
        std::fs::write(target.join(goodput_results::files::SUMMARY), serde_json::to_vec(&s).unwrap()).unwrap();
        let merged = merge_rows(&dirs);
        let _ = std::fs::remove_dir_all(&root);
        if let Ok(rows) = merged {
            let mut ids: Vec<u64> = rows.iter().map(|r| r.record.id).collect();
            ids.sort_unstable();
            ids.dedup();
            prop_assert_eq!(ids.len(), rows.len());
            for r in &rows {
                prop_assert!(r.record.intended <= r.record.sent && r.record.sent <= r.record.end, "{:?}", r.record);
            }
        }
    }
}
