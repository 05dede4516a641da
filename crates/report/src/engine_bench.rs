//! engine-bench's console output (`goodput_engine::bench` measures it): the prefill and decode tables against the roofline, the
//! graph probe, the matmul tuning table and the per-op step profiles.

use crate::console as table;
use goodput_engine::bench::Report;
use goodput_metrics::Summary;
use std::fmt::Write;

/// A line into the text (writing into a `String` cannot fail).
macro_rules! line {
    ($o:expr, $($t:tt)*) => {{
        let _ = writeln!($o, $($t)*);
    }};
}

/// The columns of [`latency_cells`].
const LATENCY_HEAD: [&str; 5] = ["n", "p50 ms", "p90 ms", "p99 ms", "stddev ms"];

/// n, p50, p90, p99 and stddev of a latency summary in ms, at `digits` decimals.
fn latency_cells(s: &Summary, digits: usize) -> [String; 5] {
    [
        s.n.to_string(),
        table::f(s.p50 * 1e3, digits),
        table::f(s.p90 * 1e3, digits),
        table::f(s.p99 * 1e3, digits),
        table::f(s.stddev * 1e3, digits),
    ]
}

fn floor_cells(floor: Option<f64>, of: Option<f64>) -> [String; 2] {
    match floor.zip(of) {
        Some((f, o)) => [table::f(f * 1e3, 2), format!("{:.0} %", o * 100.0)],
        None => ["-".into(), "-".into()],
    }
}

/// The prefill and decode tables, the roofline lines, the step's parts, the matmul tuning
/// and the per-op profiles, as one text.
pub fn text(r: &Report) -> String {
    let o = &mut String::new();
    let mut head = vec!["prompt"];
    head.extend(LATENCY_HEAD);
    head.extend(["tokens/s", "GFLOP/s", "floor ms", "of floor"]);
    let mut t = table::new(&head);
    for p in &r.prefill {
        let mut row = vec![p.prompt_len.to_string()];
        row.extend(latency_cells(&p.latency_s, 1));
        row.extend([table::f(p.tokens_per_s, 0), table::f(p.gflops_per_s, 1)]);
        row.extend(floor_cells(p.floor_s, p.of_floor));
        t.add_row(row);
    }
    line!(o, "Prefill ({} {}, {})\n{t}", r.model, r.dtype, r.weights);
    print_decode(o, r);
    print_parts(o, r);
    line!(
        o,
        "weights read per step: {}; KV per token: {}",
        table::bytes(r.weight_bytes_per_step),
        table::bytes(r.kv_bytes_per_token)
    );
    if let Some(roof) = &r.roofline {
        let peak = roof.peak_tflops.map_or(String::new(), |p| format!(", {p:.0} TFLOP/s dense"));
        line!(o,
            "roofline: {} — {:.0} GB/s{peak} ({}); floor = bytes / bandwidth (decode), max(FLOPs / peak, weights / bandwidth) (prefill)",
            roof.device_name, roof.bandwidth_gbytes_per_s, roof.source
        );
        if let Some(p) = &roof.cpu_bf16_peak {
            cpu_peak_lines(o, p, roof.peak_tflops, &r.prefill);
        }
    }
    for (b, g) in &r.graph_probe {
        match (g.captured, g.replay_ms) {
            (true, Some(ms)) => line!(o,
                "CUDA graph, decode batch {b}: eager {:.3} ms/step, replay {ms:.3} ms/step ({:.2}x); {} kernel launches per step ({} graph nodes)",
                g.eager_ms,
                g.eager_ms / ms,
                g.kernel_nodes.map_or("?".into(), |n| n.to_string()),
                g.nodes.map_or("?".into(), |n| n.to_string()),
            ),
            _ => line!(o,
                "CUDA graph, decode batch {b}: eager {:.3} ms/step; not replayed: {}",
                g.eager_ms,
                g.error.as_deref().unwrap_or("?")
            ),
        }
    }
    print_tuning(o, r);
    if let Some(g) = &r.cuda_graphs {
        line!(o, "{g}");
    }
    for p in &r.step_profile {
        print_profile(o, p);
    }
    if let Some(bw) = r.machine_read_gbytes_per_s {
        line!(o, "machine read bandwidth (measured, best of 5 over 512 MiB): {bw:.1} GB/s");
    }
    if let Some(u) = r.batch1_bandwidth_utilisation {
        line!(o, "decode at batch 1: bytes read (weights and KV) / step time = {:.0} % of that bandwidth", u * 100.0);
    }
    if let Some(x) = r.batch16_over_batch1_throughput {
        line!(o, "decode throughput batch 16 / batch 1: {x:.2}x");
    }
    std::mem::take(o)
}

/// Where each row's step time goes, layer parts apart (CPU runs).
fn print_parts(o: &mut String, r: &Report) {
    let rows: Vec<(String, &goodput_engine::bench::PartsRow, f64)> = r
        .prefill
        .iter()
        .filter_map(|p| p.parts.as_ref().map(|x| (format!("prefill {}", p.prompt_len), x, p.latency_s.p50)))
        .chain(
            r.decode
                .iter()
                .filter_map(|d| d.parts.as_ref().map(|x| (format!("decode batch {}", d.batch), x, d.step_s.p50))),
        )
        .collect();
    if rows.is_empty() {
        return;
    }
    let moe = rows.iter().any(|(_, p, _)| p.moe_s > 0.0);
    let mut head = vec!["step", "projections ms", "attention ms", "dense MLP ms", "MoE ms", "LM head ms", "rest ms"];
    head.push("attention share");
    if moe {
        head.extend(["MoE share", "MoE experts GB/s"]);
    }
    let mut t = table::new(&head);
    for (name, p, total) in rows {
        let share = |x: f64| format!("{:.0} %", 100.0 * x / total.max(1e-12));
        let ms = |x: f64| table::f(x * 1e3, 2);
        let mut row = vec![name, ms(p.projections_s), ms(p.attention_s), ms(p.dense_mlp_s), ms(p.moe_s)];
        row.extend([ms(p.lm_head_s), ms(p.rest_s), share(p.attention_s)]);
        if moe {
            row.extend([share(p.moe_s), p.moe_gbytes_per_s.map_or("-".into(), |g| table::f(g, 1))]);
        }
        t.add_row(row);
    }
    line!(
        o,
        "Where the step goes (p50 of each part over the timed steps; projections: q|k|v and o; attention: norm, RoPE, KV write, attention; rest: embedding, scheduling, sampling)\n{t}"
    );
}

/// One line per tuned weight shape and row count: each kernel's µs per call and GB/s.
fn print_tuning(o: &mut String, r: &Report) {
    for t in &r.gemv_tuning {
        let cells: Vec<String> = t
            .timings
            .iter()
            .map(|x| match (x.us, x.gbytes_per_s) {
                (Some(us), Some(g)) => format!("{} {us:.1} µs ({g:.0} GB/s)", x.kernel.name()),
                _ => format!("{} —: {}", x.kernel.name(), x.error.as_deref().unwrap_or("?")),
            })
            .collect();
        line!(
            o,
            "gemv tuning {}×{} at {} rows ({} matrices): {} → {}",
            t.n,
            t.k,
            t.m,
            t.matrices,
            cells.join(", "),
            t.chosen.name()
        );
    }
    if let Some(e) = &r.gemv_tuning_error {
        line!(o, "gemv tuning: {e}");
    }
}

fn print_profile(o: &mut String, p: &goodput_engine::cuda::StepTiming) {
    let what = if p.prefill {
        format!("Prefill of {} tokens", p.context)
    } else {
        format!("Decode step at batch {}, context {}", p.batch, p.context)
    };
    line!(o, "{what}: GPU time per op (events between ops, launched eagerly, mean of {} steps)", p.steps);
    let mut t = table::new(&["op", "launches", "µs / step", "share", "weight GB/s"]);
    for o in &p.ops {
        t.add_row(vec![
            o.op.to_string(),
            o.calls.to_string(),
            table::f(o.us, 1),
            format!("{:.1} %", 100.0 * o.us / p.total_us.max(1e-9)),
            o.weight_bytes.map_or(String::new(), |b| table::f(b as f64 / o.us / 1e3, 0)),
        ]);
    }
    line!(o, "{t}");
    line!(o, "sum of ops: {:.1} µs", p.total_us);
}

/// The decode table (with the experts a step read, for MoE models).
fn print_decode(o: &mut String, r: &Report) {
    let moe = r.decode.iter().any(|d| d.expert_share.is_some());
    let mut head = vec!["batch", "ctx"];
    head.extend(LATENCY_HEAD);
    head.extend(["tokens/s", "GB/s", "GFLOP/s", "sched+sample", "floor ms", "of floor"]);
    if moe {
        head.push("experts read");
    }
    let mut t = table::new(&head);
    for d in &r.decode {
        let mut row = vec![d.batch.to_string(), d.context.to_string()];
        row.extend(latency_cells(&d.step_s, 2));
        row.extend([
            table::f(d.tokens_per_s, 1),
            table::f(d.gbytes_per_s, 2),
            table::f(d.gflops_per_s, 1),
            format!("{:.2} %", d.overhead_share * 100.0),
        ]);
        row.extend(floor_cells(d.floor_s, d.of_floor));
        if let Some(share) = d.expert_share {
            row.push(format!("{:.0} ({:.0} %)", d.experts_touched.unwrap_or(0.0), share * 100.0));
        }
        t.add_row(row);
    }
    line!(o, "Decode step\n{t}");
    if moe {
        line!(
            o,
            "experts: (layer, expert) weight sets a decode step read (mean) and their share of all routed experts; \
             the step's bytes and floor count those experts only"
        );
    }
}

/// The CPU's measured bf16 peaks per core, and each prefill's FLOP/s as a share of the
/// `vdpbf16ps` peak over the engine's threads (the floor where AMX is absent).
fn cpu_peak_lines(
    o: &mut String,
    p: &goodput_engine::cpu::peak::Bf16Peak,
    engine_tflops: Option<f64>,
    prefill: &[goodput_engine::bench::PrefillRow],
) {
    let g = |x: Option<f64>| x.map_or("absent".to_string(), |v| format!("{:.0} GFLOP/s", v / 1e9));
    line!(
        o,
        "bf16 peak per core (measured from registers): vdpbf16ps {}, AMX tdpbf16ps {}",
        g(p.vdpbf16ps_per_core),
        g(p.amx_per_core)
    );
    let (Some(dot), Some(engine)) = (p.vdpbf16ps_per_core, engine_tflops) else { return };
    let threads = p.engine_per_core().map_or(1.0, |c| (engine * 1e12 / c).round().max(1.0));
    for row in prefill {
        line!(o,
            "prefill {}: {:.0} GFLOP/s = {:.0} % of the vdpbf16ps peak over {threads:.0} threads ({:.0} GFLOP/s), {:.1} % of the engine's peak",
            row.prompt_len,
            row.gflops_per_s,
            100.0 * row.gflops_per_s * 1e9 / (dot * threads),
            dot * threads / 1e9,
            100.0 * row.gflops_per_s / (engine * 1e3),
        );
    }
}
