//! The profiling grid: requests shaped so that the engine's steps cover what the step-cost
//! model must tell apart — prefill chunks at several contexts, batches of short prompts (many
//! sampled rows, no decode), decode batches at several contexts, and decodes mixed with a new
//! prompt. Run through the real engine thread, so the steps and the gaps between them are the
//! ones a run sees. Bounded in time: the grid is taken in rounds, and stops between two probes
//! once its time is spent.
//!
//! Prefill chunks at a context use the prefix cache: the context is prefilled once, then the
//! same prefix followed by `chunk` new tokens computes only those, attending to all.

use super::error::ProfilingError;
use goodput_core::{SamplingParams, StepRecord, TokenId};
use goodput_engine::{EngineHandle, RequestEvent, RequestStream};
use rand::{Rng, SeedableRng};
use std::time::{Duration, Instant};

type Result<T, E = ProfilingError> = std::result::Result<T, E>;

/// One shape of load the grid runs.
#[derive(Clone, Debug, PartialEq)]
pub enum Probe {
    /// `chunk` new prompt tokens after `context` cached ones.
    Chunk { context: usize, chunk: usize },
    /// `batch` prompts of `len` tokens submitted together, one output token each.
    Prompts { batch: usize, len: usize },
    /// `batch` sequences of `context` prompt tokens decoding `steps` tokens.
    Decode { batch: usize, context: usize, steps: usize },
    /// A decode batch joined by a new prompt of `chunk` tokens after its third token.
    Mixed { batch: usize, context: usize, chunk: usize },
    /// `batch` sequences whose prompts of `context` tokens begin with the same `prefix` (a
    /// whole number of blocks, prefilled once before them, shared through the prefix cache),
    /// decoding `steps` tokens: the batch reads the prefix's K/V once from memory
    /// (`Term::RepeatedContext` prices the repeats), as turns of conversations or agents
    /// that share a system prompt and history do.
    Shared { batch: usize, prefix: usize, context: usize, steps: usize },
}

/// Tokens each decode probe generates: its first decode steps run slower than the rest (after
/// the prefill, up to twice as long on the CPU engine, the excess gone after 4–12 steps;
/// `Term::AfterPrefill` prices them apart), and a long generation's steps are nearly all of
/// the rest, so a probe must run well past them.
pub const DECODE_STEPS: usize = 32;

/// How long the engine is left idle before each prompt probe (`Chunk`, `Prompts`), in turn,
/// in milliseconds: a prompt that finds the engine idle for tens of milliseconds prefills
/// 15–30 % slower than one queued behind a step (`Term::AfterIdle` prices it), and a
/// closed loop or a low rate meets that on every request. About 1.5 s of a round.
pub const IDLES_MS: [u64; 6] = [0, 1, 4, 16, 64, 256];

/// The engine's limits a grid must respect.
pub struct Limits {
    pub max_model_len: usize,
    pub budget: usize,
    pub max_seqs: usize,
    /// Tokens the KV pool holds.
    pub pool_tokens: usize,
    /// A device that runs large batches (a GPU): decode batches and batches of prompts up to
    /// the sequence cap, not 64, so a sweep to hundreds of users is measured, not extrapolated.
    pub wide: bool,
}

/// The probes of one round, within `l`.
pub fn probes(l: &Limits) -> Vec<Probe> {
    let fits = |tokens: usize| tokens * 10 <= l.pool_tokens * 8;
    let mut out = Vec::new();
    let contexts = [0, 256, 1024, 4096, 16384];
    for chunk in [16, 64, 256, 1024] {
        for context in contexts {
            if chunk <= l.budget && context + chunk + 1 < l.max_model_len && fits(context + chunk) {
                out.push(Probe::Chunk { context, chunk });
            }
        }
    }
    let wide: &[usize] = if l.wide { &[128, 256] } else { &[] };
    for batch in [4, 16, 64].iter().chain(wide).copied() {
        for len in [8, 32] {
            if batch <= l.max_seqs && batch * len <= l.budget && fits(batch * (len + 1)) {
                out.push(Probe::Prompts { batch, len });
            }
        }
    }
    // Decode batches crossed with contexts (batch and context must not move together, or the
    // fit cannot tell a sequence's cost from a context token's), up to 32K tokens in all so
    // their prefill stays short.
    // Batches on either side of the powers of two, where kernels switch; contexts per sequence
    // on the decode-attention table's knots (64, 256, 1024) and ¾ of the model's (a long
    // context's K/V no longer fits a cache: its cost per token grows), so that a few long
    // sequences and many short ones of the same Σ context are both measured. Up to 66K
    // tokens in all (64 × 1024; the time a probe may take drops what a slow model cannot
    // prefill). On a wide device, batches to 256 (the graph buckets' edges) and 128K tokens.
    let long = l.max_model_len * 3 / 4;
    let (wide, most): (&[usize], usize) = if l.wide { (&[96, 128, 129, 192, 256], 131_072) } else { (&[], 66_560) };
    for batch in [1, 2, 3, 4, 5, 8, 9, 16, 17, 32, 33, 64].iter().chain(wide).copied() {
        for context in [64, 256, 1024.min(long / 2), long] {
            let total = batch * (context + 8);
            if batch <= l.max_seqs && total <= most && context + 8 < l.max_model_len && fits(total) {
                out.push(Probe::Decode { batch, context, steps: DECODE_STEPS });
            }
        }
    }
    // Shared prefixes at 1.8–2.4 times the distinct positions, at the batches and lengths of
    // conversations' decodes.
    for (batch, prefix, context) in [(8, 128, 256), (4, 768, 1024), (8, 512, 768), (16, 256, 512), (32, 512, 1024)] {
        let total = prefix + batch * (context - prefix + 8);
        if batch <= l.max_seqs && total <= most && context + 8 < l.max_model_len && fits(total) {
            out.push(Probe::Shared { batch, prefix, context, steps: DECODE_STEPS });
        }
    }
    for (batch, context, chunk) in [(8, 256, 64), (8, 256, 512), (32, 128, 256), (4, 1024, 1024)] {
        let total = batch * (context + 16) + chunk;
        if batch < l.max_seqs && chunk + batch <= l.budget && context + chunk + 16 < l.max_model_len && fits(total) {
            out.push(Probe::Mixed { batch, context, chunk });
        }
    }
    out
}

/// What a probe computes, to price it before it runs: tokens through the linear layers (a
/// decode step counted as ten tokens whatever its batch) and query-key pairs of attention. A
/// long prompt's attention grows with its square and, on a CPU without matrix units, costs
/// more than its linear layers (`tiny`'s profile on an AVX-512 EPYC priced a 1 536-token
/// prompt at 0.29 s of attention and 0.09 s of linear layers), so tokens alone underprice
/// the long-context probes by 3–4×.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Work {
    pub tokens: f64,
    pub pairs: f64,
}

/// Seconds per unit of [`Work`], measured by the warm-up probes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rates {
    pub per_token: f64,
    pub per_pair: f64,
}

impl Rates {
    /// The rates that price `a` (the tokens-heavy probe) and `b` (the pairs-heavy one) at
    /// their measured seconds (two equations, two unknowns), neither below 0: when the two
    /// are not told apart (or one rate comes out negative), `a` prices tokens alone, or `b`
    /// pairs alone.
    pub fn solve((a, ta): (Work, f64), (b, tb): (Work, f64)) -> Rates {
        let det = a.tokens * b.pairs - b.tokens * a.pairs;
        let (token, pair) = if det.abs() > f64::EPSILON * a.tokens * b.pairs {
            ((ta * b.pairs - tb * a.pairs) / det, (a.tokens * tb - b.tokens * ta) / det)
        } else {
            (f64::NAN, f64::NAN)
        };
        match (token >= 0.0, pair >= 0.0) {
            (true, true) => Rates { per_token: token, per_pair: pair },
            (false, true) if b.pairs > 0.0 => Rates { per_token: 0.0, per_pair: tb / b.pairs },
            _ => Rates { per_token: ta / a.tokens.max(1.0), per_pair: 0.0 },
        }
    }

    /// The seconds `w` is expected to take.
    pub fn price(&self, w: Work) -> f64 {
        w.tokens * self.per_token + w.pairs * self.per_pair
    }
}

/// Query-key pairs of a causal prompt of `n` tokens after `context` cached ones.
fn pairs(context: usize, n: usize) -> f64 {
    (n * context) as f64 + (n * (n + 1) / 2) as f64
}

impl Probe {
    /// What the probe computes (see [`Work`]).
    pub fn work(&self) -> Work {
        let (tokens, pairs) = match *self {
            Probe::Chunk { context, chunk } => (context + chunk, pairs(0, context) + pairs(context, chunk)),
            Probe::Prompts { batch, len } => (batch * len, batch as f64 * pairs(0, len)),
            Probe::Decode { batch, context, steps } => {
                (batch * context + 10 * steps, batch as f64 * pairs(0, context) + (steps * batch * context) as f64)
            }
            Probe::Shared { batch, prefix, context, steps } => (
                prefix + batch * (context - prefix) + 10 * steps,
                pairs(0, prefix) + batch as f64 * pairs(prefix, context - prefix) + (steps * batch * context) as f64,
            ),
            Probe::Mixed { batch, context, chunk } => (
                batch * context + chunk + 10 * 16,
                batch as f64 * pairs(0, context) + pairs(0, chunk) + (16 * batch * context) as f64,
            ),
        };
        Work { tokens: tokens as f64, pairs }
    }
}

/// Runs probes on the engine behind `h` until `time` is spent (whole rounds of every probe,
/// in a shuffled order each round), and returns the steps it took.
pub struct Grid<'a> {
    pub h: &'a EngineHandle,
    pub steps: &'a flume::Receiver<StepRecord>,
    pub vocab: usize,
    /// Probes kept after pricing them (see [`Grid::run`]).
    pub kept: usize,
    rng: rand::rngs::SmallRng,
    /// Prompt probes begun, which picks the next idle from [`IDLES_MS`].
    prompt_probes: usize,
}

impl<'a> Grid<'a> {
    pub fn new(h: &'a EngineHandle, steps: &'a flume::Receiver<StepRecord>, vocab: usize, seed: u64) -> Self {
        Self { h, steps, vocab, kept: 0, rng: rand::rngs::SmallRng::seed_from_u64(seed), prompt_probes: 0 }
    }

    /// Runs rounds of `probes` until `time` has passed; returns the steps and the rounds begun.
    pub fn run(
        &mut self,
        probes: &[Probe],
        time: Duration,
        mut progress: impl FnMut(usize, usize),
    ) -> Result<(Vec<StepRecord>, usize)> {
        let t0 = Instant::now();
        let mut all = Vec::new();
        let mut rounds = 0;
        // Warm-up probes whose steps are dropped (first-touch of the pool, caches) price a
        // probe's work (see [`Work`]); probes that would take over a twelfth of the time are
        // left out (a large model on one core cannot prefill 32K tokens per probe).
        let cap = time.as_secs_f64() / 12.0;
        let rates = self.warm_up(probes, cap)?;
        let price = |p: &Probe| rates.price(p.work());
        let affordable: Vec<Probe> = probes.iter().filter(|p| price(p) <= cap).cloned().collect();
        let probes = if affordable.len() >= 4 { affordable } else { probes.to_vec() };
        self.kept = probes.len();
        'rounds: loop {
            rounds += 1;
            let mut order: Vec<&Probe> = probes.iter().collect();
            if rounds == 1 {
                // The cheapest first: a round cut short by the time still covers every batch
                // size (every knot of the tables) at a short context.
                order.sort_by(|a, b| price(a).total_cmp(&price(b)));
            } else {
                for i in (1..order.len()).rev() {
                    order.swap(i, self.rng.random_range(0..=i));
                }
            }
            for (i, p) in order.into_iter().enumerate() {
                if t0.elapsed() >= time {
                    break 'rounds;
                }
                self.probe(p)?;
                all.extend(self.steps.drain());
                progress(rounds, i + 1);
            }
        }
        Ok((all, rounds))
    }

    fn prompt(&mut self, len: usize) -> Vec<TokenId> {
        (0..len).map(|_| self.rng.random_range(3..self.vocab as u32)).collect()
    }

    fn submit(&self, prompt: Vec<TokenId>, out: usize) -> Result<RequestStream> {
        self.h.submit(prompt, SamplingParams::greedy_exact(out)).map_err(ProfilingError::Refused)
    }

    /// `batch` new prompts of `len` tokens, `out` tokens each, submitted together.
    fn submit_batch(&mut self, batch: usize, len: usize, out: usize) -> Result<Vec<RequestStream>> {
        let prompts: Vec<Vec<TokenId>> = (0..batch).map(|_| self.prompt(len)).collect();
        prompts.into_iter().map(|p| self.submit(p, out)).collect()
    }

    /// Runs the warm-up probes and drops their steps: a short decode batch twice (the first
    /// untimed: the engine's first steps touch the pool and caches) and the longest prompt at
    /// context 0 that the short batch prices within `cap` seconds, attention-heavy beside
    /// it. Returns the rates their times give.
    fn warm_up(&mut self, probes: &[Probe], cap: f64) -> Result<Rates> {
        let mut timed = |p: &Probe| -> Result<(Work, f64)> {
            let t = Instant::now();
            self.run_probe(p)?;
            let _ = self.steps.drain().count();
            Ok((p.work(), t.elapsed().as_secs_f64()))
        };
        let short = Probe::Decode { batch: 4, context: 64, steps: 4 };
        timed(&short)?;
        let short = timed(&short)?;
        let by_tokens = Rates::solve(short, (Work::default(), 0.0));
        let longest = probes
            .iter()
            .filter(|p| matches!(p, Probe::Chunk { context: 0, .. }) && by_tokens.price(p.work()) <= cap)
            .max_by(|a, b| a.work().tokens.total_cmp(&b.work().tokens));
        let long = match longest {
            Some(p) => timed(p)?,
            None => (Work::default(), 0.0),
        };
        Ok(Rates::solve(short, long))
    }

    /// Runs `p`, a prompt probe after the engine idled for the next of [`IDLES_MS`].
    fn probe(&mut self, p: &Probe) -> Result<()> {
        if matches!(p, Probe::Chunk { .. } | Probe::Prompts { .. }) {
            let idle = IDLES_MS[self.prompt_probes % IDLES_MS.len()];
            self.prompt_probes += 1;
            std::thread::sleep(Duration::from_millis(idle));
        }
        self.run_probe(p)
    }

    fn run_probe(&mut self, p: &Probe) -> Result<()> {
        match *p {
            Probe::Chunk { context, chunk } => {
                let prefix = self.prompt(context);
                if context > 0 {
                    self.submit(prefix.clone(), 1)?.wait()?;
                }
                let mut full = prefix;
                full.extend(self.prompt(chunk));
                self.submit(full, 1)?.wait()?;
            }
            Probe::Prompts { batch, len } => {
                let streams = self.submit_batch(batch, len, 1)?;
                wait_all(streams)?;
            }
            Probe::Decode { batch, context, steps } => {
                let streams = self.submit_batch(batch, context, steps)?;
                wait_all(streams)?;
            }
            Probe::Shared { batch, prefix, context, steps } => {
                let shared = self.prompt(prefix);
                self.submit(shared.clone(), 1)?.wait()?;
                let prompts: Vec<Vec<TokenId>> = (0..batch)
                    .map(|_| {
                        let mut p = shared.clone();
                        p.extend(self.prompt(context - prefix));
                        p
                    })
                    .collect();
                let streams: Vec<RequestStream> =
                    prompts.into_iter().map(|p| self.submit(p, steps)).collect::<Result<_>>()?;
                wait_all(streams)?;
            }
            Probe::Mixed { batch, context, chunk } => {
                let streams = self.submit_batch(batch, context, 16)?;
                // After the batch's third token, a new prompt joins the decodes.
                for ev in streams[0].events.iter() {
                    if matches!(ev, RequestEvent::Token { index: 2.., .. } | RequestEvent::Finished { .. }) {
                        break;
                    }
                }
                let p = self.prompt(chunk);
                let late = self.submit(p, 2)?;
                wait_all(streams)?;
                late.wait()?;
            }
        }
        Ok(())
    }
}

fn wait_all(streams: Vec<RequestStream>) -> Result<()> {
    for s in streams {
        s.wait()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_respect_the_engine_limits() {
        let l = Limits { max_model_len: 2048, budget: 512, max_seqs: 32, pool_tokens: 20_000, wide: false };
        let ps = probes(&l);
        assert!(ps.iter().any(|p| matches!(p, Probe::Chunk { context: 1024, .. })));
        assert!(ps.iter().any(|p| matches!(p, Probe::Mixed { .. })));
        for p in &ps {
            match *p {
                Probe::Chunk { context, chunk } => assert!(chunk <= 512 && context + chunk < 2048),
                Probe::Prompts { batch, len } => assert!(batch <= 32 && batch * len <= 512),
                Probe::Decode { batch, context, .. } => {
                    assert!(batch <= 32 && context < 2048 && batch * context < 16_000)
                }
                Probe::Mixed { batch, chunk, .. } => assert!(batch < 32 && chunk <= 512),
                Probe::Shared { batch, prefix, context, .. } => {
                    assert!(batch <= 32 && prefix % 16 == 0 && prefix < context && context < 2048)
                }
            }
        }
        // A small pool leaves out what would not fit.
        let small = probes(&Limits { pool_tokens: 1000, ..l });
        assert!(small.iter().all(|p| !matches!(p, Probe::Chunk { context: 1024, .. })));
    }

    #[test]
    fn a_probe_is_priced_with_its_attention() {
        // By hand: 33 prompts of 1 536 tokens (1 536 · 1 537 / 2 = 1 180 416 pairs each), then
        // 32 decode steps of 33 × 1 536 pairs and ten tokens each.
        let decode = Probe::Decode { batch: 33, context: 1536, steps: 32 }.work();
        assert_eq!(decode, Work { tokens: 50_688.0 + 320.0, pairs: 33.0 * 1_180_416.0 + 1_622_016.0 });
        // A chunk after a context: the context's own prefill, then 16 × 1 024 + 16 · 17 / 2.
        let chunk = Probe::Chunk { context: 1024, chunk: 16 }.work();
        assert_eq!(chunk, Work { tokens: 1040.0, pairs: 524_800.0 + 16_384.0 + 136.0 });
        // A shared prefix of 128 prefilled once (128 · 129 / 2 = 8 256 pairs), then 8 prompts
        // of 128 own tokens after it (128 · 128 + 128 · 129 / 2 = 24 640 each), then 32 steps
        // of 8 × 256 pairs.
        let shared = Probe::Shared { batch: 8, prefix: 128, context: 256, steps: 32 }.work();
        assert_eq!(shared, Work { tokens: 128.0 + 1024.0 + 320.0, pairs: 8256.0 + 8.0 * 24_640.0 + 65_536.0 });
        // The two warm-up probes' times give back the rates that made them.
        let r = Rates { per_token: 50e-6, per_pair: 200e-9 };
        let short = Probe::Decode { batch: 4, context: 64, steps: 4 }.work();
        let long = Probe::Chunk { context: 0, chunk: 1024 }.work();
        let solved = Rates::solve((short, r.price(short)), (long, r.price(long)));
        assert!((solved.per_token / r.per_token - 1.0).abs() < 1e-9, "{solved:?}");
        assert!((solved.per_pair / r.per_pair - 1.0).abs() < 1e-9, "{solved:?}");
        // 2.55 s of tokens and 8.12 s of pairs: over a twelfth of a 90 s grid (7.5 s), which
        // the short probe's time per token alone (2.87 s) kept.
        assert!((r.price(decode) - 10.665).abs() < 1e-3, "{}", r.price(decode));
        // No long prompt, or a pairs rate below 0 (noise): the short probe prices tokens alone.
        let alone = Rates { per_token: r.price(short) / 296.0, per_pair: 0.0 };
        assert_eq!(Rates::solve((short, r.price(short)), (Work::default(), 0.0)), alone);
        assert_eq!(Rates::solve((short, r.price(short)), (long, 0.0)), alone);
    }

    #[test]
    fn a_wide_device_measures_batches_up_to_the_sequence_cap() {
        let l = Limits { max_model_len: 8192, budget: 2048, max_seqs: 256, pool_tokens: 1 << 20, wide: true };
        let ps = probes(&l);
        let decode = |b: usize, c: usize| ps.contains(&Probe::Decode { batch: b, context: c, steps: DECODE_STEPS });
        // 128 × (1024 + 8) = 132,096 tokens: beyond 128K; 96 at 1024 and 256 at 256 are in.
        assert!(decode(256, 64) && decode(256, 256) && decode(96, 1024) && !decode(128, 1024) && decode(129, 64));
        assert!(ps.contains(&Probe::Prompts { batch: 256, len: 8 }));
        assert!(!ps.contains(&Probe::Prompts { batch: 256, len: 32 }), "256 × 32 is over the 2048-token budget");
        // Not wide: decode batches stop at 64.
        let cpu = probes(&Limits { wide: false, ..l });
        assert!(cpu.iter().all(|p| !matches!(p, Probe::Decode { batch, .. } if *batch > 64)));
    }
}
