//! The engine thread through its handle: token streams with stamps, abort, a client that goes
//! away, shutdown with and without draining, refusals, and step records.

use candle_core::{DType, Device};
use goodput_core::{Catalog, Clock, FinishReason, SamplingParams};
use goodput_engine::weights::DummySource;
use goodput_engine::{Engine, EngineConfig, EngineHandle, Llama, RequestEvent};
use std::time::{Duration, Instant};

fn engine(steps: Option<flume::Sender<goodput_core::StepRecord>>) -> Engine {
    let spec = Catalog::builtin().get("tiny").unwrap().clone();
    let mut src = DummySource { seed: 3, dtype: DType::F32, device: Device::Cpu };
    let model = Llama::load(&spec, &mut src, 512, &Device::Cpu, DType::F32).unwrap();
    let cfg = EngineConfig { num_blocks: Some(64), block_size: 16, max_model_len: Some(512), ..Default::default() };
    Engine::start(model, cfg, Clock::new(), steps).unwrap()
}

fn prompt(n: usize) -> Vec<u32> {
    (0..n as u32).map(|i| 3 + i % 250).collect()
}

/// Waits (bounded) until the engine holds no request and no block.
fn wait_idle(h: &EngineHandle) {
    let t = Instant::now();
    loop {
        let s = h.stats().unwrap();
        if s.running == 0 && s.waiting == 0 && s.blocks_used == 0 && s.streams == 0 {
            return;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "engine not idle: {s:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn tokens_stream_in_order_with_their_stamps_then_the_record() {
    let (tx, rx) = flume::unbounded();
    let e = engine(Some(tx));
    let h = e.handle();
    let stream = h.submit(prompt(40), SamplingParams::greedy_exact(6)).unwrap();
    let mut times = Vec::new();
    let mut tokens = Vec::new();
    let (record, all) = loop {
        match stream.events.recv_timeout(Duration::from_secs(10)).unwrap() {
            RequestEvent::Token { token, index, time } => {
                assert_eq!(index, tokens.len());
                tokens.push(token);
                times.push(time);
            }
            RequestEvent::Finished { record, tokens } => break (record, tokens),
            RequestEvent::Error(e) => panic!("{e}"),
        }
    };
    assert_eq!(all, tokens);
    assert_eq!(record.token_times, times);
    assert_eq!(record.finish_reason, FinishReason::Length);
    assert!(record.arrival <= record.queued);
    assert!(record.queued <= record.first_scheduled.unwrap());
    assert!(record.first_scheduled.unwrap() <= record.first_token.unwrap());
    assert!(times.windows(2).all(|w| w[0] < w[1]));
    let steps: Vec<_> = rx.try_iter().collect();
    assert_eq!(steps.len(), 6, "one prefill step and five decode steps");
    assert_eq!(steps[0].prefill_tokens, 40);
    assert!(steps[1..].iter().all(|s| s.decode_seqs == 1 && s.prefill_tokens == 0));
    wait_idle(&h);
    e.shutdown(true);
}

#[test]
fn abort_and_a_vanished_client_free_their_blocks_at_once() {
    let e = engine(None);
    let h = e.handle();
    let a = h.submit(prompt(100), SamplingParams::greedy_exact(400)).unwrap();
    // Distinct tokens: no prefix-cache sharing with `a`, so each holds its own blocks.
    let b_prompt: Vec<u32> = prompt(90).iter().map(|t| t + 300).collect();
    let b = h.submit(b_prompt, SamplingParams::greedy_exact(400)).unwrap();
    // Both are running once each has a token.
    assert!(matches!(a.events.recv().unwrap(), RequestEvent::Token { .. }));
    assert!(matches!(b.events.recv().unwrap(), RequestEvent::Token { .. }));
    assert!(h.stats().unwrap().blocks_used >= 13);
    h.abort(a.id);
    let record = loop {
        if let RequestEvent::Finished { record, .. } = a.events.recv().unwrap() {
            break record;
        }
    };
    assert_eq!(record.finish_reason, FinishReason::Abort);
    assert!(record.generated_tokens < 400);
    drop(b); // the client went away
    wait_idle(&h);
}

#[test]
fn shutdown_drains_or_aborts() {
    let e = engine(None);
    let s = e.handle().submit(prompt(10), SamplingParams::greedy_exact(20)).unwrap();
    e.shutdown(true);
    let (r, toks) = s.wait().unwrap();
    assert_eq!((r.finish_reason, toks.len()), (FinishReason::Length, 20));

    let e = engine(None);
    let h = e.handle();
    let s = h.submit(prompt(10), SamplingParams::greedy_exact(450)).unwrap();
    assert!(matches!(s.events.recv().unwrap(), RequestEvent::Token { .. }));
    e.shutdown(false);
    let (r, _) = s.wait().unwrap();
    assert_eq!(r.finish_reason, FinishReason::Abort);
    assert!(h.submit(prompt(3), SamplingParams::greedy_exact(1)).is_err(), "a stopped engine refuses work");
}

#[test]
fn bad_requests_are_refused_with_a_reason() {
    let e = engine(None);
    let h = e.handle();
    let err = |p: Vec<u32>, n: usize| h.submit(p, SamplingParams::greedy_exact(n)).err().unwrap().to_string();
    assert!(err(prompt(600), 1).contains("context is 512"));
    assert!(err(prompt(500), 20).contains("exceeds the model's context"));
    assert!(err(vec![], 1).contains("empty"));
    assert!(err(prompt(3), 0).contains("max_tokens"));
    assert!(err(vec![40000], 1).contains("outside the vocabulary"));
    // 63 usable blocks of 16 tokens = 1008 slots, but the context is 512: fits; a tighter pool:
    let spec = Catalog::builtin().get("tiny").unwrap().clone();
    let mut src = DummySource { seed: 3, dtype: DType::F32, device: Device::Cpu };
    let model = Llama::load(&spec, &mut src, 512, &Device::Cpu, DType::F32).unwrap();
    let cfg = EngineConfig { num_blocks: Some(4), block_size: 16, max_model_len: Some(512), ..Default::default() };
    let small = Engine::start(model, cfg, Clock::new(), None).unwrap();
    let e2 = small.handle().submit(prompt(40), SamplingParams::greedy_exact(20)).err().unwrap().to_string();
    assert!(e2.contains("KV blocks") && e2.contains("--kv-blocks"), "{e2}");
}

#[test]
fn many_concurrent_requests_all_finish_and_free_everything() {
    let e = engine(None);
    let h = e.handle();
    let streams: Vec<_> =
        (0..24).map(|i| h.submit(prompt(5 + i * 3), SamplingParams::greedy_exact(3 + i % 7)).unwrap()).collect();
    for (i, s) in streams.into_iter().enumerate() {
        let (r, toks) = s.wait().unwrap();
        assert_eq!(toks.len(), 3 + i % 7);
        assert_eq!(r.prompt_tokens, 5 + i * 3);
    }
    wait_idle(&h);
}

#[test]
fn a_stream_dropped_while_queued_is_aborted_before_it_runs() {
    // One sequence at a time: the second request waits behind the first.
    let spec = Catalog::builtin().get("tiny").unwrap().clone();
    let mut src = DummySource { seed: 3, dtype: DType::F32, device: Device::Cpu };
    let model = Llama::load(&spec, &mut src, 512, &Device::Cpu, DType::F32).unwrap();
    let cfg = EngineConfig { num_blocks: Some(64), max_num_seqs: 1, max_model_len: Some(512), ..Default::default() };
    let e = Engine::start(model, cfg, Clock::new(), None).unwrap();
    let h = e.handle();
    let first = h.submit(prompt(20), SamplingParams::greedy_exact(200)).unwrap();
    assert!(matches!(first.events.recv().unwrap(), RequestEvent::Token { .. }));
    let queued = h.submit(prompt(30), SamplingParams::greedy_exact(5)).unwrap();
    let t = Instant::now();
    while h.stats().unwrap().waiting == 0 {
        assert!(t.elapsed() < Duration::from_secs(5));
        std::thread::sleep(Duration::from_millis(1));
    }
    drop(queued);
    let t = Instant::now();
    loop {
        let s = h.stats().unwrap();
        if s.waiting == 0 {
            assert_eq!(s.running, 1, "the first request still runs");
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(5), "the dropped request was not aborted: {s:?}");
        std::thread::sleep(Duration::from_millis(1));
    }
    drop(first);
    wait_idle(&h);
}

#[test]
fn the_target_refuses_an_absurd_max_tokens_without_panicking() {
    use goodput_core::{Outcome, Target, WorkRequest};
    let e = engine(None);
    let h = e.handle();
    let req = WorkRequest { session: None, id: 1, prompt: prompt(4), params: SamplingParams::greedy_exact(usize::MAX) };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let rec = rt.block_on(h.run(req, h.clock().now()));
    assert!(
        matches!(&rec.outcome, Outcome::Refused(f) if f.message.contains("exceeds the model's context")),
        "{:?}",
        rec.outcome
    );
}

/// The CPUs allowed to every thread of this process whose name starts with `prefix`.
fn threads_cpus(prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim().starts_with(prefix) {
            let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
            let line = status.lines().find(|l| l.starts_with("Cpus_allowed_list:")).unwrap_or_default();
            out.push(line.trim_start_matches("Cpus_allowed_list:").trim().to_string());
        }
    }
    out
}

#[test]
fn a_pinned_engine_runs_its_threads_on_its_cpus_and_gives_the_same_tokens() {
    let cpu = goodput_engine::affinity::allowed()[0];
    let spec = Catalog::builtin().get("tiny").unwrap().clone();
    let mut src = DummySource { seed: 3, dtype: DType::F32, device: Device::Cpu };
    let model = Llama::load(&spec, &mut src, 512, &Device::Cpu, DType::F32).unwrap();
    let cfg =
        EngineConfig { num_blocks: Some(64), max_model_len: Some(512), cpus: Some(vec![cpu]), ..Default::default() };
    let pinned = Engine::start(model, cfg, Clock::new(), None).unwrap();
    let free = engine(None);
    let run = |h: &EngineHandle| -> Vec<u32> {
        let s = h.submit(prompt(50), SamplingParams::greedy_exact(8)).unwrap();
        let mut out = Vec::new();
        while let Ok(ev) = s.events.recv() {
            match ev {
                RequestEvent::Token { token, .. } => out.push(token),
                RequestEvent::Finished { .. } => break,
                RequestEvent::Error(e) => panic!("{e}"),
            }
        }
        out
    };
    assert_eq!(run(&pinned.handle()), run(&free.handle()));
    let compute = threads_cpus("goodput-compute");
    assert!(!compute.is_empty(), "the pinned engine's compute pool exists");
    assert!(compute.iter().all(|c| *c == cpu.to_string()), "{compute:?}");
    let engine_threads = threads_cpus("goodput-engine");
    assert!(engine_threads.contains(&cpu.to_string()), "{engine_threads:?}");
    pinned.shutdown(false);
    free.shutdown(false);
}
