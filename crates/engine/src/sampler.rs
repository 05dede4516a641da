//! Token choice per request: greedy, or seeded temperature / top-k / top-p sampling.

use goodput_core::SamplingParams;
use rand::{Rng, SeedableRng};

pub struct Sampler {
    temperature: f32,
    top_k: usize,
    top_p: f32,
    rng: rand::rngs::SmallRng,
    scratch: Vec<(f32, u32)>,
}

impl Sampler {
    pub fn new(p: &SamplingParams) -> Self {
        Self {
            temperature: p.temperature,
            top_k: p.top_k,
            top_p: p.top_p,
            rng: rand::rngs::SmallRng::seed_from_u64(p.seed),
            scratch: Vec::new(),
        }
    }

    /// This request's parameters for the GPU sampler (`sample_rows`, `cuda/kernels.rs`):
    /// `[temperature, top_k, top_p, u]`, drawing `u` from the request's generator exactly when
    /// [`Sampler::sample`] would draw (never for greedy), so a seed means the same stream.
    pub fn device_params(&mut self) -> [f32; 4] {
        if self.temperature < 1e-5 || self.top_k == 1 {
            return [0.0, 1.0, 1.0, 0.0];
        }
        [self.temperature, self.top_k as f32, self.top_p, self.rng.random::<f32>()]
    }

    /// Chooses the next token from one row of logits.
    pub fn sample(&mut self, logits: &[f32]) -> u32 {
        // Below 1e-5, logits / T overflow: that is greedy in all but name.
        if self.temperature < 1e-5 || self.top_k == 1 {
            return argmax(logits);
        }
        let inv_t = 1.0 / self.temperature;
        let c = &mut self.scratch;
        c.clear();
        c.extend(logits.iter().enumerate().map(|(i, &l)| (l * inv_t, i as u32)));
        let by_logit_desc = |a: &(f32, u32), b: &(f32, u32)| b.0.total_cmp(&a.0);
        if self.top_k > 0 && self.top_k < c.len() {
            c.select_nth_unstable_by(self.top_k - 1, by_logit_desc);
            c.truncate(self.top_k);
        }
        c.sort_unstable_by(by_logit_desc);
        let max = c[0].0;
        let mut sum = 0.0;
        for x in c.iter_mut() {
            x.0 = (x.0 - max).exp();
            sum += x.0;
        }
        for x in c.iter_mut() {
            x.0 /= sum;
        }
        if self.top_p < 1.0 {
            let mut acc = 0.0;
            let mut keep = c.len();
            for (i, x) in c.iter().enumerate() {
                acc += x.0;
                if acc >= self.top_p {
                    keep = i + 1;
                    break;
                }
            }
            c.truncate(keep);
        }
        let total: f32 = c.iter().map(|x| x.0).sum();
        let mut r = self.rng.random::<f32>() * total;
        for x in c.iter() {
            r -= x.0;
            if r <= 0.0 {
                return x.1;
            }
        }
        c[c.len() - 1].1
    }
}

/// Index of the largest value (first on ties): the greedy choice.
pub fn argmax(v: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x > v[best] {
            best = i;
        }
    }
    best as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The GPU sampler's parameters: greedy draws nothing (the stream stays where the CPU
    /// sampler leaves it), sampling draws exactly the uniform the CPU sampler would.
    #[test]
    fn device_params_draw_from_the_request_s_stream() {
        let mut g = Sampler::new(&SamplingParams { seed: 9, ..Default::default() });
        assert_eq!(g.device_params(), [0.0, 1.0, 1.0, 0.0]);
        let p = SamplingParams { temperature: 0.7, top_k: 40, top_p: 0.9, seed: 9, ..Default::default() };
        let mut s = Sampler::new(&p);
        let mut rng = rand::rngs::SmallRng::seed_from_u64(9);
        for _ in 0..3 {
            let want: f32 = rng.random();
            assert_eq!(s.device_params(), [0.7, 40.0, 0.9, want]);
        }
        let top1 = SamplingParams { temperature: 1.0, top_k: 1, ..Default::default() };
        assert_eq!(Sampler::new(&top1).device_params(), [0.0, 1.0, 1.0, 0.0]);
    }

    #[test]
    fn greedy_top_k_top_p_and_seeds() {
        let logits = [0.0f32, 5.0, 1.0, 4.9, -3.0];
        assert_eq!(Sampler::new(&SamplingParams::default()).sample(&logits), 1);
        let p = SamplingParams { temperature: 1.0, top_k: 2, seed: 3, ..Default::default() };
        let mut s = Sampler::new(&p);
        let draws: Vec<u32> = (0..200).map(|_| s.sample(&logits)).collect();
        assert!(draws.iter().all(|&t| t == 1 || t == 3), "top-k 2 keeps ids 1 and 3");
        assert!(draws.contains(&1) && draws.contains(&3));
        let again: Vec<u32> = {
            let mut s = Sampler::new(&p);
            (0..200).map(|_| s.sample(&logits)).collect()
        };
        assert_eq!(draws, again, "same seed, same tokens");
        // top-p 0.5: id 1 alone has p ≈ 0.5 of the mass after id 3 … keep the smallest set reaching 0.5.
        let p = SamplingParams { temperature: 1.0, top_p: 0.5, seed: 1, ..Default::default() };
        let mut s = Sampler::new(&p);
        assert!((0..100).all(|_| s.sample(&logits) == 1));
    }
}
