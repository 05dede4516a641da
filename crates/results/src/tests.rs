//! Every file a run writes, written and read back through its one writer and one reader; the
//! results of the previous format read; the stored verdict against one computed afresh.

use crate::files::{read_csv, read_jsonl, read_summary, Results, RunWriter, RECORDS, REQUESTS, SERIES, STEPS};
use crate::rows::{RecordRow, RequestRow, SeriesRow, StepRow};
use crate::summary::*;
use crate::{export, CpuUse, Harness, ResultsError};
use goodput_core::{ClientRecord, EngineRecord, FinishReason, Outcome, Phase, RecordBuilder, Stamp, StepRecord};
use goodput_metrics::engine::SeriesPoint;
use goodput_metrics::level::summarize;
use goodput_metrics::occupancy::{EngineLevel, Occupancy};
use goodput_metrics::slo::parse_slos;
use std::path::{Path, PathBuf};

fn temp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("goodput-results-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

const MS: u64 = 1_000_000;

/// A request of `n` tokens, one every 10 ms after a first token at `ttft` ms, waiting `wait` ms.
fn record(id: u64, ttft: u64, n: u64, wait: u64) -> ClientRecord {
    let t0 = id * 1000 * MS;
    let times: Vec<Stamp> = (0..n).map(|i| Stamp(t0 + (ttft + 10 * i) * MS)).collect();
    let outcome = if id % 5 == 4 { Outcome::error(goodput_core::FailureKind::Http(503), "boom") } else { Outcome::Ok };
    let engine = EngineRecord {
        id,
        arrival: Stamp(t0 + MS),
        queued: Stamp(t0 + 2 * MS),
        first_scheduled: Some(Stamp(t0 + (2 + wait) * MS)),
        first_token: times.first().copied(),
        token_times: times.clone(),
        finished: *times.last().unwrap(),
        prompt_tokens: 100,
        cached_tokens: 16,
        generated_tokens: n as usize,
        preemptions: 0,
        finish_reason: FinishReason::Length,
    };
    RecordBuilder::new(id)
        .intended(Stamp(t0))
        .sent(Stamp(t0 + MS / 10))
        .end(*times.last().unwrap())
        .tokens_at(times)
        .input(100)
        .outcome(outcome)
        .engine(engine)
        .required_output(n as usize)
        .build()
}

fn step(at: u64, running: usize) -> StepRecord {
    StepRecord {
        start: Stamp(at * MS),
        end: Stamp((at + 3) * MS),
        running,
        usable_blocks: 64,
        blocks_used: running * 2,
        block_size: 16,
        ..Default::default()
    }
}

fn level(load: f64, records: &[ClientRecord]) -> LevelReport {
    let slos = parse_slos("ttft_p95=100ms,error_rate=30%").unwrap();
    let measured: Vec<&ClientRecord> = records.iter().collect();
    let summary = summarize(load, &measured, &slos);
    let engine = EngineLevel::of(&[step(0, 1), step(3, load as usize)]);
    LevelReport {
        vllm: vllm_keys(&summary, Default::default()),
        turns: goodput_metrics::turns::by_turn(&measured),
        summary,
        warmup_requests: 1,
        cooldown_requests: 0,
        occupancy: Occupancy::of(&engine, None),
        engine,
        server: None,
        harness: Harness::new(CpuUse { harness_s: 0.01, process_s: 1.0, wall_s: 2.0 }, 6, 0.0001, None, true),
        agent: None,
        rag: None,
        partial: false,
        prefix_cache: None,
    }
}

fn run_summary() -> RunSummary {
    RunSummary {
        format: FORMAT,
        goodput_version: "0.1.0".into(),
        model: "tiny".into(),
        weights: "dummy".into(),
        device: "cpu".into(),
        seed: 3,
        seed_drawn: false,
        target: "in-process".into(),
        engine: EngineSettings {
            block_size: 16,
            kv_memory_bytes: Some(1 << 30),
            max_num_batched_tokens: 2048,
            max_num_seqs: 256,
            max_model_len: 2048,
            prefix_caching: true,
            ..Default::default()
        },
        machine: Machine { cpu: "test".into(), logical_cpus: 2, memory_gib: 23.5, kernel: "6".into() },
        cpus: Pinning::default(),
        retry: RetrySetting { max: 0, backoff_s: 0.1 },
        scenario: serde_json::json!({"name": "short-qa"}),
        workload: WorkloadInfo {
            name: "short-qa".into(),
            description: "short-qa: …".into(),
            lengths: "input 50–200".into(),
        },
        load_unit: LoadUnit::Users,
        slos: parse_slos("ttft_p95=100ms,error_rate=30%").unwrap(),
        levels: Vec::new(),
        complete: true,
        prediction: None,
        command: Vec::new(),
        capacity: None,
    }
}

/// Two levels: 1 user fast (TTFT 20 ms, no wait), 2 users slow (TTFT 150 ms, 40 ms wait).
fn two_levels() -> (RunSummary, Vec<(f64, Vec<ClientRecord>)>) {
    let fast: Vec<ClientRecord> = (0..5).map(|i| record(i, 20, 8, 0)).collect();
    let slow: Vec<ClientRecord> = (10..15).map(|i| record(i, 150, 8, 40)).collect();
    let mut s = run_summary();
    s.push_level(level(2.0, &slow));
    s.push_level(level(1.0, &fast));
    (s, vec![(1.0, fast), (2.0, slow)])
}

#[test]
fn a_run_written_and_read_back_is_the_same_run() {
    let dir = temp("roundtrip");
    let (s, levels) = two_levels();
    assert_eq!(s.levels[0].summary.load, 1.0, "levels stay by load ascending");
    let (mut w, mut log) = RunWriter::create(&dir, true).unwrap();
    let steps = [step(0, 1), step(3, 2)];
    let series = goodput_metrics::engine::series(&steps, Stamp(0), 0.002);
    for (load, records) in &levels {
        for r in records {
            log.append(*load, Phase::Measured, r).unwrap();
        }
        w.append_level(*load, &steps, &series).unwrap();
    }
    log.flush().unwrap();
    w.write_summary(&s).unwrap();
    let back = Results::read(&dir).unwrap();
    assert_eq!(back.summary, s);
    let records: Vec<&ClientRecord> = back.records.iter().map(|r| &r.record).collect();
    let written: Vec<&ClientRecord> = levels.iter().flat_map(|(_, r)| r).collect();
    assert_eq!(records, written);
    assert_eq!(back.measured(2.0).count(), 5);
    let steps_back: Vec<StepRow> = read_jsonl(&dir.join(STEPS)).unwrap();
    assert_eq!(steps_back.len(), 4);
    assert_eq!(steps_back[3], StepRow { level: 2.0, step: steps[1].clone() });
    let series_back: Vec<SeriesRow> = read_csv(&dir.join(SERIES)).unwrap();
    assert_eq!(series_back.len(), 2 * series.len());
    assert_eq!(series_back[0], SeriesRow::of(1.0, &series[0]));
    let requests: Vec<RequestRow> = read_csv(&dir.join(REQUESTS)).unwrap();
    assert_eq!(requests[0], RequestRow::of(1.0, Phase::Measured, &levels[0].1[0]));
    // Hand-computed: the first request waits 1 ms of handoff, then nothing; TTFT 20 ms.
    assert!((requests[0].engine_wait_s.unwrap() - 0.001).abs() < 1e-12);
    assert!((requests[0].ttft_s.unwrap() - 0.020).abs() < 1e-12);
    assert_eq!(requests[4].outcome, "error: boom");
    assert_eq!(requests[4].failure.as_deref(), Some("http-503"));
    assert_eq!(requests[0].failure, None);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_stored_verdict_is_the_one_computed_from_the_levels() {
    let (s, _) = two_levels();
    let v = s.capacity.clone().unwrap();
    // 1 user holds (TTFT 20 ms), 2 users break it (150 ms): usable 1, limit where output peaks.
    assert_eq!(v.usable, Some(1.0));
    assert_eq!(v, RunSummary::verdict_of(&s.levels));
    // The knee on engine wait: 1 ms at 1 user, 41 ms at 2 users.
    assert_eq!(v.knee, Some(2.0));
    let conclusion = crate::Conclusion::of(&s).render();
    assert!(conclusion.contains("recommended stable load is 1 users"), "{conclusion}");
    assert!(conclusion.contains("median 41 ms of handoff and queue"), "{conclusion}");
    assert!(conclusion.contains("At 2 users the SLOs break: ttft_p95 <= 100ms"), "{conclusion}");
}

#[test]
fn a_record_cut_short_by_a_killed_run_is_left_out_and_a_broken_one_is_named() {
    let dir = temp("cut");
    let (_, mut log) = RunWriter::create(&dir, true).unwrap();
    log.append(1.0, Phase::Warmup, &record(0, 20, 4, 0)).unwrap();
    log.append(1.0, Phase::Measured, &record(1, 20, 4, 0)).unwrap();
    log.flush().unwrap();
    let path = dir.join(RECORDS);
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, &text[..text.len() - 20]).unwrap();
    let rows: Vec<RecordRow> = read_jsonl(&path).unwrap();
    assert_eq!((rows.len(), rows[0].phase), (1, Phase::Warmup));
    std::fs::write(&path, format!("{{\"level\": 1}}\n{text}")).unwrap();
    let err = read_jsonl::<RecordRow>(&path).unwrap_err();
    assert!(matches!(err, ResultsError::Json { line: Some(1), .. }), "{err}");
    assert!(err.to_string().contains("records.jsonl, line 1"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn missing_and_newer_results_are_refused_by_name() {
    let dir = temp("refuse");
    std::fs::create_dir_all(&dir).unwrap();
    let err = Results::read(&dir).unwrap_err();
    assert!(err.to_string().contains("not a goodput results directory"), "{err}");
    let mut s = run_summary();
    s.format = FORMAT + 1;
    let (w, _) = RunWriter::create(&dir, true).unwrap();
    w.write_summary(&s).unwrap();
    let err = read_summary(&dir).unwrap_err();
    assert!(err.to_string().contains("written by a newer goodput"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures").join(name)
}

#[test]
fn results_of_the_previous_release_read_with_their_verdict_computed_once() {
    for name in ["run-small", "run-v0.1"] {
        let r = Results::read(&fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        let s = &r.summary;
        assert_eq!(s.format, 1, "{name}");
        assert!(!s.levels.is_empty() && !r.records.is_empty() && !r.series.is_empty(), "{name}");
        assert_eq!(s.workload.name, "short-qa");
        assert_eq!(s.slos.len(), 4);
        assert!(s.levels.iter().all(|l| l.occupancy.is_some()), "{name}: occupancy from the engine's steps");
        assert_eq!(s.capacity, Some(RunSummary::verdict_of(&s.levels)));
        assert!(
            r.conclusion.starts_with("In the short-qa scenario"),
            "{name}: its own conclusion.txt, without its heading"
        );
        // The vLLM keys were written beside the contract's names and read back with them.
        assert!(s.levels[0].vllm.p99_ttft_ms.is_some() && s.levels[0].vllm.completed > 0);
        for l in &s.levels {
            assert_eq!(r.measured(l.summary.load).count(), l.summary.requests, "{name}");
        }
    }
}

#[test]
fn exports_hold_the_levels() {
    let dir = temp("export");
    std::fs::create_dir_all(&dir).unwrap();
    let (s, _) = two_levels();
    export::csv(&dir.join("l.csv"), &s).unwrap();
    let rows: Vec<export::LevelRow> = read_csv(&dir.join("l.csv")).unwrap();
    assert_eq!(rows, s.levels.iter().map(export::LevelRow::of).collect::<Vec<_>>());
    assert!(!rows[1].slos_hold && rows[0].slos_hold);
    let md = export::markdown_table(&s);
    assert_eq!(md.lines().count(), 4, "{md}");
    assert!(md.lines().nth(3).unwrap().ends_with("| broken |"), "{md}");
    export::json(&dir.join("s.json"), &s).unwrap();
    let back: RunSummary = serde_json::from_slice(&std::fs::read(dir.join("s.json")).unwrap()).unwrap();
    assert_eq!(back, s);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_headers_written_at_creation_are_the_rows_fields() {
    let header = |row: &dyn Fn(&mut csv::Writer<Vec<u8>>)| {
        let mut w = csv::Writer::from_writer(Vec::new());
        row(&mut w);
        String::from_utf8(w.into_inner().unwrap()).unwrap().lines().next().unwrap().to_string()
    };
    let r = RequestRow::of(1.0, Phase::Measured, &record(1, 20, 4, 0));
    assert_eq!(header(&|w| w.serialize(&r).unwrap()), crate::rows::REQUEST_COLUMNS.join(","));
    let p = SeriesRow::default();
    assert_eq!(header(&|w| w.serialize(&p).unwrap()), crate::rows::SERIES_COLUMNS.join(","));
    // A run that ends before its first request still leaves readable, empty tables.
    let dir = temp("headers");
    let _ = RunWriter::create(&dir, true).unwrap();
    assert!(read_csv::<RequestRow>(&dir.join(REQUESTS)).unwrap().is_empty());
    assert!(read_csv::<SeriesRow>(&dir.join(SERIES)).unwrap().is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn records_of_the_earliest_results_take_their_phase_from_warmup() {
    let mut v =
        serde_json::to_value(RecordRow { level: 2.0, phase: Phase::Measured, record: record(1, 20, 4, 0) }).unwrap();
    v.as_object_mut().unwrap().remove("phase");
    v["warmup"] = true.into();
    let row: RecordRow = serde_json::from_value(v.clone()).unwrap();
    assert_eq!((row.level, row.phase), (2.0, Phase::Warmup));
    v.as_object_mut().unwrap().remove("warmup");
    assert_eq!(serde_json::from_value::<RecordRow>(v).unwrap().phase, Phase::Measured);
}

#[test]
fn series_rows_keep_every_point_field() {
    let p = SeriesPoint {
        t_s: 0.25,
        steps: 3,
        running_mean: 1.5,
        running_max: 2,
        waiting_mean: 0.5,
        waiting_max: 1,
        kv_block_usage_mean: 0.1,
        kv_block_usage_max: 0.2,
        kv_token_usage_mean: 0.05,
        preemptions: 1,
        prefill_tokens: 7,
        decode_tokens: 9,
    };
    let r = SeriesRow::of(4.0, &p);
    assert_eq!((r.level, r.t_s, r.running_max, r.preemptions, r.decode_tokens), (4.0, 0.25, 2, 1, 9));
}

#[test]
fn vllm_keys_mean_what_vllm_s_mean() {
    // TTFT 1, 2, 3, 4 s: sample std 1.291 s, vLLM's population std √1.25 = 1.118 s.
    let s = goodput_metrics::level::LevelSummary {
        requests: 5,
        completed: 4,
        total_input_tokens: 40,
        total_output_tokens: 80,
        window_s: 2.0,
        ttft: goodput_metrics::Summary::of(&[1.0, 2.0, 3.0, 4.0]),
        ..Default::default()
    };
    let closed = VllmLoad {
        request_rate: Some(RequestRate::Unlimited(Inf::Inf)),
        max_concurrency: Some(4),
        burstiness: Some(1.0),
        max_output_tokens_per_s: Some(30.0),
        max_concurrent_requests: Some(3),
    };
    let k = vllm_keys(&s, closed);
    let v = serde_json::to_value(&k).unwrap();
    assert_eq!((v["request_rate"].as_str(), v["max_concurrency"].as_u64()), (Some("inf"), Some(4)));
    assert_eq!((v["completed"].as_u64(), v["failed"].as_u64(), v["duration"].as_f64()), (Some(4), Some(1), Some(2.0)));
    assert_eq!((v["total_input_tokens"].as_u64(), v["total_output_tokens"].as_u64()), (Some(40), Some(80)));
    assert!((v["std_ttft_ms"].as_f64().unwrap() - 1.25f64.sqrt() * 1e3).abs() < 1e-9, "{v}");
    assert_eq!(v["median_ttft_ms"].as_f64(), Some(2500.0));
    assert_eq!(serde_json::from_value::<VllmKeys>(v).unwrap(), k);
    let open = vllm_keys(&s, VllmLoad { request_rate: Some(RequestRate::PerSecond(2.5)), ..Default::default() });
    assert_eq!(serde_json::to_value(&open).unwrap()["request_rate"].as_f64(), Some(2.5));
}
