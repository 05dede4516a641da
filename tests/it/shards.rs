//! `goodput run --shard i/N`: shards of one open-loop run against one server are disjoint and
//! together the single process's run (the same ids, prompts, phases and schedule);
//! `--start-at` waits for its moment; what cannot be split is refused by name.

use crate::common::{goodput, goodput_code, temp};
use goodput_core::Phase;
use goodput_results::files::{read_jsonl, RECORDS};
use goodput_results::{read_summary, RecordRow};
use std::collections::BTreeMap;
use std::path::Path;

/// A run's records by id: (phase, input tokens, intended send after the level's first).
fn by_id(dir: &Path) -> BTreeMap<u64, (Phase, usize, f64)> {
    let rows = read_jsonl::<RecordRow>(&dir.join(RECORDS)).unwrap();
    let first = rows.iter().map(|r| r.record.intended).min().unwrap();
    rows.iter().map(|r| (r.record.id, (r.phase, r.record.input_tokens, r.record.intended.secs_since(first)))).collect()
}

#[test]
fn shards_are_disjoint_and_together_the_single_run() {
    let (_server, addr) = crate::common::serve(&[]);
    let target = format!("http://{addr}");
    let dir = temp("shards");
    let run = |out: &str, extra: &[&str]| {
        let out = dir.join(out);
        let mut args = vec!["run", "--target", &target, "--rate", "25", "--requests", "15", "--warmup", "3"];
        args.extend(["--seed", "11", "--refine", "0", "-q", "--out", out.to_str().unwrap()]);
        args.extend(extra);
        let (ok, _, err) = goodput(&args);
        assert!(ok, "{extra:?}: {err}");
        out
    };
    let single = by_id(&run("single", &[]));
    let start = humantime::format_rfc3339(std::time::SystemTime::now() + std::time::Duration::from_secs(2)).to_string();
    let s0 = run("s0", &["--shard", "0/2", "--start-at", &start]);
    let s1 = run("s1", &["--shard", "1/2"]);
    let (a, b) = (by_id(&s0), by_id(&s1));
    assert!(a.keys().all(|id| !b.contains_key(id)), "disjoint");
    let mut union: BTreeMap<u64, (Phase, usize, f64)> = a.clone();
    union.extend(b.clone());
    assert_eq!(union.keys().collect::<Vec<_>>(), single.keys().collect::<Vec<_>>(), "together the single run's ids");
    for (id, (phase, input, _)) in &union {
        assert_eq!((phase, input), (&single[id].0, &single[id].1), "request {id}: its phase and prompt");
    }
    // The one schedule: the gaps between a shard's sends are the single run's between the
    // same requests (to within the loopback's scheduling).
    let ids: Vec<&u64> = a.keys().collect();
    for w in ids.windows(2) {
        let (gap, single_gap) = (a[w[1]].2 - a[w[0]].2, single[w[1]].2 - single[w[0]].2);
        assert!((gap - single_gap).abs() < 1e-6, "ids {w:?}: {gap} s against {single_gap} s");
    }
    let summary = read_summary(&s0).unwrap();
    assert_eq!(summary.shard.map(|s| s.to_string()).as_deref(), Some("0/2"));
    let at = summary.start_at.expect("start_at");
    assert!(at.late_s < 1.0, "it waited for its moment: {at:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn what_cannot_be_split_is_refused_by_name() {
    let cases: [(&[&str], &str); 9] = [
        (&["run", "--clock-ref", "ftp://h", "--rate", "2"], "expected ntp://HOST"),
        (
            &["run", "--clock-ref", "ntp://127.0.0.1:1", "--rate", "2", "--requests", "1"],
            "--clock-ref ntp://127.0.0.1:1",
        ),
        (&["run", "--shard", "0/2", "--seed", "1", "--rate", "2,4"], "one level per process"),
        (&["run", "--repeats", "2", "--out", "x", "--start-at", "2026-01-01T00:00:00Z", "--rate", "2"], "--start-at"),
        (&["run", "--shard", "0/2", "--rate", "2"], "--seed"),
        (&["run", "--shard", "2/2", "--seed", "1", "--rate", "2"], "INDEX/COUNT"),
        (&["run", "--shard", "0/2", "--seed", "1", "--concurrency", "2"], "closed loop"),
        (&["run", "--shard", "0/2", "--seed", "1", "--rate", "2", "--scenario", "multi-turn"], "sessions"),
        (&["run", "--start-at", "tomorrow", "--rate", "2"], "RFC 3339"),
    ];
    for (args, says) in cases {
        let (code, _, err) = goodput_code(args);
        assert_ne!(code, 0, "{args:?} was taken");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// `--clock-ref ntp://…` against a real NTP server: `scripts/local-ntp.sh` (chrony on
/// loopback), then `GOODPUT_NTP=127.0.0.1:11123 cargo test --test it -- --ignored ntp`.
#[test]
#[ignore = "needs an NTP server: scripts/local-ntp.sh, then GOODPUT_NTP=127.0.0.1:11123"]
fn an_ntp_server_is_a_clock_reference() {
    let ntp = std::env::var("GOODPUT_NTP").expect("GOODPUT_NTP=HOST:PORT of an NTP server");
    let out = temp("ntp");
    let reference = format!("ntp://{ntp}");
    let args = ["run", "--rate", "4", "--requests", "3", "--warmup", "0", "--refine", "0", "-q", "--clock-ref"];
    let (ok, _, err) = goodput(&[&args[..], &[reference.as_str(), "--out", out.to_str().unwrap()]].concat());
    assert!(ok, "{err}");
    let clock = read_summary(&out).unwrap().clock.expect("the clock");
    let r = clock.reference.expect("measured against the NTP server");
    assert_eq!(r.url, reference);
    let end = r.end.expect("measured after the run too");
    for o in [r.start, end] {
        // This machine's clock is the server's: the offset is within the round trip.
        assert!(o.offset_s.abs() <= o.rtt_s.max(1e-3) && o.rtt_s < 0.1, "{o:?}");
    }
    let _ = std::fs::remove_dir_all(&out);
}
