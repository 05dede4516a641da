//! CPU bf16: bf16 weights (half the bytes), f32 activations and norms, a bf16 KV pool. The
//! packed, paged, batched engine against the f32 single-sequence reference on the same
//! weights (the f32 model holds the bf16 values widened), teacher-forced on the engine's own
//! tokens so one near-tie cannot derail the comparison.

use candle_core::{DType, Device, Tensor};
use goodput_core::{Catalog, Clock, ModelSpec, SamplingParams};
use goodput_engine::check::reference::ReferenceRunner;
use goodput_engine::sampler::argmax;
use goodput_engine::weights::{DummySource, Init, TensorSource};
use goodput_engine::{EngineConfig, EngineCore, Llama};
use std::collections::HashMap;

fn spec() -> ModelSpec {
    let text = "[models.t]\narchitecture = \"qwen2\"\nhidden_size = 128\nnum_layers = 2\nnum_heads = 4\n\
                num_kv_heads = 2\nintermediate_size = 192\nvocab_size = 300\nmax_position_embeddings = 256\n\
                rope_theta = 10000.0\nrms_norm_eps = 1e-5\ntie_word_embeddings = true\neos_token_id = 2\n";
    Catalog::parse(text, "test").unwrap().get("t").unwrap().clone()
}

/// Dummy weights drawn in bf16, handed out in `dtype`.
struct Rounded(DummySource, DType);
impl TensorSource for Rounded {
    fn tensor(&mut self, name: &str, shape: &[usize], init: Init) -> goodput_engine::Result<Tensor> {
        Ok(self.0.tensor(name, shape, init)?.to_dtype(self.1)?)
    }
    fn contains(&self, name: &str) -> bool {
        self.0.contains(name)
    }
}

fn model(spec: &ModelSpec, dtype: DType) -> Llama {
    let mut src = Rounded(DummySource { seed: 11, dtype: DType::BF16, device: Device::Cpu }, dtype);
    Llama::load(spec, &mut src, spec.max_position_embeddings, &Device::Cpu, dtype).unwrap()
}

#[test]
fn bf16_weights_run_with_f32_activations_and_a_bf16_pool() {
    let s = spec();
    let (m16, m32) = (model(&s, DType::BF16), model(&s, DType::F32));
    assert_eq!((m16.dtype, m16.act_dtype, m32.act_dtype), (DType::BF16, DType::F32, DType::F32));
    let ratio = m16.weight_bytes_per_step() as f64 / m32.weight_bytes_per_step() as f64;
    assert!(ratio > 0.5 && ratio < 0.52, "weights read per step halve (norms stay f32): {ratio}");

    // Mixed prefill chunks (odd boundaries: block size 4, 23 tokens a step) and decodes,
    // prompts long enough for the panel path (> 16 rows) and short ones for the few-rows path.
    let reqs: Vec<(Vec<u32>, usize)> = [(1u32, 5usize, 9usize), (2, 40, 6), (3, 17, 12), (4, 1, 7)]
        .iter()
        .map(|&(seed, len, n)| ((0..len as u32).map(|i| 3 + (i * 7 + seed * 13) % 290).collect(), n))
        .collect();
    let cfg = EngineConfig {
        block_size: 4,
        num_blocks: Some(200),
        max_num_batched_tokens: 23,
        enable_prefix_caching: false,
        ..Default::default()
    };
    let mut core = EngineCore::new(m16, &cfg, Clock::new()).unwrap();
    assert_eq!(core.kv_dtype(), DType::BF16);
    core.logits_tap = Some(Vec::new());
    for (i, (p, n)) in reqs.iter().enumerate() {
        core.add_request(i as u64, p.clone(), SamplingParams::greedy_exact(*n), core.clock().now()).unwrap();
    }
    let done = core.run_to_completion().unwrap();
    let mut rows: HashMap<u64, Vec<Vec<f32>>> = HashMap::new();
    for (id, row) in core.logits_tap.take().unwrap() {
        rows.entry(id).or_default().push(row);
    }

    let (mut n, mut agree, mut max) = (0usize, 0usize, 0f32);
    for (rec, tokens) in &done {
        let (prompt, want_n) = &reqs[rec.id as usize];
        assert_eq!(tokens.len(), *want_n);
        let mut r = ReferenceRunner::new(&m32);
        let mut want = r.forward(prompt).unwrap();
        for (j, got) in rows[&rec.id].iter().enumerate() {
            n += 1;
            agree += (argmax(got) == argmax(&want)) as usize;
            max = got.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(max, f32::max);
            // Teacher forcing on the engine's token.
            if j + 1 < tokens.len() {
                want = r.forward(&[tokens[j]]).unwrap();
            }
        }
    }
    assert_eq!(n, reqs.iter().map(|r| r.1).sum::<usize>());
    // Only the KV pool's rounding and the summation order differ from the f32 reference.
    assert!(max > 0.0 && max < 0.02, "max |Δ logit| {max} (measured: 0.006)");
    assert!(agree as f64 >= 0.95 * n as f64, "top-1 agreement {agree}/{n}");
}
