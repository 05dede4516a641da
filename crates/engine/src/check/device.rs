//! The device check (`goodput engine-check`): the engine on a device against the CPU f32 engine, from the same
//! weights. At f32 the greedy ids must be equal — one request alone, a batch of prompts of
//! mixed lengths (decode rows, short and long prefill chunks in one step), prompts hitting the
//! prefix cache, and a KV pool small enough to preempt. At the device's dtype (bf16 by
//! default on CUDA; bf16 weights with f32 activations on CPU) the logits of teacher-forced
//! positions are compared with CPU f32 — random token sequences (a harsh case: flat
//! distributions) and six English prompts continued for 32 tokens by the f32 model: top-1
//! agreement, max |Δ| of the logits and of the log-probability of f32's top token. On CUDA,
//! goodput's kernels are also checked against candle's ops on the GPU (long contexts split
//! into partitions, the small-batch matmuls with bf16 and f32 outputs, the sampler's cuts).
//! [`Report::passed`] says whether every check held. [`rounding_study`] instead predicts, on
//! the CPU, the agreement of each bf16 rounding scheme ([`super::study`]).

use super::reference::ReferenceRunner;
use super::study::{SchemeResult, Sequences};
use crate::bench::BenchError;
use crate::cuda::KernelCheck;
use crate::kv_cache::KvCache;
use crate::loader::LoadedModel;
use crate::moe::ExpertLoad;
use crate::sampler::argmax;
use crate::source::ModelSource;
use crate::tokenizer::Tokenizer;
use crate::{EngineConfig, EngineCore, Llama, StepBatch};
use goodput_core::{Clock, RequestId, SamplingParams, TokenId};
use rand::{Rng, SeedableRng};
use serde::Serialize;

/// Returns [`BenchError::Invalid`] with the formatted message.
macro_rules! fail {
    ($($t:tt)*) => { return Err(BenchError::Invalid(format!($($t)*))) };
}
use std::collections::BTreeMap;

/// What `engine-check` checks: the model on its device against the CPU f32 engine.
#[derive(Clone, Debug)]
pub struct CheckSpec {
    /// The model, on the device to check, at the dtype to compare its logits at.
    pub model: ModelSource,
    /// Greedy tokens generated per request.
    pub max_tokens: usize,
    /// Random sequences of the logits comparison.
    pub sequences: usize,
    /// The least top-1 agreement of the logits that passes.
    pub min_top1: f64,
}

/// Requests run together, then (a second wave) after the first wave has finished.
struct Scenario {
    name: &'static str,
    waves: Vec<Vec<Vec<TokenId>>>,
    prefix_caching: bool,
    /// KV blocks (`None`: plenty).
    num_blocks: Option<usize>,
}

#[derive(Debug, Serialize)]
pub struct GreedyResult {
    pub scenario: &'static str,
    pub requests: usize,
    pub equal: usize,
    pub preemptions: usize,
    pub prefix_hit_tokens: usize,
    pub first_difference: Option<String>,
    /// On CUDA: the device run's graph serving (decode steps replayed, graphs captured).
    pub cuda_graphs: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct LogitsResult {
    /// `random tokens` or `text prompts`.
    pub sequences: &'static str,
    pub dtype: String,
    pub positions: usize,
    pub top1_agreement: f64,
    pub max_abs_diff: f64,
    pub mean_abs_diff: f64,
    /// Largest |Δ| of the log-probability of the reference's top-1 token.
    pub max_logprob_diff: f64,
    /// MoE models: positions whose token went to the same experts as in CPU f32 in every
    /// sparse layer, and the top-1 agreement over those. A bf16 router score that crosses
    /// another sends the token through other experts (a different, equally valid function),
    /// so a kernel is judged on the positions routed alike; the others are counted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub routed_alike: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top1_routed_alike: Option<f64>,
}

impl LogitsResult {
    /// The agreement a check is held to: over the positions routed alike for MoE models.
    fn judged_top1(&self) -> f64 {
        self.top1_routed_alike.unwrap_or(self.top1_agreement)
    }
}

/// Prompts of the text comparison: each is continued greedily by the CPU f32 model for
/// [`TEXT_POSITIONS`] tokens, and the positions predicting the continuation are compared.
const TEXT_PROMPTS: [&str; 6] = [
    "The capital of France is",
    "Write a short poem about the sea.\n",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "Photosynthesis is the process by which plants",
    "Q: What is 17 times 23?\nA:",
    "In 1969, the Apollo 11 mission",
];
const TEXT_POSITIONS: usize = 32;

#[derive(Debug, Serialize)]
pub struct Report {
    pub model: String,
    pub device: String,
    pub greedy: Vec<GreedyResult>,
    /// On CUDA, at the logits' dtype: the batched scenario's greedy ids with steps replayed
    /// from CUDA graphs (decode and mixed, the prefill kernel's blocks planned in them) against
    /// the same steps launched eagerly. Reported, not judged: a padded bucket's matmuls may
    /// sum in another order, and a near-tie then goes the other way.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub graphs_vs_eager: Option<GreedyResult>,
    pub logits: Vec<LogitsResult>,
    pub kernels: Vec<KernelCheck>,
    pub passed: bool,
}

const BLOCK: usize = 16;

type Result<T, E = BenchError> = std::result::Result<T, E>;

fn prompt(rng: &mut rand::rngs::SmallRng, len: usize, vocab: usize) -> Vec<TokenId> {
    (0..len).map(|_| rng.random_range(3..vocab as u32)).collect()
}

fn scenarios(vocab: usize) -> Vec<Scenario> {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(0xc4ec);
    let mut p = |n| prompt(&mut rng, n, vocab);
    let shared = p(48);
    let with_prefix = |tail: Vec<TokenId>| [shared.clone(), tail].concat();
    vec![
        Scenario { name: "alone", waves: vec![vec![p(40)]], prefix_caching: false, num_blocks: None },
        Scenario {
            name: "batched (decode rows, short and long chunks)",
            waves: vec![vec![p(5), p(17), p(33), p(64), p(100), p(9)]],
            prefix_caching: false,
            num_blocks: None,
        },
        Scenario {
            name: "prefix-cache hits",
            waves: vec![vec![with_prefix(p(8))], vec![with_prefix(p(12)), with_prefix(p(20)), with_prefix(p(3))]],
            prefix_caching: true,
            num_blocks: None,
        },
        Scenario {
            name: "preemption (10 KV blocks a group for 8 requests)",
            // 48-token prompts fill 3 blocks exactly: every sequence needs a 4th for its first
            // decode, so whatever the token count, the pool runs out.
            waves: vec![(0..8).map(|_| p(48)).collect()],
            prefix_caching: false,
            num_blocks: Some(10),
        },
    ]
}

/// What one engine did in a scenario; the model comes back for the next one.
struct ScenarioRun {
    model: Llama,
    tokens: BTreeMap<RequestId, Vec<TokenId>>,
    preemptions: usize,
    prefix_hit_tokens: usize,
    graphs: Option<String>,
}

/// Runs a scenario on `model` (steps from CUDA graphs when `graphs` and the model can).
fn run_scenario(model: Llama, s: &Scenario, max_tokens: usize, graphs: bool) -> Result<ScenarioRun> {
    let max_len = s.waves.iter().flatten().map(Vec::len).max().unwrap_or(1) + max_tokens + 1;
    // The scenario's blocks are per KV-cache group (a block table each).
    let groups = model.spec.kv_groups().len();
    let cfg = EngineConfig {
        block_size: BLOCK,
        num_blocks: Some(groups * s.num_blocks.unwrap_or(64 * max_len.div_ceil(BLOCK))),
        max_num_batched_tokens: 512,
        max_num_seqs: 16,
        enable_prefix_caching: s.prefix_caching,
        max_model_len: Some(max_len),
        cuda_graphs: graphs,
        ..Default::default()
    };
    let mut core = EngineCore::new(model, &cfg, Clock::new())?;
    let (mut out, mut preempted, mut hits) = (BTreeMap::new(), 0, 0);
    let mut id = 0;
    for wave in &s.waves {
        for p in wave {
            let now = core.clock().now();
            core.add_request(id, p.clone(), SamplingParams::greedy_exact(max_tokens), now)?;
            id += 1;
        }
        while core.has_work() {
            if let Some(o) = core.step()? {
                preempted += o.record.preemptions;
                hits += o.record.prefix_hit_tokens;
                for (rec, tokens) in o.update.finished {
                    out.insert(rec.id, tokens);
                }
            }
        }
    }
    let graphs = core.graph_summary();
    Ok(ScenarioRun { model: core.into_model(), tokens: out, preemptions: preempted, prefix_hit_tokens: hits, graphs })
}

fn greedy(mut cpu: Llama, mut dev: Llama, a: &CheckSpec, say: &mut dyn FnMut(&str)) -> Result<Vec<GreedyResult>> {
    let mut results = Vec::new();
    for s in scenarios(cpu.spec.vocab_size) {
        let want = run_scenario(cpu, &s, a.max_tokens, true)?;
        let got = run_scenario(dev, &s, a.max_tokens, true)?;
        results.push(compare(s.name, &want.tokens, &got, "cpu"));
        if let Some(g) = &got.graphs {
            say(&format!("  {}: {g}", s.name));
        }
        (cpu, dev) = (want.model, got.model);
    }
    Ok(results)
}

/// How many of `want`'s requests `got` generated the same ids for, and the first that differs.
fn compare(
    scenario: &'static str,
    want: &BTreeMap<RequestId, Vec<TokenId>>,
    got: &ScenarioRun,
    reference: &str,
) -> GreedyResult {
    let (w, g) = (want, &got.tokens);
    let first_difference = w
        .iter()
        .find(|(id, t)| g.get(id) != Some(t))
        .map(|(id, t)| format!("request {id}: {reference} {t:?}, device {:?}", g.get(id).cloned().unwrap_or_default()));
    GreedyResult {
        scenario,
        requests: w.len(),
        equal: w.iter().filter(|(id, t)| g.get(id) == Some(t)).count(),
        preemptions: got.preemptions,
        prefix_hit_tokens: got.prefix_hit_tokens,
        first_difference,
        cuda_graphs: got.graphs.clone(),
    }
}

/// On CUDA: the batched scenario on `dev` launched eagerly, then from graphs; the model back.
fn graphs_vs_eager(dev: Llama, a: &CheckSpec) -> Result<(Llama, Option<GreedyResult>)> {
    if !dev.device.is_cuda() {
        return Ok((dev, None));
    }
    let s = scenarios(dev.spec.vocab_size)
        .into_iter()
        .find(|s| s.name.starts_with("batched"))
        .ok_or_else(|| BenchError::Invalid("engine-check has no batched scenario".into()))?;
    let eager = run_scenario(dev, &s, a.max_tokens, false)?;
    let graphs = run_scenario(eager.model, &s, a.max_tokens, true)?;
    let r = compare("batched: graphs vs eager", &eager.tokens, &graphs, "eager");
    Ok((graphs.model, Some(r)))
}

/// Logits `(len, vocab)` of every position of `tokens`, in one prefill step.
fn all_logits(m: &Llama, tokens: &[TokenId]) -> Result<Vec<Vec<f32>>> {
    let (kv, tables) = KvCache::for_one_sequence(&m.spec, tokens.len(), BLOCK, m.dtype, &m.device)?;
    let mut batch = StepBatch::new(BLOCK);
    batch.push(tokens, 0, &tables, true);
    batch.sample_rows = (0..tokens.len() as u32).collect();
    Ok(Llama::logits_rows(&m.forward(&batch, &kv)?)?)
}

fn random_sequences(n: usize, vocab: usize) -> Sequences {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(0x70b1);
    (0..n).map(|_| (prompt(&mut rng, 128, vocab), 0..128)).collect()
}

/// [`TEXT_PROMPTS`], each followed by the CPU f32 model's greedy continuation.
fn text_sequences(cpu: &Llama, tok: &Tokenizer) -> Result<Sequences> {
    let mut out = Vec::new();
    for text in TEXT_PROMPTS {
        let prompt = tok.encode(text).map_err(|e| BenchError::Invalid(format!("cannot tokenize {text:?}: {e}")))?;
        if prompt.is_empty() {
            fail!("the tokenizer turns {text:?} into no tokens");
        }
        let (cont, _) = ReferenceRunner::new(cpu).generate(&prompt, TEXT_POSITIONS)?;
        // Position i's logits predict token i + 1: the last prompt position and the
        // continuation's but last.
        let from = prompt.len() - 1;
        out.push(([prompt.as_slice(), &cont].concat(), from..from + TEXT_POSITIONS));
    }
    Ok(out)
}

fn log_softmax_at(row: &[f32], i: usize) -> f64 {
    let m = row.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b)) as f64;
    let lse = m + row.iter().map(|&x| (x as f64 - m).exp()).sum::<f64>().ln();
    row[i] as f64 - lse
}

/// Whether position `i` went to the same experts in every sparse layer of both runs.
fn routed_alike(want: &[ExpertLoad], got: &[ExpertLoad], i: usize, k: usize) -> bool {
    want.len() == got.len() && want.iter().zip(got).all(|(w, g)| w.chosen(i, k) == g.chosen(i, k))
}

fn logits(cpu: &Llama, dev: &Llama, name: &'static str, seqs: &Sequences) -> Result<LogitsResult> {
    let (mut n, mut agree, mut max, mut sum, mut count, mut max_lp) = (0usize, 0usize, 0f64, 0f64, 0usize, 0f64);
    let (mut alike, mut alike_agree) = (0usize, 0usize);
    let k = cpu.spec.moe.as_ref().map(|m| m.experts_per_token);
    for (tokens, range) in seqs {
        let (want, want_routes) = (all_logits(cpu, tokens)?, cpu.take_expert_load());
        let (got, got_routes) = (all_logits(dev, tokens)?, dev.take_expert_load());
        for (i, (w, g)) in want.iter().zip(&got).enumerate().filter(|(i, _)| range.contains(i)) {
            n += 1;
            let top = argmax(w);
            let same = top == argmax(g);
            agree += same as usize;
            if k.is_some_and(|k| routed_alike(&want_routes, &got_routes, i, k)) {
                alike += 1;
                alike_agree += same as usize;
            }
            max_lp = max_lp.max((log_softmax_at(w, top as usize) - log_softmax_at(g, top as usize)).abs());
            for (x, y) in w.iter().zip(g) {
                let d = (*x as f64 - *y as f64).abs();
                max = max.max(d);
                sum += d;
                count += 1;
            }
        }
    }
    Ok(LogitsResult {
        sequences: name,
        dtype: format!("{:?}", dev.dtype),
        positions: n,
        top1_agreement: agree as f64 / n.max(1) as f64,
        max_abs_diff: max,
        mean_abs_diff: sum / count.max(1) as f64,
        max_logprob_diff: max_lp,
        routed_alike: k.map(|_| alike),
        top1_routed_alike: k.map(|_| alike_agree as f64 / alike.max(1) as f64),
    })
}

fn load(a: &ModelSource, device: &str, dtype: &str, max_len: usize, say: &mut dyn FnMut(&str)) -> Result<Llama> {
    Ok(load_with_tokenizer(a, device, dtype, max_len, say)?.model)
}

/// `a`'s model on `device` at `dtype`; what the load warns of is said.
fn load_with_tokenizer(
    a: &ModelSource,
    device: &str,
    dtype: &str,
    max_len: usize,
    say: &mut dyn FnMut(&str),
) -> Result<LoadedModel> {
    let m = ModelSource { device: device.into(), dtype: Some(dtype.into()), ..a.clone() };
    let mut warnings = Vec::new();
    let loaded = m.load(max_len, &mut warnings).map_err(|cause| BenchError::Load {
        what: format!("{} on {device} at {dtype}", a.model),
        cause: Box::new(cause),
    })?;
    warnings.iter().for_each(|w| say(&format!("goodput: warning: {w}")));
    Ok(loaded)
}

/// Checks the engine on `a`'s device against the CPU f32 engine: greedy ids at f32, logits at
/// the device's dtype, and on CUDA goodput's kernels; what it does is said through `say`.
pub fn run(a: &CheckSpec, say: &mut dyn FnMut(&str)) -> Result<Report> {
    if a.max_tokens == 0 || a.sequences == 0 {
        fail!("--max-tokens and --sequences must be at least 1");
    }
    let max_len = 256 + a.max_tokens;
    let (device, dtype) = a.model.device_dtype()?;
    // `fp8` is bf16 with e4m3 projections: the flag's own word, not the dtype's.
    let fp8 = a.model.fp8();
    let dtype = if fp8 { "fp8".to_string() } else { format!("{dtype:?}").to_lowercase() };
    let cpu = load(&a.model, "cpu", "f32", max_len, say)?;
    let dev32 = load(&a.model, &a.model.device, "f32", max_len, say)?;
    say(&format!("engine-check: {} on {device:?} against cpu f32; greedy at f32 …", cpu.spec.name));
    let greedy = greedy(cpu, dev32, a, say)?;
    let loaded = load_with_tokenizer(&a.model, "cpu", "f32", max_len, say)?;
    let cpu = loaded.model;
    let dev = load(&a.model, &a.model.device, &dtype, max_len, say)?;
    let (dev, graphs_vs_eager) = graphs_vs_eager(dev, a)?;
    say(&format!("engine-check: logits at {dtype} …"));
    let mut logits = vec![
        logits(&cpu, &dev, "random tokens", &random_sequences(a.sequences, cpu.spec.vocab_size))?,
        logits(&cpu, &dev, "text prompts", &text_sequences(&cpu, &loaded.tokenizer)?)?,
    ];
    if fp8 {
        logits.iter_mut().for_each(|l| l.dtype = "FP8".into());
    }
    let kernels = crate::cuda::check_kernels(&device)?;
    let kernels_ok = kernels.iter().all(|k| k.passed);
    let passed = greedy.iter().all(|g| g.equal == g.requests)
        && logits.iter().all(|l| l.judged_top1() >= a.min_top1)
        && kernels_ok;
    Ok(Report {
        model: cpu.spec.name.clone(),
        device: format!("{device:?}"),
        greedy,
        graphs_vs_eager,
        logits,
        kernels,
        passed,
    })
}

/// The rounding study: the CPU f32 model, its sequences, each bf16 rounding scheme against
/// f32 ([`super::study`]).
pub fn rounding_study(a: &CheckSpec, say: &mut dyn FnMut(&str)) -> Result<Vec<SchemeResult>> {
    if a.max_tokens == 0 || a.sequences == 0 {
        fail!("--max-tokens and --sequences must be at least 1");
    }
    if a.model.device != "cpu" {
        fail!("--rounding-study runs on the CPU (it emulates bf16 rounding in f32); drop --device {}", a.model.device);
    }
    let loaded = load_with_tokenizer(&a.model, "cpu", "f32", 256 + a.max_tokens, say)?;
    let m = &loaded.model;
    say(&format!("engine-check: rounding study of {} on the CPU …", m.spec.name));
    let sets = [
        ("random tokens", random_sequences(a.sequences, m.spec.vocab_size)),
        ("text prompts", text_sequences(m, &loaded.tokenizer)?),
    ];
    Ok(super::study::run(m, &sets)?)
}
