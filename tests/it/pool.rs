//! The load generator's worker pool (`--harness-cpus` of two or more CPUs) end to end.

use crate::common::{goodput, temp};

/// `--harness-cpus 0,1`: the load generator on a pool of two pinned workers against a server,
/// an open loop and a closed loop: every request sent once, on its schedule, recorded once,
/// and the harness's CPU counted over both workers.
#[test]
fn a_pool_of_load_generator_workers_sends_every_request_once() {
    use goodput_results::files::{read_jsonl, RECORDS};
    let (_server, addr) = crate::common::serve(&[]);
    let target = format!("http://{addr}");
    for load in [["--rate", "20"], ["--concurrency", "6"]] {
        let dir = temp(&format!("pool-{}", &load[0][2..]));
        let (ok, _, err) = goodput(&[
            "run",
            "--target",
            &target,
            load[0],
            load[1],
            "--requests",
            "24",
            "--warmup",
            "3",
            "--refine",
            "0",
            "--harness-cpus",
            "0,1",
            "--out",
            dir.to_str().unwrap(),
            "-q",
        ]);
        assert!(ok, "{err}");
        let rows = read_jsonl::<goodput_results::RecordRow>(&dir.join(RECORDS)).unwrap();
        let mut ids: Vec<u64> = rows.iter().map(|r| r.record.id).collect();
        let n = ids.len();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), n, "each request recorded once");
        let measured: Vec<_> = rows.iter().filter(|r| r.phase == goodput_core::Phase::Measured).collect();
        assert_eq!(measured.len(), 24, "{load:?}");
        assert!(measured.iter().all(|r| r.record.is_ok()), "{load:?}");
        let s = goodput_results::read_summary(&dir).unwrap();
        let h = &s.levels[0].harness;
        assert_eq!(h.cpu.threads, 2, "{h:?}");
        assert!(h.cpu.harness_s > 0.0, "{h:?}");
        if load[0] == "--rate" {
            // On schedule: the open loop's send lag stays small with the sends spread.
            assert!(h.send_lag_p99_s < 0.05, "send lag p99 {} s", h.send_lag_p99_s);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
