//! A plan's answer: the written recommendation in the seeds' form and its assumptions (its
//! table and page are `goodput_report::plan`'s).

use super::search::Load;
use super::{Plan, PlanSpec, Row, Setting};

/// The load as said: `4 req/s`, `16 concurrent users`.
pub fn load_text(load: Load) -> String {
    match load {
        Load::Rate(r) => format!("{r} req/s"),
        Load::Users(u) => format!("{u} concurrent users"),
    }
}

/// The load's unit: `req/s` or `users`.
pub fn unit(load: Load) -> &'static str {
    match load {
        Load::Rate(_) => "req/s",
        Load::Users(_) => "users",
    }
}

/// How the plan picks among the rows that serve the load, in words.
pub fn criterion(rows: &[Row]) -> String {
    if rows.iter().any(|r| r.cost_per_hour.is_some()) {
        "cheapest per hour (priced GPUs first), then fewest GPUs".into()
    } else {
        "fewest GPUs, then most capacity (--price GPU=USD_PER_HOUR picks the cheapest)".into()
    }
}

/// Each GPU's best row for the load by [`best`]'s order, in the order the GPUs were given;
/// `None` for a GPU none of whose rows serves it.
pub fn best_per_gpu(rows: &[Row]) -> Vec<(&str, Option<&Row>)> {
    let mut gpus: Vec<&str> = Vec::new();
    for r in rows {
        if !gpus.contains(&r.gpu.as_str()) {
            gpus.push(&r.gpu);
        }
    }
    gpus.into_iter().map(|g| (g, best(rows.iter().filter(|r| r.gpu == g)))).collect()
}

/// A row's weights as said: `fp8`, `mxfp4 weight-only`.
pub fn dtype_text(r: &Row) -> String {
    if r.weight_only {
        format!("{} weight-only", r.dtype)
    } else {
        r.dtype.to_string()
    }
}

/// The row that serves the load at the least cost per hour (priced rows before unpriced ones),
/// then with the fewest GPUs, then with the most capacity.
pub fn best<'a>(rows: impl IntoIterator<Item = &'a Row>) -> Option<&'a Row> {
    rows.into_iter().filter(|r| r.gpus.is_some()).min_by(|a, b| {
        let key = |r: &Row| (r.cost_per_hour.unwrap_or(f64::INFINITY), r.gpus.unwrap_or(usize::MAX));
        let (ka, kb) = (key(a), key(b));
        let by_cost =
            if ka.0.is_finite() || kb.0.is_finite() { ka.0.total_cmp(&kb.0) } else { std::cmp::Ordering::Equal };
        by_cost.then(ka.1.cmp(&kb.1)).then(b.capacity.unwrap_or(0.0).total_cmp(&a.capacity.unwrap_or(0.0)))
    })
}

/// The plan of `rows` for `load`: the best row's answer in words, with its assumptions.
pub fn assemble(a: &PlanSpec, set: &Setting, load: Load, headroom: f64, rows: Vec<Row>) -> Plan {
    let slo_text: Vec<String> = set.slos.iter().map(|s| s.to_string()).collect();
    let (mean_in, mean_out) = (set.mean_in, set.mean_out);
    let answer = match best(&rows) {
        Some(r) => format!(
            "To serve {} of {} ({:.0} tokens in, {:.0} out on average) within {} you need {}× {} ({} weights, {}, {} replica{} of {} GPU{}); one replica serves {} {} within the SLOs ({}), and the next load tried breaks on {}{}; sized with {:.0} % headroom{}. Picked as {}. Error bar: {}.",
            load_text(load),
            a.scenario,
            mean_in,
            mean_out,
            slo_text.join(", "),
            r.gpus.unwrap_or(0),
            r.gpu,
            dtype_text(r),
            r.layout_label,
            r.replicas.unwrap_or(0),
            if r.replicas == Some(1) { "" } else { "s" },
            r.gpus_per_replica,
            if r.gpus_per_replica == 1 { "" } else { "s" },
            fmt_cap(r.capacity),
            unit(load),
            output_there(r),
            r.bound,
            r.step.as_ref().map_or(String::new(), |s| format!(
                "; a step there takes {:.1} ms on average: {}, so it rests on {}",
                s.mean_step_s * 1e3,
                s.text(),
                s.largest()
            )),
            headroom * 100.0,
            r.cost_per_hour.map_or(String::new(), |c| {
                let per_m = match (r.cost_per_million_output_tokens, r.cost_per_million_tokens) {
                    (Some(o), Some(all)) => {
                        format!(", ${o:.3} per million output tokens (${all:.3} per million tokens in and out) at this load")
                    }
                    _ => String::new(),
                };
                format!(", at ${c:.2}/hour{per_m}")
            }),
            criterion(&rows),
            set.error_bar,
        ),
        None => format!(
            "No configuration tried serves {} of {} with {} within {}: see why per row.",
            load_text(load),
            a.scenario,
            set.spec.name,
            slo_text.join(", ")
        ),
    };
    let precision = super::config::precision(a);
    Plan {
        model: set.spec.name.clone(),
        hf_repo: set.spec.hf_repo.clone(),
        scenario: a.scenario.clone(),
        load,
        slos: slo_text,
        dtype: a.dtype,
        kv_dtype: precision.kv,
        expert_skew: a.expert_skew,
        headroom,
        efficiencies: set.eff.clone(),
        mean_input_tokens: mean_in,
        mean_output_tokens: mean_out,
        try_dtypes: a.try_dtypes,
        criterion: criterion(&rows),
        skipped: 0,
        rows,
        answer,
        assumptions: assumptions(a, set),
    }
}

/// What every row of a plan takes as given, in words.
pub fn assumptions(a: &PlanSpec, set: &Setting) -> Vec<String> {
    let eff = &set.eff;
    let precision = super::config::precision(a);
    let mut out = vec![
        format!(
            "Step time on one GPU of the slowest pipeline stage = dense part + attention + experts, each max(bytes ÷ (bandwidth × {:.2}), FLOPs ÷ (dense peak × {:.2}; attention × {:.2})), + all-reduces (ring, link × {:.2}, {:.0} µs each) + {:.0} µs per step ({}).",
            eff.memory, eff.compute, eff.attention, eff.link, eff.allreduce_latency_s * 1e6, eff.step_overhead_s * 1e6, eff.source
        ),
        format!(
            "Weights {}, KV cache {}; {:.0} % of the GPU for the engine; activations of one {}-token step reserved; the rest is KV.{}",
            weights_text(a),
            if a.try_dtypes && a.kv_dtype.is_none() { "fp8 with fp8 weights, else bf16".to_string() } else { precision.kv.to_string() },
            a.memory_utilization * 100.0,
            a.max_num_batched_tokens,
            if a.emulate { " Weights without tensor cores on a GPU run on bf16 math (--emulate)." } else { "" }
        ),
        format!(
            "Each engine runs continuous batching with {} batched tokens, {} sequences, blocks of {} and prefix caching (goodput's scheduler, simulated with {} measured requests per level); a replica of DP attention groups × PP slots runs that many engines, the load split evenly.",
            a.max_num_batched_tokens, a.max_num_seqs, a.block_size, a.requests
        ),
        "Datasheet figures from hardware.toml (dense, no sparsity); load balanced evenly over replicas.".into(),
    ];
    if set.spec.moe.is_some() {
        out.push(format!(
            "Experts: the distinct experts a step's tokens reach are read (N·(1 − (1 − k/N)^B) under uniform routing{}), their FLOPs from the assignments, on the busiest EP rank, + {:.0} µs per MoE layer; EP/DP dispatch in FP8 and combine in bf16 over the node's links (× {:.2}) and once to each other node over the network (× {:.2}), {:.0} µs each, not overlapped with compute (SGLang's two-batch overlap would hide part).",
            if a.expert_skew > 0.0 { format!("; here popularity ∝ rank^−{}", a.expert_skew) } else { String::new() },
            eff.moe_layer_overhead_s * 1e6,
            eff.link,
            eff.internode,
            eff.all_to_all_latency_s * 1e6
        ));
    }
    if set.spec.sliding_window.is_some() || set.spec.mla.is_some() || set.spec.has_sinks() {
        out.push("Attention: sliding layers read and attend at most their window; MLA caches its latent whole on every GPU of a TP group and decodes absorbed (attending over the latent); attention sinks (one logit per head) cost nothing measurable and are left out.".into());
    }
    out
}

/// The weights' dtype as the assumptions say it: the one asked and what it covers, or the
/// recommended ones each row tries.
fn weights_text(a: &PlanSpec) -> String {
    use crate::hardware::DType;
    if a.try_dtypes {
        return "as each row says (no --dtype: a model published in mxfp4 in mxfp4, weight-only on bf16 math where the GPU has no FP4 tensor cores; the others bf16, fp8 where the GPU has fp8 tensor cores, nvfp4 on Blackwell)".into();
    }
    let covers = match a.dtype {
        DType::Fp8 => "every linear layer; embedding, LM head, norms and routers bf16",
        DType::Mxfp4 => "the routed experts at 4.25 bits with their scales, the rest bf16",
        DType::Nvfp4 => "every linear layer at 4.5 bits with their scales; embedding, LM head, norms and routers bf16",
        _ => "every weight",
    };
    format!("{} ({covers})", a.dtype)
}

/// `14.9 req/s completed × 299 tokens = 4458 output tok/s there`: the capacity's output
/// throughput as the product it is, so it can be checked against the rate and the lengths.
fn output_there(r: &Row) -> String {
    match (r.capacity_completed, r.capacity_mean_output, r.capacity_output_tps) {
        (Some(done), Some(out), Some(tps)) => {
            format!("{done:.1} req/s completed × {out:.0} output tokens = {tps:.0} output tok/s there")
        }
        (_, _, tps) => format!("{:.0} output tok/s there", tps.unwrap_or(0.0)),
    }
}

/// A capacity to three significant figures (`0.620`, `5.31`, `18.0`, `240`), one format for
/// every size; `-` for none.
pub fn fmt_cap(c: Option<f64>) -> String {
    c.map_or("-".into(), |c| match c.abs() {
        x if x >= 100.0 => format!("{c:.0}"),
        x if x >= 10.0 => format!("{c:.1}"),
        x if x >= 1.0 => format!("{c:.2}"),
        _ => format!("{c:.3}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn row(done: f64, out: f64) -> Row {
        Row {
            gpu: "h100-sxm".into(),
            tp: 1,
            layout: crate::layout::Layout { tp: 1, dp: 1, ep: 1, pp: 1 },
            layout_label: "TP1".into(),
            gpus_per_replica: 1,
            nodes: 1,
            engines_per_replica: 1,
            unfit: None,
            weight_gb_per_gpu: 16.0,
            kv_tokens: 100_000,
            kv_sequences: 200.0,
            capacity: Some(16.0),
            capacity_output_tps: Some(done * out),
            capacity_completed: Some(done),
            capacity_mean_output: Some(out),
            capacity_other: None,
            bound: "tpot_p95".into(),
            replicas: Some(1),
            gpus: Some(1),
            cost_per_hour: None,
            cost_per_million_output_tokens: None,
            cost_per_million_tokens: None,
            step: None,
            dtype: crate::hardware::DType::Bf16,
            weight_only: false,
        }
    }

    proptest! {
        /// The "16 req/s per replica (4458 output tok/s there)" for 300-token answers:
        /// the figure now comes as the product it is, and the product holds within rounding.
        #[test]
        fn the_capacity_s_output_is_its_completed_rate_times_its_length(done in 0.1f64..200.0, out in 1.0f64..4000.0) {
            let text = output_there(&row(done, out));
            let nums: Vec<f64> = text
                .split(|c: char| !(c.is_ascii_digit() || c == '.'))
                .filter(|s| !s.is_empty())
                .map(|s| s.parse().unwrap())
                .collect();
            prop_assert_eq!(nums.len(), 3, "{}", text);
            let (a, b, c) = (nums[0], nums[1], nums[2]);
            prop_assert!((a * b - c).abs() <= 0.05 * b + 0.5 * a + 1.0, "{}", text);
            prop_assert!(text.contains("req/s completed") && text.ends_with("output tok/s there"), "{}", text);
        }
    }
}
