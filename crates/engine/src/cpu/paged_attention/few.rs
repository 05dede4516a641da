//! A decode tile's few query vectors (a KV head's group, below `WIDEN_FROM`) against a block
//! of bf16 K/V rows on AVX-512: each pool row widened once for the whole group, the group's
//! scores and its weighted values accumulated in registers over the block. The generic path
//! called a dot product and an axpy per query vector and key, on AVX2, with a horizontal sum
//! each; a SmolLM2 decode step at batch 16 spent more in them (17 ms) than in every
//! projection and MLP product of its 30 layers (engine-bench, this project's AMX host).
//! Where the CPU has AVX-512 BF16 the scores skip the widening (`vdpbf16ps` on the rows as they
//! lie, 16 keys' sums per horizontal pass), and the block's online softmax runs on 16 query
//! vectors at once instead of one scalar row at a time. At long contexts the step waits on
//! memory: the rows of the block two ahead are asked for one per key computed
//! ([`prefetch_row`]), not in one burst per block, which stalled the work behind it. 30 cold
//! layers at batch 16 (criterion `attention_decode_batch`, one core, three alternations):
//! 1024 positions 64-68 → 54-57 ms, 137 positions 8.6-9.9 → 8.6-9.1 ms; one hot layer 197-203
//! → 193-210 µs (unchanged within this host's noise).

/// Most query vectors the block kernels take (their accumulators stay in registers).
pub(super) const MAX_Q: usize = 4;

/// Rows of one block of the pool: row `j` at `data[off + j * stride..][..len]`.
#[derive(Clone, Copy)]
pub(super) struct Rows<'a> {
    pub data: &'a [u16],
    pub off: usize,
    pub stride: usize,
    pub n: usize,
    pub len: usize,
}

impl Rows<'_> {
    fn fits(&self) -> bool {
        self.n == 0 || self.off + (self.n - 1) * self.stride + self.len <= self.data.len()
    }
}

/// Whether the block kernels run here for rows of `dk` and `dv` values and `nq` query vectors.
pub(super) fn takes(nq: usize, dk: usize, dv: usize) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        nq <= MAX_Q && dk.is_multiple_of(16) && dv.is_multiple_of(16) && std::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (nq, dk, dv);
        false
    }
}

/// Asks the caches for every line of `rows` (the next block's, while this one is computed):
/// a decode tile reads 128 bytes of each 384-byte slot, a stride the hardware prefetchers did
/// not follow — the loads of `scores` waited on memory most of their time.
pub(super) fn prefetch(rows: Rows) {
    if !rows.fits() {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    for j in 0..rows.n {
        let row = &rows.data[rows.off + j * rows.stride..][..rows.len];
        for line in (0..rows.len).step_by(32) {
            // SAFETY: a prefetch of an address within `row`; it reads nothing.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(row[line..].as_ptr().cast())
            };
        }
    }
}

/// Asks the caches for row `j` of `ahead` (a block a few ahead of the one computed), where
/// there is one: the kernels ask one row per key they compute, so the requests go out spread
/// over the block's work instead of in one burst that stalls it (a decode step at 1024
/// positions waited on such bursts for half its attention time).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn prefetch_row(ahead: Option<Rows>, j: usize) {
    if let Some(a) = ahead.filter(|a| j < a.n) {
        let row = &a.data[a.off + j * a.stride..][..a.len];
        for line in (0..a.len).step_by(32) {
            // SAFETY: a prefetch of an address within `row`; it reads nothing.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(row[line..].as_ptr().cast())
            };
        }
    }
}

/// `scores[i * bs + j] = scale · q[i] · k_j` for each query vector `i` and key row `j` of `k`.
/// Where the CPU has AVX-512 BF16 and rows of whole 32-value steps, on `vdpbf16ps`: `q` split
/// into two bf16 parts (within about 2^-16 of f32 `q`; the products exact), no key row widened,
/// and one horizontal pass per 16 keys instead of one per key; else in f32, one key at a time.
/// Needs [`takes`].
/// `ahead`: the rows of a block to come, asked for one per key (see [`prefetch_row`]).
pub(super) fn scores(q: &[&[f32]], k: Rows, scale: f32, scores: &mut [f32], bs: usize, ahead: Option<Rows>) {
    assert!(q.len() <= MAX_Q && k.fits() && k.len.is_multiple_of(16) && k.n <= bs && scores.len() >= q.len() * bs);
    let ahead = ahead.filter(|a| a.fits());
    assert!(q.iter().all(|v| v.len() >= k.len));
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `takes` found AVX-512F (and `pairs` AVX-512 BF16); the asserts bound every read
    // and write.
    unsafe {
        if k.len.is_multiple_of(32) && k.len <= 256 && pairs() {
            x86::scores_pairs(q, k, scale, scores, bs, ahead)
        } else {
            x86::scores(q, k, scale, scores, bs, ahead)
        }
    }
}

/// Whether the CPU multiplies bf16 pairs (`vdpbf16ps`).
fn pairs() -> bool {
    static P: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    #[cfg(target_arch = "x86_64")]
    {
        *P.get_or_init(|| std::is_x86_feature_detected!("avx512bf16") && std::is_x86_feature_detected!("avx512bw"))
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        *P.get_or_init(|| false)
    }
}

/// The online softmax of one block's scores for `nq` query vectors (`sc[i * bs..][..n]`, `−∞`
/// where hidden), with their running max `m`, sum `l` and outputs `acc` (`dv` each), 16 query
/// vectors at a time with one per lane: their block maxima, new maxima and rescale factors in
/// one pass, no branch on whether a max rose (the outputs are rescaled every block, by 1 where
/// it did not). The scores become the weights `e^(s − m)`. Needs [`takes`].
#[allow(clippy::too_many_arguments)]
pub(super) fn softmax(
    sc: &mut [f32],
    bs: usize,
    n: usize,
    nq: usize,
    m: &mut [f32],
    l: &mut [f32],
    acc: &mut [f32],
    dv: usize,
) {
    assert!(n <= bs && sc.len() >= nq * bs && m.len() >= nq && l.len() >= nq && acc.len() >= nq * dv);
    assert!(dv.is_multiple_of(16));
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `takes` found AVX-512F; the asserts bound the rows read and written.
    unsafe {
        for r0 in (0..nq).step_by(16) {
            let rn = (nq - r0).min(16);
            x86::softmax_rows(
                &mut sc[r0 * bs..],
                bs,
                n,
                rn,
                &mut m[r0..r0 + rn],
                &mut l[r0..r0 + rn],
                &mut acc[r0 * dv..(r0 + rn) * dv],
            );
        }
    }
}

/// `acc[i * dv..][..dv] += Σ_j w[i * bs + j] · v_j` over the value rows `v_j` of `v`. Needs
/// [`takes`].
/// `ahead` as in [`scores`].
pub(super) fn weigh(w: &[f32], bs: usize, nq: usize, v: Rows, acc: &mut [f32], ahead: Option<Rows>) {
    assert!(nq <= MAX_Q && v.fits() && v.len.is_multiple_of(16) && v.n <= bs && w.len() >= nq * bs);
    assert!(acc.len() >= nq * v.len);
    #[cfg(target_arch = "x86_64")]
    // SAFETY: as in `scores`.
    unsafe {
        x86::weigh(w, bs, nq, v, acc, ahead.filter(|a| a.fits()))
    }
}

/// The query groups of a tile: each KV head's index and its query vectors' range.
pub(super) type Groups = [(usize, std::ops::Range<usize>)];

/// [`scores`] of each group against the block of `n` slots from `base` of the K pool `kb`
/// (`hkv` heads of `dk` values per slot).
#[allow(clippy::too_many_arguments)]
pub(super) fn group_scores(
    qv: &[&[f32]],
    kb: &[u16],
    groups: &Groups,
    (hkv, dk): (usize, usize),
    (base, n, bs): (usize, usize, usize),
    ahead: Option<(usize, usize)>,
    scale: f32,
    out: &mut [f32],
) {
    for (kh, g) in groups {
        let rows = |base: usize, n: usize| Rows { data: kb, off: (base * hkv + kh) * dk, stride: hkv * dk, n, len: dk };
        let next = ahead.map(|(b, n)| rows(b, n));
        scores(&qv[g.clone()], rows(base, n), scale, &mut out[g.start * bs..], bs, next);
    }
}

/// [`weigh`] of each group over the block of `n` slots from `base` of the V pool `vb` (`hkv`
/// heads of `v_row` values per slot, the first `dv` read), into `acc`.
pub(super) fn group_weigh(
    vb: &[u16],
    groups: &Groups,
    (hkv, v_row, dv): (usize, usize, usize),
    (base, n, bs): (usize, usize, usize),
    ahead: Option<(usize, usize)>,
    w: &[f32],
    acc: &mut [f32],
) {
    for (kh, g) in groups {
        let rows =
            |base: usize, n: usize| Rows { data: vb, off: (base * hkv + kh) * v_row, stride: hkv * v_row, n, len: dv };
        let next = ahead.map(|(b, n)| rows(b, n));
        weigh(&w[g.start * bs..], bs, g.len(), rows(base, n), &mut acc[g.start * dv..g.end * dv], next);
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{prefetch_row, Rows, MAX_Q};
    use std::arch::x86_64::*;

    /// 16 bf16 at `p` as f32 (exact).
    #[target_feature(enable = "avx512f")]
    unsafe fn widen(p: *const u16) -> __m512 {
        // SAFETY: the caller reads 16 values within its row.
        let h = unsafe { _mm256_loadu_si256(p.cast()) };
        _mm512_castsi512_ps(_mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(h)))
    }

    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn scores(q: &[&[f32]], k: Rows, scale: f32, out: &mut [f32], bs: usize, ahead: Option<Rows>) {
        let nq = q.len();
        for j in 0..k.n {
            prefetch_row(ahead, j);
            let row = unsafe { k.data.as_ptr().add(k.off + j * k.stride) };
            let mut acc = [_mm512_setzero_ps(); MAX_Q];
            for c in (0..k.len).step_by(16) {
                let kc = unsafe { widen(row.add(c)) };
                for i in 0..nq {
                    acc[i] = _mm512_fmadd_ps(unsafe { _mm512_loadu_ps(q[i].as_ptr().add(c)) }, kc, acc[i]);
                }
            }
            for i in 0..nq {
                out[i * bs + j] = _mm512_reduce_add_ps(acc[i]) * scale;
            }
        }
    }

    /// Lane `j` of the result: the sum of the 16 lanes of `v[j]` (`j < 16`), in a tree of
    /// shuffles (45 operations for the 16, where a horizontal sum each takes 8).
    #[allow(unsafe_op_in_unsafe_fn)]
    #[target_feature(enable = "avx512f")]
    unsafe fn transpose_sum(v: &[__m512; 16]) -> __m512 {
        // Pairs of keys: lanes (x0 + x2, y0 + y2, x1 + x3, y1 + y3) of each 128-bit chunk.
        let mut t = [_mm512_setzero_ps(); 8];
        for (a, t) in t.iter_mut().enumerate() {
            let (x, y) = (v[2 * a], v[2 * a + 1]);
            *t = _mm512_add_ps(_mm512_unpacklo_ps(x, y), _mm512_unpackhi_ps(x, y));
        }
        // Fours: each 128-bit chunk holds its part of keys 4g..4g + 4.
        let mut r = [_mm512_setzero_ps(); 4];
        for (g, r) in r.iter_mut().enumerate() {
            let (a, b) = (t[2 * g], t[2 * g + 1]);
            *r = _mm512_add_ps(_mm512_shuffle_ps::<0b01_00_01_00>(a, b), _mm512_shuffle_ps::<0b11_10_11_10>(a, b));
        }
        // Across the chunks: halves, then the whole.
        let s01 = _mm512_add_ps(
            _mm512_shuffle_f32x4::<0b10_00_10_00>(r[0], r[1]),
            _mm512_shuffle_f32x4::<0b11_01_11_01>(r[0], r[1]),
        );
        let s23 = _mm512_add_ps(
            _mm512_shuffle_f32x4::<0b10_00_10_00>(r[2], r[3]),
            _mm512_shuffle_f32x4::<0b11_01_11_01>(r[2], r[3]),
        );
        _mm512_add_ps(_mm512_shuffle_f32x4::<0b10_00_10_00>(s01, s23), _mm512_shuffle_f32x4::<0b11_01_11_01>(s01, s23))
    }

    /// [`super::scores`] on `vdpbf16ps`: `q` as two bf16 parts, each key row read once as its
    /// own pairs for every query vector, 16 keys' sums at a time into one vector. `k.len` a
    /// multiple of 32, ≤ 256.
    #[allow(unsafe_op_in_unsafe_fn)]
    #[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
    pub(super) unsafe fn scores_pairs(
        q: &[&[f32]],
        k: Rows,
        scale: f32,
        out: &mut [f32],
        bs: usize,
        ahead: Option<Rows>,
    ) {
        match k.len / 32 {
            1 => scores_steps::<1>(q, k, scale, out, bs, ahead),
            2 => scores_steps::<2>(q, k, scale, out, bs, ahead),
            3 => scores_steps::<3>(q, k, scale, out, bs, ahead),
            4 => scores_steps::<4>(q, k, scale, out, bs, ahead),
            5 => scores_steps::<5>(q, k, scale, out, bs, ahead),
            6 => scores_steps::<6>(q, k, scale, out, bs, ahead),
            7 => scores_steps::<7>(q, k, scale, out, bs, ahead),
            _ => scores_steps::<8>(q, k, scale, out, bs, ahead),
        }
    }

    /// [`scores_pairs`] for rows of `S` steps of 32 values.
    #[allow(unsafe_op_in_unsafe_fn, clippy::needless_range_loop)]
    #[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
    unsafe fn scores_steps<const S: usize>(
        q: &[&[f32]],
        k: Rows,
        scale: f32,
        out: &mut [f32],
        bs: usize,
        ahead: Option<Rows>,
    ) {
        let nq = q.len();
        // q as a bf16 pair of pairs: its rounding `hi` and what that left, `lo` (also rounded),
        // so `k · hi + k · lo` is within about 2^-16 of `k · q` (f32 q, as the paged path).
        let (mut hi, mut lo) = ([[_mm512_setzero_ps(); S]; MAX_Q], [[_mm512_setzero_ps(); S]; MAX_Q]);
        let back = |h: __m256bh| -> __m512 {
            _mm512_castsi512_ps(_mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(
                std::mem::transmute::<__m256bh, __m256i>(h),
            )))
        };
        for (i, qv) in q.iter().enumerate() {
            for c in 0..S {
                let (v0, v1) =
                    (_mm512_loadu_ps(qv.as_ptr().add(32 * c)), _mm512_loadu_ps(qv.as_ptr().add(32 * c + 16)));
                let (h0, h1) = (back(_mm512_cvtneps_pbh(v0)), back(_mm512_cvtneps_pbh(v1)));
                hi[i][c] = std::mem::transmute::<__m512bh, __m512>(_mm512_cvtne2ps_pbh(v1, v0));
                lo[i][c] = std::mem::transmute::<__m512bh, __m512>(_mm512_cvtne2ps_pbh(
                    _mm512_sub_ps(v1, h1),
                    _mm512_sub_ps(v0, h0),
                ));
            }
        }
        let sv = _mm512_set1_ps(scale);
        // Each key's sums, written once (no chain through memory); keys past the block's end 0.
        let mut acc = [[_mm512_setzero_ps(); 16]; MAX_Q];
        for j0 in (0..k.n).step_by(16) {
            let cnt = (k.n - j0).min(16);
            for j in 0..cnt {
                prefetch_row(ahead, j0 + j);
                let row = k.data.as_ptr().add(k.off + (j0 + j) * k.stride);
                let mut kc = [_mm512_setzero_ps(); S];
                for (c, kc) in kc.iter_mut().enumerate() {
                    *kc = _mm512_loadu_ps(row.add(32 * c).cast());
                }
                let bh = |v: __m512| std::mem::transmute::<__m512, __m512bh>(v);
                for i in 0..nq {
                    let (mut a, mut b) = (_mm512_setzero_ps(), _mm512_setzero_ps());
                    for c in 0..S {
                        a = _mm512_dpbf16_ps(a, bh(kc[c]), bh(hi[i][c]));
                        b = _mm512_dpbf16_ps(b, bh(kc[c]), bh(lo[i][c]));
                    }
                    acc[i][j] = _mm512_add_ps(a, b);
                }
            }
            for acc in acc.iter_mut().take(nq) {
                acc[cnt..].iter_mut().for_each(|a| *a = _mm512_setzero_ps());
            }
            let mask = if cnt == 16 { 0xFFFF } else { (1u16 << cnt) - 1 };
            for (i, acc) in acc.iter().enumerate().take(nq) {
                _mm512_mask_storeu_ps(out.as_mut_ptr().add(i * bs + j0), mask, _mm512_mul_ps(transpose_sum(acc), sv));
            }
        }
    }

    /// `(1 << n) - 1` for `n ≤ 16`.
    fn lanes(n: usize) -> __mmask16 {
        if n >= 16 {
            0xFFFF
        } else {
            (1u16 << n) - 1
        }
    }

    /// [`super::softmax`] of `rn ≤ 16` query vectors: `m`, `l` of `rn` each, `acc` `rn` rows of
    /// its `dv` (a multiple of 16).
    #[allow(unsafe_op_in_unsafe_fn)]
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn softmax_rows(
        sc: &mut [f32],
        bs: usize,
        n: usize,
        rn: usize,
        m: &mut [f32],
        l: &mut [f32],
        acc: &mut [f32],
    ) {
        let dv = acc.len() / rn;
        let ninf = _mm512_set1_ps(f32::NEG_INFINITY);
        let log2e = _mm512_set1_ps(std::f32::consts::LOG2_E);
        let base = sc.as_mut_ptr();
        let row = |i: usize, j: usize| base.add(i * bs + j).cast_const();
        let mut bm = [f32::NEG_INFINITY; 16];
        for (i, bm) in bm.iter_mut().enumerate().take(rn) {
            let mut top = ninf;
            for j in (0..n).step_by(16) {
                top = _mm512_max_ps(top, _mm512_mask_loadu_ps(ninf, lanes(n - j), row(i, j)));
            }
            *bm = _mm512_reduce_max_ps(top);
        }
        let rm = lanes(rn);
        let old = _mm512_mask_loadu_ps(ninf, rm, m.as_ptr());
        let new = _mm512_max_ps(old, _mm512_loadu_ps(bm.as_ptr()));
        // Where the max is still −∞ nothing was seen: the factor is 1 (and the weights 0).
        let seen = _mm512_cmp_ps_mask::<_CMP_GT_OQ>(new, ninf);
        let c = _mm512_mask_blend_ps(
            seen,
            _mm512_set1_ps(1.0),
            crate::cpu::common::x86::exp2(_mm512_mul_ps(_mm512_sub_ps(old, new), log2e)),
        );
        let mut cs = [0f32; 16];
        _mm512_storeu_ps(cs.as_mut_ptr(), c);
        _mm512_mask_storeu_ps(m.as_mut_ptr(), rm, new);
        let mut sums = [0f32; 16];
        for i in 0..rn {
            let ci = _mm512_set1_ps(cs[i]);
            for d in (0..dv).step_by(16) {
                let a = acc.as_mut_ptr().add(i * dv + d);
                _mm512_storeu_ps(a, _mm512_mul_ps(_mm512_loadu_ps(a), ci));
            }
            let mi = _mm512_set1_ps(m[i]);
            let mut sum = _mm512_setzero_ps();
            for j in (0..n).step_by(16) {
                let s = _mm512_mask_loadu_ps(ninf, lanes(n - j), row(i, j));
                // exp2(−∞ − −∞) would be NaN: a row that saw nothing gets weights 0.
                let w = _mm512_maskz_mov_ps(
                    if m[i] == f32::NEG_INFINITY { 0 } else { 0xFFFF },
                    crate::cpu::common::x86::exp2(_mm512_mul_ps(_mm512_sub_ps(s, mi), log2e)),
                );
                sum = _mm512_add_ps(sum, w);
                _mm512_mask_storeu_ps(base.add(i * bs + j), lanes(n - j), w);
            }
            sums[i] = _mm512_reduce_add_ps(sum);
        }
        let lv = _mm512_mul_ps(_mm512_mask_loadu_ps(_mm512_setzero_ps(), rm, l.as_ptr()), c);
        _mm512_mask_storeu_ps(l.as_mut_ptr(), rm, _mm512_add_ps(lv, _mm512_loadu_ps(sums.as_ptr())));
    }

    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn weigh(w: &[f32], bs: usize, nq: usize, v: Rows, acc: &mut [f32], ahead: Option<Rows>) {
        let dv = v.len;
        for c in (0..dv).step_by(16) {
            let mut a = [_mm512_setzero_ps(); MAX_Q];
            for (i, a) in a.iter_mut().enumerate().take(nq) {
                *a = unsafe { _mm512_loadu_ps(acc.as_ptr().add(i * dv + c)) };
            }
            for j in 0..v.n {
                if c == 0 {
                    prefetch_row(ahead, j);
                }
                let vc = unsafe { widen(v.data.as_ptr().add(v.off + j * v.stride + c)) };
                for i in 0..nq {
                    a[i] = _mm512_fmadd_ps(_mm512_set1_ps(w[i * bs + j]), vc, a[i]);
                }
            }
            for (i, a) in a.iter().enumerate().take(nq) {
                unsafe { _mm512_storeu_ps(acc.as_mut_ptr().add(i * dv + c), *a) };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn val(i: usize) -> half::bf16 {
        half::bf16::from_f32(((i * 7919) % 2003) as f32 / 1000.0 - 1.0)
    }

    /// Scores of 11, 16 and 27 keys (a block's tail, a whole 16, and a 16 with a tail) against
    /// f32 sums, on `vdpbf16ps` (q in two bf16 parts) where the CPU has it and on the f32
    /// per-key loop; then the weighted values.
    #[test]
    #[cfg_attr(not(host_avx512bf16), ignore = "this CPU has no AVX-512: the per-key path runs instead")]
    fn scores_and_weighted_values_match_the_scalar_sums() {
        let (dk, stride) = (64usize, 3 * 64 + 16);
        assert!(takes(3, dk, dk), "built on a CPU with AVX-512, but the block kernels are not taken here");
        for (n, bs) in [(11usize, 16usize), (16, 16), (27, 32)] {
            let data: Vec<u16> = (0..5 + n * stride).map(|i| val(i).to_bits()).collect();
            let rows = Rows { data: &data, off: 5, stride, n, len: dk };
            let qv: Vec<Vec<f32>> =
                (0..3).map(|i| (0..dk).map(|d| ((i * 31 + d * 17) % 29) as f32 / 14.3 - 1.0).collect()).collect();
            let q: Vec<&[f32]> = qv.iter().map(|v| v.as_slice()).collect();
            let row = |j: usize| -> Vec<f32> { (0..dk).map(|d| val(5 + j * stride + d).to_f32()).collect() };
            let mut s = vec![0f32; 3 * bs];
            let mut per_key = vec![0f32; 3 * bs];
            scores(&q, rows, 0.5, &mut s, bs, Some(rows));
            // SAFETY: `takes` found AVX-512F.
            unsafe { x86::scores(&q, rows, 0.5, &mut per_key, bs, None) };
            for i in 0..3 {
                for j in 0..n {
                    let want: f32 = q[i].iter().zip(row(j)).map(|(a, b)| a * b).sum::<f32>() * 0.5;
                    for got in [s[i * bs + j], per_key[i * bs + j]] {
                        assert!((got - want).abs() < 1e-4, "n {n}: score {i},{j}: {got} vs {want}");
                    }
                }
            }
            let mut acc: Vec<f32> = (0..3 * dk).map(|x| x as f32 / 100.0).collect();
            let before = acc.clone();
            weigh(&s, bs, 3, rows, &mut acc, None);
            for i in 0..3 {
                for d in 0..dk {
                    let want = before[i * dk + d] + (0..n).map(|j| s[i * bs + j] * row(j)[d]).sum::<f32>();
                    assert!((acc[i * dk + d] - want).abs() < 1e-3, "acc {i},{d}: {} vs {want}", acc[i * dk + d]);
                }
            }
        }
    }

    /// The rows' softmax against the scalar one (`super::super::softmax_block`), 18 query
    /// vectors (two passes of 16 lanes) over two blocks: hidden keys, a row that sees nothing
    /// in the first block, maxima that rise in the second.
    #[test]
    #[cfg_attr(not(host_avx512bf16), ignore = "this CPU has no AVX-512: the scalar softmax runs instead")]
    fn the_rows_softmax_matches_the_scalar_one() {
        let (nq, bs, n, dv) = (18usize, 16usize, 13usize, 32usize);
        let (mut m, mut l) = (vec![f32::NEG_INFINITY; nq], vec![0f32; nq]);
        let (mut m2, mut l2) = (m.clone(), l.clone());
        let mut acc: Vec<f32> = (0..nq * dv).map(|x| (x % 7) as f32).collect();
        let mut acc2 = acc.clone();
        for block in 0..2 {
            let mut sc: Vec<f32> =
                (0..nq * bs).map(|x| ((x * 37 + block * 11) % 19) as f32 / 3.0 - 3.0 + block as f32).collect();
            for i in 0..nq {
                sc[i * bs + (i % n)] = f32::NEG_INFINITY;
            }
            if block == 0 {
                sc[5 * bs..5 * bs + n].iter_mut().for_each(|x| *x = f32::NEG_INFINITY);
            }
            let mut sc2 = sc.clone();
            softmax(&mut sc, bs, n, nq, &mut m, &mut l, &mut acc, dv);
            for i in 0..nq {
                super::super::softmax_block(
                    &mut sc2[i * bs..i * bs + n],
                    &mut m2[i],
                    &mut l2[i],
                    &mut acc2[i * dv..(i + 1) * dv],
                    true,
                );
            }
            let close = |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(x, y)| (x - y).abs() <= 1e-5 * y.abs().max(1.0));
            for i in 0..nq {
                assert!(close(&sc[i * bs..i * bs + n], &sc2[i * bs..i * bs + n]), "block {block}, row {i}: weights");
            }
            assert_eq!(m, m2, "block {block}: maxima");
            assert!(close(&l, &l2) && close(&acc, &acc2), "block {block}: sums or outputs");
        }
        assert_eq!(l[5], l2[5]);
    }
}
