//! A whole sweep through the library's API alone, no command line: the spec built by hand
//! (the tiny model on dummy weights, in-process, two closed-loop levels), run with a
//! progress view that records its events, and the outcome checked against the files written.

use goodput_bench::profile::{profile, ProfileSpec, ProfilingError};
use goodput_bench::progress::Progress;
use goodput_bench::run::live::Live;
use goodput_bench::run::spec::TargetSpec;
use goodput_bench::run::spec::{LevelSpec, OutDir, Outputs, Pacing, PerLevel, RefineKind, Simulation, Span, SpecError};
use goodput_bench::run::{run, RunError, EXIT_INTERRUPTED, EXIT_OK};
use goodput_bench::workload::{build_workload, ScenarioError};
use goodput_bench::RunSpec;
use goodput_engine::source::{EngineOptions, ModelSource};
use goodput_metrics::slo::parse_slos;
use goodput_results::LoadUnit;
use goodput_workload::{Arrival, RetryPolicy, Stop};
use std::cell::RefCell;
use std::path::Path;
use std::time::Duration;

/// Every event the sweep sent, in order.
#[derive(Default)]
struct Recorded(RefCell<Vec<String>>);

impl Progress for Recorded {
    fn line(&self, line: &str, warning: bool) {
        self.0.borrow_mut().push(format!("{}: {line}", if warning { "warning" } else { "line" }));
    }
    fn levels(&self, total: usize) {
        self.0.borrow_mut().push(format!("levels {total}"));
    }
    fn level_started(&self, label: &str, live: Option<&Live>) {
        self.0.borrow_mut().push(format!("start {label} live={}", live.is_some()));
    }
    fn draws_live(&self) -> bool {
        false
    }
    fn level_finished(&self) {
        self.0.borrow_mut().push("finished".into());
    }
    fn finish(&self) {
        self.0.borrow_mut().push("end".into());
    }
}

/// `users` closed-loop levels of `requests` measured requests each, on the tiny model's
/// dummy weights in this process, written to `out`.
fn spec(users: &[usize], requests: usize, out: &Path) -> RunSpec {
    let model_args = ModelSource { dtype: Some("f32".into()), ..ModelSource::new("tiny") };
    let engine = EngineOptions {
        kv_blocks: None,
        kv_memory: Some(64 << 20),
        block_size: 16,
        max_num_batched_tokens: 512,
        max_prefill_tokens: None,
        max_num_seqs: 16,
        max_model_len: Some(512),
        prefix_caching: true,
        cuda_graphs: false,
        mixed_graphs: false,
        flash_prefill: false,
        pdl: false,
        step_delay: Duration::ZERO,
    };
    let model = model_args.spec().unwrap();
    let max_len = 512;
    let levels = users
        .iter()
        .map(|&u| {
            let arrival = Arrival::Closed { users: u, think: Duration::ZERO };
            LevelSpec { load: arrival.load(), arrival, duration: None }
        })
        .collect();
    RunSpec {
        slos: parse_slos("ttft_p95=10s,error_rate=1%").unwrap(),
        model,
        target: TargetSpec::InProcess { engine: engine.config().unwrap(), simulation: None },
        model_args,
        engine,
        max_len,
        workload: build_workload("short-qa", None, None, None, false, max_len).unwrap(),
        unit: LoadUnit::Users,
        levels,
        rate_multiples: None,
        refine: RefineKind::None,
        refine_levels: 0,
        search: None,
        stop_at_first_failure: false,
        soak: None,
        shard: None,
        start_at: None,
        clock_ref: None,
        per_level: PerLevel {
            requests: Some(requests),
            min_requests: 1,
            warmup: Some(Span::Count(1)),
            cooldown: Span::Count(0),
        },
        pacing: Pacing { max_in_flight: None, ramp: Some(Duration::ZERO), think_jitter: 0.0 },
        retry: RetryPolicy::default(),
        timeout: Duration::from_secs(60),
        engine_cpus: None,
        harness_cpus: None,
        scrape_interval: Duration::from_secs(1),
        series_interval: Duration::from_secs(1),
        seed: 7,
        seed_drawn: false,
        outputs: Outputs {
            out: Some(OutDir { dir: out.to_path_buf(), overwrite: false, report: false }),
            export_json: None,
            export_csv: None,
            export_markdown: None,
            command: Some(vec!["embedded".into()]),
            scenario_toml: None,
            metrics: None,
        },
        quiet: true,
        explain: false,
    }
}

fn out_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("goodput-bench-api-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn a_sweep_runs_through_the_library_alone() {
    let dir = out_dir("sweep");
    let events = Recorded::default();
    let o = run(&spec(&[1, 2], 6, &dir), Stop::default(), &events).unwrap();
    assert_eq!((o.exit, o.errors.len()), (EXIT_OK, 0), "{:?}", o.errors);
    let loads: Vec<f64> = o.summary.levels.iter().map(|l| l.summary.load).collect();
    assert_eq!(loads, [1.0, 2.0]);
    for l in &o.summary.levels {
        assert_eq!((l.summary.requests, l.summary.completed), (6, 6), "every measured request completed");
        assert!(l.engine.steps > 0 && l.engine.kv_block_usage_max > 0.0, "the engine layer is measured");
    }
    assert!(o.summary.complete && o.summary.command == ["embedded"]);
    // What the outcome says is what the files hold.
    assert_eq!(o.dir.as_deref(), Some(dir.as_path()));
    let read = goodput_results::Results::read(&dir).unwrap();
    assert_eq!(read.summary.levels.len(), 2);
    assert_eq!(read.summary.verdict().usable, o.summary.verdict().usable);
    let conclusion = std::fs::read_to_string(dir.join(goodput_results::files::CONCLUSION)).unwrap();
    assert_eq!(conclusion.trim_end(), o.conclusion.trim_end());
    // The view heard the levels start and end, in order, and the sweep's end.
    let ev = events.0.borrow();
    let kinds: Vec<&str> =
        ev.iter().filter(|e| !e.starts_with("line") && !e.starts_with("warning")).map(String::as_str).collect();
    assert_eq!(
        kinds,
        ["levels 2", "start 1 users live=false", "finished", "start 2 users live=false", "finished", "end"]
    );
    assert!(ev.iter().any(|e| e.starts_with("line: goodput run: tiny on cpu")), "{ev:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_stop_raised_before_the_first_level_ends_the_run_as_interrupted() {
    let dir = out_dir("stopped");
    let stop = Stop::default();
    stop.raise();
    let o = run(&spec(&[1], 2, &dir), stop, &Recorded::default()).unwrap();
    assert_eq!(o.exit, EXIT_INTERRUPTED);
    assert!(o.summary.levels.is_empty() && !o.summary.complete);
    assert!(o.errors[0].contains("interrupted"), "{:?}", o.errors);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// What the library refuses, it refuses with a typed error a program can match on, and
/// loses nothing on the way.
#[test]
fn refusals_are_typed_errors() {
    let zero = LevelSpec::users(&[2, 0], Duration::ZERO, None);
    assert!(matches!(zero, Err(SpecError::ZeroUsers(ref u)) if u == &[2, 0]), "{zero:?}");
    let closed = LevelSpec::users(&[2], Duration::ZERO, None).unwrap();
    let capped = Pacing::checked(Some(4), Some(1.0), None, 0.0, Duration::ZERO, &closed);
    assert!(matches!(capped, Err(SpecError::InFlightClosed(4))), "{capped:?}");
    let entry = goodput_workload::trace::TraceEntry {
        at_s: 0.0,
        input: 8,
        output: 4,
        hash_ids: Vec::new(),
        session: None,
        delay_s: None,
        parent: None,
        text: None,
    };
    let options = goodput_workload::TraceOptions { window: (0.0, None), block_size: 16 };
    let trace = goodput_workload::Trace::new("t".into(), vec![entry], options, 512, 1).unwrap();
    let slow = LevelSpec::trace(&trace, &[1.0, 0.0], None);
    assert!(matches!(slow, Err(SpecError::Speedups(ref s)) if s == &[1.0, 0.0]), "{slow:?}");
    let open_rag = build_workload("rag", None, None, None, true, 512);
    assert!(matches!(open_rag, Err(ScenarioError::ClosedLoop { units: "RAG queries", .. })), "{:?}", open_rag.err());

    // A run into a directory that holds a file no run writes: refused, the file kept.
    let dir = out_dir("foreign");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("notes.txt"), "mine").unwrap();
    let Err(e) = run(&spec(&[1], 2, &dir), Stop::default(), &Recorded::default()) else { panic!("ran") };
    assert!(matches!(e, RunError::Results(goodput_results::ResultsError::NotEmpty { .. })), "{e:?}");
    assert_eq!(std::fs::read_to_string(dir.join("notes.txt")).unwrap(), "mine");
    std::fs::remove_dir_all(&dir).unwrap();

    // A simulation of a profile that is not there.
    let mut s = spec(&[1], 2, &out_dir("simulated"));
    let engine = s.engine.config().unwrap();
    s.target = TargetSpec::InProcess { engine, simulation: Some(Simulation::Simulate("no-such-profile.json".into())) };
    let Err(e) = run(&s, Stop::default(), &Recorded::default()) else { panic!("ran") };
    assert!(matches!(e, RunError::Profile(_)), "{e:?}");

    // Profiling: too many resamples; steps priced from a file that is not there.
    let base = spec(&[1], 1, &out_dir("profile"));
    let mut p = ProfileSpec {
        model: base.model_args,
        engine: base.engine,
        engine_cpus: None,
        harness_cpus: None,
        out: out_dir("profile").join("profile.json"),
        from: None,
        from_steps: Vec::new(),
        from_bench: Vec::new(),
        time: Duration::from_secs(1),
        baseline: None,
        bootstrap: 20_000,
        seed: 1,
        save_steps: None,
        roofline: false,
        price_with: None,
        context_term: "table".into(),
        rows_term: "linear".into(),
    };
    assert!(matches!(profile(&p, &Recorded::default()), Err(ProfilingError::Bootstrap(20_000))));
    p.bootstrap = 10;
    p.from_steps = vec!["no-such-steps.jsonl".into()];
    let e = profile(&p, &Recorded::default()).unwrap_err();
    assert!(matches!(e, ProfilingError::NoFile { ref path } if path.ends_with("no-such-steps.jsonl")), "{e:?}");
}
