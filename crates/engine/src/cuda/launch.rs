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
//! On by default where both the PTX (its `griddepcontrol` waits) and the device are compute
//! capability 9.0 or later; `set_pdl` (`params.rs`) turns it off (`--no-pdl`). A launch the
//! driver refuses with the attribute (not supported, invalid value) is retried without it, and
//! PDL stays off for the process, with the reason kept (`pdl_state`); other launch errors are
//! returned.

use crate::cuda::params::{Arg, CAPABLE, PDL, PDL_OFF_BECAUSE};
use candle_core::cuda_backend::cudarc::driver::{sys, CudaContext, LaunchConfig};
use candle_core::{bail, CudaDevice, Result};
use std::ffi::c_void;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

const PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/goodput.ptx"));
const MODULE: &str = "goodput";
/// The compute capability the PTX was built for (`CUDA_COMPUTE_CAP`, build.rs).
const PTX_CAP: &str = env!("GOODPUT_PTX_CAP");

/// Launches `name` from goodput's module on `dev`'s stream with `args` in the kernel's
/// parameter order.
pub(crate) fn launch(dev: &CudaDevice, name: &str, cfg: LaunchConfig, args: &[Arg]) -> Result<()> {
    let ctx = dev.cuda_stream().context().clone();
    // As cudarc's own launches do: the raw driver calls below need the context current.
    ctx.bind_to_thread().map_err(|e| candle_core::Error::Msg(format!("launching {name}: {e:?}")))?;
    let f = dev.get_or_load_custom_func(name, MODULE, PTX)?;
    let mut slots: Vec<u64> = args.iter().map(|a| a.slot()).collect();
    let mut params: Vec<*mut c_void> = slots.iter_mut().map(|s| (s as *mut u64).cast::<c_void>()).collect();
    let stream = dev.cuda_stream().cu_stream();
    let (g, b) = (cfg.grid_dim, cfg.block_dim);
    if PDL.load(Ordering::Relaxed) && pdl_capable(&ctx) {
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
        use sys::cudaError_enum::{CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_NOT_SUPPORTED, CUDA_SUCCESS};
        match r {
            CUDA_SUCCESS => return Ok(()),
            CUDA_ERROR_NOT_SUPPORTED | CUDA_ERROR_INVALID_VALUE => {}
            e => bail!("launching goodput kernel {name} with PDL: {e:?}"),
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

/// Whether the tensor-core kernels (`mma.sync` m16n8k16 with f16/bf16 operands, compute
/// capability 8.0) are in the PTX and can run on `dev`; without them `kernels/flash.cuh`
/// compiles to an empty body and long chunks go through cuBLAS.
/// Asked of the driver once per process (every step's plan asks), as PDL's capability is.
pub(crate) fn has_mma(dev: &CudaDevice) -> bool {
    use candle_core::cuda_backend::cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR;
    static MMA: OnceLock<bool> = OnceLock::new();
    *MMA.get_or_init(|| {
        let ptx = PTX_CAP.parse::<u32>().unwrap_or(0) >= 80;
        let major = dev.cuda_stream().context().attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
        ptx && matches!(major, Ok(m) if m >= 8)
    })
}

/// Whether PDL can be used: the PTX was built for compute capability 9.0 or later (else its
/// kernels have no `griddepcontrol.wait`, and an early start would read unfinished results)
/// and so is the device.
fn pdl_capable(ctx: &Arc<CudaContext>) -> bool {
    *CAPABLE.get_or_init(|| {
        let ptx = PTX_CAP.parse::<u32>().unwrap_or(0) >= 90;
        let major = ctx.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
        let device = matches!(major, Ok(m) if m >= 9);
        if !(ptx && device) {
            if let Ok(mut why) = PDL_OFF_BECAUSE.lock() {
                why.get_or_insert_with(|| {
                    format!("PTX for compute capability {PTX_CAP}, device {major:?}: PDL needs 9.0")
                });
            }
        }
        ptx && device
    })
}
