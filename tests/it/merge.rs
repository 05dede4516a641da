//! `goodput merge`: shards written by hand from one run's records (split by id, each on its
//! own clock, one machine's wall clock 5 s wrong and its reference offset saying so) merge
//! back into exactly the single run: the same records, stamp for stamp, and the same
//! metrics; bad shard sets are refused by name.

use crate::common::{goodput_code, temp};
use goodput_core::shard::Shard;
use goodput_core::{ClientRecord, HttpStamps, Outcome, Phase, RecordBuilder, Stamp};
use goodput_metrics::windowed::{self, Sending};
use goodput_results::clock::{ClockInfo, ClockOffset, ClockReference};
use goodput_results::files::{read_jsonl, RECORDS};
use goodput_results::{read_summary, LoadUnit, RecordRow, RunSummary, RunWriter};
use std::path::{Path, PathBuf};

const MS: u64 = 1_000_000;
const SHARDS: u64 = 3;
/// The single run's wall time of its stamp 0.
const WALL0: u64 = 1_800_000_000 * 1_000_000_000;
/// Shard k's clock started k × this later than the single run's.
const LATER: u64 = 1_700 * MS;
const LOAD: f64 = 4.0;
const URL: &str = "http://10.0.0.9:8000";

/// Request `id` of the single run: due every 150 ms from 10 s, so several overlap; TTFT and
/// length vary, one in seven fails; its HTTP stamps beside its chunks.
fn single(id: u64) -> ClientRecord {
    let t0 = 10_000 * MS + id * 150 * MS;
    let (ttft, n) = (20 + (id * 37) % 90, 4 + id % 6);
    let times: Vec<Stamp> = (0..n).map(|i| Stamp(t0 + (ttft + 12 * i) * MS)).collect();
    let end = *times.last().unwrap();
    let mut b = RecordBuilder::new(id)
        .intended(Stamp(t0))
        .sent(Stamp(t0 + (id % 3) * MS / 2))
        .tokens_at(times.clone())
        .end(end)
        .input(100 + id as usize)
        .http(HttpStamps {
            status: 200,
            headers: Some(Stamp(t0 + 3 * MS)),
            first_byte: times.first().copied(),
            done: Some(end),
            ..Default::default()
        });
    if id % 7 == 6 {
        b = b.outcome(Outcome::error(goodput_core::FailureKind::Http(503), "overloaded"));
    }
    b.build()
}

/// The phase of request `id` (two warm-up requests first).
fn phase(id: u64) -> Phase {
    if id < 2 {
        Phase::Warmup
    } else {
        Phase::Measured
    }
}

/// Every stamp of `r` `ns` earlier (the same moment on a clock started `ns` later).
fn earlier(r: &ClientRecord, ns: u64) -> ClientRecord {
    let mut v = serde_json::to_value(r).unwrap();
    shift_stamps(&mut v, ns);
    serde_json::from_value(v).unwrap()
}

fn shift_stamps(v: &mut serde_json::Value, ns: u64) {
    use serde_json::Value;
    const STAMPS: [&str; 7] = ["intended", "sent", "end", "at", "headers", "first_byte", "done"];
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                match x {
                    Value::Number(n) if STAMPS.contains(&k.as_str()) => {
                        let moved = n.as_u64().unwrap() - ns;
                        *x = moved.into();
                    }
                    _ => shift_stamps(x, ns),
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| shift_stamps(x, ns)),
        _ => {}
    }
}

fn base_summary() -> RunSummary {
    let mut s = goodput_results::testing::run_summary();
    s.target = URL.into();
    s.load_unit = LoadUnit::Rate;
    s.seed = 9;
    s
}

/// Writes shard `k` of the single run of `ids` into `dir`: its slice, on its own clock;
/// `wrong_s` makes its machine's wall clock that far off, and `reference` says by how much.
fn write_shard(dir: &Path, k: u64, ids: &[u64], wrong_s: f64, reference: bool) -> PathBuf {
    let shard = Shard { index: k as u32, count: SHARDS as u32 };
    let later = k * LATER;
    let rows: Vec<(Phase, ClientRecord)> =
        ids.iter().filter(|&&id| shard.takes(id)).map(|&id| (phase(id), earlier(&single(id), later))).collect();
    let (mut writer, mut log) = RunWriter::create(dir, false).unwrap();
    for (p, r) in &rows {
        log.append(LOAD, *p, r).unwrap();
    }
    log.flush().unwrap();
    writer.append_level(LOAD, &[], &[]).unwrap();
    let measured: Vec<ClientRecord> =
        rows.iter().filter(|(p, _)| *p == Phase::Measured).map(|(_, r)| r.clone()).collect();
    let mut s = base_summary();
    s.shard = Some(shard);
    let wrong = (wrong_s * 1e9) as i64;
    let origin = (WALL0 + later) as i64 + wrong;
    let at = |offset_s: f64| ClockOffset { offset_s, rtt_s: 0.0004 };
    s.clock = Some(ClockInfo {
        origin_unix_ns: origin as u64,
        // Measured before and after: the mean is exactly −wrong.
        reference: reference.then(|| ClockReference {
            url: URL.into(),
            start: at(-wrong_s - 0.25),
            end: Some(at(-wrong_s + 0.25)),
        }),
    });
    let mut level = goodput_results::testing::level(LOAD, &measured);
    level.start_s = Some((10_000 * MS - later) as f64 * 1e-9);
    level.warmup_requests = rows.iter().filter(|(p, _)| *p == Phase::Warmup).count();
    // The level's wall time reaches past its last request's end, as a run's does.
    let last_end = rows.iter().map(|(_, r)| r.end.as_secs()).fold(0.0, f64::max);
    level.harness.cpu.wall_s = last_end - level.start_s.unwrap() + 0.05;
    level.server = None;
    s.push_level(level);
    writer.write_summary(&s).unwrap();
    dir.to_path_buf()
}

fn merge(dirs: &[&Path], out: &Path) -> (i32, String) {
    let mut args: Vec<&str> = vec!["merge", "--out", out.to_str().unwrap()];
    args.extend(dirs.iter().map(|d| d.to_str().unwrap()));
    let (code, _, err) = goodput_code(&args);
    (code, err)
}

#[test]
fn shards_merge_back_into_the_single_run_exactly() {
    let dir = temp("merge-exact");
    let ids: Vec<u64> = (0..20).collect();
    // Shard 2's machine runs 5 s ahead; its --clock-ref measured −5 s.
    let shards: Vec<PathBuf> = (0..SHARDS)
        .map(|k| write_shard(&dir.join(format!("s{k}")), k, &ids, if k == 2 { 5.0 } else { 0.0 }, true))
        .collect();
    let out = dir.join("merged");
    let (code, err) = merge(&[&shards[2], &shards[0], &shards[1]], &out);
    assert_eq!(code, 0, "{err}");
    let rows: Vec<RecordRow> = read_jsonl(&out.join(RECORDS)).unwrap();
    let mut got: Vec<(Phase, ClientRecord)> = rows.into_iter().map(|r| (r.phase, r.record)).collect();
    got.sort_by_key(|(_, r)| r.id);
    let want: Vec<(Phase, ClientRecord)> = ids.iter().map(|&id| (phase(id), single(id))).collect();
    assert_eq!(got, want, "every record back on the single run's clock, stamp for stamp");
    let merged = read_summary(&out).unwrap();
    let slos = merged.slos.clone();
    let measured: Vec<&ClientRecord> = want.iter().filter(|(p, _)| *p == Phase::Measured).map(|(_, r)| r).collect();
    // Over the single run's steady window: every record, the measured ones sampled.
    let all: Vec<&ClientRecord> = want.iter().map(|(_, r)| r).collect();
    let sending =
        if merged.levels[0].harness.users.is_some() { Sending::Closed } else { Sending::Open { until: None } };
    let (single, steady) = windowed::summarize(LOAD, &all, &measured, &slos, sending);
    assert_eq!(merged.levels[0].summary, single, "the metrics of the single run");
    assert_eq!(merged.levels[0].steady, steady);
    assert_eq!(
        merged.levels[0].vllm.max_concurrent_requests,
        goodput_metrics::peaks::max_concurrent_requests(&measured)
    );
    assert_eq!(merged.levels[0].warmup_requests, 2);
    assert_eq!(merged.clock.as_ref().unwrap().origin_unix_ns, WALL0, "the common time line is the single run's");
    let m = merged.merged.as_ref().unwrap();
    assert!(m.referenced && m.shards.len() == 3 && m.shards.iter().all(|s| s.lost == 0), "{m:?}");
    assert!(m.shards.iter().all(|s| s.start_s.abs() < 1e-9), "the schedules started together: {m:?}");
    assert!(merged.shard.is_none() && merged.capacity.is_some() && merged.complete);
    assert!(out.join("conclusion.txt").is_file());
    // The report of a merged run shows its shards.
    let (ok, _, err) = crate::common::goodput(&["report", out.to_str().unwrap()]);
    assert!(ok, "{err}");
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(page.contains("<h2 id=\"shards\">Shards</h2>") && page.contains("reference clock"), "no shards section");
    assert!(page.contains("<td>2/3</td>"), "shard 2/3's row");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn lost_requests_and_late_shards_are_named() {
    let dir = temp("merge-lost");
    // Shard 1 lost request 7 (and 13); shard 2's clock is 2 s off with no reference to say so.
    let ids: Vec<u64> = (0..20).filter(|id| ![7, 13].contains(id)).collect();
    let shards: Vec<PathBuf> = (0..SHARDS)
        .map(|k| write_shard(&dir.join(format!("s{k}")), k, &ids, if k == 2 { 2.0 } else { 0.0 }, false))
        .collect();
    let out = dir.join("merged");
    let (code, err) = merge(&[&shards[0], &shards[1], &shards[2]], &out);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("(shard 1/3) lost 2 requests of its slice (no shard recorded ids 7, 13)"), "{err}");
    assert!(err.contains("(shard 2/3) started its schedule 2000 ms after"), "{err}");
    let m = read_summary(&out).unwrap().merged.unwrap();
    assert_eq!(m.shards.iter().map(|s| s.lost).collect::<Vec<_>>(), [0, 2, 0]);
    assert!(!m.referenced);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_shard_sets_are_refused_by_name() {
    let dir = temp("merge-bad");
    let ids: Vec<u64> = (0..12).collect();
    let s: Vec<PathBuf> = (0..SHARDS).map(|k| write_shard(&dir.join(format!("s{k}")), k, &ids, 0.0, true)).collect();
    let again = write_shard(&dir.join("again1"), 1, &ids, 0.0, true);
    let unreferenced = write_shard(&dir.join("unref2"), 2, &ids, 0.0, false);
    let other_seed = write_shard(&dir.join("seed2"), 2, &ids, 0.0, true);
    let mut summary = read_summary(&other_seed).unwrap();
    summary.seed = 10;
    std::fs::write(other_seed.join("summary.json"), serde_json::to_vec(&summary).unwrap()).unwrap();
    let plain = dir.join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    let mut p = read_summary(&s[0]).unwrap();
    p.shard = None;
    std::fs::write(plain.join("summary.json"), serde_json::to_vec(&p).unwrap()).unwrap();
    let cases: [(Vec<&Path>, &str); 5] = [
        (vec![&s[0], &s[1]], "shard 2/3 missing"),
        (vec![&s[0], &s[1], &again, &s[2]], "shard 1/3 given twice"),
        (vec![&s[0], &s[1], &other_seed], "seed 9 against 10"),
        (vec![&s[0], &s[1], &unreferenced], "give every shard the same --clock-ref"),
        (vec![&s[0], &plain], "not a shard"),
    ];
    for (i, (dirs, says)) in cases.into_iter().enumerate() {
        let out = dir.join(format!("out{i}"));
        let (code, err) = merge(&dirs, &out);
        assert_ne!(code, 0, "{says}: merged");
        assert!(err.contains(says), "{says}: {err}");
        assert!(!out.exists(), "{says}: nothing written");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Rewrites `dir`'s records.jsonl with `edit` applied to its rows.
fn edit_records(dir: &Path, edit: impl FnOnce(&mut Vec<RecordRow>)) {
    let mut rows: Vec<RecordRow> = read_jsonl(&dir.join(RECORDS)).unwrap();
    edit(&mut rows);
    let text: String = rows.iter().map(|r| serde_json::to_string(r).unwrap() + "\n").collect();
    std::fs::write(dir.join(RECORDS), text).unwrap();
}

/// Sets `dir`'s level schedule (a shard written by a goodput that keeps it).
fn set_schedule(dir: &Path, n: u64) {
    let mut s = read_summary(dir).unwrap();
    s.levels[0].schedule = Some(n);
    std::fs::write(dir.join("summary.json"), serde_json::to_vec(&s).unwrap()).unwrap();
}

/// Shards are checked before they are trusted, and refused by name before --out is touched:
/// a record beyond the level's schedule, another shard's records, a request recorded twice,
/// a record cut from records.jsonl, impossible stamps, a records file linked to /dev/zero, and
/// an --out that is one of the shards.
#[test]
fn shards_are_checked_before_they_are_trusted() {
    let dir = temp("merge-checked");
    let ids: Vec<u64> = (0..12).collect();
    let fresh = |name: &str| -> Vec<PathBuf> {
        (0..SHARDS).map(|k| write_shard(&dir.join(format!("{name}{k}")), k, &ids, 0.0, true)).collect()
    };
    let mut cases: Vec<(Vec<PathBuf>, String)> = Vec::new();
    // One record's id made 10^12 + 1 (it falls to shard 2) where the level's schedule was 12.
    let big = fresh("big");
    big.iter().for_each(|d| set_schedule(d, 12));
    edit_records(&big[2], |rows| rows[0].record.id = 1_000_000_000_001);
    cases.push((big, "request id 1000000000001 is beyond the level's schedule of 12 requests".into()));
    // Shard 1's records replaced by shard 0's.
    let swapped = fresh("swap");
    std::fs::copy(swapped[0].join(RECORDS), swapped[1].join(RECORDS)).unwrap();
    cases.push((swapped, "falls to shard 0/3, not to this one".into()));
    // A request recorded twice by one shard (its summary counts one more, as if it had).
    let twice = fresh("twice");
    edit_records(&twice[0], |rows| {
        let r = rows.last().unwrap().clone();
        rows.push(r);
    });
    cases.push((twice, "records.jsonl holds".into()));
    // Shard 2's last record cut.
    let cut = fresh("cut");
    edit_records(&cut[2], |rows| {
        rows.pop();
    });
    cases.push((cut, "its summary counts 4 measured requests, its records.jsonl holds 3".into()));
    // A record ending at u64::MAX, and one ending before it was sent.
    let forever = fresh("forever");
    edit_records(&forever[1], |rows| rows[1].record.end = Stamp(u64::MAX));
    cases.push((forever, "outside the shard's level".into()));
    let backwards = fresh("backwards");
    edit_records(&backwards[1], |rows| rows[1].record.end = Stamp(rows[1].record.sent.0 - 1));
    cases.push((backwards, "before it was sent".into()));
    // records.jsonl a link to /dev/zero: refused at the line bound, not read until memory ends.
    let zero = fresh("zero");
    std::fs::remove_file(zero[0].join(RECORDS)).unwrap();
    std::os::unix::fs::symlink("/dev/zero", zero[0].join(RECORDS)).unwrap();
    cases.push((zero, "longer than 16 MiB".into()));
    for (i, (dirs, says)) in cases.iter().enumerate() {
        let out = dir.join(format!("out{i}"));
        let started = std::time::Instant::now();
        let (code, err) = merge(&dirs.iter().map(PathBuf::as_path).collect::<Vec<_>>(), &out);
        assert_ne!(code, 0, "{says}: merged");
        assert!(err.contains(says.as_str()), "{says}: {err}");
        assert!(!out.exists(), "{says}: nothing written");
        assert!(started.elapsed() < std::time::Duration::from_secs(20), "{says}: {:?}", started.elapsed());
    }
    // The same request id recorded by two shards: shard 0's id 3 given to shard 1 as 3 + 3·…
    // is another shard's; a copy of one of its own records under a free id is a duplicate.
    let dup = fresh("dup");
    edit_records(&dup[0], |rows| {
        let last = rows.len() - 1;
        rows[last].record.id = rows[last - 1].record.id;
    });
    let (code, err) = merge(&dup.iter().map(PathBuf::as_path).collect::<Vec<_>>(), &dir.join("out-dup"));
    assert_ne!(code, 0);
    assert!(err.contains("is recorded by") && err.contains("twice"), "{err}");
    // --out one of the shards, even with --overwrite: refused, the shard kept.
    let s = fresh("self");
    let before = std::fs::read(s[0].join(RECORDS)).unwrap();
    let mut args: Vec<&str> = vec!["merge", "--overwrite", "--out", s[0].to_str().unwrap()];
    args.extend(s.iter().map(|d| d.to_str().unwrap()));
    let (code, _, err) = goodput_code(&args);
    assert_ne!(code, 0);
    assert!(err.contains("is the shard"), "{err}");
    assert_eq!(std::fs::read(s[0].join(RECORDS)).unwrap(), before, "the shard is untouched");
    let (code, err) = merge(&s.iter().map(PathBuf::as_path).collect::<Vec<_>>(), &dir.join("out-self"));
    assert_eq!(code, 0, "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A shard that predates the level's schedule and holds one record with a huge id: the lost
/// requests are counted, not listed (no memory for a trillion ids), and the merge finishes.
#[test]
fn a_huge_id_without_a_schedule_costs_no_memory() {
    let dir = temp("merge-huge");
    let ids: Vec<u64> = (0..12).collect();
    let s: Vec<PathBuf> = (0..SHARDS).map(|k| write_shard(&dir.join(format!("s{k}")), k, &ids, 0.0, true)).collect();
    edit_records(&s[2], |rows| rows[0].record.id = 1_000_000_000_001);
    let started = std::time::Instant::now();
    let (code, err) = merge(&s.iter().map(PathBuf::as_path).collect::<Vec<_>>(), &dir.join("out"));
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("lost 333333333330 requests of its slice"), "{err}");
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    let _ = std::fs::remove_dir_all(&dir);
}
