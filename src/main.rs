//! The `goodput` binary: a thin shell over `goodput-cli`.

use std::ffi::{c_int, c_long};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

extern "C" {
    /// mimalloc's `mi_option_set` (linked by the `mimalloc` crate's `libmimalloc-sys`).
    fn mi_option_set(option: c_int, value: c_long);
}

/// `mi_option_purge_delay` in the `mi_option_t` of the mimalloc (v3) that `libmimalloc-sys`
/// 0.1 builds.
const MI_OPTION_PURGE_DELAY: c_int = 15;

fn main() {
    // Keep freed memory for reuse instead of returning it to the OS 10 ms later: a CPU prefill
    // step allocates and frees hundreds of MB of activations, and every fresh page costs a
    // fault and its zeroing (19 % of a SmolLM2 prefill of 512 tokens on 2 cores, in perf;
    // prefill 1.4× faster without). The resident size stays at its peak, which is what a
    // benchmark sizes for anyway. MIMALLOC_PURGE_DELAY in the environment still wins.
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: sets one integer option of the allocator; no allocation is in flight.
        unsafe { mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
    }
    std::process::exit(goodput_cli::main());
}
