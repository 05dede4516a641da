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
#include <stdint.h>

#define NEG_INF __int_as_float(0xff800000)
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
// scaled here. One block per row.
template <typename T>
__device__ void causal_softmax(T* s, int rows_per_head, int q_len, int ctx, float scale) {
  __shared__ float sh[32];
  const size_t r = blockIdx.x;
  const int i = (int)(r % rows_per_head) % q_len;
  const int vis = ctx - q_len + i + 1;
  T* x = s + r * ctx;
  float m = NEG_INF;
  for (int j = threadIdx.x; j < vis; j += blockDim.x) m = fmaxf(m, to_f(x[j]) * scale);
  m = block_max(m, sh);
  float sum = 0.f;
  for (int j = threadIdx.x; j < vis; j += blockDim.x) sum += expf(to_f(x[j]) * scale - m);
  sum = block_sum(sum, sh);
  const float inv = 1.f / sum;
  for (int j = threadIdx.x; j < ctx; j += blockDim.x)
    x[j] = from_f<T>(j < vis ? expf(to_f(x[j]) * scale - m) * inv : 0.f);
}

// ---------------------------------------------------------------------------------------------
// Sampling on the GPU: one block of 1024 threads per row of f32 logits; only the token id
// crosses to the host. params per row: (temperature, top_k (0 = all), top_p, u) with u a
// uniform draw in [0, 1) from the request's seeded generator on the host.
// - temperature < 1e-5 or top_k == 1: argmax (lowest index among equal maxima).
// - otherwise z = (x - max) / T; the top-k cut is the k-th largest z, found exactly by a
//   bitwise search over order-preserving integer keys (32 counting passes, no sort); the
//   top-p cut is the largest key whose set {z >= cut} holds at least top_p of the top-k mass
//   (32 summing passes); the kept set includes ties at the cut. The token is drawn by inverse
//   CDF over the kept set in index order (the same distribution as in sorted order).
__device__ __forceinline__ unsigned f_key(float f) {
  const unsigned b = __float_as_uint(f);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

extern "C" __global__ void sample_rows(const float* logits, const float* params, uint32_t* out, int vocab) {
  __shared__ float sh[32];
  __shared__ unsigned shu[32];
  __shared__ float scan[32];
  __shared__ unsigned chosen;
  const float* x = logits + (size_t)blockIdx.x * vocab;
  const float T = params[4 * blockIdx.x], kf = params[4 * blockIdx.x + 1];
  const float top_p = params[4 * blockIdx.x + 2], u = params[4 * blockIdx.x + 3];
  float m = NEG_INF;
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) m = fmaxf(m, x[i]);
  m = block_max(m, sh);
  if (T < 1e-5f || kf == 1.f) {
    unsigned best = 0xffffffffu;
    for (int i = threadIdx.x; i < vocab; i += blockDim.x)
      if (x[i] == m) best = min(best, (unsigned)i);
    best = block_min_u(best, shu);
    if (threadIdx.x == 0) out[blockIdx.x] = best == 0xffffffffu ? 0u : best;
    return;
  }
  const float inv_t = 1.f / T;
  const unsigned k = kf <= 0.f || kf >= (float)vocab ? (unsigned)vocab : (unsigned)kf;
  // Top-k cut: the largest key K with count(key >= K) >= k.
  unsigned cut = 0;
  if (k < (unsigned)vocab) {
    for (int b = 31; b >= 0; b--) {
      const unsigned cand = cut | (1u << b);
      float cnt = 0.f;
      for (int i = threadIdx.x; i < vocab; i += blockDim.x) cnt += f_key((x[i] - m) * inv_t) >= cand ? 1.f : 0.f;
      cnt = block_sum(cnt, sh);
      if (cnt >= (float)k) cut = cand;
    }
  }
  // Top-p cut: the largest key K' with mass(key >= K') >= top_p * mass(key >= cut).
  float total = 0.f;
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
    const float z = (x[i] - m) * inv_t;
    if (f_key(z) >= cut) total += expf(z);
  }
  total = block_sum(total, sh);
  if (top_p < 1.f) {
    const float target = top_p * total;
    unsigned pc = 0;
    for (int b = 31; b >= 0; b--) {
      const unsigned cand = pc | (1u << b);
      float mass = 0.f;
      for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
        const float z = (x[i] - m) * inv_t;
        if (f_key(z) >= cand) mass += expf(z);
      }
      mass = block_sum(mass, sh);
      if (mass >= target) pc = cand;
    }
    cut = max(cut, pc);
    total = 0.f;
    for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
      const float z = (x[i] - m) * inv_t;
      if (f_key(z) >= cut) total += expf(z);
    }
    total = block_sum(total, sh);
  }
  // Inverse CDF in index order: each thread owns a contiguous chunk; a block scan of the
  // chunk sums finds the chunk holding r, whose thread walks it.
  const float r = u * total;
  const int chunk = (vocab + blockDim.x - 1) / blockDim.x;
  const int lo = threadIdx.x * chunk, hi = min(vocab, lo + chunk);
  float mine = 0.f;
  unsigned last = 0xffffffffu;
  for (int i = lo; i < hi; i++) {
    const float z = (x[i] - m) * inv_t;
    if (f_key(z) >= cut) {
      mine += expf(z);
      last = i;
    }
  }
  // Inclusive scan of `mine` over the block.
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  float incl = mine;
  for (int o = 1; o < 32; o <<= 1) {
    const float y = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += y;
  }
  if (threadIdx.x == 0) chosen = 0xffffffffu;
  if (lane == 31) scan[w] = incl;
  __syncthreads();
  if (w == 0) {
    const int nw = blockDim.x >> 5;
    float t = lane < nw ? scan[lane] : 0.f;
    for (int o = 1; o < 32; o <<= 1) {
      const float y = __shfl_up_sync(0xffffffffu, t, o);
      if (lane >= o) t += y;
    }
    if (lane < nw) scan[lane] = t;
  }
  __syncthreads();
  const float before = (w > 0 ? scan[w - 1] : 0.f) + incl - mine;
  if (mine > 0.f && r >= before && r < before + mine) {
    float acc = before;
    unsigned pick = last;
    for (int i = lo; i < hi; i++) {
      const float z = (x[i] - m) * inv_t;
      if (f_key(z) >= cut) {
        acc += expf(z);
        if (r < acc) {
          pick = i;
          break;
        }
      }
    }
    atomicMin(&chosen, pick);
  }
  // r at or past the total (rounding): the last kept token.
  const unsigned last_kept = block_min_u(last == 0xffffffffu ? 0xffffffffu : ~last, shu);
  __syncthreads();
  if (threadIdx.x == 0) out[blockIdx.x] = chosen != 0xffffffffu ? chosen : ~last_kept;
}

// ---------------------------------------------------------------------------------------------
// y (m, n) = x (m, k) · w (n, k)ᵀ for m ≤ 4 rows (decode at small batch), f16/bf16: one warp
// per weight row, 16-byte loads (8 values), f32 accumulation, the x rows read through L1. Its
// fixed cost per launch is lower than cuBLAS's; its bandwidth on large matrices is lower too
// (~1.4 TB/s on an H200), so the caller gives it small matrices only. Needs k % 8 == 0 and
// 16-byte-aligned rows (checked by the caller).
#define GEMV_MAX_M 4

template <typename T>
__device__ __forceinline__ void unpack8(const uint4& v, float* f) {
  const T* p = reinterpret_cast<const T*>(&v);
#pragma unroll
  for (int e = 0; e < 8; e++) f[e] = to_f(p[e]);
}

template <typename T>
__device__ void gemv_t(const T* x, const T* w, T* y, int m, int n, int k) {
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
      if (lane == 0) y[(size_t)r * n + j] = from_f<T>(s);
    }
  }
}

extern "C" __global__ void gemv_t_f16(const __half* x, const __half* w, __half* y, int m, int n, int k) {
  gemv_t<__half>(x, w, y, m, n, k);
}
extern "C" __global__ void gemv_t_bf16(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y, int m, int n,
                                       int k) {
  gemv_t<__nv_bfloat16>(x, w, y, m, n, k);
}

// ---------------------------------------------------------------------------------------------
// The same product with the row count M a template parameter and U 16-byte weight loads per
// lane issued before any is used (U × 512 bytes in flight per warp), the weights read with
// the streaming hint (evict first: each is read once per step) and x through the read-only
// cache. One warp per weight row. Which of gemv_t, this one (U = 4 or 8) and cuBLAS runs a
// given shape is measured on the device at load (src/cuda_tune.rs). Same preconditions as
// gemv_t.
template <typename T, int M, int U>
__device__ void gemv_u(const T* x, const T* w, T* y, int n, int k) {
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
  for (; i + 32 * (U - 1) < k8; i += 32 * U) {
    uint4 wv[U];
#pragma unroll
    for (int u = 0; u < U; u++) wv[u] = __ldcs(wr + i + 32 * u);
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
    if (lane == 0) y[(size_t)r * n + j] = from_f<T>(s);
  }
}

#define GEMV_U_ENTRY(T, S, M, U)                                                                                   \
  extern "C" __global__ void gemv_u##U##_m##M##_##S(const T* x, const T* w, T* y, int n, int k) {                 \
    gemv_u<T, M, U>(x, w, y, n, k);                                                                               \
  }
#define GEMV_U_ENTRIES(T, S)                                                                                       \
  GEMV_U_ENTRY(T, S, 1, 4) GEMV_U_ENTRY(T, S, 2, 4) GEMV_U_ENTRY(T, S, 3, 4) GEMV_U_ENTRY(T, S, 4, 4)             \
  GEMV_U_ENTRY(T, S, 1, 8) GEMV_U_ENTRY(T, S, 2, 8) GEMV_U_ENTRY(T, S, 3, 8) GEMV_U_ENTRY(T, S, 4, 8)
GEMV_U_ENTRIES(__half, f16)
GEMV_U_ENTRIES(__nv_bfloat16, bf16)

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
    causal_softmax<T>(s, rows_per_head, q_len, ctx, scale);                                                        \
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
