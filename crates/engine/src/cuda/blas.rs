//! cuBLAS products of bf16/f16 operands with an f32 output (`cublasGemmStridedBatchedEx`,
//! f32 accumulation), for the two products whose output must not be rounded to the operands'
//! dtype: the LM head's logits and the attention scores of long prefill chunks. The rounding
//! study (`check/numerics.rs`, `goodput engine-check --rounding-study`) finds bf16 logits cost
//! the most top-1 agreement with f32 of any rounding in a bf16 step, and bf16 scores the most
//! on real weights' outlier activations; vLLM's flash kernels keep scores in f32 too.

use crate::cuda::device::{alloc, cuda, i32_of, ptr};
use candle_core::cuda_backend::cudarc::cublas::{result::gemm_strided_batched_ex, sys};
use candle_core::{bail, DType, Result, Tensor};
use std::ffi::c_void;

fn data_type(dtype: DType) -> Result<sys::cudaDataType> {
    Ok(match dtype {
        DType::BF16 => sys::cudaDataType::CUDA_R_16BF,
        DType::F16 => sys::cudaDataType::CUDA_R_16F,
        DType::F32 => sys::cudaDataType::CUDA_R_32F,
        d => bail!("cuBLAS products take f32, f16 or bf16 operands, not {d:?}"),
    })
}

/// `a · bᵀ` in f32 for `a` `(m, k)` and `b` `(n, k)`, or batched: `(batch, m, k)` and
/// `(batch, n, k)`. Both operands of one dtype; the output is `(m, n)` or `(batch, m, n)` f32.
pub fn matmul_nt_f32(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let two_d = a.rank() == 2;
    let (a, b) = if two_d { (a.unsqueeze(0)?, b.unsqueeze(0)?) } else { (a.clone(), b.clone()) };
    let ((batch, m, k), (bb, n, kb)) = (a.dims3()?, b.dims3()?);
    if batch != bb || k != kb || a.dtype() != b.dtype() {
        bail!("matmul_nt_f32: {:?} {:?} · ({:?} {:?})ᵀ do not fit", a.shape(), a.dtype(), b.shape(), b.dtype());
    }
    let dev = cuda(a.device())?;
    dev.cuda_stream()
        .context()
        .bind_to_thread()
        .map_err(|e| candle_core::Error::Msg(format!("matmul_nt_f32: {e:?}")))?;
    let (a, b) = (a.contiguous()?, b.contiguous()?);
    let (c, cp) = alloc(&dev, DType::F32, (batch, m, n))?;
    let (ap, bp, ty) = (ptr(&a)?, ptr(&b)?, data_type(a.dtype())?);
    let (mm, nn, kk, count) = (i32_of(m, "rows")?, i32_of(n, "columns")?, i32_of(k, "width")?, i32_of(batch, "batch")?);
    let (alpha, beta) = (1f32, 0f32);
    let blas = dev.cublas_handle();
    // Row-major C (m, n) is column-major Cᵀ (n, m) = b · aᵀ: cuBLAS's first operand is our b
    // (stored as column-major (k, n), so transposed), its second our a (column-major (k, m)).
    // SAFETY: the pointers address contiguous buffers of the shapes given, alive until the
    // stream-ordered product has run (the tensors are freed after it on the same stream).
    unsafe {
        gemm_strided_batched_ex(
            *blas.handle(),
            sys::cublasOperation_t::CUBLAS_OP_T,
            sys::cublasOperation_t::CUBLAS_OP_N,
            nn,
            mm,
            kk,
            (&alpha as *const f32).cast::<c_void>(),
            bp as *const c_void,
            ty,
            kk,
            (n * k) as i64,
            ap as *const c_void,
            ty,
            kk,
            (m * k) as i64,
            (&beta as *const f32).cast::<c_void>(),
            cp as *mut c_void,
            sys::cudaDataType::CUDA_R_32F,
            nn,
            (m * n) as i64,
            count,
            sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
            sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
        )
    }
    .map_err(|e| {
        candle_core::Error::Msg(format!("cublasGemmStridedBatchedEx ({batch} × {m}×{k} · ({n}×{k})ᵀ): {e:?}"))
    })?;
    if two_d {
        c.squeeze(0)
    } else {
        Ok(c)
    }
}
