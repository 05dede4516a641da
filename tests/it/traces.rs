//! Trace replay through the binary: a Mooncake trace's requests sent at its times (faster by
//! the speedup, within the window), its shared hash-id blocks met by the prefix cache; an Azure
//! CSV trace as one level per speedup; the report's offered-load chart.

use crate::common::{goodput, records, summary_of, temp};

#[test]
fn a_mooncake_trace_is_replayed_at_its_times_with_its_shared_prefixes() {
    let dir = temp("mooncake");
    std::fs::create_dir_all(&dir).unwrap();
    // Twelve requests, one every 500 ms; all share blocks 1 and 2 (32 tokens at 16 a block).
    let lines: Vec<String> = (0..12)
        .map(|i| {
            format!(
                "{{\"timestamp\": {}, \"input_length\": 48, \"output_length\": 4, \"hash_ids\": [1, 2, {}]}}",
                10_000 + 500 * i,
                100 + i
            )
        })
        .collect();
    let trace = dir.join("trace.jsonl");
    std::fs::write(&trace, lines.join("\n")).unwrap();
    let out = dir.join("run");
    let (ok, _, err) = goodput(&[
        "run",
        "--trace",
        trace.to_str().unwrap(),
        "--trace-speedup",
        "2",
        "--trace-block-size",
        "16",
        "--trace-window",
        "..4s",
        "--refine",
        "0",
        "--report",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    // The window holds the requests at 0 … 3.5 s: 8, each due at half its trace time.
    let mut recs = records(&out);
    assert_eq!(recs.len(), 8);
    recs.sort_by_key(|r| r["intended"].as_u64().unwrap());
    let t0 = recs[0]["intended"].as_u64().unwrap();
    for (i, r) in recs.iter().enumerate() {
        let due_ms = (r["intended"].as_u64().unwrap() - t0) as f64 / 1e6;
        assert!((due_ms - 250.0 * i as f64).abs() < 1.0, "request {i} due at {due_ms} ms");
        assert_eq!((r["input_tokens"].as_u64(), r["output_tokens"].as_u64()), (Some(48), Some(4)));
    }
    let s = summary_of(&out);
    let level = &s["levels"][0];
    // 8 requests over 3.5 s is 2.286 req/s at speed 1; 4.571 at speed 2.
    assert_eq!(level["summary"]["load"].as_f64(), Some(4.571));
    assert_eq!(level["request_rate"].as_f64(), Some(4.571));
    // After the first, every request finds blocks 1 and 2 in the cache: 7 × 32 of 8 × 48 tokens.
    let hits = &level["prefix_cache"];
    assert_eq!((hits["cached_tokens"].as_f64(), hits["prompt_tokens"].as_f64()), (Some(224.0), Some(384.0)), "{hits}");
    assert!(!err.contains("came from the prefix cache"), "shared blocks are the trace's own: {err}");
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(page.contains("Offered load and throughput over time"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_azure_trace_runs_a_level_per_speedup_and_bad_traces_are_named() {
    let dir = temp("azure");
    std::fs::create_dir_all(&dir).unwrap();
    let csv = dir.join("azure.csv");
    std::fs::write(
        &csv,
        "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.0000000,30,3\n2023-11-16 18:15:46.5000000,40,3\n\
         2023-11-16 18:15:47.0000000,50,3\n2023-11-16 18:15:47.5000000,60,3\n2023-11-16 18:15:48.0000000,70,3\n",
    )
    .unwrap();
    let out = dir.join("run");
    let (ok, _, err) = goodput(&[
        "run",
        "--trace",
        csv.to_str().unwrap(),
        "--trace-speedup",
        "1,4",
        "--refine",
        "0",
        "--out",
        out.to_str().unwrap(),
        "-q",
    ]);
    assert!(ok, "{err}");
    let s = summary_of(&out);
    let loads: Vec<f64> =
        s["levels"].as_array().unwrap().iter().map(|l| l["summary"]["load"].as_f64().unwrap()).collect();
    assert_eq!(loads, [2.5, 10.0], "5 requests over 2 s, at speed 1 and 4");
    let mut inputs: Vec<u64> = records(&out).iter().map(|r| r["input_tokens"].as_u64().unwrap()).collect();
    inputs.sort_unstable();
    assert_eq!(inputs, [30, 30, 40, 40, 50, 50, 60, 60, 70, 70]);
    let bad = dir.join("bad.jsonl");
    std::fs::write(&bad, "{\"timestamp\": 0, \"input_length\": 5}\n").unwrap();
    let (ok, _, err) = goodput(&["run", "--trace", bad.to_str().unwrap(), "-q"]);
    assert!(!ok && err.contains("line 1") && err.contains("output_length"), "{err}");
    let (ok, _, err) = goodput(&["run", "--trace", csv.to_str().unwrap(), "--trace-window", "5..2", "-q"]);
    assert!(!ok && err.contains("ends before it starts"), "{err}");
    let (ok, _, err) = goodput(&["run", "--trace", csv.to_str().unwrap(), "--rate", "2", "-q"]);
    assert!(!ok && err.contains("--rate"), "{err}");
    // A duration cuts the replay short and never sends beyond the trace: 1 s at speed 1
    // holds the requests at 0 and 0.5 s.
    let cut = dir.join("cut");
    let (ok, _, err) =
        goodput(&["run", "--trace", csv.to_str().unwrap(), "--duration", "1s", "--out", cut.to_str().unwrap(), "-q"]);
    assert!(ok, "{err}");
    assert_eq!(records(&cut).len(), 2);
    let (ok, _, err) = goodput(&["capacity", "--trace", csv.to_str().unwrap(), "-q"]);
    assert!(!ok && err.contains("--trace-speedup"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_synthetic_day_keeps_its_diurnal_shape_through_the_azure_reader() {
    use goodput_workload::trace::{read, TraceFormat};
    // `scripts/synthetic-day.py --mean-rate 0.1 --hours 24 --out examples/traces/synthetic-day-sample.csv`
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/traces/synthetic-day-sample.csv");
    let day = read(&path, TraceFormat::Auto).unwrap();
    assert_eq!(day.len(), 8621);
    let span = day.last().unwrap().at_s - day[0].at_s;
    assert!(span > 23.9 * 3600.0 && span < 24.0 * 3600.0, "{span}");
    let mut hourly = [0usize; 24];
    // Times are from the first request (at 8.9 s past midnight): within a second of the hour.
    for e in &day {
        hourly[((e.at_s / 3600.0) as usize).min(23)] += 1;
    }
    // The stated shape: 0.4 × the mean around 03:00, 1.6 × (and the morning bump) in the
    // afternoon; 0.1 req/s is 360 an hour on average.
    let night: usize = hourly[1..=5].iter().sum();
    let afternoon: usize = hourly[13..=17].iter().sum();
    assert!(afternoon > 3 * night, "{hourly:?}");
    assert!((150..=1000).contains(&hourly[15]) && hourly[3] < 250, "{hourly:?}");
    // Lengths within their caps, medians near the stated 1020 and 180.
    let mut ctx: Vec<usize> = day.iter().map(|e| e.input).collect();
    let mut gen: Vec<usize> = day.iter().map(|e| e.output).collect();
    ctx.sort_unstable();
    gen.sort_unstable();
    let (c, g) = (ctx[ctx.len() / 2], gen[gen.len() / 2]);
    assert!((900..1150).contains(&c) && (160..200).contains(&g), "medians {c} {g}");
    assert!(*ctx.last().unwrap() <= 8000 && *gen.last().unwrap() <= 2000);
}
