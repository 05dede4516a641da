//! What every goodput CUDA kernel wrapper needs from candle's CUDA backend: the device of a
//! tensor, device addresses of contiguous tensors, fresh uninitialised outputs, launch grids
//! and the kernels' dtype suffixes; and which attention shapes the kernels cover. The leaf of
//! `cuda/`: it imports no other module of the crate.

use candle_core::cuda_backend::cudarc::driver::{DevicePtr, LaunchConfig};
use candle_core::cuda_backend::CudaStorageSlice;
use candle_core::op::BackpropOp;
use candle_core::{bail, CudaDevice, CudaStorage, DType, Device, Result, Shape, Storage, Tensor};

/// Whether the kernels cover this attention shape (head dim 64 or 128, at most 8 query heads
/// per KV head) and dtype.
pub fn supports(head_dim: usize, num_heads: usize, num_kv_heads: usize, dtype: DType) -> bool {
    matches!(head_dim, 64 | 128)
        && num_kv_heads > 0
        && num_heads.is_multiple_of(num_kv_heads)
        && num_heads / num_kv_heads <= 8
        && matches!(dtype, DType::F32 | DType::F16 | DType::BF16)
}

/// The GPU's name as the driver reports it (`NVIDIA H200`).
pub fn device_name(device: &Device) -> Option<String> {
    match device {
        Device::Cuda(d) => d.cuda_stream().context().name().ok(),
        _ => None,
    }
}

pub(crate) fn cuda(device: &Device) -> Result<CudaDevice> {
    match device {
        Device::Cuda(d) => Ok(d.clone()),
        _ => bail!("goodput CUDA kernel called on {device:?}"),
    }
}

pub(crate) fn suffix(dtype: DType) -> Result<&'static str> {
    Ok(match dtype {
        DType::F32 => "f32",
        DType::F16 => "f16",
        DType::BF16 => "bf16",
        d => bail!("goodput CUDA kernels take f32, f16 or bf16, not {d:?}"),
    })
}

pub(crate) fn slice_ptr(s: &CudaStorage) -> Result<(u64, usize)> {
    let stream = s.device.cuda_stream();
    Ok(match &s.slice {
        CudaStorageSlice::F32(x) => (x.device_ptr(&stream).0, 4),
        CudaStorageSlice::F16(x) => (x.device_ptr(&stream).0, 2),
        CudaStorageSlice::BF16(x) => (x.device_ptr(&stream).0, 2),
        CudaStorageSlice::U32(x) => (x.device_ptr(&stream).0, 4),
        CudaStorageSlice::F8E4M3(x) => (x.device_ptr(&stream).0, 1),
        _ => bail!("goodput CUDA kernels take f32, f16, bf16, e4m3 or u32 buffers"),
    })
}

/// Device address of the first element of a contiguous CUDA tensor. The tensor must outlive
/// the launch that uses it (it does: launches are stream-ordered before any later free).
pub(crate) fn ptr(t: &Tensor) -> Result<u64> {
    let (st, l) = t.storage_and_layout();
    let Storage::Cuda(s) = &*st else { bail!("goodput CUDA kernel: a tensor is not on the GPU") };
    if !l.is_contiguous() {
        bail!("goodput CUDA kernel: a tensor of shape {:?} is not contiguous", l.shape());
    }
    let (base, size) = slice_ptr(s)?;
    Ok(base + (l.start_offset() * size) as u64)
}

/// A new, uninitialised tensor of `shape` on `dev`, with its device address.
pub(crate) fn alloc(dev: &CudaDevice, dtype: DType, shape: impl Into<Shape>) -> Result<(Tensor, u64)> {
    let shape = shape.into();
    let n = shape.elem_count().max(1);
    // SAFETY: every element is written by the kernel the caller launches next.
    let slice = unsafe {
        match dtype {
            DType::F32 => CudaStorageSlice::F32(dev.alloc::<f32>(n)?),
            DType::F16 => CudaStorageSlice::F16(dev.alloc::<half::f16>(n)?),
            DType::BF16 => CudaStorageSlice::BF16(dev.alloc::<half::bf16>(n)?),
            DType::U32 => CudaStorageSlice::U32(dev.alloc::<u32>(n)?),
            d => bail!("goodput CUDA kernels: cannot allocate {d:?}"),
        }
    };
    let s = CudaStorage { slice, device: dev.clone() };
    let (p, _) = slice_ptr(&s)?;
    Ok((Tensor::from_storage(Storage::Cuda(s), shape, BackpropOp::none(), false), p))
}

pub(crate) fn cfg(grid: (u32, u32), block: u32) -> LaunchConfig {
    LaunchConfig { grid_dim: (grid.0.max(1), grid.1.max(1), 1), block_dim: (block, 1, 1), shared_mem_bytes: 0 }
}

pub(crate) fn i32_of(x: usize, what: &str) -> Result<i32> {
    i32::try_from(x).map_err(|_| candle_core::Error::Msg(format!("goodput CUDA kernel: {what} {x} exceeds i32")))
}
