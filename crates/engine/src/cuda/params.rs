//! The host side of a launch, the same in every build (so its tests run without CUDA): how a
//! kernel argument sits in its parameter slot, and the process-wide PDL switch with the reason
//! it went off. `launch.rs` launches with them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

pub(crate) static PDL: AtomicBool = AtomicBool::new(true);
/// Whether the PTX and the device can take PDL (known after the first launch).
pub(crate) static CAPABLE: OnceLock<bool> = OnceLock::new();
pub(crate) static PDL_OFF_BECAUSE: Mutex<Option<String>> = Mutex::new(None);

pub(crate) static FUSED_SWIGLU: AtomicBool = AtomicBool::new(true);

/// Turns SwiGLU in the small-batch gate|up matmul's epilogue on or off (off: the matmul, then
/// `silu_mul`; engine-bench `--no-fused-swiglu` measures both).
pub fn set_fused_swiglu(on: bool) {
    FUSED_SWIGLU.store(on, Ordering::Relaxed);
}

/// Turns programmatic dependent launch on or off for the kernels launched from now on.
pub fn set_pdl(on: bool) {
    PDL.store(on, Ordering::Relaxed);
}

/// Whether kernels launch with PDL, and if the driver refused it, why.
pub fn pdl_state() -> (bool, Option<String>) {
    let on = PDL.load(Ordering::Relaxed) && CAPABLE.get() != Some(&false);
    (on, PDL_OFF_BECAUSE.lock().ok().and_then(|r| r.clone()))
}

/// One kernel argument: a device address, an `int` or a `float`.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Arg {
    Ptr(u64),
    I32(i32),
    F32(f32),
}

impl Arg {
    /// The argument's bytes at the start of an 8-byte slot (x86-64 and aarch64 are little-
    /// endian: the driver reads the parameter's own size from the slot's address).
    pub(crate) fn slot(self) -> u64 {
        match self {
            Arg::Ptr(p) => p,
            Arg::I32(x) => x as u32 as u64,
            Arg::F32(x) => x.to_bits() as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The driver reads each parameter's own size from the start of its slot.
    #[test]
    fn each_argument_sits_at_the_start_of_its_slot() {
        let bytes = |a: Arg| a.slot().to_ne_bytes();
        let b = bytes(Arg::I32(-7));
        assert_eq!(i32::from_ne_bytes([b[0], b[1], b[2], b[3]]), -7);
        let b = bytes(Arg::F32(0.125));
        assert_eq!(f32::from_ne_bytes([b[0], b[1], b[2], b[3]]), 0.125);
        assert_eq!(Arg::Ptr(0xdead_beef_0000_0010).slot(), 0xdead_beef_0000_0010);
    }

    #[test]
    fn pdl_can_be_turned_off_and_on() {
        set_pdl(false);
        assert!(!pdl_state().0);
        set_pdl(true);
        assert!(pdl_state().0);
    }
}
