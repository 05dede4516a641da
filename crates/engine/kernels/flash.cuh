// Prefill attention on tensor cores (FlashAttention-2's scheme) over the paged pool, for the
// prefill chunks of f16/bf16 steps: the score matrix lives in registers one 64-position tile
// at a time and is never written to memory. Included by goodput.cu (after its helpers).
//
// Work: a chunk of q_len new tokens of a sequence whose context is ctx_len, with G = hq / hkv
// query heads per KV head (GQA), is seen as q_len * G rows: row r is token r / G, query head
// kh * G + r % G. One block (4 warps, 128 threads) computes 64 consecutive rows of one
// sequence for one KV head, so the K/V tile it loads serves every query head of the group.
// The host plans the blocks (src/cuda/layout.rs, `flash_items`): item b is (sequence, first
// row), SKIP_ROW for an item a captured graph pads with; the grid is (items, hkv).
//
// Per block: each warp holds 16 rows' Q as mma A fragments in registers (once), then walks
// the context in tiles of 64 positions up to the last position its rows see:
//   K and V tiles are gathered from the pool (block tables) into shared memory;
//   S = Q Kᵀ with mma.sync m16n8k16 (f32 accumulators; B fragments by ldmatrix), scaled to log2
//   units, causally masked;
//   the online softmax: running row max m and (thread-partial) row sum l, O rescaled;
//   P (the accumulators rounded to T) is reused in registers as the A operand of P·V.
// Row statistics are reduced across the 4 threads of a quad (the lanes holding a row).
//
// Fragment layouts (PTX ISA, mma.m16n8k16 with .f16/.bf16 operands), gid = lane / 4,
// tig = lane % 4: A (16 × 16, row) a0a1 (gid, 2tig..), a2a3 (gid + 8, 2tig..), a4a5 (gid,
// 2tig + 8..), a6a7 (gid + 8, 2tig + 8..); B (16 × 8, col) b0b1 (k 2tig.., n gid), b2b3
// (k 2tig + 8.., n gid); C (16 × 8, f32) c0c1 (gid, 2tig..), c2c3 (gid + 8, 2tig..).

#define FLASH_ROWS 64
#define FLASH_COLS 64
#define FLASH_PAD 8

template <typename T> struct Mma;
// One m16n8k16 product with f32 accumulators (c += a·b), and two f32 packed as the operand.
#define MMA_SPEC(T, PTX, T2, PACK)                                                                         \
  template <> struct Mma<T> {                                                                              \
    __device__ __forceinline__ static void run(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {    \
      asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." PTX "." PTX                                     \
                   ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"                            \
                   : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])                                        \
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));                         \
    }                                                                                                      \
    __device__ __forceinline__ static uint32_t pack(float lo, float hi) {                                  \
      T2 v = PACK(lo, hi);                                                                                 \
      return *reinterpret_cast<uint32_t*>(&v);                                                             \
    }                                                                                                      \
  };
MMA_SPEC(__nv_bfloat16, "bf16", __nv_bfloat162, __floats2bfloat162_rn)
MMA_SPEC(__half, "f16", __half2, __floats2half2_rn)

// Four 8 × 8 matrices of 16-bit values from shared memory, each lane l giving the address of row
// l % 8 of matrix l / 8 (16-byte aligned); lane (gid, tig) gets elements (gid, 2tig..2tig+1) of
// each (of its transpose with .trans): mma B fragments straight from row-major tiles.
__device__ __forceinline__ void ldsm_x4(uint32_t* r, const void* p) {
  const uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t* r, const void* p) {
  const uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}

// Two consecutive values of T (4-byte aligned) as one register.
template <typename T> __device__ __forceinline__ uint32_t ld2(const T* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}

__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// Gathers positions [p0, p0 + FLASH_COLS) of KV head kh from the pool into tile (rows of
// D + FLASH_PAD), 16 bytes per load; positions at or past `end` are zeros (a masked score's
// probability is 0, and 0 × a stale NaN in V would not be).
template <typename T, int D>
__device__ __forceinline__ void flash_load_tile(T (*tile)[D + FLASH_PAD], const T* pool, const uint32_t* bt,
                                                int p0, int end, int kh, int hkv, int block_size) {
  constexpr int VEC = 16 / sizeof(T), PER_ROW = D / VEC;
  for (int i = threadIdx.x; i < FLASH_COLS * PER_ROW; i += blockDim.x) {
    const int r = i / PER_ROW, c = (i % PER_ROW) * VEC;
    const int p = p0 + r;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (p < end) {
      const size_t slot = (size_t)bt[p / block_size] * block_size + p % block_size;
      v = *reinterpret_cast<const uint4*>(pool + (slot * hkv + kh) * D + c);
    }
    *reinterpret_cast<uint4*>(&tile[r][c]) = v;
  }
}

// mma.sync m16n8k16 needs compute capability 8.0: below it the kernel has no body (and the
// host never launches it, src/cuda/launch.rs `has_mma`), so the module still loads there.
template <typename T, int D>
__device__ void flash_prefill(const T* q, const T* k_pool, const T* v_pool, T* out, const uint32_t* items,
                              const uint32_t* seq_info, const uint32_t* block_tables, int hq, int hkv,
                              int block_size, float scale) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();
#else
  PDL_START();
  constexpr int KS = D / 16;          // k-steps of Q·Kᵀ
  constexpr int NT = FLASH_COLS / 8;  // n-tiles of a score tile
  constexpr int DT = D / 8;           // n-tiles of the output
  __shared__ __align__(16) T k_sh[FLASH_COLS][D + FLASH_PAD];
  __shared__ __align__(16) T v_sh[FLASH_COLS][D + FLASH_PAD];

  const uint32_t si = items[2 * blockIdx.x];
  if (si == SKIP_ROW) return;
  const int row0 = (int)items[2 * blockIdx.x + 1];
  const int kh = blockIdx.y, group = hq / hkv;
  const uint32_t* info = seq_info + 4 * si;
  const int q_start = info[0], q_len = info[1], ctx_len = info[2];
  const uint32_t* bt = block_tables + info[3];
  const int rows = q_len * group, past = ctx_len - q_len;

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, gid = lane >> 2, tig = lane & 3;
  // This thread's two rows, their tokens and how many positions each sees.
  int tok[2], vis[2];
  const T* qrow[2];
#pragma unroll
  for (int h = 0; h < 2; h++) {
    const int r = row0 + warp * 16 + gid + 8 * h;
    const bool valid = r < rows;
    tok[h] = valid ? r / group : -1;
    vis[h] = valid ? past + tok[h] + 1 : 0;
    qrow[h] = valid ? q + ((size_t)(q_start + tok[h]) * hq + kh * group + r % group) * D : nullptr;
  }
  uint32_t qa[KS][4];
#pragma unroll
  for (int k = 0; k < KS; k++) {
    const int c = k * 16 + 2 * tig;
    qa[k][0] = qrow[0] ? ld2(qrow[0] + c) : 0u;
    qa[k][1] = qrow[1] ? ld2(qrow[1] + c) : 0u;
    qa[k][2] = qrow[0] ? ld2(qrow[0] + c + 8) : 0u;
    qa[k][3] = qrow[1] ? ld2(qrow[1] + c + 8) : 0u;
  }
  // The last position any row of the block sees bounds the walk.
  const int last_row = min(rows, row0 + FLASH_ROWS) - 1;
  const int end = min(ctx_len, past + last_row / group + 1);
  const float sl2 = scale * 1.4426950408889634f;  // scores in log2 units: exp2 in the softmax

  float o[DT][4];
#pragma unroll
  for (int n = 0; n < DT; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  float m[2] = {NEG_INF, NEG_INF}, l[2] = {0.f, 0.f};

  for (int p0 = 0; p0 < end; p0 += FLASH_COLS) {
    __syncthreads();  // the previous tile's readers are done
    flash_load_tile<T, D>(k_sh, k_pool, bt, p0, end, kh, hkv, block_size);
    flash_load_tile<T, D>(v_sh, v_pool, bt, p0, end, kh, hkv, block_size);
    __syncthreads();

    // S = Q Kᵀ: K's rows are B's columns; one ldmatrix gives the B fragments of two k-steps.
    float s[NT][4];
    const int lr = lane & 7, lm = lane >> 3;
#pragma unroll
    for (int n = 0; n < NT; n++) {
      s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
      for (int k = 0; k < KS; k += 2) {
        uint32_t b[4];
        ldsm_x4(b, &k_sh[n * 8 + lr][k * 16 + lm * 8]);
        Mma<T>::run(s[n], qa[k], b[0], b[1]);
        Mma<T>::run(s[n], qa[k + 1], b[2], b[3]);
      }
    }
    // Mask, scale, new row maxima.
    float mx[2] = {NEG_INF, NEG_INF};
#pragma unroll
    for (int n = 0; n < NT; n++) {
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int h = e >> 1, p = p0 + n * 8 + 2 * tig + (e & 1);
        s[n][e] = p < vis[h] ? s[n][e] * sl2 : NEG_INF;
        mx[h] = fmaxf(mx[h], s[n][e]);
      }
    }
    float corr[2], base[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const float mn = fmaxf(m[h], quad_max(mx[h]));
      // A row that sees nothing yet keeps m = -inf; its probabilities are all 0.
      base[h] = mn == NEG_INF ? 0.f : mn;
      corr[h] = exp2f(m[h] - base[h]);
      m[h] = mn;
      l[h] *= corr[h];
    }
#pragma unroll
    for (int n = 0; n < DT; n++) {
      o[n][0] *= corr[0];
      o[n][1] *= corr[0];
      o[n][2] *= corr[1];
      o[n][3] *= corr[1];
    }
    // P = exp2(s - m), summed as the rounded values P·V multiplies, reused as A fragments.
    uint32_t pa[NT / 2][4];
#pragma unroll
    for (int n = 0; n < NT; n++) {
      float pr[4];
#pragma unroll
      for (int e = 0; e < 4; e++) pr[e] = round_to<T>(exp2f(s[n][e] - base[e >> 1]));
      l[0] += pr[0] + pr[1];
      l[1] += pr[2] + pr[3];
      pa[n / 2][(n & 1) * 2] = Mma<T>::pack(pr[0], pr[1]);
      pa[n / 2][(n & 1) * 2 + 1] = Mma<T>::pack(pr[2], pr[3]);
    }
    // O += P V: k runs over the tile's positions 16 at a time, n over the head's columns; V's
    // rows are B's k, so its fragments come transposed, two n-tiles per ldmatrix.
#pragma unroll
    for (int k = 0; k < NT / 2; k++) {
#pragma unroll
      for (int n = 0; n < DT; n += 2) {
        uint32_t b[4];
        ldsm_x4_t(b, &v_sh[k * 16 + (lm & 1) * 8 + lr][(n + (lm >> 1)) * 8]);
        Mma<T>::run(o[n], pa[k], b[0], b[1]);
        Mma<T>::run(o[n + 1], pa[k], b[2], b[3]);
      }
    }
  }
#pragma unroll
  for (int h = 0; h < 2; h++) {
    // Every lane takes part in the reduction; a quad's lanes share their rows.
    const float L = quad_sum(l[h]);
    if (!qrow[h]) continue;
    const float inv = L > 0.f ? 1.f / L : 0.f;
    T* orow = out + (qrow[h] - q);
#pragma unroll
    for (int n = 0; n < DT; n++) {
      const int c = n * 8 + 2 * tig;
      *reinterpret_cast<uint32_t*>(orow + c) = Mma<T>::pack(o[n][2 * h] * inv, o[n][2 * h + 1] * inv);
    }
  }
#endif
}
