//! Test support (feature `testing`): a run summary of two levels built from hand-made
//! records, for the tests of this crate and of the crates that read results.

use crate::level::LevelReport;
use crate::summary::*;
use crate::vllm::vllm_keys;
use crate::{CpuUse, Harness};
use goodput_core::{ClientRecord, EngineRecord, FinishReason, Outcome, RecordBuilder, Stamp, StepRecord};
use goodput_metrics::level::summarize;
use goodput_metrics::occupancy::{EngineLevel, Occupancy};
use goodput_metrics::slo::parse_slos;

pub const MS: u64 = 1_000_000;

/// A request of `n` tokens, one every 10 ms after a first token at `ttft` ms, waiting `wait` ms.
pub fn record(id: u64, ttft: u64, n: u64, wait: u64) -> ClientRecord {
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

pub fn step(at: u64, running: usize) -> StepRecord {
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

pub fn level(load: f64, records: &[ClientRecord]) -> LevelReport {
    // A maximum is judged as counted: a few records decide it (a P95 of them could not).
    let slos = parse_slos("ttft_max=100ms,error_rate=30%").unwrap();
    let measured: Vec<&ClientRecord> = records.iter().collect();
    let summary = summarize(load, &measured, &slos);
    let engine = EngineLevel::of(&[step(0, 1), step(3, load as usize)]);
    LevelReport {
        schedule: None,
        start_s: None,
        vllm: vllm_keys(&summary, Default::default()),
        aiperf: crate::aiperf::aiperf_keys(&summary),
        turns: goodput_metrics::turns::by_turn(&measured),
        sessions: goodput_metrics::sessions::summarize(&measured),
        summary,
        warmup_requests: 1,
        cooldown_requests: 0,
        occupancy: Occupancy::of(&engine, None),
        engine,
        server: None,
        harness: Harness::new(
            CpuUse { harness_s: 0.01, process_s: 1.0, wall_s: 2.0, threads: 1, busiest_s: 0.01 },
            6,
            0.0001,
            None,
            true,
        ),
        agent: None,
        rag: None,
        partial: false,
        prefix_cache: None,
        machine: None,
        steady: None,
        saturated: None,
    }
}

pub fn run_summary() -> RunSummary {
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
        slos: parse_slos("ttft_max=100ms,error_rate=30%").unwrap(),
        levels: Vec::new(),
        complete: true,
        prediction: None,
        command: Vec::new(),
        shard: None,
        start_at: None,
        clock: None,
        merged: None,
        search: None,
        soak: None,
        capacity: None,
    }
}

/// `record(id, ttft, n, wait)` of a reasoning model: its first `reasoning` tokens are
/// reasoning (streamed as reasoning chunks, counted so by usage), the answer starts after.
pub fn thinking_record(id: u64, ttft: u64, n: u64, reasoning: u64) -> ClientRecord {
    let mut r = record(id, ttft, n, 0);
    r.reasoning = goodput_core::Reasoning::prefix(&r.chunks, reasoning as usize);
    r
}

/// Two levels of a reasoning model: requests of 8 tokens, 6 of them reasoning (10 ms apart),
/// TTFT 20 ms (1 user) and 150 ms (2 users).
pub fn thinking_levels() -> RunSummary {
    let mut s = run_summary();
    for (load, ttft, ids) in [(1.0, 20, 0..5), (2.0, 150, 10..15)] {
        let records: Vec<ClientRecord> = ids.map(|i| thinking_record(i, ttft, 8, 6)).collect();
        s.push_level(level(load, &records));
    }
    s
}

/// Two levels: 1 user fast (TTFT 20 ms, no wait), 2 users slow (TTFT 150 ms, 40 ms wait).
pub fn two_levels() -> (RunSummary, Vec<(f64, Vec<ClientRecord>)>) {
    let fast: Vec<ClientRecord> = (0..5).map(|i| record(i, 20, 8, 0)).collect();
    let slow: Vec<ClientRecord> = (10..15).map(|i| record(i, 150, 8, 40)).collect();
    let mut s = run_summary();
    s.push_level(level(2.0, &slow));
    s.push_level(level(1.0, &fast));
    (s, vec![(1.0, fast), (2.0, slow)])
}
