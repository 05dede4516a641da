//! `goodput merge` against one process: two shard processes on loopback against one
//! `goodput serve`, started together with `--start-at` and measuring their clocks against the
//! server's, merge into a run that measures what one process sends the same load measures —
//! within the run-to-run noise, the medians of three runs each (`goodput compare`'s lists).

use crate::common::{goodput, temp};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime};

#[test]
fn merged_shards_measure_what_one_process_does() {
    let _serial = crate::serial();
    let (_server, addr) = crate::common::serve(&["--no-prefix-caching"]);
    let target = format!("http://{addr}");
    let dir = temp("shards-vs-one");
    let base = |seed: &str| -> Vec<String> {
        let args = ["run", "--target", &target, "--rate", "6", "--requests", "24", "--warmup", "4", "--seed", seed];
        args.iter().chain(&["--refine", "0", "-q"]).map(|s| s.to_string()).collect()
    };
    let (mut singles, mut merged) = (Vec::new(), Vec::new());
    for rep in 0..3 {
        let seed = (20 + rep).to_string();
        let single = dir.join(format!("single{rep}"));
        let mut args = base(&seed);
        args.extend(["--out".into(), single.display().to_string()]);
        let (ok, _, err) = goodput(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(ok, "{err}");
        let start = humantime::format_rfc3339(SystemTime::now() + Duration::from_secs(2)).to_string();
        let shards: Vec<_> = (0..2)
            .map(|i| {
                let out = dir.join(format!("r{rep}-shard{i}"));
                let mut args = base(&seed);
                let extra = ["--shard", &format!("{i}/2"), "--start-at", &start, "--clock-ref", &target, "--out"];
                args.extend(extra.iter().map(|s| s.to_string()).chain([out.display().to_string()]));
                let child = Command::new(env!("CARGO_BIN_EXE_goodput"))
                    .args(&args)
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap();
                (child, out)
            })
            .collect();
        let mut dirs = Vec::new();
        for (child, out) in shards {
            let o = child.wait_with_output().unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            dirs.push(out.display().to_string());
        }
        let m = dir.join(format!("merged{rep}"));
        let mut args = vec!["merge".to_string(), "--out".into(), m.display().to_string()];
        args.extend(dirs);
        let (ok, _, err) = goodput(&args.iter().map(String::as_str).collect::<Vec<_>>());
        // A shard may start a little late on a loaded machine (named, not an error); none may
        // lose a request.
        assert!(ok && !err.contains("lost"), "{err}");
        let (one, both) = (goodput_results::read_summary(&single).unwrap(), goodput_results::read_summary(&m).unwrap());
        assert_eq!(both.levels[0].summary.requests, one.levels[0].summary.requests, "the same requests measured");
        for s in &both.merged.as_ref().unwrap().shards {
            let r = s.clock.as_ref().and_then(|c| c.reference.as_ref()).expect("measured against the server");
            assert!(r.start.offset_s.abs() <= r.start.rtt_s.max(1e-3), "one machine, one clock: {r:?}");
        }
        singles.push(single.display().to_string());
        merged.push(m.display().to_string());
    }
    let (a, b) = (singles.join(","), merged.join(","));
    let gate = "ttft_p50=+60%,e2e_p50=+40%,output_throughput=-25%,request_throughput=-15%";
    let (ok, out, err) = goodput(&["compare", &a, &b, "--fail-on", gate]);
    println!("{out}");
    assert!(ok, "the merged shards measured another run than one process:\n{out}\n{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
