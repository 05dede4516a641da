//! The engine's integration tests, as one test binary: the engine thread, the paged and
//! batched engine against the single-sequence reference, and the encoder.

mod encoder;
mod engine_thread;
mod equivalence;
