//! Scenarios: input and output length distributions and prompt synthesis.
//!
//! Prompts are random token ids, seeded per request, so no two requests share a prefix and
//! nothing hits the prefix cache by accident; `shared_prefix` puts the same first tokens in
//! every prompt to measure the cache-hit case on purpose.

use crate::prompts::Prompts;
use goodput_core::{SamplingParams, TokenId, WorkRequest};
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, LogNormal, Normal};
use serde::{Deserialize, Serialize};

/// `n` random token ids from `rng`, clear of the ids 0–2 that most vocabularies reserve.
pub(crate) fn random_tokens(rng: &mut impl Rng, n: usize, vocab: usize) -> Vec<TokenId> {
    let hi = vocab.max(4) as TokenId;
    (0..n).map(|_| rng.random_range(3..hi)).collect()
}

/// The longest a tool, retrieval or think time may wait (an hour): a longer one holds the run.
pub const MAX_LATENCY_MS: usize = 3_600_000;

/// The largest mean, median or normal spread a length distribution may state (2^32).
pub const MAX_CENTRE: f64 = 4_294_967_296.0;
/// The widest log-normal sigma a length distribution may state.
pub const MAX_SIGMA: f64 = 16.0;

/// A distribution of token counts, clamped to `[min, max]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", deny_unknown_fields)]
pub enum LengthDist {
    Fixed {
        n: usize,
    },
    Uniform {
        min: usize,
        max: usize,
    },
    Normal {
        mean: f64,
        std: f64,
        min: usize,
        max: usize,
    },
    #[serde(alias = "lognormal")]
    LogNormal {
        median: f64,
        sigma: f64,
        min: usize,
        max: usize,
    },
}

impl LengthDist {
    /// Checks the distribution's own bounds: `1 ≤ min ≤ max`, a centre (mean, median) that is
    /// a finite number of tokens in `[0, 2^32]`, and a spread that is finite and non-negative,
    /// at most 2^32 tokens for a normal and at most [`MAX_SIGMA`] for a log-normal (e^16 ≈ 9
    /// million times the median: anything wider is a typo, not a workload).
    pub fn validate(&self, what: &str) -> Result<(), crate::Invalid> {
        let bad = |m: String| Err(crate::Invalid::new(what, m));
        let centre_ok = |c: f64| c.is_finite() && (0.0..=MAX_CENTRE).contains(&c);
        match *self {
            LengthDist::Fixed { n: 0 } => bad("a fixed length must be at least 1".into()),
            LengthDist::Uniform { min, max } if min == 0 || min > max => bad("uniform needs 1 ≤ min ≤ max".into()),
            LengthDist::Normal { min, max, .. } | LengthDist::LogNormal { min, max, .. } if min == 0 || min > max => {
                bad(format!("needs 1 ≤ min ≤ max (min {min}, max {max})"))
            }
            LengthDist::Normal { mean, std, .. }
                if !(centre_ok(mean) && std.is_finite() && (0.0..=MAX_CENTRE).contains(&std)) =>
            {
                bad(format!("normal needs a mean and std between 0 and {MAX_CENTRE} (mean {mean}, std {std})"))
            }
            LengthDist::LogNormal { median, sigma, .. }
                if !(centre_ok(median) && sigma.is_finite() && (0.0..=MAX_SIGMA).contains(&sigma)) =>
            {
                bad(format!(
                    "lognormal needs a median between 0 and {MAX_CENTRE} and a sigma between 0 and {MAX_SIGMA} \
                     (median {median}, sigma {sigma})"
                ))
            }
            _ => Ok(()),
        }
    }

    /// Largest value it can take.
    pub fn max(&self) -> usize {
        match *self {
            LengthDist::Fixed { n } => n,
            LengthDist::Uniform { max, .. } | LengthDist::Normal { max, .. } | LengthDist::LogNormal { max, .. } => max,
        }
    }

    pub fn sample(&self, rng: &mut impl Rng) -> usize {
        // In integers: an f64 holds no usize above 2^53 exactly, so a bound there would move.
        let clamp = |x: f64, min: usize, max: usize| (x.round() as usize).max(min).min(max);
        match *self {
            LengthDist::Fixed { n } => n,
            LengthDist::Uniform { min, max } => rng.random_range(min..=max),
            LengthDist::Normal { mean, std, min, max } => match Normal::new(mean, std) {
                Ok(d) => clamp(d.sample(rng), min, max),
                Err(_) => clamp(mean, min, max),
            },
            LengthDist::LogNormal { median, sigma, min, max } => match LogNormal::new(median.max(1.0).ln(), sigma) {
                Ok(d) => clamp(d.sample(rng), min, max),
                Err(_) => clamp(median, min, max),
            },
        }
    }

    pub fn describe(&self) -> String {
        match *self {
            LengthDist::Fixed { n } => format!("{n}"),
            LengthDist::Uniform { min, max } => format!("uniform {min}–{max}"),
            LengthDist::Normal { mean, std, min, max } => format!("normal {mean}±{std} in {min}–{max}"),
            LengthDist::LogNormal { median, sigma, min, max } => {
                format!("lognormal median {median} σ {sigma} in {min}–{max}")
            }
        }
    }
}

/// What the requests of a run look like.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    pub input: LengthDist,
    pub output: LengthDist,
    /// Tokens every prompt starts with (the cache-hit case, reported as such); 0 = unique prompts.
    #[serde(default)]
    pub shared_prefix: usize,
    /// Reasoning workloads: the share of each output that is reasoning — the first
    /// round(share × output) tokens, asked for through `SamplingParams::reasoning_tokens`
    /// (goodput's server streams them as reasoning; the in-process engine records them so). A
    /// model that reasons on its own ignores it. `None`: no reasoning asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_share: Option<f64>,
    /// How a built-in was fitted to the model (stated wherever the lengths are); never read
    /// from a file.
    #[serde(skip)]
    pub note: Option<String>,
}

/// The built-in scenarios of the seeds, named once: the single-request ones
/// ([`Scenario::builtin`]) and those run by runners of their own (multi-turn sessions, agent
/// tasks, RAG queries).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Builtin {
    ShortQa,
    LongGen,
    LongContext,
    Reasoning,
    MultiTurn,
    Agent,
    Rag,
}

impl Builtin {
    pub const ALL: [Builtin; 7] = [
        Builtin::ShortQa,
        Builtin::LongGen,
        Builtin::LongContext,
        Builtin::Reasoning,
        Builtin::MultiTurn,
        Builtin::Agent,
        Builtin::Rag,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Builtin::ShortQa => "short-qa",
            Builtin::LongGen => "long-gen",
            Builtin::LongContext => "long-context",
            Builtin::Reasoning => "reasoning",
            Builtin::MultiTurn => "multi-turn",
            Builtin::Agent => "agent",
            Builtin::Rag => "rag",
        }
    }

    /// The built-in scenario of this name.
    pub fn named(name: &str) -> Option<Builtin> {
        Builtin::ALL.into_iter().find(|b| b.name() == name)
    }

    /// Whether it is a scenario of single requests (a [`Scenario`]).
    pub fn single(self) -> bool {
        !matches!(self, Builtin::MultiTurn | Builtin::Agent | Builtin::Rag)
    }

    /// Every name, `, `-separated; `single`: the single-request ones only.
    pub fn names(single: bool) -> String {
        let names: Vec<&str> = Builtin::ALL.into_iter().filter(|b| !single || b.single()).map(Builtin::name).collect();
        names.join(", ")
    }
}

impl Scenario {
    /// The built-in single-request scenarios of the seeds ([`Builtin::single`]; RAG,
    /// multi-turn and agent come as their own runners).
    pub fn builtin(name: &str, max_model_len: usize) -> Result<Self, crate::WorkloadError> {
        let Some(b) = Builtin::named(name) else {
            return Err(crate::WorkloadError::Unknown { name: name.into(), known: Builtin::names(false) });
        };
        if !b.single() {
            let problem = format!(
                "runs {} of its own, not single requests; here a single-request scenario is needed: {}",
                if b == Builtin::MultiTurn { "sessions" } else { "tasks" },
                Builtin::names(true)
            );
            return Err(crate::Invalid::new(format!("scenario {name}"), problem).into());
        }
        let s = match name {
            // Short questions and answers: input ≤ 200 tokens, output ≤ 100.
            "short-qa" => Scenario {
                name: name.into(),
                input: LengthDist::Uniform { min: 50, max: 200 },
                output: LengthDist::Uniform { min: 50, max: 100 },
                shared_prefix: 0,
                reasoning_share: None,
                note: None,
            },
            // A reasoning model's answer: 1K in, 8K out, three quarters of it thinking.
            "reasoning" => Self::reasoning(max_model_len)?,
            // Long generation: ≈500 in, ≥1500 out.
            "long-gen" => Self::long_gen(max_model_len)?,
            // Long context: 8K–32K in, within the model's limit.
            "long-context" => {
                let max_in = 32_768.min(max_model_len.saturating_sub(256));
                if max_in < 8192 {
                    let problem = format!(
                        "needs 8K–32K input tokens but the model's context is {max_model_len}: \
                         run it on a model of at least 8448 positions, e.g. `--model qwen2.5-0.5b` (32768)"
                    );
                    return Err(crate::Invalid::new("scenario long-context", problem).into());
                }
                Scenario {
                    name: name.into(),
                    input: LengthDist::Uniform { min: 8192, max: max_in },
                    output: LengthDist::Uniform { min: 100, max: 200 },
                    shared_prefix: 0,
                    reasoning_share: None,
                    note: None,
                }
            }
            _ => unreachable!("every single-request built-in is matched above"),
        };
        Ok(s)
    }

    /// Long generation: ≈500 tokens in (400–600), 1500–1600 out. On a model whose context
    /// holds less than 2200 positions (the built-in `tiny` has 2048) the output keeps its
    /// length — it is what the scenario measures — and the input shrinks to fit, with the
    /// scaling stated in [`Scenario::note`]; below 1800 positions it is refused.
    fn long_gen(max_model_len: usize) -> Result<Self, crate::WorkloadError> {
        let (out_min, out_max) = (1500, 1600);
        let room = max_model_len.saturating_sub(out_max).min(600);
        if room < 200 {
            let problem = format!(
                "needs about 500 input and 1600 output tokens, which exceeds the model's context of \
                 {max_model_len}: run it on a model of at least 1800 positions, e.g. `--model smollm2-135m` (8192)"
            );
            return Err(crate::Invalid::new("scenario long-gen", problem).into());
        }
        let (min, max) = (room * 2 / 3, room);
        let input = LengthDist::Normal { mean: (room * 5 / 6) as f64, std: (room / 12) as f64, min, max };
        let note = (room < 600).then(|| {
            format!("input scaled from 400–600 to {min}–{max} tokens to fit the model's context of {max_model_len}")
        });
        Ok(Scenario {
            name: "long-gen".into(),
            input,
            output: LengthDist::Uniform { min: out_min, max: out_max },
            shared_prefix: 0,
            reasoning_share: None,
            note,
        })
    }

    /// The share of a `reasoning` scenario's output that is reasoning.
    pub const REASONING_SHARE: f64 = 0.75;

    /// A reasoning model's request, InferenceMAX's reasoning shape: 1024 tokens in, 8192 out,
    /// of which [`Self::REASONING_SHARE`] is reasoning. On a model whose context holds less
    /// than 9216 positions both lengths shrink by the same factor (keeping 1:8) to fit it less
    /// 128 positions (room for a chat template and a text prompt's re-tokenization: reasoning
    /// is split in chat streams), stated in [`Scenario::note`]; below 416 positions (32 in,
    /// 256 out) it is refused.
    fn reasoning(max_model_len: usize) -> Result<Self, crate::WorkloadError> {
        let (full_in, full_out) = (1024usize, 8192usize);
        let room = if max_model_len >= full_in + full_out { max_model_len } else { max_model_len.saturating_sub(128) };
        let scale = (room as f64 / (full_in + full_out) as f64).min(1.0);
        let (n_in, n_out) = ((full_in as f64 * scale) as usize, (full_out as f64 * scale) as usize);
        if n_in < 32 {
            let problem = format!(
                "needs 1024 input and 8192 output tokens (at least 32 and 256 scaled down), which exceeds the \
                 model's context of {max_model_len}"
            );
            return Err(crate::Invalid::new("scenario reasoning", problem).into());
        }
        let note = (scale < 1.0).then(|| {
            format!("scaled from 1024 in / 8192 out to {n_in} / {n_out} to fit the model's context of {max_model_len}")
        });
        Ok(Scenario {
            name: "reasoning".into(),
            input: LengthDist::Fixed { n: n_in },
            output: LengthDist::Fixed { n: n_out },
            shared_prefix: 0,
            reasoning_share: Some(Self::REASONING_SHARE),
            note,
        })
    }

    /// Checks the scenario against the model before anything runs.
    /// Whether the scenario fits a model of `max_model_len` positions.
    pub fn validate(&self, max_model_len: usize) -> Result<(), crate::WorkloadError> {
        Ok(self.check(max_model_len)?)
    }

    fn check(&self, max_model_len: usize) -> Result<(), crate::Invalid> {
        self.input.validate(&format!("scenario {} input", self.name))?;
        self.output.validate(&format!("scenario {} output", self.name))?;
        let bad = |problem: String| Err(crate::Invalid::new(format!("scenario {}", self.name), problem));
        let longest = self.input.max().saturating_add(self.output.max());
        if longest > max_model_len {
            return bad(format!(
                "up to {} input + {} output tokens exceeds the model's context of {max_model_len}",
                self.input.max(),
                self.output.max()
            ));
        }
        if self.shared_prefix >= self.input.max() {
            return bad("shared_prefix must be shorter than the inputs".into());
        }
        if let Some(r) = self.reasoning_share.filter(|r| !(r.is_finite() && (0.0..=1.0).contains(r))) {
            return bad(format!("reasoning_share must be between 0 and 1, got {r}"));
        }
        Ok(())
    }

    /// Request number `id` of a run seeded with `seed`: the same (seed, id) always gives the
    /// same request, whatever the order in which requests are issued.
    pub fn request(&self, seed: u64, id: u64, vocab: usize) -> WorkRequest {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed ^ id.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let n_in = self.input.sample(&mut rng).max(self.shared_prefix + 1);
        let n_out = self.output.sample(&mut rng);
        // Ids 0–2 are special in most vocabularies; stay clear of them.
        let hi = vocab.max(4) as TokenId;
        let mut prefix_rng = rand::rngs::SmallRng::seed_from_u64(seed ^ 0x5EED);
        let mut prompt: Vec<TokenId> = (0..self.shared_prefix).map(|_| prefix_rng.random_range(3..hi)).collect();
        prompt.extend((self.shared_prefix..n_in).map(|_| rng.random_range(3..hi)));
        let mut params = SamplingParams::greedy_exact(n_out);
        params.reasoning_tokens = self.reasoning_share.map_or(0, |r| ((r * n_out as f64).round() as usize).min(n_out));
        WorkRequest { session: None, id, prompt, params }
    }

    pub fn describe(&self) -> String {
        format!("{}: {}", self.name, self.describe_lengths())
    }

    /// The lengths alone: `input uniform 50–200, output uniform 50–100 tokens`.
    pub fn describe_lengths(&self) -> String {
        let mut s = format!("input {}, output {} tokens", self.input.describe(), self.output.describe());
        if self.shared_prefix > 0 {
            s.push_str(&format!(", shared prefix {}", self.shared_prefix));
        }
        if let Some(r) = self.reasoning_share {
            s.push_str(&format!(", {:.0} % of each output reasoning", r * 100.0));
        }
        if let Some(note) = &self.note {
            s.push_str(&format!(" ({note})"));
        }
        s
    }
}

impl Prompts for Scenario {
    fn request(&self, seed: u64, id: u64, _index: u64, vocab: usize) -> WorkRequest {
        Scenario::request(self, seed, id, vocab)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_respect_their_bounds_and_prompts_are_unique() {
        let s = Scenario::builtin("short-qa", 2048).unwrap();
        s.validate(2048).unwrap();
        let reqs: Vec<WorkRequest> = (0..200).map(|i| s.request(1, i, 32000)).collect();
        for r in &reqs {
            assert!((50..=200).contains(&r.prompt.len()));
            assert!((50..=100).contains(&r.params.max_tokens));
            assert!(r.params.ignore_eos);
            assert!(r.prompt.iter().all(|&t| (3..32000).contains(&t)));
        }
        let mut firsts: Vec<&[u32]> = reqs.iter().map(|r| &r.prompt[..16]).collect();
        firsts.sort();
        firsts.dedup();
        assert_eq!(firsts.len(), 200, "no two prompts share a first block");
        assert_eq!(s.request(1, 7, 32000), s.request(1, 7, 32000), "deterministic per (seed, id)");
        assert_ne!(s.request(1, 7, 32000), s.request(2, 7, 32000));
    }

    #[test]
    fn shared_prefix_and_validation() {
        let mut s = Scenario::builtin("short-qa", 2048).unwrap();
        s.shared_prefix = 32;
        let a = s.request(1, 1, 1000);
        let b = s.request(1, 2, 1000);
        assert_eq!(a.prompt[..32], b.prompt[..32]);
        assert_ne!(a.prompt[32..40], b.prompt[32..40]);
        assert!(Scenario::builtin("short-qa", 2048)
            .unwrap()
            .validate(256)
            .unwrap_err()
            .to_string()
            .contains("exceeds"));
        let err = Scenario::builtin("long-context", 2048).unwrap_err().to_string();
        assert!(err.contains("8K") && err.contains("--model qwen2.5-0.5b"), "{err}");
        let unknown = Scenario::builtin("chat", 2048).unwrap_err().to_string();
        assert!(unknown.contains("unknown scenario") && unknown.contains(&Builtin::names(false)), "{unknown}");
        assert!(unknown.contains("reasoning") && unknown.contains("rag"), "{unknown}");
        let sessions = Scenario::builtin("multi-turn", 2048).unwrap_err().to_string();
        assert!(sessions.contains("runs sessions") && sessions.contains("reasoning"), "{sessions}");
        // Every single-request built-in is a scenario; names are each one's own.
        for b in Builtin::ALL.into_iter().filter(|b| b.single()) {
            assert_eq!(Scenario::builtin(b.name(), 40_000).unwrap().name, b.name());
        }
        assert!(LengthDist::Uniform { min: 5, max: 2 }.validate("x").is_err());
        for (mean, std) in [(f64::NAN, 1.0), (f64::INFINITY, 1.0), (-5.0, 1.0), (10.0, 1e308), (10.0, -1.0)] {
            let err = LengthDist::Normal { mean, std, min: 1, max: 9 }.validate("input").unwrap_err();
            assert!(err.what == "input" && err.problem.starts_with("normal needs"), "{mean} {std}: {err}");
        }
        for (median, sigma) in [(f64::NAN, 0.5), (-1.0, 0.5), (100.0, 1e308), (100.0, f64::NAN)] {
            assert!(LengthDist::LogNormal { median, sigma, min: 1, max: 9 }.validate("x").is_err(), "{median} {sigma}");
        }
        LengthDist::LogNormal { median: 150.0, sigma: 0.5, min: 20, max: 1000 }.validate("x").unwrap();
    }

    #[test]
    fn distributions_stay_in_bounds() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(3);
        let d = LengthDist::LogNormal { median: 100.0, sigma: 1.0, min: 10, max: 300 };
        let xs: Vec<usize> = (0..2000).map(|_| d.sample(&mut rng)).collect();
        assert!(xs.iter().all(|&x| (10..=300).contains(&x)));
        let mut sorted = xs.clone();
        sorted.sort();
        let median = sorted[1000] as f64;
        assert!((80.0..125.0).contains(&median), "median {median}");
    }

    #[test]
    fn reasoning_is_1k_in_8k_out_three_quarters_thinking_scaled_to_the_context() {
        let full = Scenario::builtin("reasoning", 32_768).unwrap();
        full.validate(32_768).unwrap();
        let r = full.request(1, 1, 32_000);
        assert_eq!((r.prompt.len(), r.params.max_tokens, r.params.reasoning_tokens), (1024, 8192, 6144));
        assert!(
            full.note.is_none() && full.describe().contains("75 % of each output reasoning"),
            "{}",
            full.describe()
        );
        // The tiny model's 2048 positions less 128 for a chat template: 1:8 kept, 213 in and
        // 1706 out, 1280 thinking.
        let tiny = Scenario::builtin("reasoning", 2048).unwrap();
        tiny.validate(2048).unwrap();
        let r = tiny.request(1, 1, 32_000);
        assert_eq!((r.prompt.len(), r.params.max_tokens, r.params.reasoning_tokens), (213, 1706, 1280));
        assert!(tiny.describe().contains("scaled from 1024 in / 8192 out to 213 / 1706"), "{}", tiny.describe());
        assert!(Scenario::builtin("reasoning", 200).is_err());
        let bad = Scenario { reasoning_share: Some(1.5), ..tiny.clone() };
        assert!(bad.validate(2048).unwrap_err().to_string().contains("reasoning_share must be between 0 and 1"));
        // Without a share nothing is asked.
        assert_eq!(Scenario::builtin("short-qa", 2048).unwrap().request(1, 1, 100).params.reasoning_tokens, 0);
    }

    #[test]
    fn long_gen_keeps_its_output_and_fits_its_input_to_the_context() {
        let full = Scenario::builtin("long-gen", 4096).unwrap();
        assert_eq!((full.input.max(), full.output.max(), full.note.as_deref()), (600, 1600, None));
        let tiny = Scenario::builtin("long-gen", 2048).unwrap();
        tiny.validate(2048).unwrap();
        assert_eq!((tiny.input.max(), tiny.output.max()), (448, 1600));
        assert!(tiny.describe().contains("scaled from 400–600 to 298–448"), "{}", tiny.describe());
        let err = Scenario::builtin("long-gen", 1024).unwrap_err().to_string();
        assert!(err.contains("at least 1800") && err.contains("smollm2-135m"), "{err}");
    }
}
