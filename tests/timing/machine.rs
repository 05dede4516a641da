//! The machine watched (issue 48): a run beside a CPU hog flags its levels and says the
//! result is not reproducible; the same run on the quiet machine flags nothing. Both hold the
//! binary's [`crate::serial`] lock, so the only other load is the hog.

use crate::common::{goodput, summary_of, temp};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// `--wide`: the table's machine column is in the wide table.
const RUN: [&str; 8] = ["run", "--concurrency", "2,4", "--requests", "80", "--seed", "5", "--wide"];

/// Runs [`RUN`] into `name`'s directory; returns the summary and stdout.
fn run(name: &str) -> (serde_json::Value, String) {
    let dir = temp(name);
    let mut args = RUN.to_vec();
    args.extend(["--out", dir.to_str().unwrap()]);
    let (ok, out, err) = goodput(&args);
    assert!(ok, "{err}");
    let s = summary_of(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    (s, out)
}

fn other_cores(s: &serde_json::Value) -> Vec<f64> {
    s["levels"].as_array().unwrap().iter().map(|l| l["machine"]["other_cores"].as_f64().unwrap()).collect()
}

#[test]
fn a_cpu_hog_beside_the_run_is_flagged() {
    let _serial = crate::serial();
    let stop = Arc::new(AtomicBool::new(false));
    let hog = {
        let stop = stop.clone();
        // A busy loop for the whole run (at most 120 s): a core's worth of other work.
        std::thread::spawn(move || {
            let t = std::time::Instant::now();
            let mut x = 0u64;
            while !stop.load(Ordering::Relaxed) && t.elapsed().as_secs() < 120 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(1));
            }
        })
    };
    let (s, out) = run("hog");
    stop.store(true, Ordering::Relaxed);
    hog.join().unwrap();
    let cores = other_cores(&s);
    // The hog is a whole core; the bar is a quarter of one.
    assert!(cores.iter().all(|&c| c >= 0.5), "{cores:?}");
    assert!(out.contains("the machine was busy during 2 of 2 levels"), "{out}");
    assert!(out.contains("not reproducible"), "{out}");
    assert!(out.contains("busy ("), "the table's machine column: {out}");
}

/// Cores other processes kept busy over `secs` seconds now (this process is idle meanwhile).
fn others_now(secs: f64) -> f64 {
    use goodput_metrics::machine::CpuCounters;
    let read = || CpuCounters::parse_stat(&std::fs::read_to_string("/proc/stat").unwrap()).unwrap();
    let (a, t) = (read(), std::time::Instant::now());
    std::thread::sleep(std::time::Duration::from_secs_f64(secs));
    let b = read();
    // USER_HZ is 100 on every Linux this runs on.
    (b.0 - a.0) as f64 / 100.0 / t.elapsed().as_secs_f64()
}

#[test]
fn a_quiet_machine_flags_nothing() {
    let _serial = crate::serial();
    // A machine busy before the run cannot show a quiet run: said, not judged.
    let before = others_now(2.0);
    if before >= goodput_metrics::machine::BUSY_OTHER_CORES {
        eprintln!("the machine was busy before the run ({before:.2} cores): the quiet case is not judged");
        return;
    }
    let (s, out) = run("quiet");
    let cores = other_cores(&s);
    assert!(cores.iter().all(|&c| c < goodput_metrics::machine::BUSY_OTHER_CORES), "{cores:?}");
    assert!(!out.contains("the machine was busy"), "{out}");
    assert!(!out.contains("busy ("), "{out}");
}
