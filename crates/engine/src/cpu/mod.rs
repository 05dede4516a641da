//! goodput's CPU kernels, chosen at run time by the CPU's features (AVX2+FMA, AVX-512 BF16, AMX):
//! the few-rows f32 matmul (`skinny`), the bf16-weight matmuls (`bf16`, and `bf16_dot` on
//! `vdpbf16ps`, and `amx` on AMX tiles), the paged attention kernel and KV write
//! (`paged_attention`), RoPE (`rope`), RMSNorm and the residual add (`norm`), and the SIMD
//! inner loops they share (`simd`, `common`).
//!
//! Only kernels live here: slices in, slices out, wrapped as candle custom ops. They may import
//! each other (a DAG: `common` is the leaf) and, of the rest of the crate, only the step's map
//! into the KV pool (`crate::kv_cache::AttnMeta`). Nothing here may import the model, the
//! engine, the CUDA backend or the checks; the model decides which kernel a product takes.

pub mod amx;
pub mod bf16;
pub mod bf16_dot;
pub(crate) mod common;
pub(crate) mod flash_amx;
pub(crate) mod mlp_amx;
pub mod mxfp4;
pub mod norm;
pub mod paged_attention;
pub mod peak;
pub mod rope;
pub mod simd;
pub mod skinny;
pub mod swiglu;
