//! The engine's benchmark and device check through their API alone, no command line: the tiny
//! model on dummy weights, a small grid benchmarked and the CPU checked against itself.

use goodput_engine::bench::{self, Attention, BenchError, BenchSpec};
use goodput_engine::check::device::{self, CheckSpec};
use goodput_engine::source::ModelSource;

fn tiny() -> ModelSource {
    ModelSource { dtype: Some("f32".into()), ..ModelSource::new("tiny") }
}

fn spec() -> BenchSpec {
    BenchSpec {
        model: tiny(),
        prompt_lens: vec![16, 64],
        batch_sizes: vec![1, 4],
        decode_context: 32,
        decode_steps: 3,
        repeats: 2,
        warmup: 1,
        block_size: 16,
        attention: Attention::Paged,
        graph_probe: false,
        step_profile: false,
        cuda_graphs: false,
        mixed_graphs: false,
        pdl: false,
        cuda_long_chunk: None,
        flash_prefill: true,
        fused_swiglu: true,
        bandwidth: false,
    }
}

#[test]
fn engine_bench_runs_through_the_library_alone() {
    let mut said = Vec::new();
    let r = bench::run(spec(), &|_, _| panic!("no catalog on the CPU"), &mut |l| said.push(l.to_string())).unwrap();
    assert_eq!((r.model.as_str(), r.dtype.as_str()), ("tiny", "F32"));
    let lens: Vec<usize> = r.prefill.iter().map(|p| p.prompt_len).collect();
    let batches: Vec<usize> = r.decode.iter().map(|d| d.batch).collect();
    assert_eq!((lens, batches), (vec![16, 64], vec![1, 4]));
    for p in &r.prefill {
        assert_eq!(p.latency_s.n, 2, "one sample per repeat");
        assert!((p.tokens_per_s - p.prompt_len as f64 / p.latency_s.p50).abs() < 1e-6 * p.tokens_per_s);
    }
    for d in &r.decode {
        assert_eq!(d.step_s.n, 2 * 3, "each repeat's timed steps");
        assert!(d.bytes_per_step >= r.weight_bytes_per_step, "a step reads every weight and its KV");
    }
    assert!(r.roofline.is_none() && r.machine_read_gbytes_per_s.is_none(), "no bandwidth asked for");
    assert!(said[0].starts_with("engine-bench: tiny on Cpu F32"), "{said:?}");
}

#[test]
fn a_benchmark_it_cannot_run_is_refused_with_its_flag() {
    let e = bench::run(BenchSpec { repeats: 0, ..spec() }, &|_, _| None, &mut |_| {}).unwrap_err();
    assert!(matches!(&e, BenchError::Invalid(m) if m.contains("--repeats")), "{e}");
    let long = BenchSpec { decode_context: 1 << 20, ..spec() };
    let e = bench::run(long, &|_, _| None, &mut |_| {}).unwrap_err();
    assert!(e.to_string().contains("context of 2048 tokens"), "{e}");
}

#[test]
fn the_device_check_of_the_cpu_against_itself_passes() {
    let spec = CheckSpec { model: tiny(), max_tokens: 4, sequences: 1, min_top1: 0.99 };
    let r = device::run(&spec, &mut |_| {}).unwrap();
    assert!(r.passed, "{r:?}");
    assert_eq!(r.greedy.len(), 4, "alone, batched, prefix hits, preemption");
    assert!(r.greedy.iter().all(|g| g.equal == g.requests && g.first_difference.is_none()));
    assert!(r.logits.iter().all(|l| l.top1_agreement == 1.0 && l.max_abs_diff == 0.0), "{:?}", r.logits);
}
