//! goodput's CUDA backend: its own kernels (`kernels/goodput.cu`, PTX built by build.rs) and
//! what runs them — the packed Llama step on them (`forward`), decode steps served from CUDA
//! graphs (`graph_serve`), the load-time choice of small-batch matmul (`tune`, `gemv_table`),
//! and the on-device measurements and checks engine-bench and engine-check report
//! (`graph_probe`, `kernel_timing`, `check`, `report`).
//!
//! Compiled only with the `cuda` feature: lib.rs declares this module once, and in builds
//! without the feature the stub `off.rs` in its place, with the names the rest of the crate
//! and the cli use in every build (as candle-core does with its dummy CUDA backend). So no
//! other file of the crate holds a `cfg(feature = "cuda")`. The host-side files —
//! `layout` (the step metadata the kernels read), `params` (kernel arguments, the PDL switch),
//! `gemv_table` and `report` — touch no GPU and are compiled in both, their tests with them.
//!
//! Inside, the modules form a DAG with `device` (pointers, allocation, grids) and the
//! host-side files as leaves; the model-level ones (`forward`, `graph_serve`, `graph_probe`,
//! `kernel_timing`, `check`) sit on the kernel wrappers. From the rest of the crate this may
//! import the model and its KV pool, attention's gather reference and the sampler's `argmax`;
//! nothing here may be imported by the CPU kernels (`cpu/`) or the checks (`check/`), and the
//! rest of the crate uses only the names re-exported below.

pub mod blas;
pub mod check;
mod device;
#[cfg(test)]
mod flash_ref;
mod forward;
pub mod gemv;
pub mod gemv_table;
pub mod graph_probe;
pub mod graph_serve;
pub mod kernel_timing;
pub mod kernels;
mod launch;
pub mod layout;
pub mod meta;
mod params;
pub mod report;
pub mod tune;
mod values;

// The names every build has (`off.rs` defines or re-exports the same).
pub use check::check_kernels;
pub use device::device_name;
pub use gemv_table::{GemvKernel, Timing, TuneRow};
pub use graph_probe::probe_decode;
pub use graph_serve::StepGraphs;
pub use kernel_timing::{time_decode, time_prefill};
pub use kernels::sample;
pub use layout::{part_len, set_flash_prefill, set_long_chunk, LONG_CHUNK, MAX_PART_LEN};
pub use params::{pdl_state, set_fused_swiglu, set_pdl};
pub use report::{GraphProbe, KernelCheck, OpTime, StepTiming};

// CUDA-only names.
pub use device::supports;
pub use gemv::{gemv, gemv_to, gemv_with, GEMV_MAX_ELEMENTS, GEMV_MAX_ROWS};
pub use graph_serve::GraphStats;
pub use kernels::{add_rms_norm, attention, qkv_rope_cache, silu_mul, Heads, Rope};
pub use meta::StepDevice;
