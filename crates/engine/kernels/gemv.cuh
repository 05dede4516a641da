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
// cache. One warp per weight row. Which of gemv_t, this one (U = 4 or 8), gemv_s2 and cuBLAS
// runs a given shape is measured on the device at load (src/cuda/tune.rs). Same preconditions
// as gemv_t. Built from stream_row and dot_row_u; its kernel is gemv_rows (below, shared with
// gemv_fp8).

// Streams the n 16-byte chunks of one weight row, U loads per lane in flight, calling f(chunk,
// index) for each. `wait`: the first loads go out before the PDL wait (under PDL, while the
// kernel before this one still runs: weights are written by no kernel); f reads x after it.
template <int U, typename F>
__device__ __forceinline__ void stream_row(const uint4* wr, int n, bool wait, F f) {
  const int lane = threadIdx.x & 31;
  int i = lane;
  uint4 wv[U];
  if (i + 32 * (U - 1) < n) {
#pragma unroll
    for (int u = 0; u < U; u++) wv[u] = __ldcs(wr + i + 32 * u);
  }
  if (wait) PDL_START();
  for (; i + 32 * (U - 1) < n; i += 32 * U) {
    if (i != lane) {
#pragma unroll
      for (int u = 0; u < U; u++) wv[u] = __ldcs(wr + i + 32 * u);
    }
#pragma unroll
    for (int u = 0; u < U; u++) f(wv[u], i + 32 * u);
  }
  for (; i < n; i += 32) f(__ldcs(wr + i), i);
}

// One weight row (wr, k8 16-byte chunks) dotted with the M rows of x, per lane (the caller
// reduces across the warp); x's rows are x_stride chunks apart (k8 unless the caller walks
// part of them: split-K).
template <typename T, int M, int U>
__device__ __forceinline__ void dot_row_u(const uint4* wr, const uint4* xr, int k8, float* acc, bool wait,
                                          int x_stride = -1) {
  const size_t xs = x_stride < 0 ? (size_t)k8 : (size_t)x_stride;
  stream_row<U>(wr, k8, wait, [&](const uint4& v, int i) {
    float wf[8];
    unpack8<T>(v, wf);
#pragma unroll
    for (int r = 0; r < M; r++) {
      float xf[8];
      unpack8<T>(__ldg(xr + (size_t)r * xs + i), xf);
#pragma unroll
      for (int e = 0; e < 8; e++) acc[r] = fmaf(wf[e], xf[e], acc[r]);
    }
  });
}


// Split-K: each weight row's width cut in S parts, one warp each, the parts' sums added in
// shared memory (blocks of 8 warps: 8 / S rows). S times the warps of gemv_u for the same
// matrix, so a matrix of few rows (Llama-3.1-8B's 4096-row o and down projections: 1024
// blocks of gemv_u, ~1.5 waves on an H200) fills the GPU in more, smaller waves. A candidate
// of the load-time tuning like the others: chosen only for the shapes where it is fastest.
template <typename T, typename O, int M, int U, int S>
__device__ void gemv_split(const T* x, const T* w, O* y, int n, int k) {
  __shared__ float part[8][M];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int j = blockIdx.x * (8 / S) + warp / S, s = warp % S;
  const int k8 = k / 8, per = (k8 + S - 1) / S;
  const int c0 = min(k8, s * per), c1 = min(k8, c0 + per);
  float acc[M];
#pragma unroll
  for (int r = 0; r < M; r++) acc[r] = 0.f;
  if (j < n) {
    dot_row_u<T, M, U>(reinterpret_cast<const uint4*>(w + (size_t)j * k) + c0, reinterpret_cast<const uint4*>(x) + c0,
                       c1 - c0, acc, true, k8);
  }
#pragma unroll
  for (int r = 0; r < M; r++) {
    const float v = warp_sum(acc[r]);
    if (lane == 0) part[warp][r] = v;
  }
  __syncthreads();
  if (j < n && s == 0 && lane < M) {
    float v = 0.f;
#pragma unroll
    for (int p = 0; p < S; p++) v += part[warp + p][lane];
    y[(size_t)lane * n + j] = from_f<O>(v);
  }
}

// silu(g) · u of one output, g and u rounded to T first, as silu_mul reads a matmul's output.
template <typename T>
__device__ __forceinline__ T swiglu_of(float g, float u) {
  const float gr = round_to<T>(g), ur = round_to<T>(u);
  return from_f<T>(round_to<T>(gr / (1.f + expf(-gr))) * ur);
}

#define GEMV_S_ENTRY(T, S, M)                                                                                      \
  extern "C" __global__ void gemv_s2_m##M##_##S(const T* x, const T* w, T* y, int n, int k) {                     \
    gemv_split<T, T, M, 8, 2>(x, w, y, n, k);                                                                     \
  }                                                                                                                \
  extern "C" __global__ void gemv_s2_m##M##_##S##_of32(const T* x, const T* w, float* y, int n, int k) {          \
    gemv_split<T, float, M, 8, 2>(x, w, y, n, k);                                                                 \
  }
#define GEMV_S_ENTRIES(T, S) GEMV_S_ENTRY(T, S, 1) GEMV_S_ENTRY(T, S, 2) GEMV_S_ENTRY(T, S, 3) GEMV_S_ENTRY(T, S, 4)
GEMV_S_ENTRIES(__half, f16)
GEMV_S_ENTRIES(__nv_bfloat16, bf16)



// ---------------------------------------------------------------------------------------------
// y (m, n) = x (m, k) · (q · scale)ᵀ for e4m3 weights q (n, k) with one f32 scale per row
// (`--dtype fp8`), m ≤ 4 rows of f16/bf16 x: gemv_u's scheme (one warp per weight row, U
// 16-byte loads in flight, the first issued before the PDL wait) on bytes, so each load
// carries 16 weights; each pair is widened by the hardware's e4m3→f16 conversion, the sum is
// f32 and the row's scale multiplies it once. Needs k % 16 == 0 and 16-byte-aligned rows.
__device__ __forceinline__ void unpack16_e4m3(const uint4& v, float* f) {
  const __nv_fp8x2_storage_t* p = reinterpret_cast<const __nv_fp8x2_storage_t*>(&v);
#pragma unroll
  for (int e = 0; e < 8; e++) {
    const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(p[e], __NV_E4M3);
    const float2 f2 = __half22float2(*reinterpret_cast<const __half2*>(&h));
    f[2 * e] = f2.x;
    f[2 * e + 1] = f2.y;
  }
}

template <typename T, int M>
__device__ __forceinline__ void fp8_fma(const uint4& wv, const uint4* xr, int k8, int i, float* acc) {
  float wf[16];
  unpack16_e4m3(wv, wf);
#pragma unroll
  for (int r = 0; r < M; r++) {
    float xf[16];
    unpack8<T>(__ldg(xr + (size_t)r * k8 + 2 * i), xf);
    unpack8<T>(__ldg(xr + (size_t)r * k8 + 2 * i + 1), xf + 8);
#pragma unroll
    for (int e = 0; e < 16; e++) acc[r] = fmaf(wf[e], xf[e], acc[r]);
  }
}

template <typename T, int M, int U>
__device__ __forceinline__ void dot_row_fp8(const uint4* wr, const uint4* xr, int k16, float* acc, bool wait) {
  stream_row<U>(wr, k16, wait, [&](const uint4& v, int i) { fp8_fma<T, M>(v, xr, 2 * k16, i, acc); });
}


// One weight row of T (gemv_u) or of e4m3 bytes (W = uint8_t, gemv_fp8) dotted with x's M rows.
template <typename T, typename W, int M, int U>
__device__ __forceinline__ void dot_row(const W* row, const T* x, int k, float* acc, bool wait) {
  const uint4* wr = reinterpret_cast<const uint4*>(row);
  const uint4* xr = reinterpret_cast<const uint4*>(x);
  if constexpr (sizeof(W) == 1) {
    dot_row_fp8<T, M, U>(wr, xr, k / 16, acc, wait);
  } else {
    dot_row_u<T, M, U>(wr, xr, k / 8, acc, wait);
  }
}

// y (m, n) = x (m, k) · wᵀ, one warp per weight row: gemv_u (W = T) and, for e4m3 weights with
// one f32 scale per row, gemv_fp8 (W = uint8_t; the scale multiplies the row's f32 sum).
template <typename T, typename W, typename O, int M, int U>
__device__ void gemv_rows(const T* x, const W* w, const float* scale, O* y, int n, int k) {
  const int j = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (j >= n) return;
  float acc[M];
#pragma unroll
  for (int r = 0; r < M; r++) acc[r] = 0.f;
  dot_row<T, W, M, U>(w + (size_t)j * k, x, k, acc, true);
  const float s = scale ? scale[j] : 1.f;
#pragma unroll
  for (int r = 0; r < M; r++) {
    const float v = warp_sum(acc[r]);
    if (lane == 0) y[(size_t)r * n + j] = from_f<O>(v * s);
  }
}

// SwiGLU in the epilogue of the fused gate|up product: w is (2 inter, k) with gate rows first;
// the warp of output j dots gate row j and up row inter + j with x (times their scales, for
// e4m3 weights) and writes silu(g) · u (inter columns), each rounded as the unfused pair (the
// matmul's T output, then silu_mul) rounds it. One launch and one (rows, 2 inter) round trip
// fewer per layer.
template <typename T, typename W, int M, int U>
__device__ void gemv_swiglu(const T* x, const W* w, const float* scale, T* y, int inter, int k) {
  const int j = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (j >= inter) return;
  float g[M], u[M];
#pragma unroll
  for (int r = 0; r < M; r++) g[r] = u[r] = 0.f;
  dot_row<T, W, M, U>(w + (size_t)j * k, x, k, g, true);
  dot_row<T, W, M, U>(w + (size_t)(inter + j) * k, x, k, u, false);
  const float sg = scale ? scale[j] : 1.f, su = scale ? scale[inter + j] : 1.f;
#pragma unroll
  for (int r = 0; r < M; r++) {
    const float gs = warp_sum(g[r]) * sg, us = warp_sum(u[r]) * su;
    if (lane == 0) y[(size_t)r * inter + j] = swiglu_of<T>(gs, us);
  }
}

#define GEMV_FP8_ENTRY(T, S, M)                                                                                    \
  extern "C" __global__ void gemv_fp8_m##M##_##S(const T* x, const uint8_t* w, const float* scale, T* y, int n,   \
                                                 int k) {                                                          \
    gemv_rows<T, uint8_t, T, M, 4>(x, w, scale, y, n, k);                                                                       \
  }                                                                                                                \
  extern "C" __global__ void gemv_fp8_m##M##_swiglu_##S(const T* x, const uint8_t* w, const float* scale, T* y,   \
                                                        int inter, int k) {                                        \
    gemv_swiglu<T, uint8_t, M, 4>(x, w, scale, y, inter, k);                                                            \
  }
#define GEMV_FP8_ENTRIES(T, S) GEMV_FP8_ENTRY(T, S, 1) GEMV_FP8_ENTRY(T, S, 2) GEMV_FP8_ENTRY(T, S, 3) GEMV_FP8_ENTRY(T, S, 4)
GEMV_FP8_ENTRIES(__half, f16)
GEMV_FP8_ENTRIES(__nv_bfloat16, bf16)

// gemv_u's entry points (after gemv_swiglu, which its SwiGLU variants instantiate).
#define GEMV_U_ENTRY(T, S, M, U)                                                                                   \
  extern "C" __global__ void gemv_u##U##_m##M##_##S(const T* x, const T* w, T* y, int n, int k) {                 \
    gemv_rows<T, T, T, M, U>(x, w, nullptr, y, n, k);                                                                            \
  }                                                                                                                \
  extern "C" __global__ void gemv_u##U##_m##M##_swiglu_##S(const T* x, const T* w, T* y, int inter, int k) {      \
    gemv_swiglu<T, T, M, U>(x, w, nullptr, y, inter, k);                                                          \
  }                                                                                                                \
  extern "C" __global__ void gemv_u##U##_m##M##_##S##_of32(const T* x, const T* w, float* y, int n, int k) {      \
    gemv_rows<T, T, float, M, U>(x, w, nullptr, y, n, k);                                                                        \
  }
#define GEMV_U_ENTRIES(T, S)                                                                                       \
  GEMV_U_ENTRY(T, S, 1, 4) GEMV_U_ENTRY(T, S, 2, 4) GEMV_U_ENTRY(T, S, 3, 4) GEMV_U_ENTRY(T, S, 4, 4)             \
  GEMV_U_ENTRY(T, S, 1, 8) GEMV_U_ENTRY(T, S, 2, 8) GEMV_U_ENTRY(T, S, 3, 8) GEMV_U_ENTRY(T, S, 4, 8)
GEMV_U_ENTRIES(__half, f16)
GEMV_U_ENTRIES(__nv_bfloat16, bf16)
