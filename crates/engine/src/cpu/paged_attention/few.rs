//! A decode tile's few query vectors (a KV head's group, below `WIDEN_FROM`) against a block
//! of bf16 K/V rows on AVX-512: each pool row widened once for the whole group, the group's
//! scores and its weighted values accumulated in registers over the block. The generic path
//! called a dot product and an axpy per query vector and key, on AVX2, with a horizontal sum
//! each; a SmolLM2 decode step at batch 16 spent more in them (17 ms) than in every
//! projection and MLP product of its 30 layers (engine-bench, this project's AMX host).

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

/// `scores[i * bs + j] = scale · q[i] · k_j` for each query vector `i` and key row `j` of `k`.
/// Needs [`takes`].
pub(super) fn scores(q: &[&[f32]], k: Rows, scale: f32, scores: &mut [f32], bs: usize) {
    assert!(q.len() <= MAX_Q && k.fits() && k.len.is_multiple_of(16) && k.n <= bs && scores.len() >= q.len() * bs);
    assert!(q.iter().all(|v| v.len() >= k.len));
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `takes` found AVX-512F; the asserts bound every read and write.
    unsafe {
        x86::scores(q, k, scale, scores, bs)
    }
}

/// `acc[i * dv..][..dv] += Σ_j w[i * bs + j] · v_j` over the value rows `v_j` of `v`. Needs
/// [`takes`].
pub(super) fn weigh(w: &[f32], bs: usize, nq: usize, v: Rows, acc: &mut [f32]) {
    assert!(nq <= MAX_Q && v.fits() && v.len.is_multiple_of(16) && v.n <= bs && w.len() >= nq * bs);
    assert!(acc.len() >= nq * v.len);
    #[cfg(target_arch = "x86_64")]
    // SAFETY: as in `scores`.
    unsafe {
        x86::weigh(w, bs, nq, v, acc)
    }
}

/// The query groups of a tile: each KV head's index and its query vectors' range.
pub(super) type Groups = [(usize, std::ops::Range<usize>)];

/// [`scores`] of each group against the block of `n` slots from `base` of the K pool `kb`
/// (`hkv` heads of `dk` values per slot).
pub(super) fn group_scores(
    qv: &[&[f32]],
    kb: &[u16],
    groups: &Groups,
    (hkv, dk): (usize, usize),
    (base, n, bs): (usize, usize, usize),
    scale: f32,
    out: &mut [f32],
) {
    for (kh, g) in groups {
        let ks = Rows { data: kb, off: (base * hkv + kh) * dk, stride: hkv * dk, n, len: dk };
        scores(&qv[g.clone()], ks, scale, &mut out[g.start * bs..], bs);
    }
}

/// [`weigh`] of each group over the block of `n` slots from `base` of the V pool `vb` (`hkv`
/// heads of `v_row` values per slot, the first `dv` read), into `acc`.
pub(super) fn group_weigh(
    vb: &[u16],
    groups: &Groups,
    (hkv, v_row, dv): (usize, usize, usize),
    (base, n, bs): (usize, usize, usize),
    w: &[f32],
    acc: &mut [f32],
) {
    for (kh, g) in groups {
        let vs = Rows { data: vb, off: (base * hkv + kh) * v_row, stride: hkv * v_row, n, len: dv };
        weigh(&w[g.start * bs..], bs, g.len(), vs, &mut acc[g.start * dv..g.end * dv]);
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{Rows, MAX_Q};
    use std::arch::x86_64::*;

    /// 16 bf16 at `p` as f32 (exact).
    #[target_feature(enable = "avx512f")]
    unsafe fn widen(p: *const u16) -> __m512 {
        // SAFETY: the caller reads 16 values within its row.
        let h = unsafe { _mm256_loadu_si256(p.cast()) };
        _mm512_castsi512_ps(_mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(h)))
    }

    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn scores(q: &[&[f32]], k: Rows, scale: f32, out: &mut [f32], bs: usize) {
        let nq = q.len();
        for j in 0..k.n {
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

    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn weigh(w: &[f32], bs: usize, nq: usize, v: Rows, acc: &mut [f32]) {
        let dv = v.len;
        for c in (0..dv).step_by(16) {
            let mut a = [_mm512_setzero_ps(); MAX_Q];
            for (i, a) in a.iter_mut().enumerate().take(nq) {
                *a = unsafe { _mm512_loadu_ps(acc.as_ptr().add(i * dv + c)) };
            }
            for j in 0..v.n {
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

    #[test]
    #[cfg_attr(not(host_avx512bf16), ignore = "this CPU has no AVX-512: the per-key path runs instead")]
    fn scores_and_weighted_values_match_the_scalar_sums() {
        let (dk, n, bs, stride) = (64usize, 11usize, 16usize, 3 * 64 + 16);
        assert!(takes(3, dk, dk), "built on a CPU with AVX-512, but the block kernels are not taken here");
        let val = |i: usize| half::bf16::from_f32(((i * 7919) % 2003) as f32 / 1000.0 - 1.0);
        let data: Vec<u16> = (0..5 + n * stride).map(|i| val(i).to_bits()).collect();
        let rows = Rows { data: &data, off: 5, stride, n, len: dk };
        let qv: Vec<Vec<f32>> =
            (0..3).map(|i| (0..dk).map(|d| ((i * 31 + d * 17) % 29) as f32 / 14.0 - 1.0).collect()).collect();
        let q: Vec<&[f32]> = qv.iter().map(|v| v.as_slice()).collect();
        let row = |j: usize| -> Vec<f32> { (0..dk).map(|d| val(5 + j * stride + d).to_f32()).collect() };
        let mut s = vec![0f32; 3 * bs];
        scores(&q, rows, 0.5, &mut s, bs);
        for i in 0..3 {
            for j in 0..n {
                let want: f32 = q[i].iter().zip(row(j)).map(|(a, b)| a * b).sum::<f32>() * 0.5;
                assert!((s[i * bs + j] - want).abs() < 1e-4, "score {i},{j}: {} vs {want}", s[i * bs + j]);
            }
        }
        let mut acc: Vec<f32> = (0..3 * dk).map(|x| x as f32 / 100.0).collect();
        let before = acc.clone();
        weigh(&s, bs, 3, rows, &mut acc);
        for i in 0..3 {
            for d in 0..dk {
                let want = before[i * dk + d] + (0..n).map(|j| s[i * bs + j] * row(j)[d]).sum::<f32>();
                assert!((acc[i * dk + d] - want).abs() < 1e-3, "acc {i},{d}: {} vs {want}", acc[i * dk + d]);
            }
        }
    }
}
