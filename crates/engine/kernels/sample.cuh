// Sampling on the GPU (included by goodput.cu, after its helpers).
#pragma once

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
  PDL_START();
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

