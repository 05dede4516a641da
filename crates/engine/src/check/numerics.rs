//! Where a bf16 pipeline loses top-1 agreement with f32: one sequence's logits through the
//! dense reference forward (`reference.rs`) on the CPU in f32, with the values a GPU bf16 step
//! holds in bf16 rounded to bf16 at the same points (each point switchable, [`Rounding`]). The
//! weights are the model's own (dummy weights are bf16-exact at every dtype), so the only
//! difference from f32 is the rounding chosen. `goodput engine-check --rounding-study` prints
//! the agreement of each scheme; with nothing rounded the forward is an independent f32
//! reference of [`Llama::forward`] (dense causal attention, no paged pool).

use crate::check::reference::{ReferenceRunner, Rounding};
use crate::error::Result;
use crate::model::Llama;
use crate::sampler::argmax;
use candle_core::DType;

impl Rounding {
    /// The schemes `engine-check --rounding-study` compares, with their labels.
    pub fn schemes() -> Vec<(&'static str, Self)> {
        let all = Self::ALL;
        vec![
            ("all bf16 but the residual (CUDA before)", all),
            ("… f32 logits", Self { logits: false, ..all }),
            ("… f32 scores", Self { scores: false, ..all }),
            ("… f32 scores and logits (CUDA now)", Self::CUDA_BF16),
            ("… and f32 matmul outputs", Self { matmul_out: false, ..Self::CUDA_BF16 }),
            ("bf16 matmul operands only", Self { matmul_in: true, heads: true, ..Self::NONE }),
            ("k, v in a bf16 pool only (CPU bf16)", Self { heads: true, ..Self::NONE }),
            ("nothing (f32 on the same weights)", Self::NONE),
        ]
    }
}

impl Llama {
    /// Logits `(tokens, vocab)` of every position of one sequence starting at position 0,
    /// computed in f32 with the values of `r` rounded to bf16. Needs an f32 model.
    pub fn logits_rounded(&self, tokens: &[u32], r: Rounding) -> Result<Vec<Vec<f32>>> {
        if self.dtype != DType::F32 {
            return Err(crate::EngineError::Unsupported(format!(
                "logits_rounded needs f32 weights, not {:?}",
                self.dtype
            )));
        }
        ReferenceRunner::with_rounding(self, r).forward_all(tokens)
    }
}

/// Top-1 agreement of `got`'s rows with `want`'s (agreeing rows, rows) and the largest |Δ|.
pub fn agreement(want: &[Vec<f32>], got: &[Vec<f32>]) -> (usize, usize, f64) {
    let (mut n, mut agree, mut max) = (0, 0, 0f64);
    for (w, g) in want.iter().zip(got) {
        n += 1;
        agree += (argmax(w) == argmax(g)) as usize;
        for (a, b) in w.iter().zip(g) {
            max = max.max((*a as f64 - *b as f64).abs());
        }
    }
    (agree, n, max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::reference::round;
    use crate::kv_cache::KvCache;
    use crate::model::StepBatch;
    use crate::weights::{DummySource, Init, TensorSource};
    use candle_core::{Device, Tensor};
    use goodput_core::Catalog;

    /// Dummy weights drawn in bf16, widened to f32.
    struct Widened(DummySource);
    impl TensorSource for Widened {
        fn tensor(&mut self, name: &str, shape: &[usize], init: Init) -> Result<Tensor> {
            Ok(self.0.tensor(name, shape, init)?.to_dtype(DType::F32)?)
        }
        fn contains(&self, name: &str) -> bool {
            self.0.contains(name)
        }
    }

    fn model() -> Llama {
        let text = "[models.t]\narchitecture = \"llama\"\nhidden_size = 64\nnum_layers = 2\nnum_heads = 4\n\
                    num_kv_heads = 2\nintermediate_size = 96\nvocab_size = 200\nmax_position_embeddings = 64\n\
                    rope_theta = 10000.0\nrms_norm_eps = 1e-5\ntie_word_embeddings = false\neos_token_id = 2\n";
        let spec = Catalog::parse(text, "test").unwrap().get("t").unwrap().clone();
        let mut src = Widened(DummySource { seed: 5, dtype: DType::BF16, device: Device::Cpu });
        Llama::load(&spec, &mut src, 64, &Device::Cpu, DType::F32).unwrap()
    }

    fn tokens() -> Vec<u32> {
        (0..37u32).map(|i| 3 + (i * 53 + 7) % 190).collect()
    }

    #[test]
    fn rounding_nothing_gives_the_paged_engines_logits() {
        let m = model();
        let toks = tokens();
        let (kv, tables) = KvCache::for_one_sequence(&m.spec, toks.len(), 4, DType::F32, &Device::Cpu).unwrap();
        let mut batch = StepBatch::new(4);
        batch.push(&toks, 0, &tables, true);
        batch.sample_rows = (0..toks.len() as u32).collect();
        let paged = Llama::logits_rows(&m.forward(&batch, &kv).unwrap()).unwrap();
        let dense = m.logits_rounded(&toks, Rounding::NONE).unwrap();
        let (agree, n, max) = agreement(&paged, &dense);
        assert_eq!((agree, n), (toks.len(), toks.len()));
        assert!(max < 1e-4, "dense and paged f32 logits differ by {max}");
    }

    #[test]
    fn each_rounding_point_moves_the_logits_and_bf16_rounds_to_nearest_even() {
        // 1 + 2^-8 is halfway between 1 and the next bf16 (1 + 2^-7): ties go to even.
        let t = Tensor::new(&[1.0f32 + 1.0 / 256.0, 1.0 + 3.0 / 512.0, -3.0], &Device::Cpu).unwrap();
        assert_eq!(round(t, true).unwrap().to_vec1::<f32>().unwrap(), [1.0, 1.0 + 1.0 / 128.0, -3.0]);
        let m = model();
        let toks = tokens();
        let want = m.logits_rounded(&toks, Rounding::NONE).unwrap();
        let one = [
            Rounding { matmul_in: true, ..Rounding::NONE },
            Rounding { matmul_out: true, ..Rounding::NONE },
            Rounding { heads: true, ..Rounding::NONE },
            Rounding { scores: true, ..Rounding::NONE },
            Rounding { probs: true, ..Rounding::NONE },
            Rounding { logits: true, ..Rounding::NONE },
        ];
        for r in one {
            let (_, _, max) = agreement(&want, &m.logits_rounded(&toks, r).unwrap());
            assert!(max > 1e-6 && max < 0.5, "{r:?}: max |Δ| {max}");
        }
        let (_, _, all) = agreement(&want, &m.logits_rounded(&toks, Rounding::ALL).unwrap());
        assert!(all > 1e-4, "every point rounded moves the logits: {all}");
    }
}
