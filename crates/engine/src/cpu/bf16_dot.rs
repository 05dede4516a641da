//! The many-rows (prefill) path of `x · Wᵀ` on CPUs with AVX-512 BF16: a blocked GEMM on
//! `vdpbf16ps`, which multiplies 32 pairs of bf16 values into 16 f32 sums per instruction —
//! twice the products of an f32 FMA of the same width.
//!
//! Layout (as oneDNN's bf16 GEMM, which vLLM's CPU build runs): `x` is rounded to bf16 once
//! per call and kept as pairs `(x[2p], x[2p+1])` in one 32-bit word per pair; each task packs
//! a panel of [`NR`] weight rows as, for every pair index `p`, the `NR` rows' pairs side by
//! side (64 bytes per 16 rows: one vector). A register tile of [`MR`] rows of `x` × `NR`
//! columns then broadcasts one pair of each row and issues two `vdpbf16ps` per row and pair,
//! with 16 f32 accumulators in registers. Products are exact in f32 and accumulate in f32;
//! what differs from the f32-activation path (`bf16.rs`) is the rounding of `x` to bf16, as in
//! every bf16 GEMM (the rounding study, `check/numerics.rs`, measures what that costs).
//!
//! Elsewhere than x86-64 [`available`] is false and nothing here runs; the kernels' arguments
//! are then unused.
#![cfg_attr(not(target_arch = "x86_64"), allow(unused_variables, unused_mut))]

use crate::cpu::amx;
use crate::cpu::common::OutPtr;
use rayon::prelude::*;
use std::mem::MaybeUninit;
use std::sync::OnceLock;

/// Weight rows (output columns) of one packed panel: two vectors of 16 f32 sums.
pub const NR: usize = 32;
/// Rows of `x` per register tile.
pub const MR: usize = 8;

/// Whether this CPU has `vdpbf16ps` (AVX-512 BF16 with AVX-512F).
pub fn available() -> bool {
    static A: OnceLock<bool> = OnceLock::new();
    *A.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            std::is_x86_feature_detected!("avx512bf16") && std::is_x86_feature_detected!("avx512f")
        }
        #[cfg(not(target_arch = "x86_64"))]
        false
    })
}

/// `u32` words whose first starts a cache line (64 bytes): a tile row (AMX) or a vector
/// (`vdpbf16ps`) that straddles two lines is loaded from both. Allocators align large blocks
/// to 16 bytes only (glibc's and mimalloc's gave offsets of 16, 32 and 48 bytes here).
pub struct Lines {
    buf: Vec<u32>,
    off: usize,
    len: usize,
}

impl Lines {
    /// `len` zero words.
    pub fn zeroed(len: usize) -> Self {
        let buf = vec![0u32; len + 15];
        let off = (64 - buf.as_ptr() as usize % 64) % 64 / 4;
        Self { buf, off, len }
    }

    /// `len` words, the first `head` written by `fill` (which must write every one of them),
    /// the rest zero: no zeroing pass over what `fill` writes (at prefill sizes, megabytes per
    /// product).
    pub(crate) fn filled(len: usize, head: usize, fill: impl FnOnce(&mut [MaybeUninit<u32>])) -> Self {
        assert!(head <= len, "Lines::filled: a head of {head} words past the {len} words");
        let mut buf = Vec::<u32>::with_capacity(len + 15);
        let off = (64 - buf.as_ptr() as usize % 64) % 64 / 4;
        let words = &mut buf.spare_capacity_mut()[..off + len];
        words[..off].fill(MaybeUninit::new(0));
        fill(&mut words[off..off + head]);
        words[off + head..].fill(MaybeUninit::new(0));
        // SAFETY: words 0..off + len are written: the gap before the first line and the tail
        // here, the head by `fill`.
        unsafe { buf.set_len(off + len) };
        Self { buf, off, len }
    }
}

impl std::ops::Deref for Lines {
    type Target = [u32];
    fn deref(&self) -> &[u32] {
        &self.buf[self.off..self.off + self.len]
    }
}

impl std::ops::DerefMut for Lines {
    fn deref_mut(&mut self) -> &mut [u32] {
        &mut self.buf[self.off..self.off + self.len]
    }
}

/// `x` (`m` rows of `k` f32) rounded to bf16 (nearest, ties to even) as `k.div_ceil(2)` pairs
/// per row, the low half the even element; an odd `k` pads each row with a zero. Rows in
/// parallel, 32 values per `vcvtne2ps2bf16` where the CPU has it.
pub fn pack_x(x: &[f32], m: usize, k: usize) -> Lines {
    pack_x_rows(x, m, k, m)
}

/// [`pack_x`] into `rows ≥ m` rows, the last `rows - m` zero (whole tiles of 16 rows).
pub(crate) fn pack_x_rows(x: &[f32], m: usize, k: usize, rows: usize) -> Lines {
    let k2 = k.div_ceil(2);
    Lines::filled(rows.max(m) * k2, m * k2, |head| {
        head.par_chunks_mut(k2.max(1))
            .zip(x[..m * k].par_chunks(k.max(1)))
            .for_each(|(dst, row)| round_pairs_to(row, dst));
    })
}

/// One row of f32 rounded to bf16 pairs into `dst` (`row.len().div_ceil(2)` words), as
/// [`pack_x`] rounds each row.
pub(crate) fn round_pairs_into(row: &[f32], dst: &mut [u32]) {
    // SAFETY: the same words seen as possibly uninitialised; only initialised ones are written.
    round_pairs_to(row, unsafe { &mut *(dst as *mut [u32] as *mut [MaybeUninit<u32>]) })
}

/// [`round_pairs_into`] into words not yet written: it writes all `row.len().div_ceil(2)`.
fn round_pairs_to(row: &[f32], dst: &mut [MaybeUninit<u32>]) {
    let k = row.len();
    assert!(dst.len() >= k.div_ceil(2), "round_pairs: {} words for {k} values", dst.len());
    let mut p0 = 0;
    #[cfg(target_arch = "x86_64")]
    if available() {
        // SAFETY: AVX-512 BF16 was detected; whole blocks of 32 values within the row, and
        // dst holds their pairs (checked above).
        p0 = unsafe { x86::round_pairs(row, dst.as_mut_ptr().cast()) };
    }
    let bits = |v: f32| half::bf16::from_f32(v).to_bits() as u32;
    for (p, d) in dst.iter_mut().enumerate().take(k.div_ceil(2)).skip(p0) {
        let hi = if 2 * p + 1 < k { bits(row[2 * p + 1]) } else { 0 };
        d.write(bits(row[2 * p]) | (hi << 16));
    }
}

/// Packs weight rows `w` (`rows ≤ NR` rows of `k` bf16) into `out`: pair `p` of row `c` at
/// `p * NR + c`, rows beyond `rows` and the odd tail zero.
pub fn pack_w(w: &[u16], rows: usize, k: usize, out: &mut Vec<u32>) {
    assert!(rows <= NR && w.len() >= rows * k, "pack_w: at most NR rows of k values");
    let k2 = k.div_ceil(2);
    out.clear();
    out.resize(k2 * NR, 0);
    // Pair index outer: the output is written in order and the `rows` input rows are read
    // side by side (a cache line each), instead of a stride of NR words through the whole
    // panel per row.
    let full = k / 2;
    #[cfg(target_arch = "x86_64")]
    if rows == NR && available() && NR * k < i32::MAX as usize {
        // SAFETY: AVX-512 was detected; `w` holds NR rows of k values and every gathered pair
        // (2p, 2p + 1) with p < k / 2 lies within its row; `out` holds k2 · NR words.
        unsafe { x86::pack_pairs(w, k, full, out) };
        if k % 2 == 1 {
            for c in 0..rows {
                out[full * NR + c] = w[c * k + k - 1] as u32;
            }
        }
        return;
    }
    for (p, dst) in out.chunks_exact_mut(NR).take(full).enumerate() {
        for (c, d) in dst[..rows].iter_mut().enumerate() {
            let i = c * k + 2 * p;
            *d = w[i] as u32 | (w[i + 1] as u32) << 16;
        }
    }
    if k % 2 == 1 {
        for c in 0..rows {
            out[full * NR + c] = w[c * k + k - 1] as u32;
        }
    }
}

/// A weight matrix packed once (at load) into [`NR`]-row panels of pairs, so products with it
/// skip [`pack_w`]: decode-sized products read each weight once, as a stream.
pub struct Packed {
    n: usize,
    k: usize,
    data: Lines,
}

impl Packed {
    /// Packs `w` (`n × k` bf16 bits), panels in parallel.
    pub fn new(w: &[u16], n: usize, k: usize) -> Self {
        let per = k.div_ceil(2) * NR;
        let mut data = Lines::zeroed(n.div_ceil(NR) * per);
        data.par_chunks_mut(per.max(1)).enumerate().for_each_init(Vec::new, |buf: &mut Vec<u32>, (j, dst)| {
            let c0 = j * NR;
            let cols = NR.min(n - c0);
            pack_w(&w[c0 * k..(c0 + cols) * k], cols, k, buf);
            dst.copy_from_slice(buf);
        });
        Self { n, k, data }
    }

    /// The panels, [`NR`] weight rows of `k.div_ceil(2)` pairs each (`pack_w`'s layout).
    pub(crate) fn panels(&self) -> &[u32] {
        &self.data
    }

    /// `(rows, columns)` of the weight: `(n, k)`.
    pub fn dims(&self) -> (usize, usize) {
        (self.n, self.k)
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.data.len() * 4
    }
}

/// `x · wᵀ` for `x` (`m × k` f32) and a packed `w`, `m × n` f32: on AMX tiles where
/// [`amx::takes`] the product, else on `vdpbf16ps`. Needs [`available`].
pub fn matmul_packed(x: &[f32], w: &Packed, m: usize) -> Vec<f32> {
    matmul_packed_on(x, w, m, amx::takes(m, w.k))
}

/// [`matmul_packed`] on AMX tiles (`tiles`, which needs [`amx::takes`]) or on `vdpbf16ps`
/// (the benchmarks and tests compare them).
pub fn matmul_packed_on(x: &[f32], w: &Packed, m: usize, tiles: bool) -> Vec<f32> {
    assert!(available(), "bf16_dot::matmul_packed needs AVX-512 BF16");
    let (n, k) = (w.n, w.k);
    let k2 = k.div_ceil(2);
    if tiles {
        assert!(amx::takes(m, k), "bf16_dot: a {m} × {k} product does not fit AMX tiles here");
        let xa = pack_x_rows(x, m, k, m.div_ceil(16) * 16);
        return amx::matmul(&xa, m, k2, &w.data, n);
    }
    let xa = pack_x(x, m, k);
    let mut out = vec![0f32; m * n];
    let dst = OutPtr(out.as_mut_ptr());
    w.data.par_chunks(k2 * NR).enumerate().for_each(|(j, panel)| {
        let c0 = j * NR;
        // SAFETY: as in `matmul`; the panel was packed by `pack_w` for these rows.
        #[cfg(target_arch = "x86_64")]
        unsafe {
            x86::panel(&xa, m, k2, panel, dst.get().add(c0), n, NR.min(n - c0))
        }
    });
    out
}

/// `x · wᵀ` for `x` (`m × k` f32) and `w` (`n × k` bf16 bits), `m × n` f32; panels of [`NR`]
/// weight rows in parallel, each packed by the task that multiplies it. Needs [`available`].
pub fn matmul(x: &[f32], w: &[u16], m: usize, k: usize, n: usize) -> Vec<f32> {
    assert!(available(), "bf16_dot::matmul needs AVX-512 BF16");
    let tiles = amx::takes(m, k);
    // The tiles read whole tiles of 16 rows.
    let xa = pack_x_rows(x, m, k, if tiles { m.div_ceil(16) * 16 } else { m });
    let mut out = vec![0f32; m * n];
    let dst = OutPtr(out.as_mut_ptr());
    (0..n.div_ceil(NR)).into_par_iter().for_each_init(Vec::new, |panel: &mut Vec<u32>, j| {
        let c0 = j * NR;
        let cols = NR.min(n - c0);
        pack_w(&w[c0 * k..(c0 + cols) * k], cols, k, panel);
        if tiles {
            return amx::panel(&xa, m, k.div_ceil(2), panel, dst, c0, n);
        }
        // SAFETY: AVX-512 BF16 was detected; xa holds m × k2 pairs, the panel k2 × NR; this
        // task writes columns c0..c0 + cols of the m × n output only.
        #[cfg(target_arch = "x86_64")]
        unsafe {
            x86::panel(&xa, m, k.div_ceil(2), panel, dst.get().add(c0), n, cols)
        }
    });
    out
}

/// FLOP/s of one core on `vdpbf16ps` from registers (12 independent accumulators, enough to
/// hide its latency), over `iters` instructions; `None` without AVX-512 BF16.
pub fn peak_flops(iters: u64) -> Option<f64> {
    if !available() {
        return None;
    }
    #[cfg(target_arch = "x86_64")]
    {
        let rounds = iters.div_ceil(12);
        let t = std::time::Instant::now();
        // SAFETY: AVX-512 BF16 was detected; the loop touches registers only.
        let sum = unsafe { x86::spin(rounds) };
        let s = t.elapsed().as_secs_f64();
        std::hint::black_box(sum);
        // 16 lanes × 2 products, a multiply and an add each.
        return Some(rounds as f64 * 12.0 * 64.0 / s);
    }
    #[allow(unreachable_code)]
    None
}

#[cfg(target_arch = "x86_64")]
#[allow(unsafe_op_in_unsafe_fn)]
mod x86 {
    use super::{MR, NR};
    use std::arch::x86_64::*;

    /// `12 · rounds` `vdpbf16ps` into 12 accumulators; their sum.
    #[target_feature(enable = "avx512f,avx512bf16")]
    pub(super) unsafe fn spin(rounds: u64) -> f32 {
        let b: __m512bh = std::mem::transmute(_mm512_set1_epi32(std::hint::black_box(0x3f80_3f80)));
        let mut acc = [_mm512_setzero_ps(); 12];
        for _ in 0..rounds {
            for a in acc.iter_mut() {
                *a = _mm512_dpbf16_ps(*a, b, b);
            }
        }
        _mm512_reduce_add_ps(acc.iter().fold(_mm512_setzero_ps(), |s, &a| _mm512_add_ps(s, a)))
    }

    /// Pairs `0..full` of `NR` rows of `k` bf16 (`w`) into `out` (`p · NR + c`): each vector of
    /// 16 rows' pair `p` is one gather of 32-bit words at 2-byte-aligned addresses.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn pack_pairs(w: &[u16], k: usize, full: usize, out: &mut [u32]) {
        debug_assert!(w.len() >= NR * k && out.len() >= full * NR);
        // The gathers add scale × index bytes to this address; it is never dereferenced as an i32.
        let base = w.as_ptr().cast::<i32>();
        let step = _mm512_set1_epi32(2);
        let lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        // Element offsets of pair 0 in rows 0..16 and 16..32 (gathers scale them by 2 bytes).
        let mut lo = _mm512_mullo_epi32(lanes, _mm512_set1_epi32(k as i32));
        let mut hi = _mm512_add_epi32(lo, _mm512_set1_epi32(16 * k as i32));
        let o = out.as_mut_ptr();
        for p in 0..full {
            let a = _mm512_i32gather_epi32::<2>(lo, base);
            let b = _mm512_i32gather_epi32::<2>(hi, base);
            _mm512_storeu_si512(o.add(p * NR).cast(), a);
            _mm512_storeu_si512(o.add(p * NR + 16).cast(), b);
            lo = _mm512_add_epi32(lo, step);
            hi = _mm512_add_epi32(hi, step);
        }
    }

    /// The first `row.len() / 32 * 16` pairs of `row` rounded to bf16 into `dst` (that many
    /// words, written only); returns that count.
    #[target_feature(enable = "avx512f,avx512bf16")]
    pub(super) unsafe fn round_pairs(row: &[f32], dst: *mut u32) -> usize {
        let blocks = row.len() / 32;
        for b in 0..blocks {
            let lo = _mm512_loadu_ps(row.as_ptr().add(32 * b));
            let hi = _mm512_loadu_ps(row.as_ptr().add(32 * b + 16));
            // Words 0..16 come from the second operand, 16..32 from the first.
            let v: __m512i = std::mem::transmute(_mm512_cvtne2ps_pbh(hi, lo));
            _mm512_storeu_si512(dst.add(16 * b).cast(), v);
        }
        blocks * 16
    }

    /// Every row of `xa` (`m` rows of `k2` pairs) against one packed panel, into `out` (row
    /// stride `ldo`, `cols ≤ NR` columns).
    #[target_feature(enable = "avx512f,avx512bf16")]
    pub(super) unsafe fn panel(xa: &[u32], m: usize, k2: usize, b: &[u32], out: *mut f32, ldo: usize, cols: usize) {
        debug_assert!(xa.len() >= m * k2 && b.len() >= k2 * NR);
        let (a, b) = (xa.as_ptr(), b.as_ptr());
        let mut i = 0;
        while i + MR <= m {
            tile::<MR>(a.add(i * k2), k2, b, out.add(i * ldo), ldo, cols);
            i += MR;
        }
        let a = a.add(i * k2);
        let o = out.add(i * ldo);
        match m - i {
            7 => tile::<7>(a, k2, b, o, ldo, cols),
            6 => tile::<6>(a, k2, b, o, ldo, cols),
            5 => tile::<5>(a, k2, b, o, ldo, cols),
            4 => tile::<4>(a, k2, b, o, ldo, cols),
            3 => tile::<3>(a, k2, b, o, ldo, cols),
            2 => tile::<2>(a, k2, b, o, ldo, cols),
            1 => tile::<1>(a, k2, b, o, ldo, cols),
            _ => {}
        }
    }

    /// `R` rows × `NR` columns: per pair index, two panel vectors and one broadcast pair per
    /// row, `2·R` `vdpbf16ps` into `2·R` accumulators.
    #[target_feature(enable = "avx512f,avx512bf16")]
    unsafe fn tile<const R: usize>(a: *const u32, k2: usize, b: *const u32, out: *mut f32, ldo: usize, cols: usize) {
        let mut acc = [[_mm512_setzero_ps(); 2]; R];
        for p in 0..k2 {
            let b0: __m512bh = std::mem::transmute(_mm512_loadu_si512(b.add(p * NR).cast()));
            let b1: __m512bh = std::mem::transmute(_mm512_loadu_si512(b.add(p * NR + 16).cast()));
            for (r, ar) in acc.iter_mut().enumerate() {
                let x: __m512bh = std::mem::transmute(_mm512_set1_epi32(*a.add(r * k2 + p) as i32));
                ar[0] = _mm512_dpbf16_ps(ar[0], x, b0);
                ar[1] = _mm512_dpbf16_ps(ar[1], x, b1);
            }
        }
        for (r, ar) in acc.iter().enumerate() {
            let o = out.add(r * ldo);
            if cols == NR {
                _mm512_storeu_ps(o, ar[0]);
                _mm512_storeu_ps(o.add(16), ar[1]);
            } else {
                let mut t = [0f32; NR];
                _mm512_storeu_ps(t.as_mut_ptr(), ar[0]);
                _mm512_storeu_ps(t.as_mut_ptr().add(16), ar[1]);
                std::ptr::copy_nonoverlapping(t.as_ptr(), o, cols);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::bf16;
    use proptest::prelude::*;

    /// The f64 product of `x` rounded to bf16 and `w`: exactly what the kernel approximates
    /// (its products are exact; only the f32 accumulation order differs).
    fn check(m: usize, k: usize, n: usize, seed: u64) {
        let mut next = crate::cpu::common::test_values(seed);
        let x: Vec<f32> = (0..m * k).map(|_| next()).collect();
        let w: Vec<u16> = (0..n * k).map(|_| bf16::from_f32(next()).to_bits()).collect();
        let got = matmul(&x, &w, m, k, n);
        for i in 0..m {
            for j in 0..n {
                let want: f64 = (0..k)
                    .map(|t| bf16::from_f32(x[i * k + t]).to_f64() * bf16::from_bits(w[j * k + t]).to_f64())
                    .sum();
                let d = (got[i * n + j] as f64 - want).abs();
                assert!(d < 1e-5 * k as f64, "{m}×{k}×{n} at ({i}, {j}): {} vs {want}", got[i * n + j]);
            }
        }
    }

    /// A test built where the kernel's instructions exist but run where they do not fails:
    /// it never passes without running the kernel.
    const MOVED: &str = "built on a CPU with AVX-512 BF16, run on one without: the kernel did not run";

    #[test]
    fn simd_rounding_equals_the_scalar_one() {
        let (m, k) = (3usize, 77usize);
        let x: Vec<f32> = (0..m * k).map(|i| (i as f32 * 0.713).sin() * 3.0 + 1.0 / 256.0).collect();
        let want: Vec<u32> = (0..m)
            .flat_map(|r| {
                let x = &x;
                (0..k.div_ceil(2)).map(move |p| {
                    let b = |t: usize| if t < k { bf16::from_f32(x[r * k + t]).to_bits() as u32 } else { 0 };
                    b(2 * p) | (b(2 * p + 1) << 16)
                })
            })
            .collect();
        assert_eq!(pack_x(&x, m, k)[..], want[..]);
    }

    #[test]
    #[cfg_attr(not(host_avx512bf16), ignore = "this CPU has no AVX-512 BF16: the kernel cannot run here")]
    fn a_weight_packed_once_gives_the_same_product() {
        assert!(available(), "{MOVED}");
        for (m, k, n) in [(1usize, 9usize, 70usize), (5, 576, 33), (16, 64, 96)] {
            let x: Vec<f32> = (0..m * k).map(|i| (i as f32 * 0.37).sin()).collect();
            let w: Vec<u16> = (0..n * k).map(|i| bf16::from_f32((i as f32 * 0.11).cos()).to_bits()).collect();
            let p = Packed::new(&w, n, k);
            assert_eq!(p.dims(), (n, k));
            assert_eq!(matmul_packed(&x, &p, m), matmul(&x, &w, m, k, n), "{m}×{k}×{n}");
        }
    }

    #[test]
    fn lines_start_a_cache_line_and_hold_what_was_asked() {
        for len in [1usize, 15, 16, 17, 1000, 4099] {
            let mut l = Lines::zeroed(len);
            assert_eq!((l.as_ptr() as usize % 64, l.len()), (0, len), "{len} words");
            l[len - 1] = 7;
            assert!(l[..len - 1].iter().all(|&w| w == 0) && l[len - 1] == 7);
        }
        let p = Packed::new(&[1u16; 5 * 64], 5, 64);
        assert_eq!(p.data.as_ptr() as usize % 64, 0);
    }

    #[test]
    fn a_full_panel_packs_as_the_scalar_loop_does() {
        for k in [2usize, 7, 64, 577] {
            let w: Vec<u16> = (0..NR * k).map(|i| (i * 2654435761usize % 65521) as u16).collect();
            let mut got = Vec::new();
            pack_w(&w, NR, k, &mut got);
            for p in 0..k.div_ceil(2) {
                for c in 0..NR {
                    let hi = if 2 * p + 1 < k { w[c * k + 2 * p + 1] as u32 } else { 0 };
                    assert_eq!(got[p * NR + c], w[c * k + 2 * p] as u32 | hi << 16, "k {k}, pair {p}, row {c}");
                }
            }
        }
    }

    #[test]
    fn packing_pairs_rows_and_rounds_to_nearest_even() {
        // 1 + 2^-8 is a tie between 1 and 1 + 2^-7: to even, 1.0 (0x3f80).
        assert_eq!(pack_x(&[1.0 + 1.0 / 256.0, -2.0, 3.0], 1, 3)[..], [0x3f80 | (0xc000 << 16), 0x4040]);
        let mut p = Vec::new();
        pack_w(&[1, 2, 3, 4, 5, 6], 2, 3, &mut p);
        assert_eq!((p.len(), p[0], p[1], p[2], p[NR], p[NR + 1]), (2 * NR, 1 | 2 << 16, 4 | 5 << 16, 0, 3, 6));
    }

    #[test]
    #[cfg_attr(not(host_avx512bf16), ignore = "this CPU has no AVX-512 BF16: the kernel cannot run here")]
    fn tiles_and_tails_match_the_f64_product() {
        assert!(available(), "{MOVED}");
        for (m, k, n) in [(1, 2, 1), (8, 64, 32), (9, 13, 33), (17, 576, 70), (64, 31, 5), (23, 1536, 96)] {
            check(m, k, n, (m * 31 + k * 7 + n) as u64);
        }
    }

    #[test]
    #[cfg_attr(not(host_amx), ignore = "this CPU has no AMX: the tiles cannot run here")]
    fn amx_tiles_match_the_f64_product_and_vdpbf16ps() {
        assert!(
            amx::available(),
            "built on a CPU with AMX, but the tiles were not granted here (or GOODPUT_CPU_AMX=0)"
        );
        // Single and double row tiles, row and column tails, several row blocks and panels.
        for (m, k, n) in [(16, 32, 1), (17, 64, 33), (32, 576, 96), (48, 1536, 70), (100, 96, 200), (300, 576, 64)] {
            let mut next = crate::cpu::common::test_values((m * 7 + k + n) as u64);
            let x: Vec<f32> = (0..m * k).map(|_| next()).collect();
            let w: Vec<u16> = (0..n * k).map(|_| bf16::from_f32(next()).to_bits()).collect();
            let p = Packed::new(&w, n, k);
            let (tiles, dot) = (matmul_packed_on(&x, &p, m, true), matmul_packed_on(&x, &p, m, false));
            for i in 0..m {
                for j in 0..n {
                    let want: f64 = (0..k)
                        .map(|t| bf16::from_f32(x[i * k + t]).to_f64() * bf16::from_bits(w[j * k + t]).to_f64())
                        .sum();
                    let (a, b) = (tiles[i * n + j] as f64, dot[i * n + j] as f64);
                    assert!((a - want).abs() < 1e-5 * k as f64, "{m}×{k}×{n} at ({i}, {j}): tiles {a} vs {want}");
                    assert!((a - b).abs() < 1e-5 * k as f64, "{m}×{k}×{n} at ({i}, {j}): tiles {a} vs vdpbf16ps {b}");
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        #[test]
        #[cfg_attr(not(host_avx512bf16), ignore = "this CPU has no AVX-512 BF16: the kernel cannot run here")]
        fn any_shape_matches_the_f64_product(m in 1usize..40, k in 1usize..200, n in 1usize..100, seed in any::<u64>()) {
            prop_assert!(available(), "{}", MOVED);
            check(m, k, n, seed);
        }
    }
}
