//! What the engine is checked against, in every build and on any device: the one dense
//! reference forward (`reference`: single sequence, contiguous KV cache, plain candle ops,
//! optionally rounding chosen values to bf16) and the rounding study over it (`numerics`).
//! Tests and `goodput engine-check` use them; the engine itself never does.
//!
//! This may import the model (its weights and layer helpers) and the sampler's `argmax`;
//! nothing outside tests and the cli's checks may import it. The on-device checks of the CUDA
//! kernels are CUDA code and live with it (`cuda/check.rs`).

pub mod numerics;
pub mod reference;
