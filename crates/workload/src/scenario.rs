//! Scenarios: input and output length distributions and prompt synthesis.
//!
//! Prompts are random token ids, seeded per request, so no two requests share a prefix and
//! nothing hits the prefix cache by accident; `shared_prefix` puts the same first tokens in
//! every prompt to measure the cache-hit case on purpose.

use goodput_core::{SamplingParams, TokenId, WorkRequest};
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, LogNormal, Normal};
use serde::{Deserialize, Serialize};

/// `n` random token ids from `rng`, clear of the ids 0–2 that most vocabularies reserve.
pub(crate) fn random_tokens(rng: &mut impl Rng, n: usize, vocab: usize) -> Vec<TokenId> {
    let hi = vocab.max(4) as TokenId;
    (0..n).map(|_| rng.random_range(3..hi)).collect()
}

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
    pub fn validate(&self, what: &str) -> Result<(), String> {
        let bad = |m: &str| Err(format!("{what}: {m}"));
        match *self {
            LengthDist::Fixed { n: 0 } => bad("a fixed length must be at least 1"),
            LengthDist::Uniform { min, max } if min == 0 || min > max => bad("uniform needs 1 ≤ min ≤ max"),
            LengthDist::Normal { std, min, max, .. } | LengthDist::LogNormal { sigma: std, min, max, .. }
                if min == 0 || min > max || !(std.is_finite() && std >= 0.0) =>
            {
                bad("needs 1 ≤ min ≤ max and a finite, non-negative spread")
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
}

impl Scenario {
    /// The built-in scenarios of the seeds (single-call ones; RAG, multi-turn and agent come
    /// as their own runners).
    pub fn builtin(name: &str, max_model_len: usize) -> Result<Self, crate::WorkloadError> {
        let s = match name {
            // Short questions and answers: input ≤ 200 tokens, output ≤ 100.
            "short-qa" => Scenario {
                name: name.into(),
                input: LengthDist::Uniform { min: 50, max: 200 },
                output: LengthDist::Uniform { min: 50, max: 100 },
                shared_prefix: 0,
            },
            // Long generation: ≈500 in, ≥1500 out.
            "long-gen" => Scenario {
                name: name.into(),
                input: LengthDist::Normal { mean: 500.0, std: 50.0, min: 400, max: 600 },
                output: LengthDist::Uniform { min: 1500, max: 1600 },
                shared_prefix: 0,
            },
            // Long context: 8K–32K in, within the model's limit.
            "long-context" => {
                let max_in = 32_768.min(max_model_len.saturating_sub(256));
                if max_in < 8192 {
                    return Err(crate::WorkloadError::Invalid(format!(
                        "scenario long-context needs 8K–32K input tokens but the model's context is {max_model_len}"
                    )));
                }
                Scenario {
                    name: name.into(),
                    input: LengthDist::Uniform { min: 8192, max: max_in },
                    output: LengthDist::Uniform { min: 100, max: 200 },
                    shared_prefix: 0,
                }
            }
            _ => return Err(crate::WorkloadError::Unknown { name: name.into() }),
        };
        Ok(s)
    }

    /// Checks the scenario against the model before anything runs.
    /// Whether the scenario fits a model of `max_model_len` positions.
    pub fn validate(&self, max_model_len: usize) -> Result<(), crate::WorkloadError> {
        self.check(max_model_len).map_err(crate::WorkloadError::Invalid)
    }

    fn check(&self, max_model_len: usize) -> Result<(), String> {
        self.input.validate(&format!("scenario {} input", self.name))?;
        self.output.validate(&format!("scenario {} output", self.name))?;
        let longest = self.input.max() + self.output.max();
        if longest > max_model_len {
            return Err(format!(
                "scenario {}: up to {} input + {} output tokens exceeds the model's context of {max_model_len}",
                self.name,
                self.input.max(),
                self.output.max()
            ));
        }
        if self.shared_prefix >= self.input.max() {
            return Err(format!("scenario {}: shared_prefix must be shorter than the inputs", self.name));
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
        WorkRequest { id, prompt, params: SamplingParams::greedy_exact(n_out) }
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
        s
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
        assert!(Scenario::builtin("long-context", 2048).unwrap_err().to_string().contains("8K"));
        assert!(Scenario::builtin("chat", 2048).unwrap_err().to_string().contains("unknown scenario"));
        assert!(LengthDist::Uniform { min: 5, max: 2 }.validate("x").is_err());
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
}
