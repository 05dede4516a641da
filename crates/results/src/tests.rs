//! Every file a run writes, written and read back through its one writer and one reader; the
//! results of the previous format read; the stored verdict against one computed afresh.

use crate::files::{read_csv, read_jsonl, read_summary, Results, RunWriter, RECORDS, REQUESTS, SERIES, STEPS};
use crate::rows::{RecordRow, RequestRow, SeriesRow, StepRow};
use crate::summary::*;
use crate::testing::{record, run_summary, step, two_levels};
use crate::vllm::*;
use crate::ResultsError;
use goodput_core::{ClientRecord, Phase, Stamp};
use goodput_metrics::engine::SeriesPoint;
use std::path::{Path, PathBuf};

fn temp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("goodput-results-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
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

#[test]
fn aiperf_keys_name_the_contract_s_figures_in_aiperf_s_units() {
    let s = crate::testing::thinking_levels();
    let v = serde_json::to_value(&s.levels[0]).unwrap();
    let a = &v["aiperf"];
    // Hand-computed (testing::thinking_levels, 1 user): 4 completed requests of 8 tokens, TTFT
    // 20 ms, answer after 6 reasoning tokens 10 ms apart, tokens every 10 ms.
    assert_eq!(a["time_to_first_token"]["unit"], "ms");
    assert_eq!(a["time_to_first_token"]["p50"].as_f64().map(f64::round), Some(20.0));
    assert_eq!(a["time_to_first_output_token"]["avg"].as_f64().map(f64::round), Some(80.0));
    assert_eq!(a["inter_token_latency"]["p99"].as_f64().map(f64::round), Some(10.0));
    assert_eq!(a["request_latency"]["max"].as_f64().map(f64::round), Some(90.0));
    assert_eq!(
        (a["reasoning_token_count"]["unit"].as_str(), a["reasoning_token_count"]["avg"].as_f64()),
        (Some("tokens"), Some(6.0))
    );
    assert_eq!(a["reasoning_token_count"]["std"].as_f64(), Some(0.0));
    // Without reasoning: no time to first output token, no reasoning count.
    let plain = serde_json::to_value(&crate::testing::two_levels().0.levels[0]).unwrap();
    assert!(
        plain["aiperf"].get("time_to_first_output_token").is_none()
            && plain["aiperf"].get("reasoning_token_count").is_none()
    );
    assert!(plain["aiperf"]["time_to_first_token"].is_object());
}
