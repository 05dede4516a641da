//! The engine's integration tests, as one test binary: the engine thread, the paged and
//! batched engine against the single-sequence reference (f32, and bf16 weights on CPU), and the
//! encoder.

mod api;
mod bf16;
mod encoder;
mod engine_thread;
mod equivalence;
mod families;
