// goodput's CUDA kernels: what candle has no single kernel for, so that a decoder layer runs
// in ~9 launches (add+RMSNorm on an f32 residual stream, QKV matmul, QKV split+RoPE+KV write, paged attention,
// O matmul, add+RMSNorm, gate|up matmul, SwiGLU, down matmul), the small-batch matmuls stream
// their weights (gemv_t) and sampling stays on the GPU.
// Compiled to PTX by crates/engine/build.rs (feature `cuda`); loaded by src/cuda.rs.
//
// Every kernel reads and writes the model's dtype (f32, f16 or bf16) and accumulates in f32.
// Suffixes: _f32, _f16, _bf16.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <stdint.h>

#define NEG_INF __int_as_float(0xff800000)

// Programmatic dependent launch (sm_90 and later; src/cuda_launch.rs launches every kernel
// here with the attribute when it is on). A kernel may then start while the kernel before it
// on the stream is still running. PDL_WAIT() returns once that kernel has completed and its
// writes are visible, so every kernel calls it before its first read of a buffer another
// kernel writes and before its first write; before it, a kernel may only read what no kernel
// writes (the weights). PDL_TRIGGER() lets the next kernel launch (its blocks then take free
// SM slots and run up to their own wait). Both are no-ops for a launch without the attribute.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define PDL_WAIT() asm volatile("griddepcontrol.wait;" ::: "memory")
#define PDL_TRIGGER() asm volatile("griddepcontrol.launch_dependents;" ::: "memory")
#else
#define PDL_WAIT()
#define PDL_TRIGGER()
#endif
#define PDL_START() \
  do {              \
    PDL_WAIT();     \
    PDL_TRIGGER();  \
  } while (0)
#define SKIP_ROW 0xffffffffu

__device__ __forceinline__ float to_f(float x) { return x; }
__device__ __forceinline__ float to_f(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> __device__ __forceinline__ T from_f(float x);
template <> __device__ __forceinline__ float from_f<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_f<__half>(float x) { return __float2half(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float x) { return __float2bfloat16(x); }
// Rounds to T and back: what an op computed in T (as candle's kernels do) would give.
template <typename T> __device__ __forceinline__ float round_to(float x) { return to_f(from_f<T>(x)); }

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ unsigned warp_min_u(unsigned v) {
  for (int o = 16; o > 0; o >>= 1) v = min(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Block-wide reductions (blockDim.x a multiple of 32, at most 1024); `sh` holds 32 floats.
// The first barrier lets a previous call's readers finish before `sh` is reused.
__device__ float block_sum(float v, float* sh) {
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) sh[w] = v;
  __syncthreads();
  if (w == 0) {
    v = lane < nw ? sh[lane] : 0.f;
    v = warp_sum(v);
    if (lane == 0) sh[0] = v;
  }
  __syncthreads();
  return sh[0];
}
__device__ float block_max(float v, float* sh) {
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) sh[w] = v;
  __syncthreads();
  if (w == 0) {
    v = lane < nw ? sh[lane] : NEG_INF;
    v = warp_max(v);
    if (lane == 0) sh[0] = v;
  }
  __syncthreads();
  return sh[0];
}
__device__ unsigned block_min_u(unsigned v, unsigned* sh) {
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = warp_min_u(v);
  __syncthreads();
  if (lane == 0) sh[w] = v;
  __syncthreads();
  if (w == 0) {
    v = lane < nw ? sh[lane] : 0xffffffffu;
    v = warp_min_u(v);
    if (lane == 0) sh[0] = v;
  }
  __syncthreads();
  return sh[0];
}

// ---------------------------------------------------------------------------------------------
// Residual add + RMSNorm, the residual stream kept in f32 (as the CPU's bf16 path keeps its
// activations): res = x + delta (x alone when delta is null; delta, a matmul's output, is
// widened from T), out = RMSNorm(res) * w rounded to T for the next matmul. One block per
// row. At T = f32 this is exactly an add then candle's RMSNorm.
template <typename T>
__device__ void add_rms_norm(const float* x, const T* delta, const T* w, float* res, T* out, int n, float eps) {
  PDL_START();
  __shared__ float sh[32];
  const size_t r = blockIdx.x;
  const float* xr = x + r * n;
  float* rr = res + r * n;
  T* orow = out + r * n;
  float ss = 0.f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const float s = delta ? xr[i] + to_f(delta[r * n + i]) : xr[i];
    rr[i] = s;
    ss += s * s;
  }
  ss = block_sum(ss, sh);
  const float inv = rsqrtf(ss / n + eps);
  for (int i = threadIdx.x; i < n; i += blockDim.x) orow[i] = from_f<T>(rr[i] * inv * to_f(w[i]));
}

// ---------------------------------------------------------------------------------------------
// SwiGLU: gu is (rows, 2 * inter) with the gate in the first half of each row and up in the
// second; out (rows, inter) = silu(gate) * up, each rounded to T as candle's silu and mul.
template <typename T>
__device__ void silu_mul(const T* gu, T* out, int rows, int inter) {
  PDL_START();
  const size_t total = (size_t)rows * inter;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
    const size_t r = i / inter, c = i % inter;
    const float g = to_f(gu[r * 2 * inter + c]);
    const float u = to_f(gu[r * 2 * inter + inter + c]);
    const float s = round_to<T>(g / (1.f + expf(-g)));
    out[i] = from_f<T>(s * u);
  }
}

// ---------------------------------------------------------------------------------------------
// The fused QKV projection's output (rows, (hq + 2 hkv) * d) split into heads: RoPE on q and
// k at each row's position, q written to q_out (rows, hq, d), k and v written to their pool
// slots (slot, hkv, d); a row whose slot is SKIP_ROW (padding of a captured graph) writes q
// only. One block per row. `interleaved`: RoPE pairs (2j, 2j+1) (GGUF
// checkpoints) instead of (j, j + d/2). Products rounded separately (no FMA), as on the CPU.
template <typename T>
__device__ void qkv_rope_cache(const T* qkv, const T* cos, const T* sin, const uint32_t* pos, const uint32_t* slots,
                               T* q_out, T* k_pool, T* v_pool, int hq, int hkv, int d, int interleaved) {
  PDL_START();
  const size_t r = blockIdx.x;
  const int half = d / 2;
  const T* row = qkv + r * (size_t)(hq + 2 * hkv) * d;
  const size_t p = pos[r], slot = slots[r];
  const T* c = cos + p * half;
  const T* s = sin + p * half;
  const int pairs = (hq + hkv) * half;
  for (int i = threadIdx.x; i < pairs; i += blockDim.x) {
    const int h = i / half, j = i % half;
    const int i1 = interleaved ? 2 * j : j;
    const int i2 = interleaved ? 2 * j + 1 : j + half;
    const T* src = row + (size_t)h * d;
    const float x1 = to_f(src[i1]), x2 = to_f(src[i2]);
    const float cc = to_f(c[j]), ss = to_f(s[j]);
    const float y1 = __fsub_rn(__fmul_rn(x1, cc), __fmul_rn(x2, ss));
    const float y2 = __fadd_rn(__fmul_rn(x1, ss), __fmul_rn(x2, cc));
    if (h >= hq && slot == SKIP_ROW) continue;
    T* dst = h < hq ? q_out + (r * hq + h) * d : k_pool + (slot * hkv + (h - hq)) * d;
    dst[i1] = from_f<T>(y1);
    dst[i2] = from_f<T>(y2);
  }
  if (slot == SKIP_ROW) return;
  const T* v = row + (size_t)(hq + hkv) * d;
  for (int i = threadIdx.x; i < hkv * d; i += blockDim.x) v_pool[slot * hkv * d + i] = v[i];
}

// ---------------------------------------------------------------------------------------------
// Paged attention for decode rows and short prefill chunks, reading K/V where the block
// tables say. One block (4 warps) per (query row, kv head, partition of the context); the
// block handles the G = hq / hkv query heads sharing that kv head (GQA; G a template
// parameter, 1 to 8, so the per-head state takes only the registers it needs), so K/V are read once for
// them. Each warp walks every 4th visible position: lane l holds elements [l*E, l*E+E) of the
// head, the dot product is a warp reduction, the softmax is online (running max m, sum l).
// The 4 warps are merged in shared memory. With one partition the row is written to `out`;
// with several, the unnormalised partial (m, l, acc) goes to `part_*` and attn_combine merges
// them (flash-decoding, for long contexts).
//
// seq_info: per sequence (q_start, q_len, ctx_len, bt_start); row_seq: sequence of each row,
// SKIP_ROW for rows another path computes. The partition length is read from device memory
// (the step's metadata), so that a captured CUDA graph, whose grid (num_parts) is fixed, can
// still split each step's context evenly. Causal: row i of a chunk of q_len new tokens in a
// context of ctx_len sees positions 0 ..= ctx_len - q_len + i.
// E consecutive values of T at a naturally aligned address, as one vector load, widened to f32.
template <int B> struct Raw;
template <> struct Raw<4> { typedef unsigned type; };
template <> struct Raw<8> { typedef uint2 type; };
template <> struct Raw<16> { typedef uint4 type; };
template <typename T, int E>
__device__ __forceinline__ void load_f(const T* p, float* f) {
  typedef typename Raw<sizeof(T) * E>::type R;
  const R r = *reinterpret_cast<const R*>(p);
  const T* t = reinterpret_cast<const T*>(&r);
#pragma unroll
  for (int e = 0; e < E; e++) f[e] = to_f(t[e]);
}

#define ATT_WARPS 4

template <typename T, int D, int G>
__device__ void paged_attention(const T* q, const T* k_pool, const T* v_pool, T* out, float* part_ml, float* part_acc,
                                const uint32_t* row_seq, const uint32_t* seq_info, const uint32_t* block_tables,
                                int hq, int hkv, int block_size, float scale, const uint32_t* part_len_dev,
                                int num_parts) {
  PDL_START();
  constexpr int E = D / 32;
  __shared__ float q_sh[G][D];
  __shared__ float red_m[ATT_WARPS][G];
  __shared__ float red_l[ATT_WARPS][G];
  __shared__ float red_acc[ATT_WARPS][G][D];

  const int row = blockIdx.x / hkv, kh = blockIdx.x % hkv, part = blockIdx.y;
  const uint32_t si = row_seq[row];
  if (si == SKIP_ROW) return;
  constexpr int group = G;
  const uint32_t* info = seq_info + 4 * si;
  const int q_start = info[0], q_len = info[1], ctx_len = info[2], bt_start = info[3];
  const int visible = ctx_len - q_len + (row - q_start) + 1;
  const int part_len = (int)*part_len_dev;
  const int p0 = part * part_len;
  const int p1 = min(visible, p0 + part_len);

  for (int i = threadIdx.x; i < group * D; i += blockDim.x) {
    const int g = i / D, x = i % D;
    q_sh[g][x] = to_f(q[((size_t)row * hq + kh * group + g) * D + x]) * scale;
  }
  __syncthreads();

  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  float qr[G][E], m[G], l[G], acc[G][E];
#pragma unroll
  for (int g = 0; g < G; g++) {
    m[g] = NEG_INF;
    l[g] = 0.f;
#pragma unroll
    for (int e = 0; e < E; e++) {
      acc[g][e] = 0.f;
      qr[g][e] = g < group ? q_sh[g][lane * E + e] : 0.f;
    }
  }
  // Two positions in flight per warp: the next one's K/V are loaded before this one is used.
  const size_t head = (size_t)kh * D + lane * E;
  const size_t stride = (size_t)hkv * D;
  float kf[E] = {}, vf[E] = {}, kn[E] = {}, vn[E] = {};
  int p = p0 + w;
  if (p < p1) {
    const size_t slot = (size_t)block_tables[bt_start + p / block_size] * block_size + p % block_size;
    load_f<T, E>(k_pool + slot * stride + head, kf);
    load_f<T, E>(v_pool + slot * stride + head, vf);
  }
  for (; p < p1; p += ATT_WARPS) {
    const int pn = p + ATT_WARPS;
    if (pn < p1) {
      const size_t slot = (size_t)block_tables[bt_start + pn / block_size] * block_size + pn % block_size;
      load_f<T, E>(k_pool + slot * stride + head, kn);
      load_f<T, E>(v_pool + slot * stride + head, vn);
    }
#pragma unroll
    for (int g = 0; g < G; g++) {
      if (g < group) {
        float s = 0.f;
#pragma unroll
        for (int e = 0; e < E; e++) s += qr[g][e] * kf[e];
        s = warp_sum(s);
        const float mn = fmaxf(m[g], s);
        const float c = expf(m[g] - mn);
        const float pw = expf(s - mn);
        l[g] = l[g] * c + pw;
#pragma unroll
        for (int e = 0; e < E; e++) acc[g][e] = acc[g][e] * c + pw * vf[e];
        m[g] = mn;
      }
    }
#pragma unroll
    for (int e = 0; e < E; e++) {
      kf[e] = kn[e];
      vf[e] = vn[e];
    }
  }
#pragma unroll
  for (int g = 0; g < G; g++) {
    if (g < group) {
      if (lane == 0) {
        red_m[w][g] = m[g];
        red_l[w][g] = l[g];
      }
#pragma unroll
      for (int e = 0; e < E; e++) red_acc[w][g][lane * E + e] = acc[g][e];
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < group * D; i += blockDim.x) {
    const int g = i / D, x = i % D;
    float mx = NEG_INF;
    for (int ww = 0; ww < ATT_WARPS; ww++) mx = fmaxf(mx, red_m[ww][g]);
    float L = 0.f, A = 0.f;
    if (mx != NEG_INF) {
      for (int ww = 0; ww < ATT_WARPS; ww++) {
        if (red_m[ww][g] == NEG_INF) continue;
        const float c = expf(red_m[ww][g] - mx);
        L += red_l[ww][g] * c;
        A += red_acc[ww][g][x] * c;
      }
    }
    const size_t h = (size_t)row * hq + kh * group + g;
    if (num_parts == 1) {
      out[h * D + x] = from_f<T>(A / L);
    } else {
      part_acc[(h * num_parts + part) * D + x] = A;
      if (x == 0) {
        part_ml[(h * num_parts + part) * 2] = mx;
        part_ml[(h * num_parts + part) * 2 + 1] = L;
      }
    }
  }
}

// Merges the partitions of paged_attention: one block of D threads per (row, query head).
template <typename T, int D>
__device__ void attn_combine(const float* part_ml, const float* part_acc, const uint32_t* row_seq, T* out, int hq,
                             int num_parts) {
  PDL_START();
  const size_t h = blockIdx.x;
  const int row = h / hq;
  if (row_seq[row] == SKIP_ROW) return;
  const int x = threadIdx.x;
  float mx = NEG_INF;
  for (int p = 0; p < num_parts; p++) mx = fmaxf(mx, part_ml[(h * num_parts + p) * 2]);
  float L = 0.f, A = 0.f;
  for (int p = 0; p < num_parts; p++) {
    const float mp = part_ml[(h * num_parts + p) * 2];
    if (mp == NEG_INF) continue;
    const float c = expf(mp - mx);
    L += part_ml[(h * num_parts + p) * 2 + 1] * c;
    A += part_acc[(h * num_parts + p) * D + x] * c;
  }
  out[h * D + x] = from_f<T>(A / L);
}

// ---------------------------------------------------------------------------------------------
// Causal softmax in place over attention scores (heads, rows_per_head, ctx) of one long
// prefill chunk (the cuBLAS path): row r of a head is query (r % q_len) of the chunk, which
// sees positions 0 ..= ctx - q_len + (r % q_len); the rest get probability 0. Scores are
// scaled here. One block per row. The probabilities P go to p, which may be s itself (in place,
// S = P = T) or, for f32 scores of bf16/f16 operands (a cuBLAS product with an f32 output, as a
// flash kernel keeps them), a separate buffer of the P·V product's dtype.
template <typename S, typename P>
__device__ void causal_softmax(const S* s, P* p, int rows_per_head, int q_len, int ctx, float scale) {
  PDL_START();
  __shared__ float sh[32];
  const size_t r = blockIdx.x;
  const int i = (int)(r % rows_per_head) % q_len;
  const int vis = ctx - q_len + i + 1;
  const S* x = s + r * ctx;
  P* y = p + r * ctx;
  float m = NEG_INF;
  for (int j = threadIdx.x; j < vis; j += blockDim.x) m = fmaxf(m, to_f(x[j]) * scale);
  m = block_max(m, sh);
  float sum = 0.f;
  for (int j = threadIdx.x; j < vis; j += blockDim.x) sum += expf(to_f(x[j]) * scale - m);
  sum = block_sum(sum, sh);
  const float inv = 1.f / sum;
  for (int j = threadIdx.x; j < ctx; j += blockDim.x)
    y[j] = from_f<P>(j < vis ? expf(to_f(x[j]) * scale - m) * inv : 0.f);
}

#include "sample.cuh"
#include "gemv.cuh"
#include "flash.cuh"

// ---------------------------------------------------------------------------------------------
// Entry points per dtype.
#define FOR_DTYPES(X) X(float, f32) X(__half, f16) X(__nv_bfloat16, bf16)

#define PAGED_ENTRY(T, S, D, G)                                                                                    \
  extern "C" __global__ void paged_attention_d##D##_g##G##_##S(                                                    \
      const T* q, const T* k, const T* v, T* out, float* pml, float* pacc, const uint32_t* row_seq,                \
      const uint32_t* seq_info, const uint32_t* bt, int hq, int hkv, int bs, float scale, const uint32_t* part_len, \
      int parts) {                                                                                                 \
    paged_attention<T, D, G>(q, k, v, out, pml, pacc, row_seq, seq_info, bt, hq, hkv, bs, scale, part_len, parts); \
  }

#define ENTRY_POINTS(T, S)                                                                                         \
  extern "C" __global__ void add_rms_norm_##S(const float* x, const T* delta, const T* w, float* res, T* out,    \
                                              int n, float eps) {                                                  \
    add_rms_norm<T>(x, delta, w, res, out, n, eps);                                                                \
  }                                                                                                                \
  extern "C" __global__ void silu_mul_##S(const T* gu, T* out, int rows, int inter) {                              \
    silu_mul<T>(gu, out, rows, inter);                                                                             \
  }                                                                                                                \
  extern "C" __global__ void qkv_rope_cache_##S(const T* qkv, const T* cos, const T* sin, const uint32_t* pos,    \
                                                const uint32_t* slots, T* q_out, T* k_pool, T* v_pool, int hq,     \
                                                int hkv, int d, int interleaved) {                                 \
    qkv_rope_cache<T>(qkv, cos, sin, pos, slots, q_out, k_pool, v_pool, hq, hkv, d, interleaved);                  \
  }                                                                                                                \
  extern "C" __global__ void causal_softmax_##S(T* s, int rows_per_head, int q_len, int ctx, float scale) {       \
    causal_softmax<T, T>(s, s, rows_per_head, q_len, ctx, scale);                                                  \
  }                                                                                                                \
  extern "C" __global__ void causal_softmax_f32_to_##S(const float* s, T* p, int rows_per_head, int q_len,        \
                                                       int ctx, float scale) {                                     \
    causal_softmax<float, T>(s, p, rows_per_head, q_len, ctx, scale);                                              \
  }                                                                                                                \
  PAGED_ENTRY(T, S, 64, 1) PAGED_ENTRY(T, S, 64, 2) PAGED_ENTRY(T, S, 64, 3) PAGED_ENTRY(T, S, 64, 4)               \
  PAGED_ENTRY(T, S, 64, 5) PAGED_ENTRY(T, S, 64, 6) PAGED_ENTRY(T, S, 64, 7) PAGED_ENTRY(T, S, 64, 8)               \
  PAGED_ENTRY(T, S, 128, 1) PAGED_ENTRY(T, S, 128, 2) PAGED_ENTRY(T, S, 128, 3) PAGED_ENTRY(T, S, 128, 4)           \
  PAGED_ENTRY(T, S, 128, 5) PAGED_ENTRY(T, S, 128, 6) PAGED_ENTRY(T, S, 128, 7) PAGED_ENTRY(T, S, 128, 8)           \
  extern "C" __global__ void attn_combine_d64_##S(const float* pml, const float* pacc, const uint32_t* row_seq,    \
                                                  T* out, int hq, int parts) {                                     \
    attn_combine<T, 64>(pml, pacc, row_seq, out, hq, parts);                                                       \
  }                                                                                                                \
  extern "C" __global__ void attn_combine_d128_##S(const float* pml, const float* pacc, const uint32_t* row_seq,   \
                                                   T* out, int hq, int parts) {                                    \
    attn_combine<T, 128>(pml, pacc, row_seq, out, hq, parts);                                                      \
  }

FOR_DTYPES(ENTRY_POINTS)

// Tensor-core prefill attention (flash.cuh): f16 and bf16 only (mma has no f32 operands).
#define FLASH_ENTRY(T, S, D)                                                                                       \
  extern "C" __global__ void __launch_bounds__(128) flash_prefill_d##D##_##S(                                     \
      const T* q, const T* k, const T* v, T* out, const uint32_t* items, const uint32_t* seq_info,                 \
      const uint32_t* bt, int hq, int hkv, int bs, float scale) {                                                  \
    flash_prefill<T, D>(q, k, v, out, items, seq_info, bt, hq, hkv, bs, scale);                                    \
  }
FLASH_ENTRY(__half, f16, 64)
FLASH_ENTRY(__half, f16, 128)
FLASH_ENTRY(__nv_bfloat16, bf16, 64)
FLASH_ENTRY(__nv_bfloat16, bf16, 128)
