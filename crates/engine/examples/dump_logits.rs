//! Writes every sampled row of logits of a batched, chunked f32 run (dummy weights) as raw
//! little-endian f32 to the file named by the first argument: two builds' files compare
//! byte for byte.
use candle_core::{DType, Device};
use goodput_core::{Catalog, Clock, SamplingParams};
use goodput_engine::weights::DummySource;
use goodput_engine::{EngineConfig, EngineCore, Llama};
use std::io::Write;

fn main() {
    let path = std::env::args().nth(1).expect("output file");
    let mut f = std::fs::File::create(path).unwrap();
    for name in ["tiny", "smollm2-135m"] {
        let spec = Catalog::builtin().get(name).unwrap().clone();
        let mut src = DummySource { seed: 5, dtype: DType::F32, device: Device::Cpu };
        let model = Llama::load(&spec, &mut src, 1024, &Device::Cpu, DType::F32).unwrap();
        let cfg = EngineConfig { num_blocks: Some(400), max_num_batched_tokens: 100, ..Default::default() };
        let mut core = EngineCore::new(model, &cfg, Clock::new()).unwrap();
        core.logits_tap = Some(Vec::new());
        for (i, len) in [1usize, 9, 40, 150, 300, 17].iter().enumerate() {
            let p: Vec<u32> =
                (0..*len as u32).map(|t| 3 + (t * 31 + i as u32 * 977) % 40000 % spec.vocab_size as u32).collect();
            core.add_request(i as u64, p, SamplingParams::greedy_exact(12), core.clock().now()).unwrap();
        }
        core.run_to_completion().unwrap();
        let mut rows = core.logits_tap.take().unwrap();
        rows.sort_by_key(|(id, _)| *id);
        for (_, row) in rows {
            for x in row {
                f.write_all(&x.to_le_bytes()).unwrap();
            }
        }
    }
}
