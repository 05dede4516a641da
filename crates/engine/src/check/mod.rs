//! What the engine is checked against, in every build and on any device: the one dense
//! reference forward (`reference`: single sequence, contiguous KV cache, plain candle ops,
//! optionally rounding chosen values to bf16) and the rounding study over it (`numerics`,
//! `study`); and the device check itself (`device`: greedy ids, logits and kernels against
//! the CPU f32 engine). Tests and `goodput engine-check` use them; the engine itself never does.
//!
//! This may import the model (its weights and layer helpers) and the sampler's `argmax`;
//! nothing but tests, the checks here and the command line may import it. The on-device checks of the CUDA
//! kernels are CUDA code and live with it (`cuda/check.rs`).

pub mod device;
pub mod numerics;
pub mod reference;
pub mod study;
