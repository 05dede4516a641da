//! What `goodput run` writes: per-request records (JSONL and CSV, each with its phase:
//! warm-up, measured or cool-down), engine steps (JSONL), the engine's time series (CSV:
//! running, waiting, KV usage per interval), the summary JSON (contract names plus vLLM
//! `bench serve` keys for the same quantities) and the written conclusion. Files are written as each level finishes, so a killed run keeps every
//! finished level.

use crate::level::{LevelReport, Setup};
use anyhow::{Context, Result};
use goodput_core::StepRecord;
use goodput_metrics::engine::SeriesPoint;
use goodput_metrics::request as rm;
use goodput_metrics::slo::Slo;
use goodput_metrics::Summary;
use goodput_workload::LevelRun;
use serde_json::{json, Map, Value};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

pub struct RunFiles {
    dir: PathBuf,
    records: BufWriter<File>,
    steps: BufWriter<File>,
    csv: csv::Writer<File>,
    series: csv::Writer<File>,
}

impl RunFiles {
    pub fn create(dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let open = |name: &str| -> Result<File> {
            File::create(dir.join(name)).with_context(|| format!("creating {}", dir.join(name).display()))
        };
        let mut csv = csv::Writer::from_writer(open("requests.csv")?);
        csv.write_record([
            "level",
            "id",
            "phase",
            "outcome",
            "input_tokens",
            "output_tokens",
            "ttft_s",
            "tpot_s",
            "e2e_s",
            "send_lag_s",
            "queue_time_s",
            "prefill_time_s",
            "decode_time_s",
            "cached_tokens",
            "preemptions",
        ])?;
        let mut series = csv::Writer::from_writer(open("timeseries.csv")?);
        series.write_record([
            "level",
            "t_s",
            "steps",
            "running_mean",
            "running_max",
            "waiting_mean",
            "waiting_max",
            "kv_block_usage_mean",
            "kv_block_usage_max",
            "kv_token_usage_mean",
            "preemptions",
            "prefill_tokens",
            "decode_tokens",
        ])?;
        Ok(Self {
            series,
            dir: dir.to_path_buf(),
            records: BufWriter::new(open("records.jsonl")?),
            steps: BufWriter::new(open("steps.jsonl")?),
            csv,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Appends one level's raw records and engine steps.
    pub fn write_level(
        &mut self,
        level: &LevelReport,
        run: &LevelRun,
        steps: &[StepRecord],
        series: &[SeriesPoint],
    ) -> Result<()> {
        use goodput_metrics::engine as em;
        let load = level.summary.load;
        let f = |x: Option<f64>| x.map(|v| format!("{v:.6}")).unwrap_or_default();
        for r in &run.records {
            let phase = run.phase(r);
            let mut v = serde_json::to_value(r)?;
            if let Value::Object(m) = &mut v {
                m.insert("level".into(), json!(load));
                m.insert("phase".into(), json!(phase));
            }
            serde_json::to_writer(&mut self.records, &v)?;
            self.records.write_all(b"\n")?;
            let e = r.engine.as_ref();
            let outcome = match &r.outcome {
                goodput_core::Outcome::Ok => "ok".to_string(),
                goodput_core::Outcome::Timeout => "timeout".to_string(),
                goodput_core::Outcome::Error(m) => format!("error: {m}"),
                goodput_core::Outcome::Refused(m) => format!("refused: {m}"),
            };
            self.csv.write_record([
                load.to_string(),
                r.id.to_string(),
                serde_json::to_value(phase)?.as_str().unwrap_or_default().to_string(),
                outcome,
                r.input_tokens.to_string(),
                r.output_tokens.to_string(),
                f(rm::ttft(r)),
                f(rm::tpot(r)),
                f(rm::e2e(r)),
                f(Some(rm::send_lag(r))),
                f(e.and_then(em::queue_time)),
                f(e.and_then(em::prefill_time)),
                f(e.and_then(em::decode_time)),
                e.map(|x| x.cached_tokens.to_string()).unwrap_or_default(),
                e.map(|x| x.preemptions.to_string()).unwrap_or_default(),
            ])?;
        }
        for s in steps {
            let mut v = serde_json::to_value(s)?;
            if let Value::Object(m) = &mut v {
                m.insert("level".into(), json!(load));
            }
            serde_json::to_writer(&mut self.steps, &v)?;
            self.steps.write_all(b"\n")?;
        }
        for p in series {
            self.series.write_record([
                load.to_string(),
                format!("{:.3}", p.t_s),
                p.steps.to_string(),
                format!("{:.3}", p.running_mean),
                p.running_max.to_string(),
                format!("{:.3}", p.waiting_mean),
                p.waiting_max.to_string(),
                format!("{:.4}", p.kv_block_usage_mean),
                format!("{:.4}", p.kv_block_usage_max),
                format!("{:.4}", p.kv_token_usage_mean),
                p.preemptions.to_string(),
                p.prefill_tokens.to_string(),
                p.decode_tokens.to_string(),
            ])?;
        }
        self.records.flush()?;
        self.steps.flush()?;
        self.csv.flush()?;
        self.series.flush()?;
        Ok(())
    }

    /// Rewrites summary.json with every level so far.
    pub fn write_summary(
        &mut self,
        setup: &Setup,
        scenario: &Value,
        slos: &[Slo],
        unit: &str,
        levels: &[LevelReport],
    ) -> Result<()> {
        let doc = json!({
            "goodput_version": env!("CARGO_PKG_VERSION"),
            "model": setup.model,
            "weights": setup.weights,
            "device": setup.device,
            "seed": setup.seed,
            "target": setup.target,
            "engine": setup.engine,
            "machine": setup.machine,
            "cpus": setup.pinning,
            "retry": { "max": setup.retry.max, "backoff_s": setup.retry.backoff.as_secs_f64() },
            "scenario": scenario,
            "load_unit": unit,
            "slos": slos.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            "levels": levels.iter().map(level_json).collect::<Vec<_>>(),
        });
        let tmp = self.dir.join("summary.json.tmp");
        std::fs::write(&tmp, serde_json::to_vec_pretty(&doc)?)?;
        std::fs::rename(&tmp, self.dir.join("summary.json"))?;
        Ok(())
    }

    pub fn write_conclusion(&mut self, text: &str) -> Result<()> {
        std::fs::write(self.dir.join("conclusion.txt"), text)?;
        Ok(())
    }
}

/// One level as JSON: the contract's names, then vLLM `bench serve` keys (milliseconds,
/// `mean_/median_/pNN_` prefixes) for the same quantities.
pub fn level_json(l: &LevelReport) -> Value {
    let s = &l.summary;
    let mut v = serde_json::to_value(l).unwrap_or(Value::Null);
    let mut vllm = Map::new();
    vllm.insert("completed".into(), json!(s.completed));
    vllm.insert("request_throughput".into(), json!(s.request_throughput));
    vllm.insert("output_throughput".into(), json!(s.output_throughput));
    vllm.insert("total_token_throughput".into(), json!(s.input_throughput + s.output_throughput));
    vllm.insert("request_goodput".into(), json!(s.goodput));
    for (name, sum) in [("ttft", &s.ttft), ("tpot", &s.tpot), ("itl", &s.itl), ("e2el", &s.e2e)] {
        if let Some(x) = sum {
            add_vllm(&mut vllm, name, x);
        }
    }
    if let Value::Object(m) = &mut v {
        m.extend(vllm);
    }
    v
}

fn add_vllm(m: &mut Map<String, Value>, name: &str, s: &Summary) {
    m.insert(format!("mean_{name}_ms"), json!(s.mean * 1e3));
    m.insert(format!("median_{name}_ms"), json!(s.p50 * 1e3));
    m.insert(format!("std_{name}_ms"), json!(s.stddev * 1e3));
    m.insert(format!("p90_{name}_ms"), json!(s.p90 * 1e3));
    m.insert(format!("p95_{name}_ms"), json!(s.p95 * 1e3));
    m.insert(format!("p99_{name}_ms"), json!(s.p99 * 1e3));
}

/// The written conclusion of seed 000 §10, filled from the run.
pub struct Conclusion<'a> {
    pub scenario_name: String,
    pub scenario_lengths: String,
    pub unit: &'a str,
    pub slos: &'a [Slo],
    pub levels: &'a [LevelReport],
    pub usable: Option<f64>,
    pub limit: Option<f64>,
    pub knee: Option<f64>,
    pub no_queue_until: Option<f64>,
}

impl Conclusion<'_> {
    pub fn render(&self) -> String {
        let unit = self.unit;
        let at = |load: f64| self.levels.iter().find(|l| l.summary.load == load);
        let ms = |s: &Option<Summary>, f: fn(&Summary) -> f64| {
            s.as_ref().map_or("-".into(), |x| format!("{:.0} ms", f(x) * 1e3))
        };
        // Describe the recommended level, or the lowest one when none meets the SLOs.
        let shown = self.usable.and_then(at).or_else(|| self.levels.first());
        let Some(shown) = shown else { return "No level ran.".into() };
        let s = &shown.summary;
        let mut out = String::from("Conclusion\n");
        out.push_str(&format!(
            "In the {} scenario ({}; measured mean input {:.0} tokens, output {:.0} tokens), at {} {unit}: \
             P95 TTFT {}, P95 TPOT {}, per-user generation {:.1} tok/s (median), total output {:.0} tok/s, \
             {:.2} requests/s ({} measured requests).",
            self.scenario_name,
            self.scenario_lengths,
            s.mean_input_tokens,
            s.mean_output_tokens,
            s.load,
            ms(&s.ttft, |x| x.p95),
            ms(&s.tpot, |x| x.p95),
            s.per_user_tps.as_ref().map_or(f64::NAN, |x| x.p50),
            s.output_throughput,
            s.request_throughput,
            s.requests,
        ));
        out.push(' ');
        // Queue times from the engine's stamps, or only from the server's /metrics.
        let from_metrics = self
            .levels
            .iter()
            .any(|l| matches!(l.queue_time(), Some((_, goodput_metrics::capacity::QueueSource::ServerMetrics))));
        let source = if from_metrics { " (queue times from the server's /metrics)" } else { "" };
        match (self.no_queue_until, self.knee) {
            (Some(q), Some(k)) => {
                let (kq, stat) = match at(k).and_then(|l| l.queue_time()) {
                    Some((v, goodput_metrics::capacity::QueueSource::ServerMetrics)) => (v, "mean"),
                    Some((v, _)) => (v, "median"),
                    None => (f64::NAN, "median"),
                };
                out.push_str(&format!(
                    "Up to {q} {unit} requests are hardly queued; from {k} {unit} queue time rises ({stat} {:.0} ms) and pushes TTFT up{source}.",
                    kq * 1e3
                ));
            }
            (Some(q), None) => out.push_str(&format!(
                "Up to {q} {unit}, the highest level run, requests are hardly queued{source}."
            )),
            _ => out.push_str(
                "Where queueing starts is unknown: the target returned no engine stamps and its /metrics no queue-time histogram.",
            ),
        }
        out.push(' ');
        let slo_text = self.slos.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(", ");
        match self.usable {
            Some(u) => out.push_str(&format!(
                "Under the SLOs ({slo_text}), the recommended stable load is {u} {unit} (usable capacity)"
            )),
            None => out.push_str(&format!(
                "No level met the SLOs ({slo_text}); the usable capacity is below {} {unit}",
                self.levels[0].summary.load
            )),
        }
        if let Some(l) = self.limit {
            let tps = at(l).map_or(f64::NAN, |x| x.summary.output_throughput);
            out.push_str(&format!("; output throughput peaks at {l} {unit} ({tps:.0} tok/s, limit capacity)."));
        } else {
            out.push('.');
        }
        let short: usize = self.levels.iter().map(|l| l.summary.short_outputs).sum();
        if short > 0 {
            let completed: usize = self.levels.iter().map(|l| l.summary.completed).sum();
            out.push_str(&format!(
                " Caution: {short} of {completed} completed requests came back shorter than the scenario requires, so these are not the scenario's lengths."
            ));
        }
        if let Some(turns) = shown.turns.first().zip(shown.turns.last()).filter(|(a, b)| a.turn != b.turn) {
            let (a, b) = turns;
            let p95 = |t: &goodput_metrics::turns::TurnSummary| t.ttft.as_ref().map_or(f64::NAN, |x| x.p95 * 1e3);
            out.push_str(&format!(
                " Over a session, prompts grow from {:.0} tokens at turn {} to {:.0} at turn {}; the prefix cache serves {:.0} % of the last turn's prompt, and P95 TTFT goes from {:.0} ms to {:.0} ms.",
                a.prompt_tokens,
                a.turn,
                b.prompt_tokens,
                b.turn,
                100.0 * b.cached_tokens / b.prompt_tokens.max(1.0),
                p95(a),
                p95(b)
            ));
        }
        if let Some(ag) = &shown.agent {
            out.push_str(&format!(
                " In the agent scenario each task triggers {:.1} model calls and {:.1} tool/knowledge-base calls; task E2E P95 {:.2} s (median {:.2} s), {:.0} % of it waiting on tools and retrievals.",
                ag.amplification,
                ag.tool_calls_per_task,
                ag.task_e2e.as_ref().map_or(f64::NAN, |x| x.p95),
                ag.task_e2e.as_ref().map_or(f64::NAN, |x| x.p50),
                ag.tool_wait_share * 100.0
            ));
        }
        if let Some(r) = &shown.rag {
            let stage = |k: &str| {
                r.steps.iter().find(|x| x.kind == k).and_then(|x| x.duration.as_ref()).map_or(f64::NAN, |d| d.p50 * 1e3)
            };
            let p50 = |x: &Option<Summary>| x.as_ref().map_or(f64::NAN, |d| d.p50 * 1e3);
            out.push_str(&format!(
                " A RAG query's median timeline: embed {:.1} ms, retrieve {:.1} ms, rerank {:.1} ms, assemble {:.1} ms, queue {:.1} ms, prefill {:.0} ms, decode {:.0} ms; query E2E P95 {:.2} s.",
                stage("embed"),
                stage("retrieve"),
                stage("rerank"),
                stage("assemble"),
                p50(&s.queue_time),
                p50(&s.prefill_time),
                p50(&s.decode_time),
                r.task_e2e.as_ref().map_or(f64::NAN, |d| d.p95)
            ));
        }
        if let Some(first_fail) = self.levels.iter().find(|l| !l.summary.slos_hold()) {
            let broken: Vec<String> = first_fail
                .summary
                .slos
                .iter()
                .filter(|r| !r.holds)
                .map(|r| {
                    let v = r.value.map_or("no data".into(), |v| {
                        if r.slo.metric.is_rate() {
                            format!("{:.1}%", v * 100.0)
                        } else if r.slo.metric.is_time() {
                            format!("{:.0} ms", v * 1e3)
                        } else {
                            format!("{v:.1}")
                        }
                    });
                    format!("{} (measured {v})", r.slo)
                })
                .collect();
            out.push_str(&format!(" At {} {unit} the SLOs break: {}.", first_fail.summary.load, broken.join("; ")));
        }
        out
    }
}
