//! Launches of goodput's kernels on candle's stream, with programmatic dependent launch (PDL)
//! where the GPU has it (compute capability 9.0 and later, CUDA 12.3+ for graph capture).
//!
//! Why: on an H200 a decode step of Llama-3.1-8B at batch 1 runs ~330 kernels from a CUDA
//! graph; each boundary costs the next kernel's launch and its ramp-up to full memory
//! bandwidth (the step profile shows every matmul ~5 µs above weights / bandwidth, whatever
//! its size). Under PDL a kernel's blocks start while the kernel before it finishes: the
//! small-batch matmuls issue their first weight loads before `griddepcontrol.wait`, and every
//! kernel waits there before it touches another kernel's output (see `kernels/goodput.cu`).
//! TensorRT-LLM and FlashInfer launch their decode kernels this way on Hopper.
//!
//! On by default; [`set_pdl`] turns it off (`--no-pdl`). A launch the driver refuses with the
//! attribute is retried without it, and PDL stays off for the process, with the reason kept
//! ([`pdl_state`]).

#[cfg(feature = "cuda")]
use candle_core::cuda_backend::cudarc::driver::{sys, LaunchConfig};
#[cfg(feature = "cuda")]
use candle_core::{bail, CudaDevice, Result};
#[cfg(feature = "cuda")]
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

#[cfg(feature = "cuda")]
const PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/goodput.ptx"));
#[cfg(feature = "cuda")]
const MODULE: &str = "goodput";

static PDL: AtomicBool = AtomicBool::new(true);
static PDL_OFF_BECAUSE: Mutex<Option<String>> = Mutex::new(None);

/// Turns programmatic dependent launch on or off for the kernels launched from now on.
pub fn set_pdl(on: bool) {
    PDL.store(on, Ordering::Relaxed);
}

/// Whether kernels launch with PDL, and if the driver refused it, why.
pub fn pdl_state() -> (bool, Option<String>) {
    (PDL.load(Ordering::Relaxed), PDL_OFF_BECAUSE.lock().ok().and_then(|r| r.clone()))
}

/// One kernel argument: a device address, an `int` or a `float`.
#[derive(Clone, Copy, Debug)]
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) enum Arg {
    Ptr(u64),
    I32(i32),
    F32(f32),
}

#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
impl Arg {
    /// The argument's bytes at the start of an 8-byte slot (x86-64 and aarch64 are little-
    /// endian: the driver reads the parameter's own size from the slot's address).
    fn slot(self) -> u64 {
        match self {
            Arg::Ptr(p) => p,
            Arg::I32(x) => x as u32 as u64,
            Arg::F32(x) => x.to_bits() as u64,
        }
    }
}

/// Launches `name` from goodput's module on `dev`'s stream with `args` in the kernel's
/// parameter order.
#[cfg(feature = "cuda")]
pub(crate) fn launch(dev: &CudaDevice, name: &str, cfg: LaunchConfig, args: &[Arg]) -> Result<()> {
    let f = dev.get_or_load_custom_func(name, MODULE, PTX)?;
    let mut slots: Vec<u64> = args.iter().map(|a| a.slot()).collect();
    let mut params: Vec<*mut c_void> = slots.iter_mut().map(|s| (s as *mut u64).cast::<c_void>()).collect();
    let stream = dev.cuda_stream().cu_stream();
    let (g, b) = (cfg.grid_dim, cfg.block_dim);
    if PDL.load(Ordering::Relaxed) {
        let mut attr = sys::CUlaunchAttribute {
            id: sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
            pad: [0; 4],
            // SAFETY: a plain-data union; the field read by the driver for this id is set.
            value: unsafe { std::mem::zeroed() },
        };
        attr.value.programmaticStreamSerializationAllowed = 1;
        let config = sys::CUlaunchConfig {
            gridDimX: g.0,
            gridDimY: g.1,
            gridDimZ: g.2,
            blockDimX: b.0,
            blockDimY: b.1,
            blockDimZ: b.2,
            sharedMemBytes: cfg.shared_mem_bytes,
            hStream: stream,
            attrs: &mut attr,
            numAttrs: 1,
        };
        // SAFETY: `params` points at one slot per kernel parameter, alive for the call (the
        // driver copies them at launch); the buffers behind the addresses are stream-ordered.
        let r = unsafe { sys::cuLaunchKernelEx(&config, f.cu_function(), params.as_mut_ptr(), std::ptr::null_mut()) };
        if r == sys::cudaError_enum::CUDA_SUCCESS {
            return Ok(());
        }
        PDL.store(false, Ordering::Relaxed);
        if let Ok(mut why) = PDL_OFF_BECAUSE.lock() {
            why.get_or_insert_with(|| format!("cuLaunchKernelEx with PDL refused for {name}: {r:?}"));
        }
    }
    // SAFETY: as above, without the attribute.
    let r = unsafe {
        sys::cuLaunchKernel(
            f.cu_function(),
            g.0,
            g.1,
            g.2,
            b.0,
            b.1,
            b.2,
            cfg.shared_mem_bytes,
            stream,
            params.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    };
    if r != sys::cudaError_enum::CUDA_SUCCESS {
        bail!("launching goodput kernel {name}: {r:?}");
    }
    Ok(())
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
