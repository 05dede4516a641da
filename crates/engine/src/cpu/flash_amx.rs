//! Prefill attention on AMX tiles, flash-style, one query per lane: for 16 query rows of one
//! head at a time, the keys the rows see go by in steps of 32 — the step's scores computed
//! transposed (`K·Qᵀ`, keys as rows, the 16 queries as lanes) on two 16 × 16 f32 tiles, an
//! online softmax over them in AVX-512 with every reduction down the keys a vertical one
//! (running max and sum per lane, the weights rounded to bf16 pairs of keys), and the step's
//! `Vᵀ·Pᵀ` accumulated on tiles into the output, held transposed (`dk` rows × 16 queries):
//! on tiles 0–3 from the first step to the last when `dk ≤ 64`, rescaled only when a query's
//! max rises past `LAZY_MAX`. No score matrix is materialised; the steps beyond the tile's
//! last row are never computed (causal), and only the steps that reach past its first row are
//! masked. Each step's successor's scores go to the tile unit before the step's softmax, so
//! the two run side by side (`attention_prefill/kernel_bf16`, one core: 2048 positions 13.0–
//! 14.5 → 11.8–12.4 ms, 128 positions 192–203 → 132–137 µs, with the transposes below).
//!
//! The queries into the tiles' lanes, the output back to rows and the values into pairs of
//! keys are 16 × 16 transposes of 32-bit lanes in AVX-512 shuffles ([`to_lanes`]).
//!
//! Layouts (each `u32` a pair of bf16, the low half first, as `tdpbf16ps` reads them):
//! - the tile's queries `qb[p][row] = (q_row[2p], q_row[2p+1])`: a B tile per 32 values of
//!   `dk`;
//! - the sequence's keys as rows, `kr[pos][dk]` (copied once per call and KV head): an A tile
//!   is 16 keys × 32 values of `dk`;
//! - its values transposed in pairs of keys, step by step, `vt[b][d][j] = (v_2j[d],
//!   v_2j+1[d])` for keys `32b + 2j` and `32b + 2j + 1`: an A tile is 16 values of `d` × the
//!   step's 32 keys, 1 KB in one piece (rows a whole context apart would share one L1 set);
//! - the step's weights `p[j][row] = (w_2j, w_2j+1)`: the B tile of `Vᵀ·Pᵀ`.
//!
//! Taken for bf16 pools, chunks of 16 rows or more, `dk` a multiple of 32 up to 256 with
//! `dv = dk`, no window and no sinks, where AMX runs (`amx::available`); every other call
//! keeps the paged kernel (`paged_attention.rs`). What differs from it: `q` and the weights
//! are rounded to bf16 before their products (as in every bf16 flash attention), and the
//! softmax's exponential is a polynomial.
#![cfg_attr(not(target_arch = "x86_64"), allow(unused_variables, unused_mut, dead_code))]

use crate::cpu::common::OutPtr;
use crate::cpu::{amx, bf16_dot};
use crate::kv_cache::{AttnMeta, AttnSeq};
use rayon::prelude::*;

/// Query rows per tile.
const QT: usize = 16;
/// How far (in log2 units) a step's top score may pass a query's running max before the max
/// is moved and its output rescaled: its weights then reach at most 2^8, exact enough in f32
/// sums and as bf16 (FlashAttention-4's conditional rescaling).
const LAZY_MAX: f32 = 8.0;
/// Keys per step: two score tiles, one weight tile of 16 pairs.
const KB: usize = 32;

/// Whether a sequence's chunk of `q_len` rows goes through the tiles.
pub(crate) fn takes(q_len: usize, dk: usize, dv: usize, v_row: usize, plain: bool) -> bool {
    plain && q_len >= QT && dk.is_multiple_of(KB) && dk <= 256 && dv == dk && v_row == dk && amx::available()
}

/// Heads and widths of a call: query heads, KV heads, and `dk` (= `dv`).
#[derive(Clone, Copy)]
pub(crate) struct Dims {
    pub hq: usize,
    pub hkv: usize,
    pub dk: usize,
}

/// One sequence's keys and values for one KV head, in the tiles' layouts.
struct Packed {
    kr: Vec<u16>,
    vt: Vec<u32>,
    /// Keys rounded up to a whole step: `kr`'s rows.
    ctx_pad: usize,
}

fn pack(meta: &AttnMeta, s: &AttnSeq, kh: usize, d: Dims, k: &[u16], v: &[u16]) -> Packed {
    let dk = d.dk;
    let ctx_pad = s.ctx_len.div_ceil(KB) * KB;
    let (mut kr, mut vt) = (vec![0u16; ctx_pad * dk], vec![0u32; dk * ctx_pad / 2]);
    let row = |pos: usize| (meta.slot(s, pos) * d.hkv + kh) * dk;
    for pos in 0..s.ctx_len {
        kr[pos * dk..(pos + 1) * dk].copy_from_slice(&k[row(pos)..row(pos) + dk]);
    }
    // A step's values as 16 rows of key pairs (`pairs[j][d] = (v_2j[d], v_2j+1[d])`), then
    // turned into the step's `dk` rows of 16 pairs.
    let mut pairs = vec![0u32; KB / 2 * dk];
    for (b, step) in vt.chunks_exact_mut(dk * KB / 2).enumerate() {
        for (j, pr) in pairs.chunks_exact_mut(dk).enumerate() {
            let (p0, p1) = (b * KB + 2 * j, b * KB + 2 * j + 1);
            let val = |pos: usize, i: usize| if pos < s.ctx_len { u32::from(v[row(pos) + i]) } else { 0 };
            if p1 < s.ctx_len {
                let (v0, v1) = (&v[row(p0)..row(p0) + dk], &v[row(p1)..row(p1) + dk]);
                pr.iter_mut().zip(v0.iter().zip(v1)).for_each(|(x, (&a, &b))| *x = u32::from(a) | u32::from(b) << 16);
            } else {
                pr.iter_mut().enumerate().for_each(|(i, x)| *x = val(p0, i) | val(p1, i) << 16);
            }
        }
        to_lanes(&pairs, dk, step);
    }
    Packed { kr, vt, ctx_pad }
}

/// `src`, 16 rows of `w` 32-bit values (`w` a multiple of 16), as `w` rows of 16 lanes:
/// `dst[c * 16 + r] = src[r * w + c]`.
fn to_lanes<T: Copy>(src: &[T], w: usize, dst: &mut [T]) {
    const { assert!(size_of::<T>() == 4) };
    assert!(w.is_multiple_of(16) && src.len() >= 16 * w && dst.len() >= 16 * w);
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx512f") {
        for c in (0..w).step_by(16) {
            // SAFETY: AVX-512F is here; block c reads rows 0..16 of columns c..c + 16 of src
            // and writes rows c..c + 16 of dst, within both (checked above).
            unsafe { x86::transpose16(src.as_ptr().add(c).cast(), w, dst.as_mut_ptr().add(c * 16).cast(), 16) };
        }
        return;
    }
    for r in 0..16 {
        for c in 0..w {
            dst[c * 16 + r] = src[r * w + c];
        }
    }
}

/// The inverse of [`to_lanes`]: `w` rows of 16 lanes as 16 rows of `w` values.
fn from_lanes<T: Copy>(src: &[T], w: usize, dst: &mut [T]) {
    const { assert!(size_of::<T>() == 4) };
    assert!(w.is_multiple_of(16) && src.len() >= 16 * w && dst.len() >= 16 * w);
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx512f") {
        for c in (0..w).step_by(16) {
            // SAFETY: as in `to_lanes`, the other way round.
            unsafe { x86::transpose16(src.as_ptr().add(c * 16).cast(), 16, dst.as_mut_ptr().add(c).cast(), w) };
        }
        return;
    }
    for r in 0..16 {
        for c in 0..w {
            dst[r * w + c] = src[c * 16 + r];
        }
    }
}

/// The attention of sequences `seqs` (indices into `meta.seqs`) into their rows of `out`
/// (`t × hq × dk`): `q` is `t × hq × dk` f32, `k` and `v` the bf16 pools (`slots × hkv × dk`).
/// Needs [`takes`] for each of them; the pools are bounds-checked by the caller.
#[allow(clippy::too_many_arguments)]
pub(crate) fn attend(
    q: &[f32],
    k: &[u16],
    v: &[u16],
    meta: &AttnMeta,
    seqs: &[usize],
    d: Dims,
    scale: f32,
    out: &mut [f32],
) {
    assert!(amx::available(), "flash_amx::attend needs AMX");
    let jobs: Vec<(usize, usize)> = seqs.iter().flat_map(|&s| (0..d.hkv).map(move |kh| (s, kh))).collect();
    let packed: Vec<Packed> = jobs.par_iter().map(|&(s, kh)| pack(meta, &meta.seqs[s], kh, d, k, v)).collect();
    // Tasks: one block of 16 rows of one sequence and KV head, all the heads of its group.
    let tasks: Vec<(usize, usize)> = jobs
        .iter()
        .enumerate()
        .flat_map(|(j, &(s, _))| (0..meta.seqs[s].q_len).step_by(QT).map(move |r| (j, r)))
        .collect();
    let dst = OutPtr(out.as_mut_ptr());
    let group = d.hq / d.hkv;
    let scale_log2 = scale * std::f32::consts::LOG2_E;
    tasks.par_iter().for_each(|&(j, r0)| {
        let (si, kh) = jobs[j];
        let s = &meta.seqs[si];
        let rows = QT.min(s.q_len - r0);
        // The absolute position of the block's first row: it sees keys 0..=that + its row.
        let first = s.ctx_len - s.q_len + r0;
        // One task's buffers, reused by each head of the group: the rows' q as pairs (rows
        // past `rows` stay 0), the same as the tiles' B layout, the output held transposed
        // and turned back.
        let half = d.dk / 2;
        let (mut qp, mut qb) = (vec![0u32; QT * half], vec![0u32; half * QT]);
        let (mut o, mut ot) = (vec![0f32; d.dk * QT], vec![0f32; QT * d.dk]);
        for h in kh * group..(kh + 1) * group {
            let at = |r: usize| ((s.q_start + r0 + r) * d.hq + h) * d.dk;
            for r in 0..rows {
                bf16_dot::round_pairs_into(&q[at(r)..at(r) + d.dk], &mut qp[r * half..(r + 1) * half]);
            }
            to_lanes(&qp, half, &mut qb);
            #[cfg(target_arch = "x86_64")]
            {
                // SAFETY: AMX was granted (with AVX-512 BW and BF16); `qb` holds dk / 2 pair
                // rows of 16 queries, the packed keys and values cover ctx_pad ≥ first + rows
                // positions (first + rows ≤ ctx_len).
                unsafe { x86::tile(&qb, &packed[j], d.dk, first, first + rows, scale_log2, &mut o) };
                from_lanes(&o, d.dk, &mut ot);
                for r in 0..rows {
                    // SAFETY: row (q_start + r0 + r, h) of `out` belongs to this task alone.
                    let row = unsafe { std::slice::from_raw_parts_mut(dst.get().add(at(r)), d.dk) };
                    row.copy_from_slice(&ot[r * d.dk..(r + 1) * d.dk]);
                }
            }
        }
    });
}

#[cfg(target_arch = "x86_64")]
#[allow(unsafe_op_in_unsafe_fn)]
mod x86 {
    use super::{Packed, KB, LAZY_MAX, QT};
    use crate::cpu::amx;
    use crate::cpu::common::x86::exp2;
    use std::arch::asm;
    use std::arch::x86_64::*;

    /// Emits one tile instruction on accumulator `$i` (0–3): tile registers are named in the
    /// text, `$pre` and `$post` around the register's number.
    macro_rules! on_tile {
        ($i:expr, $pre:literal, $post:literal $(, $name:ident = $val:expr)*) => {
            match $i {
                0 => asm!(concat!($pre, "0", $post), $($name = in(reg) $val,)* options(nostack)),
                1 => asm!(concat!($pre, "1", $post), $($name = in(reg) $val,)* options(nostack)),
                2 => asm!(concat!($pre, "2", $post), $($name = in(reg) $val,)* options(nostack)),
                _ => asm!(concat!($pre, "3", $post), $($name = in(reg) $val,)* options(nostack)),
            }
        };
    }

    /// Bytes of a row of 16 lanes (f32 or bf16 pairs).
    const ROW: usize = 64;

    /// The 16 queries of `qb` (positions `first..first + 16`, the first `end - first` real)
    /// against keys `0..end`, normalised, into `o` (`dk` rows × 16 query lanes, f32).
    /// With `dk ≤ 64` the output stays on tiles 0–3 from the first step to the last.
    #[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
    pub(super) unsafe fn tile(
        qb: &[u32],
        pk: &Packed,
        dk: usize,
        first: usize,
        end: usize,
        scale_log2: f32,
        o: &mut [f32],
    ) {
        let (mut m, mut l) = (_mm512_set1_ps(f32::NEG_INFINITY), _mm512_setzero_ps());
        let mut s = [0f32; KB * QT];
        let mut p = [0u32; KB / 2 * QT];
        debug_assert!(end <= pk.ctx_pad && pk.kr.len() == pk.ctx_pad * dk && pk.vt.len() == pk.ctx_pad / 2 * dk);
        let resident = dk <= 64;
        o[..dk * QT].iter_mut().for_each(|x| *x = 0.0);
        amx::configure();
        if resident {
            asm!("tilezero tmm0", "tilezero tmm1", "tilezero tmm2", "tilezero tmm3", options(nostack, nomem));
        }
        // Software-pipelined: step b + 1's scores go to the tiles before step b's softmax,
        // so the tile unit computes them while the vector units work (the tiles are not
        // renamed: in program order, each step's scores are stored before the next's start).
        let steps = (end - 1) / KB + 1;
        scores_issue(qb, pk, dk, 0);
        for b in 0..steps {
            scores_store(&mut s);
            if b + 1 < steps {
                scores_issue(qb, pk, dk, b + 1);
            }
            // Key row j of the step is at `shift + j` past the first query's position: the
            // rows past it (shift + 31 > 0) need the causal mask.
            let shift = (b * KB) as i64 - first as i64;
            let alpha = if shift + KB as i64 - 1 > 0 {
                softmax::<true>(&s, &mut m, &mut l, &mut p, scale_log2, shift)
            } else {
                softmax::<false>(&s, &mut m, &mut l, &mut p, scale_log2, 0)
            };
            if let Some(alpha) = alpha {
                // Some query's max rose past LAZY_MAX: its output shrinks first.
                if resident {
                    store_resident(dk, o);
                }
                scale_rows(&mut o[..dk * QT], alpha);
                if resident {
                    load_resident(dk, o);
                }
            }
            weighted_values(&p, pk, dk, b, o, resident);
        }
        if resident {
            store_resident(dk, o);
        }
        amx::release();
        let inv = _mm512_maskz_div_ps(_mm512_cmp_ps_mask::<_CMP_GT_OQ>(l, _mm512_setzero_ps()), _mm512_set1_ps(1.0), l);
        scale_rows(&mut o[..dk * QT], inv);
    }

    /// The 16 × 16 block of 32-bit values with rows at `src + i · ss` into rows at
    /// `dst + i · ds`, transposed: four rounds of lane shuffles (pairs, quads, 128-bit
    /// quarters, halves).
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn transpose16(src: *const u32, ss: usize, dst: *mut u32, ds: usize) {
        let mut r = [_mm512_setzero_si512(); 16];
        for (i, x) in r.iter_mut().enumerate() {
            *x = _mm512_loadu_si512(src.add(i * ss).cast());
        }
        let mut t = [_mm512_setzero_si512(); 16];
        for i in (0..16).step_by(2) {
            t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
            t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
        }
        for i in (0..16).step_by(4) {
            r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
            r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
            r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
            r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
        }
        for i in (0..16).step_by(8) {
            for j in 0..4 {
                t[i + j] = _mm512_shuffle_i32x4::<0x88>(r[i + j], r[i + j + 4]);
                t[i + j + 4] = _mm512_shuffle_i32x4::<0xdd>(r[i + j], r[i + j + 4]);
            }
        }
        for j in 0..8 {
            r[j] = _mm512_shuffle_i32x4::<0x88>(t[j], t[j + 8]);
            r[j + 8] = _mm512_shuffle_i32x4::<0xdd>(t[j], t[j + 8]);
        }
        for (i, x) in r.iter().enumerate() {
            _mm512_storeu_si512(dst.add(i * ds).cast(), *x);
        }
    }

    /// Every 16-lane row of `o` times `f`, lane by lane.
    #[target_feature(enable = "avx512f")]
    unsafe fn scale_rows(o: &mut [f32], f: __m512) {
        for row in o.chunks_exact_mut(QT) {
            _mm512_storeu_ps(row.as_mut_ptr(), _mm512_mul_ps(_mm512_loadu_ps(row.as_ptr()), f));
        }
    }

    /// The output held on tiles 0..dk/16 into `o`.
    unsafe fn store_resident(dk: usize, o: &mut [f32]) {
        for i in 0..dk / 16 {
            on_tile!(i, "tilestored [{c} + {sc}*1], tmm", "", c = o.as_mut_ptr().add(i * 16 * QT), sc = ROW);
        }
    }

    /// `o` onto tiles 0..dk/16.
    unsafe fn load_resident(dk: usize, o: &[f32]) {
        for i in 0..dk / 16 {
            on_tile!(i, "tileloadd tmm", ", [{c} + {sc}*1]", c = o.as_ptr().add(i * 16 * QT), sc = ROW);
        }
    }

    /// Scores of step `b`, transposed: `s[key][query]` (32 × 16 f32) = Σ over dk of k · q,
    /// the keys' rows straight as A tiles, the queries' pairs as the B tile: onto tiles 4 and
    /// 5, for [`scores_store`].
    unsafe fn scores_issue(qb: &[u32], pk: &Packed, dk: usize, b: usize) {
        asm!("tilezero tmm4", "tilezero tmm5", options(nostack, nomem));
        let sa = dk * 2;
        for c in 0..dk / KB {
            let k0 = pk.kr.as_ptr().add(b * KB * dk + c * KB);
            asm!(
                "tileloadd tmm6, [{q} + {sq}*1]",
                "tileloadd tmm7, [{k0} + {sa}*1]",
                "tdpbf16ps tmm4, tmm7, tmm6",
                "tileloadd tmm7, [{k1} + {sa}*1]",
                "tdpbf16ps tmm5, tmm7, tmm6",
                q = in(reg) qb.as_ptr().add(c * 16 * QT),
                k0 = in(reg) k0,
                k1 = in(reg) k0.add(16 * dk),
                sq = in(reg) ROW,
                sa = in(reg) sa,
                options(nostack, readonly),
            );
        }
    }

    /// The scores on tiles 4 and 5 into `s`.
    unsafe fn scores_store(s: &mut [f32; KB * QT]) {
        asm!(
            "tilestored [{c0} + {sc}*1], tmm4",
            "tilestored [{c1} + {sc}*1], tmm5",
            c0 = in(reg) s.as_mut_ptr(),
            c1 = in(reg) s.as_mut_ptr().add(16 * QT),
            sc = in(reg) ROW,
            options(nostack),
        );
    }

    /// Output (`dk` rows × 16 queries) += the values' transposed pairs × the step's weights
    /// `p`, four 16-row tiles at a time: on tiles 0–3 when `resident`, else loaded from and
    /// stored back to `o`.
    unsafe fn weighted_values(p: &[u32; KB / 2 * QT], pk: &Packed, dk: usize, b: usize, o: &mut [f32], resident: bool) {
        let vb = pk.vt.as_ptr().add(b * dk * KB / 2);
        asm!("tileloadd tmm6, [{a} + {sa}*1]", a = in(reg) p.as_ptr(), sa = in(reg) ROW, options(nostack, readonly));
        for g in (0..dk / 16).step_by(4) {
            let n = (dk / 16 - g).min(4);
            if !resident {
                for i in 0..n {
                    let c = o.as_ptr().add((g + i) * 16 * QT);
                    on_tile!(i, "tileloadd tmm", ", [{c} + {sc}*1]", c = c, sc = ROW);
                }
            }
            for i in 0..n {
                let at = vb.add((g + i) * 16 * KB / 2);
                asm!("tileloadd tmm7, [{v} + {sv}*1]", v = in(reg) at, sv = in(reg) ROW, options(nostack, readonly));
                on_tile!(i, "tdpbf16ps tmm", ", tmm7, tmm6");
            }
            if !resident {
                for i in 0..n {
                    let c = o.as_mut_ptr().add((g + i) * 16 * QT);
                    on_tile!(i, "tilestored [{c} + {sc}*1], tmm", "", c = c, sc = ROW);
                }
            }
        }
    }

    /// The online softmax of one step's transposed scores (times `scale_log2`, so `2^x` is
    /// the weight), one query per lane: the running max `m` moved where the step's top passes
    /// it by `LAZY_MAX` (or at the first keys, where `m` is −∞), the sum `l` grown, the step's
    /// weights into `p` as pairs of keys per query. `MASKED`: key row `j` is seen by queries
    /// `shift + j` and up (else by all). Returns the factor the output shrinks by when some
    /// max moved.
    #[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
    unsafe fn softmax<const MASKED: bool>(
        s: &[f32; KB * QT],
        m: &mut __m512,
        l: &mut __m512,
        p: &mut [u32; KB / 2 * QT],
        scale_log2: f32,
        shift: i64,
    ) -> Option<__m512> {
        let lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        let seen = |j: usize| -> __mmask16 {
            if MASKED {
                let t = (shift + j as i64).clamp(0, QT as i64) as i32;
                _mm512_cmpge_epi32_mask(lanes, _mm512_set1_epi32(t))
            } else {
                0xFFFF
            }
        };
        let row = |j: usize| unsafe { _mm512_loadu_ps(s.as_ptr().add(j * QT)) };
        // Four running tops, not one chain of 32 dependent maxima.
        let mut tops = [_mm512_set1_ps(f32::NEG_INFINITY); 4];
        for j in 0..KB {
            tops[j % 4] = _mm512_mask_max_ps(tops[j % 4], seen(j), tops[j % 4], row(j));
        }
        let top = _mm512_max_ps(_mm512_max_ps(tops[0], tops[1]), _mm512_max_ps(tops[2], tops[3]));
        let k = _mm512_set1_ps(scale_log2);
        let top = _mm512_mul_ps(top, k);
        // The running max moves only where the step's top passes it by LAZY_MAX: the weights
        // stay below 2^LAZY_MAX, and the output is rescaled in a few steps, not in every one.
        let moved = _mm512_cmp_ps_mask::<_CMP_GT_OQ>(top, _mm512_add_ps(*m, _mm512_set1_ps(LAZY_MAX)));
        let mut alpha = None;
        if moved != 0 {
            let new = _mm512_mask_mov_ps(*m, moved, top);
            // Where m was −∞ the factor is 0: the output and sum there are still 0.
            let a = exp2(_mm512_sub_ps(*m, new));
            (*l, *m, alpha) = (_mm512_mul_ps(*l, a), new, Some(a));
        }
        // u16 lane 2q takes w_2j[q] (lane q of the low half), 2q + 1 takes w_2j+1[q] (lane
        // 16 + q): the pair (w_2j, w_2j+1) of query q, low half first.
        let inter = _mm512_set_epi16(
            31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17,
            1, 16, 0,
        );
        let mut sums = [_mm512_setzero_ps(); 2];
        for jp in 0..KB / 2 {
            let w = |j: usize| unsafe {
                let x = exp2_weight(_mm512_fmsub_ps(row(j), k, *m));
                if MASKED {
                    _mm512_maskz_mov_ps(seen(j), x)
                } else {
                    x
                }
            };
            let (w0, w1) = (w(2 * jp), w(2 * jp + 1));
            sums[jp % 2] = _mm512_add_ps(sums[jp % 2], _mm512_add_ps(w0, w1));
            let bf: __m512i = std::mem::transmute(_mm512_cvtne2ps_pbh(w1, w0));
            _mm512_storeu_si512(p.as_mut_ptr().add(jp * QT).cast(), _mm512_permutexvar_epi16(inter, bf));
        }
        *l = _mm512_add_ps(*l, _mm512_add_ps(sums[0], sums[1]));
        alpha
    }

    /// `2^x` of a softmax weight, `x ≤ LAZY_MAX` finite (lanes of masked keys may hold
    /// anything: the caller zeroes them): `x = n + f`, `|f| ≤ 1/2`, a degree-4 polynomial of
    /// `2^f` fitted for relative error (below 3e-6, a thousandth of the weight's rounding to
    /// bf16), scaled by `2^n` (`scalef` gives 0 below the smallest f32). Two multiply-adds and
    /// the clamp fewer than `common::x86::exp2`.
    #[target_feature(enable = "avx512f")]
    unsafe fn exp2_weight(x: __m512) -> __m512 {
        let n = _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(x);
        let f = _mm512_sub_ps(x, n);
        let mut p = _mm512_set1_ps(EXP2_C[4]);
        for &c in EXP2_C[..4].iter().rev() {
            p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(c));
        }
        _mm512_scalef_ps(p, n)
    }

    /// Coefficients of [`exp2_weight`]'s polynomial, lowest first: weighted least squares
    /// towards equal relative error on [−1/2, 1/2] (Lawson's iteration).
    const EXP2_C: [f32; 5] = [0.999_999_3, 0.693_121_8, 0.240_247_44, 0.055_917_86, 0.009_570_101];
}

#[cfg(test)]
mod tests {
    use super::{from_lanes, to_lanes};

    /// The shuffled transposes against their definition, for widths of one to eight blocks.
    #[test]
    fn lanes_turn_rows_and_back() {
        for w in [16usize, 32, 64, 128] {
            let src: Vec<u32> = (0..16 * w as u32).map(|i| i.wrapping_mul(2_654_435_761)).collect();
            let mut lanes = vec![0u32; 16 * w];
            to_lanes(&src, w, &mut lanes);
            for r in 0..16 {
                for c in 0..w {
                    assert_eq!(lanes[c * 16 + r], src[r * w + c], "w {w}: row {r}, column {c}");
                }
            }
            let mut back = vec![0u32; 16 * w];
            from_lanes(&lanes, w, &mut back);
            assert_eq!(back, src, "w {w}");
        }
    }
}
