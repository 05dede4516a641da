//! Prefill attention on AMX tiles, flash-style, one query per lane: for 16 query rows of one
//! head at a time, the keys the rows see go by in steps of 32 — the step's scores computed
//! transposed (`K·Qᵀ`, keys as rows, the 16 queries as lanes) on two 16 × 16 f32 tiles, an
//! online softmax over them in AVX-512 with every reduction down the keys a vertical one
//! (running max and sum per lane, the weights rounded to bf16 pairs of keys), and the step's
//! `Vᵀ·Pᵀ` accumulated on tiles into the output, held transposed (`dk` rows × 16 queries):
//! on tiles 0–3 from the first step to the last when `dk ≤ 64`, rescaled only when a query's
//! max rises past `LAZY_MAX`. No score matrix is materialised; the steps beyond the tile's
//! last row are never computed (causal), and only the steps that reach past its first row are
//! masked.
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
    for pos in 0..s.ctx_len {
        let off = (meta.slot(s, pos) * d.hkv + kh) * dk;
        kr[pos * dk..(pos + 1) * dk].copy_from_slice(&k[off..off + dk]);
        let (at, shift) = (pos / KB * dk * KB / 2 + pos % KB / 2, 16 * (pos % 2));
        for (i, &x) in v[off..off + dk].iter().enumerate() {
            vt[at + i * KB / 2] |= u32::from(x) << shift;
        }
    }
    Packed { kr, vt, ctx_pad }
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
        // One task's buffers, reused by each head of the group (rows past `rows` stay 0).
        let half = d.dk / 2;
        let (mut pairs, mut qb, mut o) = (vec![0u32; half], vec![0u32; half * QT], vec![0f32; d.dk * QT]);
        for h in kh * group..(kh + 1) * group {
            let at = |r: usize| ((s.q_start + r0 + r) * d.hq + h) * d.dk;
            for r in 0..rows {
                bf16_dot::round_pairs_into(&q[at(r)..at(r) + d.dk], &mut pairs);
                pairs.iter().enumerate().for_each(|(p, &x)| qb[p * QT + r] = x);
            }
            #[cfg(target_arch = "x86_64")]
            {
                // SAFETY: AMX was granted (with AVX-512 BW and BF16); `qb` holds dk / 2 pair
                // rows of 16 queries, the packed keys and values cover ctx_pad ≥ first + rows
                // positions (first + rows ≤ ctx_len).
                unsafe { x86::tile(&qb, &packed[j], d.dk, first, first + rows, scale_log2, &mut o) };
                for r in 0..rows {
                    // SAFETY: row (q_start + r0 + r, h) of `out` belongs to this task alone.
                    let row = unsafe { std::slice::from_raw_parts_mut(dst.get().add(at(r)), d.dk) };
                    row.iter_mut().enumerate().for_each(|(c, x)| *x = o[c * QT + r]);
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
        for b in 0..(end - 1) / KB + 1 {
            scores(qb, pk, dk, b, &mut s);
            // Key row j of the step is at `shift + j` past the first query's position: the
            // rows past it (shift + 31 > 0) need the causal mask.
            let shift = (b * KB) as i64 - first as i64;
            let mask = (shift + KB as i64 - 1 > 0).then_some(shift);
            if let Some(alpha) = softmax(&s, &mut m, &mut l, &mut p, scale_log2, mask) {
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
    /// the keys' rows straight as A tiles, the queries' pairs as the B tile.
    unsafe fn scores(qb: &[u32], pk: &Packed, dk: usize, b: usize, s: &mut [f32; KB * QT]) {
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
    /// weights into `p` as pairs of keys per query. `mask`: key row `j` is seen by queries
    /// `mask + j` and up. Returns the factor the output shrinks by when some max moved.
    #[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
    unsafe fn softmax(
        s: &[f32; KB * QT],
        m: &mut __m512,
        l: &mut __m512,
        p: &mut [u32; KB / 2 * QT],
        scale_log2: f32,
        mask: Option<i64>,
    ) -> Option<__m512> {
        let lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        let seen = |j: usize| -> __mmask16 {
            match mask {
                None => 0xFFFF,
                Some(shift) => {
                    let t = (shift + j as i64).clamp(0, QT as i64) as i32;
                    _mm512_cmpge_epi32_mask(lanes, _mm512_set1_epi32(t))
                }
            }
        };
        let row = |j: usize| unsafe { _mm512_loadu_ps(s.as_ptr().add(j * QT)) };
        let mut top = _mm512_set1_ps(f32::NEG_INFINITY);
        for j in 0..KB {
            top = _mm512_mask_max_ps(top, seen(j), top, row(j));
        }
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
        let mut sum = _mm512_setzero_ps();
        for jp in 0..KB / 2 {
            let w = |j: usize| unsafe { _mm512_maskz_mov_ps(seen(j), exp2(_mm512_fmsub_ps(row(j), k, *m))) };
            let (w0, w1) = (w(2 * jp), w(2 * jp + 1));
            sum = _mm512_add_ps(sum, _mm512_add_ps(w0, w1));
            let bf: __m512i = std::mem::transmute(_mm512_cvtne2ps_pbh(w1, w0));
            _mm512_storeu_si512(p.as_mut_ptr().add(jp * QT).cast(), _mm512_permutexvar_epi16(inter, bf));
        }
        *l = _mm512_add_ps(*l, sum);
        alpha
    }
}
