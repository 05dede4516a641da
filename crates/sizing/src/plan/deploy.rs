//! What to deploy for a row of a plan: the `vllm serve` and SGLang launch commands with the
//! parallelism, quantization, KV dtype, batch limits and memory fraction the plan simulated,
//! and a Kubernetes manifest (a Deployment, or a LeaderWorkerSet where a replica spans nodes)
//! requesting its GPUs. Each flag says which figure of the plan it comes from.

use super::{Plan, PlanSpec, Row};
use crate::hardware::DType;
use serde_json::{json, Value};

/// What `plan --emit` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Emit {
    Vllm,
    Sglang,
    K8s,
}

impl std::str::FromStr for Emit {
    type Err = goodput_core::ValueError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "vllm" => Ok(Emit::Vllm),
            "sglang" => Ok(Emit::Sglang),
            "k8s" | "kubernetes" => Ok(Emit::K8s),
            _ => Err(goodput_core::ValueError::new(s, "vllm, sglang or k8s")),
        }
    }
}

/// One flag of a launch command and the plan figure it comes from.
pub struct Flag {
    pub flag: &'static str,
    pub value: Option<String>,
    pub from: String,
}

fn flag(flag: &'static str, value: impl ToString, from: impl Into<String>) -> Flag {
    Flag { flag, value: Some(value.to_string()), from: from.into() }
}

fn switch(flag: &'static str, from: impl Into<String>) -> Flag {
    Flag { flag, value: None, from: from.into() }
}

/// The engine settings every row of a plan was simulated with.
pub struct Engine {
    pub kv: DType,
    pub max_num_seqs: usize,
    pub max_num_batched_tokens: usize,
    pub block_size: usize,
    pub memory_utilization: f64,
}

impl Engine {
    pub fn of(a: &PlanSpec, row: &Row) -> Engine {
        let kv = a.kv_dtype.unwrap_or(if row.dtype == DType::Fp8 { DType::Fp8 } else { DType::Bf16 });
        Engine {
            kv,
            max_num_seqs: a.max_num_seqs,
            max_num_batched_tokens: a.max_num_batched_tokens,
            block_size: a.block_size,
            memory_utilization: a.memory_utilization,
        }
    }
}

/// `vllm serve`'s flags for `row` (after the model).
pub fn vllm_flags(row: &Row, e: &Engine) -> Vec<Flag> {
    let l = row.layout;
    let at = format!("the row {} {} {}", row.gpu, row.dtype, row.layout_label);
    let mut out = vec![flag("--tensor-parallel-size", l.tp, format!("TP {} of {at}", l.tp))];
    if l.pp > 1 {
        out.push(flag("--pipeline-parallel-size", l.pp, format!("PP {} of {at}", l.pp)));
    }
    if l.dp > 1 {
        out.push(flag("--data-parallel-size", l.dp, format!("attention DP {} of {at}", l.dp)));
    }
    if l.ep > 1 {
        out.push(switch("--enable-expert-parallel", format!("EP {} of {at} (TP × DP ranks)", l.ep)));
    }
    out.extend(weights(row, "--quantization", "fp8", "--dtype"));
    if e.kv == DType::Fp8 {
        out.push(flag("--kv-cache-dtype", "fp8", "the plan's KV cache in fp8"));
    }
    out.extend(engine(e, ["--max-num-seqs", "--max-num-batched-tokens", "--block-size", "--gpu-memory-utilization"]));
    out.push(switch("--enable-prefix-caching", "the plan simulates prefix caching"));
    out
}

/// The plan's engine settings under a server's names for them: most sequences, a step's
/// tokens, tokens a KV block, the memory fraction.
fn engine(e: &Engine, names: [&'static str; 4]) -> [Flag; 4] {
    [
        flag(names[0], e.max_num_seqs, "the plan's --max-num-seqs"),
        flag(names[1], e.max_num_batched_tokens, "the plan's --max-num-batched-tokens"),
        flag(names[2], e.block_size, "the plan's --block-size"),
        flag(names[3], e.memory_utilization, "the plan's --memory-utilization"),
    ]
}

/// SGLang's `launch_server` flags for `row` (after the model).
pub fn sglang_flags(row: &Row, e: &Engine) -> Vec<Flag> {
    let l = row.layout;
    let at = format!("the row {} {} {}", row.gpu, row.dtype, row.layout_label);
    let mut out = vec![flag("--tp-size", l.tp * l.dp, format!("TP {} × attention DP {} of {at}", l.tp, l.dp))];
    if l.dp > 1 {
        out.push(flag("--dp-size", l.dp, format!("attention DP {} of {at}", l.dp)));
        out.push(switch("--enable-dp-attention", format!("attention DP {} of {at}", l.dp)));
    }
    if l.ep > 1 {
        out.push(flag("--ep-size", l.ep, format!("EP {} of {at}", l.ep)));
    }
    if l.pp > 1 {
        out.push(flag("--pp-size", l.pp, format!("PP {} of {at}", l.pp)));
    }
    out.extend(weights(row, "--quantization", "fp8", "--dtype"));
    if e.kv == DType::Fp8 {
        out.push(flag("--kv-cache-dtype", "fp8_e4m3", "the plan's KV cache in fp8"));
    }
    out.extend(engine(e, ["--max-running-requests", "--chunked-prefill-size", "--page-size", "--mem-fraction-static"]));
    out
}

/// The weights' flag: bf16 and fp16 as the dtype, fp8 quantized at load; FP4 formats come
/// with their checkpoint (gpt-oss's MXFP4, an NVFP4 export), which the server reads.
fn weights(row: &Row, quant: &'static str, fp8: &'static str, dtype: &'static str) -> Option<Flag> {
    let from = format!("the row's {} weights", row.dtype);
    match row.dtype {
        DType::Bf16 => Some(flag(dtype, "bfloat16", from)),
        DType::Fp16 => Some(flag(dtype, "float16", from)),
        DType::Fp8 => Some(flag(quant, fp8, from)),
        _ => None,
    }
}

/// A command line with each flag's source above it, as comments.
fn command(head: &str, model: &str, flags: &[Flag], notes: &[String]) -> String {
    let mut out: Vec<String> = notes.iter().map(|n| format!("# {n}")).collect();
    out.extend(flags.iter().map(|f| format!("# {}: {}", f.flag, f.from)));
    let args: Vec<String> =
        flags.iter().map(|f| f.value.as_ref().map_or(f.flag.to_string(), |v| format!("{} {v}", f.flag))).collect();
    out.push(format!("{head} {model} \\\n  {}", args.join(" \\\n  ")));
    out.join("\n")
}

/// Notes a row's deployment needs beside its flags.
fn notes(p: &Plan, row: &Row) -> Vec<String> {
    let mut out = vec![format!(
        "goodput plan: {} for {} of {} — {} {} {}, {} replica(s) of {} GPU(s) on {} node(s) each",
        p.model,
        super::answer::load_text(p.load),
        p.scenario,
        row.gpu,
        super::answer::dtype_text(row),
        row.layout_label,
        row.replicas.unwrap_or(0),
        row.gpus_per_replica,
        row.nodes
    )];
    match row.dtype {
        DType::Nvfp4 => out.push("nvfp4: serve an NVFP4 checkpoint of the model (ModelOpt's export); the server reads its quantization from it".into()),
        DType::Mxfp4 if row.weight_only => out.push("mxfp4 on a GPU without FP4 tensor cores: the server runs the MXFP4 checkpoint with weight-only kernels".into()),
        DType::Mxfp4 => out.push("mxfp4: the checkpoint as published; the server reads its quantization from it".into()),
        _ => {}
    }
    if row.nodes > 1 {
        out.push(format!("{} nodes a replica: start Ray on each (the k8s emit does) before the server", row.nodes));
    }
    out
}

/// The `vllm serve` or SGLang command for `row` of `p`, planned by `a`, serving `model`.
pub fn launch(p: &Plan, a: &PlanSpec, row: &Row, model: &str, emit: Emit) -> String {
    let e = Engine::of(a, row);
    match emit {
        Emit::Sglang => {
            command("python3 -m sglang.launch_server --model-path", model, &sglang_flags(row, &e), &notes(p, row))
        }
        _ => command("vllm serve", model, &vllm_flags(row, &e), &notes(p, row)),
    }
}

/// The Kubernetes manifest for `row`: a Deployment of its replicas (one pod each, its GPUs
/// requested), or a LeaderWorkerSet where a replica spans nodes (a leader and workers joined
/// by Ray); the plan's figures as annotations.
pub fn manifest(p: &Plan, a: &PlanSpec, row: &Row, model: &str) -> Value {
    let e = Engine::of(a, row);
    let mut args = vec![model.to_string()];
    for f in vllm_flags(row, &e) {
        args.push(f.flag.to_string());
        args.extend(f.value);
    }
    let name = format!("{}-{}", slug(&p.model), slug(&row.gpu));
    let per_node = row.gpus_per_replica / row.nodes.max(1);
    let (resource, image) = match row.gpu.as_str() {
        g if g.starts_with("mi") => ("amd.com/gpu", "rocm/vllm:latest"),
        _ => ("nvidia.com/gpu", "vllm/vllm-openai:latest"),
    };
    let annotations = json!({
        "goodput/plan": notes(p, row)[0],
        "goodput/usable-per-replica": super::answer::fmt_cap(row.capacity),
        "goodput/bound-by": row.bound,
    });
    let container = |cmd: Vec<String>, port: bool| {
        let mut c = json!({
            "name": "vllm",
            "image": image,
            "command": ["/bin/sh", "-c"],
            "args": [cmd.join(" ")],
            "resources": { "limits": { resource: per_node } },
            "volumeMounts": [{ "name": "dshm", "mountPath": "/dev/shm" }],
        });
        if port {
            c["ports"] = json!([{ "containerPort": 8000 }]);
            c["readinessProbe"] = json!({ "httpGet": { "path": "/health", "port": 8000 }, "periodSeconds": 10 });
        }
        c
    };
    let pod = |cmd: Vec<String>, port: bool| json!({ "containers": [container(cmd, port)], "volumes": [{ "name": "dshm", "emptyDir": { "medium": "Memory" } }] });
    let labels = json!({ "app": name });
    let serve = [vec!["vllm".to_string(), "serve".into()], args].concat();
    if row.nodes <= 1 {
        return json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": { "name": name, "labels": labels, "annotations": annotations },
            "spec": {
                "replicas": row.replicas.unwrap_or(1),
                "selector": { "matchLabels": labels },
                "template": { "metadata": { "labels": labels }, "spec": pod(serve, true) },
            },
        });
    }
    let leader = [vec!["ray start --head --port=6379 &&".to_string()], serve].concat();
    let worker = vec!["ray start --address=$(LWS_LEADER_ADDRESS):6379 --block".to_string()];
    json!({
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": { "name": name, "labels": labels, "annotations": annotations },
        "spec": {
            "replicas": row.replicas.unwrap_or(1),
            "leaderWorkerTemplate": {
                "size": row.nodes,
                "leaderTemplate": { "metadata": { "labels": labels }, "spec": pod(leader, true) },
                "workerTemplate": { "metadata": { "labels": labels }, "spec": pod(worker, false) },
            },
        },
    })
}

/// A Kubernetes name: lowercase letters, digits and `-`.
fn slug(s: &str) -> String {
    let s: String = s.to_lowercase().chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
    s.trim_matches('-').to_string()
}

/// `plan --emit`: each of `kinds` for the row `named` (`GPU/DTYPE/LAYOUT`, else the pick) of
/// `p`, planned by `a`, serving the model's repository (its catalog name without one).
pub fn emit(p: &Plan, a: &PlanSpec, named: Option<&str>, kinds: &[Emit]) -> Result<String, goodput_core::ValueError> {
    let row = row(p, named)?;
    let model = p.hf_repo.as_deref().unwrap_or(&p.model);
    let each = kinds.iter().map(|e| match e {
        Emit::K8s => serde_json::to_string_pretty(&manifest(p, a, row, model)).expect("a manifest serializes"),
        _ => launch(p, a, row, model, *e),
    });
    Ok(each.collect::<Vec<_>>().join("\n"))
}

/// The row `--emit-row GPU/DTYPE/LAYOUT` names (`h200/fp8/TP4`), or the plan's pick; an error
/// names the rows that serve the load.
pub fn row<'a>(p: &'a Plan, named: Option<&str>) -> Result<&'a Row, goodput_core::ValueError> {
    let serving: Vec<&Row> = p.rows.iter().filter(|r| r.gpus.is_some()).collect();
    let id = |r: &Row| format!("{}/{}/{}", r.gpu, r.dtype, r.layout_label);
    let listed = || serving.iter().map(|r| id(r)).collect::<Vec<_>>().join(", ");
    match named {
        Some(n) => serving.iter().copied().find(|r| id(r) == n.trim()).ok_or_else(|| {
            goodput_core::ValueError::new(n, format!("a row that serves the load, GPU/DTYPE/LAYOUT: {}", listed()))
        }),
        None => super::answer::best(&p.rows).ok_or_else(|| {
            goodput_core::ValueError::new("the pick", "a row that serves the load, and none does: nothing to deploy")
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::Layout;

    fn row(layout: Layout, dtype: DType) -> Row {
        let mut r = crate::plan::empty_row_for_tests(layout, dtype);
        (r.replicas, r.gpus, r.capacity) = (Some(3), Some(3 * layout.gpus()), Some(12.0));
        r
    }

    fn engine(kv: DType) -> Engine {
        Engine { kv, max_num_seqs: 128, max_num_batched_tokens: 4096, block_size: 16, memory_utilization: 0.85 }
    }

    fn args(flags: &[Flag]) -> Vec<String> {
        flags.iter().map(|f| f.value.as_ref().map_or(f.flag.to_string(), |v| format!("{} {v}", f.flag))).collect()
    }

    #[test]
    fn a_dense_fp8_row_is_its_tp_its_quantization_and_the_plan_s_engine() {
        let r = row(Layout { tp: 4, dp: 1, ep: 1, pp: 1 }, DType::Fp8);
        let v = args(&vllm_flags(&r, &engine(DType::Fp8)));
        assert_eq!(
            v,
            [
                "--tensor-parallel-size 4",
                "--quantization fp8",
                "--kv-cache-dtype fp8",
                "--max-num-seqs 128",
                "--max-num-batched-tokens 4096",
                "--block-size 16",
                "--gpu-memory-utilization 0.85",
                "--enable-prefix-caching"
            ]
        );
        let s = args(&sglang_flags(&r, &engine(DType::Fp8)));
        assert!(s.contains(&"--tp-size 4".into()) && s.contains(&"--kv-cache-dtype fp8_e4m3".into()), "{s:?}");
        assert!(s.contains(&"--mem-fraction-static 0.85".into()) && s.contains(&"--page-size 16".into()), "{s:?}");
    }

    #[test]
    fn wide_ep_rows_split_attention_and_experts_as_each_server_spells_it() {
        let r = row(Layout { tp: 1, dp: 8, ep: 8, pp: 1 }, DType::Bf16);
        let v = args(&vllm_flags(&r, &engine(DType::Bf16)));
        for f in ["--tensor-parallel-size 1", "--data-parallel-size 8", "--enable-expert-parallel", "--dtype bfloat16"]
        {
            assert!(v.contains(&f.to_string()), "{f} in {v:?}");
        }
        assert!(!v.iter().any(|f| f.starts_with("--kv-cache-dtype")), "bf16 KV is the default");
        // SGLang's TP spans every GPU of the stage; DP attention splits it.
        let s = args(&sglang_flags(&r, &engine(DType::Bf16)));
        for f in ["--tp-size 8", "--dp-size 8", "--enable-dp-attention", "--ep-size 8"] {
            assert!(s.contains(&f.to_string()), "{f} in {s:?}");
        }
        // FP4 comes with its checkpoint: no weight flag.
        let fp4 = row(Layout { tp: 2, dp: 1, ep: 1, pp: 1 }, DType::Nvfp4);
        assert!(!args(&vllm_flags(&fp4, &engine(DType::Bf16))).iter().any(|f| f.starts_with("--quantization")));
        assert!(matches!("k8s".parse(), Ok(Emit::K8s)) && "helm".parse::<Emit>().is_err());
        assert_eq!(slug("Llama-3.1-70B"), "llama-3-1-70b");
    }
}
