// The small-batch matmuls (included by goodput.cu, after its helpers).
#pragma once

// ---------------------------------------------------------------------------------------------
// y (m, n) = x (m, k) · w (n, k)ᵀ for m ≤ 4 rows (decode at small batch), f16/bf16: one warp
// per weight row, 16-byte loads (8 values), f32 accumulation, the x rows read through L1. Its
// fixed cost per launch is lower than cuBLAS's; its bandwidth on large matrices is lower too
// (~1.4 TB/s on an H200), so the caller gives it small matrices only. Needs k % 8 == 0 and
// 16-byte-aligned rows (checked by the caller). The output O is T, or f32 where it must not be
// rounded (the LM head's logits: entry points suffixed _of32).
#define GEMV_MAX_M 4

template <typename T>
__device__ __forceinline__ void unpack8(const uint4& v, float* f) {
  const T* p = reinterpret_cast<const T*>(&v);
#pragma unroll
  for (int e = 0; e < 8; e++) f[e] = to_f(p[e]);
}

template <typename T, typename O>
__device__ void gemv_t(const T* x, const T* w, O* y, int m, int n, int k) {
  PDL_START();
  const int j = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (j >= n) return;
  const uint4* wr = reinterpret_cast<const uint4*>(w + (size_t)j * k);
  const int k8 = k / 8;
  float acc[GEMV_MAX_M] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll 4
  for (int i = lane; i < k8; i += 32) {
    float wf[8];
    unpack8<T>(wr[i], wf);
#pragma unroll
    for (int r = 0; r < GEMV_MAX_M; r++) {
      if (r < m) {
        float xf[8];
        unpack8<T>(reinterpret_cast<const uint4*>(x + (size_t)r * k)[i], xf);
#pragma unroll
        for (int e = 0; e < 8; e++) acc[r] += wf[e] * xf[e];
      }
    }
  }
#pragma unroll
  for (int r = 0; r < GEMV_MAX_M; r++) {
    if (r < m) {
      const float s = warp_sum(acc[r]);
      if (lane == 0) y[(size_t)r * n + j] = from_f<O>(s);
    }
  }
}

#define GEMV_T_ENTRIES(T, S)                                                                                       \
  extern "C" __global__ void gemv_t_##S(const T* x, const T* w, T* y, int m, int n, int k) {                      \
    gemv_t<T, T>(x, w, y, m, n, k);                                                                               \
  }                                                                                                                \
  extern "C" __global__ void gemv_t_##S##_of32(const T* x, const T* w, float* y, int m, int n, int k) {           \
    gemv_t<T, float>(x, w, y, m, n, k);                                                                           \
  }
GEMV_T_ENTRIES(__half, f16)
GEMV_T_ENTRIES(__nv_bfloat16, bf16)

// ---------------------------------------------------------------------------------------------
// The same product with the row count M a template parameter and U 16-byte weight loads per
// lane issued before any is used (U × 512 bytes in flight per warp), the weights read with
// the streaming hint (evict first: each is read once per step) and x through the read-only
// cache. One warp per weight row. Which of gemv_t, this one (U = 4 or 8) and cuBLAS runs a
// given shape is measured on the device at load (src/cuda_tune.rs). Same preconditions as
// gemv_t.
template <typename T, typename O, int M, int U>
__device__ void gemv_u(const T* x, const T* w, O* y, int n, int k) {
  const int j = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (j >= n) return;
  const uint4* wr = reinterpret_cast<const uint4*>(w + (size_t)j * k);
  const uint4* xr = reinterpret_cast<const uint4*>(x);
  const int k8 = k / 8;
  float acc[M];
#pragma unroll
  for (int r = 0; r < M; r++) acc[r] = 0.f;
  int i = lane;
  uint4 wv[U];
  // The first weight loads go out before the wait (under PDL, while the kernel before this one
  // still runs): weights are written by no kernel. x is read after it.
  if (i + 32 * (U - 1) < k8) {
#pragma unroll
    for (int u = 0; u < U; u++) wv[u] = __ldcs(wr + i + 32 * u);
  }
  PDL_START();
  for (; i + 32 * (U - 1) < k8; i += 32 * U) {
    if (i != lane) {
#pragma unroll
      for (int u = 0; u < U; u++) wv[u] = __ldcs(wr + i + 32 * u);
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
      float wf[8];
      unpack8<T>(wv[u], wf);
#pragma unroll
      for (int r = 0; r < M; r++) {
        float xf[8];
        unpack8<T>(__ldg(xr + (size_t)r * k8 + i + 32 * u), xf);
#pragma unroll
        for (int e = 0; e < 8; e++) acc[r] = fmaf(wf[e], xf[e], acc[r]);
      }
    }
  }
  for (; i < k8; i += 32) {
    float wf[8];
    unpack8<T>(__ldcs(wr + i), wf);
#pragma unroll
    for (int r = 0; r < M; r++) {
      float xf[8];
      unpack8<T>(__ldg(xr + (size_t)r * k8 + i), xf);
#pragma unroll
      for (int e = 0; e < 8; e++) acc[r] = fmaf(wf[e], xf[e], acc[r]);
    }
  }
#pragma unroll
  for (int r = 0; r < M; r++) {
    const float s = warp_sum(acc[r]);
    if (lane == 0) y[(size_t)r * n + j] = from_f<O>(s);
  }
}

#define GEMV_U_ENTRY(T, S, M, U)                                                                                   \
  extern "C" __global__ void gemv_u##U##_m##M##_##S(const T* x, const T* w, T* y, int n, int k) {                 \
    gemv_u<T, T, M, U>(x, w, y, n, k);                                                                            \
  }                                                                                                                \
  extern "C" __global__ void gemv_u##U##_m##M##_##S##_of32(const T* x, const T* w, float* y, int n, int k) {      \
    gemv_u<T, float, M, U>(x, w, y, n, k);                                                                        \
  }
#define GEMV_U_ENTRIES(T, S)                                                                                       \
  GEMV_U_ENTRY(T, S, 1, 4) GEMV_U_ENTRY(T, S, 2, 4) GEMV_U_ENTRY(T, S, 3, 4) GEMV_U_ENTRY(T, S, 4, 4)             \
  GEMV_U_ENTRY(T, S, 1, 8) GEMV_U_ENTRY(T, S, 2, 8) GEMV_U_ENTRY(T, S, 3, 8) GEMV_U_ENTRY(T, S, 4, 8)
GEMV_U_ENTRIES(__half, f16)
GEMV_U_ENTRIES(__nv_bfloat16, bf16)

