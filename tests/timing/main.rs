//! End-to-end tests that compare timings (HTTP against in-process TTFT, a run against its
//! repeat, the client's calibration): each holds [`SERIAL`] so that no other test of this
//! binary shares the two cores with it. Cargo runs test binaries one after another, so the
//! only other load is this binary's own.

#[path = "../common/mod.rs"]
mod common;

mod compare;
mod http;
mod machine;
mod shards;

/// Held for the whole of every test in this binary.
pub static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Takes [`SERIAL`], past a test that panicked while holding it.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}
