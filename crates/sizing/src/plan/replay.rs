//! A trace replayed on simulated replicas, for the fleet plans (`fleet`, `disagg`): the
//! requests made as they fall due, what each replica is (a roofline configuration or a
//! measured profile), and what a run keeps of each request as it ends.

use super::error::refuse;
use super::overhead::Overhead;
use super::search::client_record;
use super::Result;
use super::{config, PlanSpec, Setting};
use crate::hardware::Gpu;
use goodput_core::Stamp;
use goodput_metrics::cache::PrefixHits;
use goodput_metrics::level::request_is_good;
use goodput_scheduler::NewRequest;
use goodput_workload::trace::Trace;
use serde::Serialize;

/// One router's run over the trace.
#[derive(Debug, Default, Serialize)]
pub struct PolicyRun {
    pub router: String,
    pub requests: usize,
    /// Requests that met every SLO.
    pub good: usize,
    pub gpu_hours: f64,
    pub peak_gpus: usize,
    pub prefix_hit_rate: Option<f64>,
    /// Requests each replica took, as shares of all.
    pub replica_shares: Vec<f64>,
    /// Per hour of the trace: requests that arrived, and those of them that met the SLOs.
    pub hours: Vec<(usize, usize)>,
    pub ttft_p50_s: Option<f64>,
    pub ttft_p95_s: Option<f64>,
    pub e2e_p50_s: Option<f64>,
    pub e2e_p95_s: Option<f64>,
    /// Output tokens per second from the first request's arrival to the last one's end (the
    /// window of `LevelSummary::output_throughput`).
    pub output_throughput: f64,
    /// Requests preempted at least once (their K/V dropped for want of blocks, recomputed).
    pub preempted: usize,
    /// Seconds of this machine's wall time the simulation of the run took.
    pub wall_s: f64,
    /// The autoscaler's changes of the fleet's size (none without one).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub scale_events: Vec<crate::fleet::autoscale::ScaleEvent>,
}

/// The trace's requests, each made when it is due (a day's prompts would not fit in memory
/// made up front).
pub struct TraceSource<'t> {
    trace: &'t Trace,
    next: usize,
    speedup: f64,
    vocab: usize,
    /// Whether prompts need their tokens: only when requests share blocks (the prefix
    /// caches) or the router reads them (cache-aware). Otherwise a prompt is its length
    /// alone, which spares a day's trace a billion random tokens.
    content: bool,
    /// The chat template's tokens around each prompt, as a server adds them.
    template: TemplateTokens,
}

/// The tokens a server's chat template adds around each prompt: `head` before it (the same
/// for every request, so shared in the prefix caches) and `tail` after it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TemplateTokens {
    pub head: usize,
    pub tail: usize,
}

impl TemplateTokens {
    /// `HEAD,TAIL`, e.g. `17,33`.
    pub fn parse(s: &str) -> Result<Self, goodput_core::ValueError> {
        let bad = || {
            goodput_core::ValueError::new(
                s,
                "give the template's tokens before and after each prompt as HEAD,TAIL (e.g. 17,33)",
            )
        };
        let (h, t) = s.split_once(',').ok_or_else(bad)?;
        let (head, tail): (usize, usize) = (h.trim().parse().map_err(|_| bad())?, t.trim().parse().map_err(|_| bad())?);
        let total = head.saturating_add(tail);
        if total > 65_536 {
            return Err(goodput_core::ValueError::new(
                s,
                format!("{total} template tokens a prompt is no chat template"),
            ));
        }
        Ok(Self { head, tail })
    }

    /// `prompt` as the server's engine gets it: the head's tokens, the prompt, the tail's,
    /// with room for `output` more. The template's tokens are fixed ids below `vocab`.
    fn around(self, prompt: &[u32], output: usize, vocab: usize) -> Vec<u32> {
        let id = |i: usize| (i % vocab.max(1)) as u32;
        let mut v = Vec::with_capacity(self.head + prompt.len() + self.tail + output);
        v.extend((0..self.head).map(id));
        v.extend_from_slice(prompt);
        v.extend((0..self.tail).map(|i| id(self.head + i)));
        v
    }
}

impl<'t> TraceSource<'t> {
    pub fn new(
        trace: &'t Trace,
        speedup: f64,
        vocab: usize,
        policy: &crate::fleet::router::Policy,
        template: TemplateTokens,
    ) -> Self {
        let reads = matches!(policy, crate::fleet::router::Policy::CacheAware { .. });
        Self { trace, next: 0, speedup, vocab, content: reads || trace.shares_prefixes(), template }
    }
}

impl TraceSource<'_> {
    fn at(&self, i: usize) -> Stamp {
        Stamp((self.trace.due(i, self.speedup) * 1e9) as u64)
    }
}

impl crate::sim::Source for TraceSource<'_> {
    fn due(&mut self, now: Stamp) -> Option<NewRequest> {
        let at = self.next_due().filter(|at| *at <= now)?;
        let i = self.next;
        self.next += 1;
        if !self.content {
            let e = &self.trace.entries[i];
            let params = goodput_core::SamplingParams::greedy_exact(e.output);
            // Room for the output too: the scheduler appends it to the prompt's vector.
            let input = e.input + self.template.head + self.template.tail;
            let mut prompt = Vec::with_capacity(input + e.output);
            prompt.resize(input, 0);
            return Some(NewRequest { id: i as u64, prompt, params, arrival: at });
        }
        let w = self.trace.request(i as u64, i, self.vocab);
        let prompt = if self.template == TemplateTokens::default() {
            w.prompt
        } else {
            self.template.around(&w.prompt, w.params.max_tokens, self.vocab)
        };
        Some(NewRequest { id: w.id, prompt, params: w.params, arrival: at })
    }
    fn next_due(&self) -> Option<Stamp> {
        (self.next < self.trace.entries.len()).then(|| self.at(self.next))
    }
    fn finished(&mut self, _: &goodput_core::EngineRecord, _: Stamp) {}
}

/// What the plan keeps of each request as it ends.
#[derive(Default)]
pub struct Tally {
    requests: usize,
    good: usize,
    hours: Vec<(usize, usize)>,
    ttft: Vec<f64>,
    e2e: Vec<f64>,
    hits: Option<PrefixHits>,
    start_ns: Option<u64>,
    end_ns: u64,
    output_tokens: u64,
    preempted: usize,
    /// Added to each request's tokens and end: the time outside the engines.
    overhead: Overhead,
}

impl Tally {
    pub fn add(&mut self, r: &goodput_core::EngineRecord, slos: &[goodput_metrics::slo::Slo]) {
        let mut c = client_record(r);
        if !self.overhead.is_zero() {
            // The client sees the engine's tokens and end later; the engine's own stamps stay.
            let lag = self.overhead.of(r.id);
            hold(&mut c.chunks, lag.hold_tokens as usize);
            c.chunks.iter_mut().for_each(|k| k.at = Stamp(k.at.0.saturating_add(lag.first_ns)));
            let last = c.chunks.last().map_or(Stamp(0), |k| k.at);
            c.end = Stamp(c.end.0.saturating_add(lag.end_ns)).max(last);
        }
        let good = request_is_good(&c, slos);
        let h = ((c.intended.0 as f64 / 1e9 / 3600.0) as usize).min(self.hours.len().saturating_sub(1));
        if let Some(hour) = self.hours.get_mut(h) {
            hour.0 += 1;
            hour.1 += usize::from(good);
        }
        self.requests += 1;
        self.good += usize::from(good);
        self.ttft.extend(goodput_metrics::request::ttft(&c));
        self.e2e.extend(goodput_metrics::request::e2e(&c));
        // One request's counts at a time, added to the run's.
        if let Some(one) = PrefixHits::of_records(&[&c]) {
            let h = self.hits.get_or_insert(PrefixHits { cached_tokens: 0.0, prompt_tokens: 0.0, ..one });
            h.cached_tokens += one.cached_tokens;
            h.prompt_tokens += one.prompt_tokens;
        }
        self.end_ns = self.end_ns.max(c.end.0);
        self.start_ns = Some(self.start_ns.map_or(c.intended.0, |s| s.min(c.intended.0)));
        self.output_tokens += r.generated_tokens as u64;
        self.preempted += usize::from(r.preemptions > 0);
    }

    /// A tally with room for `trace`'s requests, by hour of the trace at `speedup`, each
    /// request seen its `overhead` after its engine's tokens.
    pub fn for_trace(trace: &Trace, speedup: f64, overhead: &Overhead) -> Self {
        let hours = (trace.span_s / speedup / 3600.0).floor() as usize + 1;
        let each = || Vec::with_capacity(trace.entries.len());
        Tally { hours: vec![(0, 0); hours], ttft: each(), e2e: each(), overhead: overhead.clone(), ..Tally::default() }
    }

    /// A request refused at admission at `at`: counted, never good.
    pub fn refused(&mut self, at: Stamp) {
        let h = ((at.0 as f64 / 1e9 / 3600.0) as usize).min(self.hours.len().saturating_sub(1));
        if let Some(hour) = self.hours.get_mut(h) {
            hour.0 += 1;
        }
        self.requests += 1;
    }

    /// Seconds from the first request's arrival to the last one's end.
    pub fn span_s(&self) -> f64 {
        (self.end_ns.saturating_sub(self.start_ns.unwrap_or(0)) as f64 / 1e9).max(1e-9)
    }

    /// The end of the last request, in seconds of the trace.
    pub fn end_s(&self) -> f64 {
        self.end_ns as f64 / 1e9
    }

    /// The run's row: `counts` are the requests each replica (of the routed pool) took.
    pub fn into_run(self, router: String, gpu_hours: f64, peak_gpus: usize, counts: &[usize]) -> PolicyRun {
        let pct = |v: &[f64], p: f64| goodput_metrics::stats::percentile(v, p);
        let total = counts.iter().sum::<usize>().max(1) as f64;
        PolicyRun {
            router,
            requests: self.requests,
            good: self.good,
            gpu_hours,
            peak_gpus,
            prefix_hit_rate: self.hits.and_then(|h| h.hit_rate()),
            replica_shares: counts.iter().map(|&c| c as f64 / total).collect(),
            ttft_p50_s: pct(&self.ttft, 50.0),
            ttft_p95_s: pct(&self.ttft, 95.0),
            e2e_p50_s: pct(&self.e2e, 50.0),
            e2e_p95_s: pct(&self.e2e, 95.0),
            output_throughput: self.output_tokens as f64 / self.span_s(),
            preempted: self.preempted,
            wall_s: 0.0,
            scale_events: Vec::new(),
            hours: self.hours,
        }
    }
}

/// Holds a stream's first `tokens` tokens after its first until the one after them: one chunk
/// then carries them all, as a server sends the first text once it has a whole character.
fn hold(chunks: &mut Vec<goodput_core::Chunk>, tokens: usize) {
    let i = tokens.min(chunks.len().saturating_sub(1));
    if i > 0 {
        let held: u32 = chunks[..=i].iter().map(|k| k.tokens).sum();
        chunks.drain(..i);
        chunks[0].tokens = held;
    }
}

/// What each replica of the fleet is.
pub struct ReplicaSpec {
    pub sched: goodput_scheduler::SchedulerConfig,
    pub cost: std::sync::Arc<dyn crate::cost::StepCost>,
    pub gpus: usize,
    /// The GPU (or the measured machine) and the layout, as the answer names them.
    pub gpu: String,
    pub layout: String,
    pub error_bar: String,
    /// The roofline configuration and its GPU (`None` for a measured profile).
    pub projection: Option<(crate::roofline::ProjectedCost, Gpu)>,
}

/// Replicas of one roofline configuration (one GPU, one layout).
pub fn projected(a: &PlanSpec, set: &Setting, gpus: &[Gpu]) -> Result<ReplicaSpec> {
    let [g] = gpus else { refuse!("--trace plans one GPU: give one --gpus") };
    let layout = match config::layouts(a, &set.spec).as_slice() {
        [l] => *l,
        many => refuse!(
            "--trace plans one layout; these flags give {}: give one --tp, --ep, --dp-attention, --pp",
            many.len()
        ),
    };
    if layout.dp * layout.pp != 1 {
        refuse!("--trace: a fleet of {layout} replicas (several engines each) is not simulated yet; use DP 1 and PP 1");
    }
    let p = config::prepare(a, &set.spec, g, layout, &set.eff, set.mean_in + set.mean_out)
        .map_err(|why| super::unfit(set, g, layout, why))?;
    Ok(ReplicaSpec {
        sched: p.sched,
        gpus: p.cost.layout.gpus(),
        projection: Some((p.cost.clone(), g.clone())),
        cost: std::sync::Arc::new(p.cost),
        gpu: g.name.clone(),
        layout: layout.label(),
        error_bar: set.error_bar.clone(),
    })
}

/// Replicas as a measured profile has them: its engine's limits and pool, its fitted step
/// cost, one device each.
pub fn measured(set: &Setting, path: &std::path::Path) -> Result<ReplicaSpec> {
    let profile = crate::profile::Profile::read(path)?;
    if profile.model != set.spec.name {
        refuse!("{} is a profile of `{}`, not of --model `{}`", path.display(), profile.model, set.spec.name);
    }
    let e = &profile.engine;
    let sched = goodput_scheduler::SchedulerConfig {
        max_num_batched_tokens: e.max_num_batched_tokens,
        max_prefill_tokens: e.max_prefill_tokens,
        max_num_seqs: e.max_num_seqs,
        num_blocks: e.num_blocks,
        block_size: e.block_size,
        enable_prefix_caching: e.prefix_caching,
        max_model_len: e.max_model_len,
        eos_token_id: set.spec.eos_token_id,
        group_windows: set.spec.kv_groups().iter().map(|g| g.window).collect(),
    };
    let r = &profile.fit.residuals;
    Ok(ReplicaSpec {
        sched,
        cost: profile.step_cost(),
        gpus: 1,
        projection: None,
        gpu: format!("the machine of {}", path.display()),
        layout: format!("({} {})", profile.dtype, profile.source),
        error_bar: format!(
            "the profile's step times are within {:.0} % (P50) and {:.0} % (P90) of its fit; the fleet around them is simulated",
            r.p50 * 100.0,
            r.p90 * 100.0
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::{hold, TemplateTokens};
    use goodput_core::{Chunk, Stamp};

    #[test]
    fn a_held_first_text_comes_with_the_token_that_ends_the_hold() {
        let chunks = |n: u64| (0..n).map(|i| Chunk { at: Stamp(100 + 10 * i), tokens: 1 }).collect::<Vec<_>>();
        let mut c = chunks(5);
        hold(&mut c, 2);
        // Tokens at 100, 110, 120 go together at 120; the rest as they came.
        assert_eq!(
            c,
            [
                Chunk { at: Stamp(120), tokens: 3 },
                Chunk { at: Stamp(130), tokens: 1 },
                Chunk { at: Stamp(140), tokens: 1 }
            ]
        );
        let mut c = chunks(3);
        hold(&mut c, 0);
        assert_eq!(c, chunks(3), "no hold, no change");
        hold(&mut c, 9);
        assert_eq!(c, [Chunk { at: Stamp(120), tokens: 3 }], "a hold past the last token ends with it");
        let mut none: Vec<Chunk> = Vec::new();
        hold(&mut none, 3);
        assert!(none.is_empty());
    }

    #[test]
    fn the_template_wraps_each_prompt_in_a_shared_head_and_a_tail() {
        let t = TemplateTokens::parse("3, 2").unwrap();
        assert_eq!(t, TemplateTokens { head: 3, tail: 2 });
        let v = t.around(&[100, 101], 4, 1000);
        assert_eq!(v, [0, 1, 2, 100, 101, 3, 4]);
        assert!(v.capacity() >= 11, "room for the output");
        // Ids stay within the vocabulary.
        assert_eq!(TemplateTokens { head: 3, tail: 0 }.around(&[], 0, 2), [0, 1, 0]);
        assert!(TemplateTokens::parse("3").unwrap_err().expected.contains("HEAD,TAIL"));
        assert!(TemplateTokens::parse("a,2").is_err() && TemplateTokens::parse("70000,0").is_err());
        assert!(
            TemplateTokens::parse("18446744073709551615,1").unwrap_err().expected.contains("no chat template"),
            "no overflow"
        );
    }
}
