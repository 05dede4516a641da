//! The planner through its API alone, no command line: a spec built by hand, planned for a
//! rate on two GPUs, the answer checked against its own rows; a curve of the same; and specs
//! the planner refuses, each by what failed.

use goodput_sizing::hardware::DType;
use goodput_sizing::plan::{plan, Answer, Ep, Load, Mode, PlanError, PlanSpec, Said};

/// `llama-3.1-8b` at 2 req/s of short questions on an H100 and an L40S, TP 1 and 2.
fn spec() -> PlanSpec {
    PlanSpec {
        model: "llama-3.1-8b".into(),
        catalog: None,
        scenario: "short-qa".into(),
        lengths: None,
        slo: "ttft_p95=1s,tpot_p95=50ms,e2e_p95=30s,error_rate=1%".into(),
        gpus: vec!["h100-sxm".into(), "l40s".into()],
        tp: vec![1, 2],
        dp_attention: vec![1],
        ep: vec![Ep::Ways(1)],
        pp: vec![1],
        nodes: 1,
        dtype: DType::Bf16,
        try_dtypes: false,
        every_layout: true,
        kv_dtype: None,
        emulate: false,
        expert_skew: 0.0,
        price: vec!["h100-sxm=3.0".into(), "l40s=1.0".into()],
        calibrate: None,
        hardware: None,
        memory_utilization: 0.9,
        max_num_batched_tokens: 8192,
        max_num_seqs: 256,
        block_size: 16,
        extra_reserve: 0,
        requests: 60,
        seed: 0,
        mode: Mode::Capacity { load: Load::of(Some(2.0), None).unwrap(), headroom: 0.2 },
    }
}

#[test]
fn a_plan_runs_through_the_library_alone_and_its_answer_is_its_best_row() {
    let mut steps = Vec::new();
    let answer = plan(&spec(), &mut |s| {
        if let Said::Step(s) = s {
            steps.push(s.to_string());
        }
    })
    .unwrap();
    let Answer::Plan(p) = answer else { panic!("a rate plans GPUs per model") };
    assert_eq!(
        steps,
        ["plan: up to 4 configurations on 2 GPUs"],
        "one step for the GPUs × layouts simulated side by side"
    );
    assert_eq!(p.rows.len(), 4);
    assert_eq!(p.model, "llama-3.1-8b");
    // Every row that serves the load has replicas for 2 req/s × 1.2 headroom over its capacity.
    for r in p.rows.iter().filter(|r| r.gpus.is_some()) {
        let (cap, replicas) = (r.capacity.unwrap(), r.replicas.unwrap());
        assert!(replicas as f64 * cap >= 2.0 * 1.2 - 1e-9, "{r:?}");
        assert!((replicas - 1) as f64 * cap < 2.0 * 1.2, "the fewest replicas: {r:?}");
        assert!(r.cost_per_hour.is_some(), "both GPUs are priced");
    }
    // The answer names the cheapest row that serves the load.
    let best = p
        .rows
        .iter()
        .filter(|r| r.gpus.is_some())
        .min_by(|a, b| a.cost_per_hour.unwrap().total_cmp(&b.cost_per_hour.unwrap()))
        .unwrap();
    assert!(p.answer.starts_with("To serve 2 req/s of short-qa"), "{}", p.answer);
    let named = format!("{}× {} ({} weights, {},", best.gpus.unwrap(), best.gpu, best.dtype, best.layout_label);
    assert!(p.answer.contains(&named), "{named} in {}", p.answer);
    assert!(p.answer.contains("Picked as cheapest per hour"), "the criterion said: {}", p.answer);
    assert!(!p.assumptions.is_empty());
}

#[test]
fn the_curve_marks_a_frontier_among_its_points() {
    let s = PlanSpec { mode: Mode::Curve, gpus: vec!["h100-sxm".into()], tp: vec![1], ..spec() };
    let Answer::Curve(c) = plan(&s, &mut |_| {}).unwrap() else { panic!("--curve draws the curve") };
    assert!(c.points.len() >= 4, "concurrency doubles up to the engine's cap");
    assert!(c.points.iter().any(|p| p.frontier));
    let users: Vec<usize> = c.points.iter().map(|p| p.users).collect();
    assert!(users.windows(2).all(|w| w[1] == 2 * w[0]), "{users:?}");
}

#[test]
fn a_spec_out_of_bounds_is_refused_by_its_flag() {
    let e = plan(&PlanSpec { tp: vec![0], ..spec() }, &mut |_| {}).unwrap_err();
    assert!(matches!(&e, PlanError::Spec(m) if m.contains("--tp")), "{e}");
    // What failed is the error's variant: a caller matches on it.
    let e = plan(&PlanSpec { model: "no-such-model".into(), ..spec() }, &mut |_| {}).unwrap_err();
    assert!(matches!(e, PlanError::Catalog(_)), "{e}");
    let e = plan(&PlanSpec { gpus: vec!["no-such-gpu".into()], ..spec() }, &mut |_| {}).unwrap_err();
    assert!(matches!(e, PlanError::Hardware(_)), "{e}");
    let e = plan(&PlanSpec { slo: "ttft_p95".into(), ..spec() }, &mut |_| {}).unwrap_err();
    assert!(matches!(e, PlanError::Slo(_)), "{e}");
    let e = Load::of(None, None).unwrap_err().to_string();
    assert!(e.contains("--rate") && e.contains("--users"), "{e}");
    assert!(Load::of(Some(2.0), Some(3)).is_err() && Load::of(Some(f64::NAN), None).is_err());
    let e = plan(&PlanSpec { mode: Mode::Capacity { load: Load::Rate(1.0), headroom: 11.0 }, ..spec() }, &mut |_| {});
    assert!(e.unwrap_err().to_string().contains("--headroom"));
}
