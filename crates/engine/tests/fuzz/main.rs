//! Property-based fuzzing of the model files the engine reads: a Hugging Face `config.json`
//! checked against a catalog entry (`weights::check_hf_config`), and GGUF files through
//! goodput's entry points: `weights::GgufSource::open` (candle's GGUF reader), the metadata
//! queries on what opened, the tokenizer rebuilt from its metadata (`Tokenizer::from_gguf`,
//! `gguf_chat_template`, `gguf_special_ids`), tensor reads (`TensorSource::tensor` and
//! `linear`), and the whole `loader::load` of a GGUF for the catalog's `tiny`. Every property
//! is "no panic, bounded in time and memory": each call returns Ok or Err, each case takes
//! under 10 s, and no single allocation exceeds 64 MiB (a counting global allocator watches
//! the test's thread) although the inputs are at most a few KB.
//!
//! Inputs: arbitrary text and valid `config.json`s mutated structurally and at the byte level;
//! arbitrary bytes; a valid GGUF magic and version followed by arbitrary bytes; and GGUF files
//! built field by field (any value types, nested arrays, strings and arrays whose length
//! fields lie, unknown types, tensor infos with huge dimensions, any dtype and offset, an
//! alignment of 0) — some shaped like `tiny` with a gpt2 tokenizer so that they get past the
//! shape and tokenizer checks into the tensor reads — then byte-edited. The JSON and byte
//! mutations are `goodput-fuzzing`'s (`json::mutated`, `mutate_bytes`).
//!
//! Cases: 256 per property (6 properties, about 1,500 cases in all; `PROPTEST_CASES=N` for a
//! deeper run); failures are not persisted (no `proptest-regressions` files). Each case's file is
//! written to one temporary path per test (`std::env::temp_dir()`, named with the process id
//! and the test).
//!
//! Findings, all in candle 0.11.1's GGUF reader and all reached through `GgufSource` and
//! `loader::load`, now refused with an error by goodput (tests at the end): `general.alignment
//! = 0` divided by zero; tensor dimensions whose product overflows usize panicked; a tensor
//! with no elements aborted the process.

use goodput_core::{Catalog, ModelSpec};
use proptest::prelude::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::{Duration, Instant};

mod config_json;
mod gguf;
mod gguf_file;

// ---------------------------------------------------------------------------------------------
// Bounds: the largest single allocation of the test's thread, and the time of a case.

/// The system allocator, noting the largest allocation each thread asks for.
pub(crate) struct PeakAlloc;

thread_local! {
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

pub(crate) fn note(size: usize) {
    let _ = PEAK.try_with(|p| p.set(p.get().max(size)));
}

unsafe impl GlobalAlloc for PeakAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: PeakAlloc = PeakAlloc;

pub(crate) const MAX_ALLOC: usize = 64 << 20;
pub(crate) const MAX_CASE: Duration = Duration::from_secs(10);

/// Runs `f`; fails the case if it took over `MAX_CASE` or allocated over `MAX_ALLOC` at once.
pub(crate) fn bounded(input_len: usize, f: impl FnOnce()) -> Result<(), TestCaseError> {
    PEAK.with(|p| p.set(0));
    let t = Instant::now();
    f();
    let (took, peak) = (t.elapsed(), PEAK.with(Cell::get));
    prop_assert!(took < MAX_CASE, "a {}-byte input took {:?}", input_len, took);
    prop_assert!(peak <= MAX_ALLOC, "a {}-byte input made a {}-byte allocation", input_len, peak);
    Ok(())
}

pub(crate) fn tiny() -> ModelSpec {
    Catalog::builtin().get("tiny").unwrap().clone()
}
