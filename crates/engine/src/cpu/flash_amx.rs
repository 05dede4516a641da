//! Prefill attention on AMX tiles, flash-style: for 16 query rows of one head at a time, the
//! keys the rows see go by in steps of 32 — the scores `Q·Kᵀ` of the step on tiles (two
//! 16 × 16 f32 tiles), an online softmax over them in AVX-512 (running max and sum per row,
//! the weights rounded to bf16), and the step's `P·V` accumulated on tiles into the rows'
//! output, which is rescaled only when a row's max rises past `LAZY_MAX`. No score matrix is materialised; the steps beyond the
//! tile's last row are never computed (causal), and only the steps that reach past its first
//! row are masked.
//!
//! Layouts (each `u32` a pair of bf16, the low half first, as `tdpbf16ps` reads them):
//! - the tile's queries `qa[row][p] = (q[2p], q[2p+1])`: an A tile per 32 values of `dk`;
//! - the sequence's keys, transposed once per call and KV head, `kt[p][pos] = (k_pos[2p],
//!   k_pos[2p+1])`: a B tile is 16 pairs of `dk` × 16 keys;
//! - its values, `vp[j][d] = (v_2j[d], v_2j+1[d])`: a B tile is 32 keys × 16 values of `d`;
//! - the step's weights `p[row][j] = (w_2j, w_2j+1)`: the A tile of `P·V`.
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
/// How far (in log2 units) a step's top score may pass a row's running max before the max is
/// moved and the row's output rescaled: its weights then reach at most 2^8, exact enough in
/// f32 sums and as bf16 (FlashAttention-4's conditional rescaling).
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
    kt: Vec<u32>,
    vp: Vec<u32>,
    /// Keys rounded up to a whole step: the row stride of `kt`.
    ctx_pad: usize,
}

fn pack(meta: &AttnMeta, s: &AttnSeq, kh: usize, d: Dims, k: &[u16], v: &[u16]) -> Packed {
    let (dk, half) = (d.dk, d.dk / 2);
    let ctx_pad = s.ctx_len.div_ceil(KB) * KB;
    let (mut kt, mut vp) = (vec![0u32; half * ctx_pad], vec![0u32; ctx_pad / 2 * dk]);
    for pos in 0..s.ctx_len {
        let off = (meta.slot(s, pos) * d.hkv + kh) * dk;
        let (kr, vr) = (&k[off..off + dk], &v[off..off + dk]);
        for p in 0..half {
            kt[p * ctx_pad + pos] = u32::from(kr[2 * p]) | u32::from(kr[2 * p + 1]) << 16;
        }
        let (row, shift) = (&mut vp[pos / 2 * dk..(pos / 2 + 1) * dk], 16 * (pos % 2));
        for (w, &x) in row.iter_mut().zip(vr) {
            *w |= u32::from(x) << shift;
        }
    }
    Packed { kt, vp, ctx_pad }
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
        // One task's buffers, reused by each head of the group.
        let (mut qa, mut o) = (vec![0u32; QT * d.dk / 2], vec![0f32; QT * d.dk]);
        for h in kh * group..(kh + 1) * group {
            for r in 0..rows {
                let at = ((s.q_start + r0 + r) * d.hq + h) * d.dk;
                bf16_dot::round_pairs_into(&q[at..at + d.dk], &mut qa[r * d.dk / 2..(r + 1) * d.dk / 2]);
            }
            #[cfg(target_arch = "x86_64")]
            {
                // SAFETY: AMX was granted; `qa` holds 16 rows of dk / 2 pairs, the packed keys
                // and values cover ctx_pad ≥ first + rows positions (first + rows ≤ ctx_len).
                unsafe { x86::tile(&qa, &packed[j], d.dk, first, first + rows, scale_log2, &mut o) };
                for r in 0..rows {
                    let at = ((s.q_start + r0 + r) * d.hq + h) * d.dk;
                    // SAFETY: row (q_start + r0 + r, h) of `out` belongs to this task alone.
                    unsafe { std::ptr::copy_nonoverlapping(o.as_ptr().add(r * d.dk), dst.get().add(at), d.dk) };
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

    /// The 16 rows of `qa` (positions `first..first + 16`, the first `end - first` real)
    /// against keys `0..end`, normalised, into `o` (16 × dk f32).
    #[target_feature(enable = "avx512f,avx512bf16")]
    pub(super) unsafe fn tile(
        qa: &[u32],
        pk: &Packed,
        dk: usize,
        first: usize,
        end: usize,
        scale_log2: f32,
        o: &mut [f32],
    ) {
        let (mut m, mut l) = ([f32::NEG_INFINITY; QT], [0f32; QT]);
        let mut s = [0f32; QT * KB];
        let mut p = [0u32; QT * KB / 2];
        o[..QT * dk].iter_mut().for_each(|x| *x = 0.0);
        amx::configure();
        for b in 0..(end - 1) / KB + 1 {
            scores(qa, pk, dk, b, &mut s);
            // Keys of this step past the first row's own position need the causal mask.
            let masked = (b + 1) * KB - 1 > first;
            let mut alpha = [1f32; QT];
            softmax(
                &mut s,
                &mut m,
                &mut l,
                &mut alpha,
                &mut p,
                scale_log2,
                masked.then_some(first as i64 - (b * KB) as i64),
            );
            // A row whose max rose enough shrinks its output first; the step's P·V is then
            // added on the tiles, the output loaded as their accumulators.
            for (r, &a) in alpha.iter().enumerate().filter(|(_, a)| **a != 1.0) {
                let or = &mut o[r * dk..(r + 1) * dk];
                for c in (0..dk).step_by(16) {
                    let x = _mm512_mul_ps(_mm512_loadu_ps(or.as_ptr().add(c)), _mm512_set1_ps(a));
                    _mm512_storeu_ps(or.as_mut_ptr().add(c), x);
                }
            }
            weighted_values(&p, pk, dk, b, o);
        }
        amx::release();
        for r in 0..QT {
            let inv = if l[r] > 0.0 { 1.0 / l[r] } else { 0.0 };
            o[r * dk..(r + 1) * dk].iter_mut().for_each(|x| *x *= inv);
        }
    }

    /// Scores of step `b`: `s[row][key]` (16 × 32 f32) = Σ over dk of q · k.
    unsafe fn scores(qa: &[u32], pk: &Packed, dk: usize, b: usize, s: &mut [f32; QT * KB]) {
        asm!("tilezero tmm0", "tilezero tmm1", options(nostack, nomem));
        let (sa, sb) = (dk / 2 * 4, pk.ctx_pad * 4);
        for c in 0..dk / KB {
            let kb = pk.kt.as_ptr().add(c * 16 * pk.ctx_pad + b * KB);
            asm!(
                "tileloadd tmm4, [{a} + {sa}*1]",
                "tileloadd tmm6, [{b0} + {sb}*1]",
                "tileloadd tmm7, [{b1} + {sb}*1]",
                "tdpbf16ps tmm0, tmm4, tmm6",
                "tdpbf16ps tmm1, tmm4, tmm7",
                a = in(reg) qa.as_ptr().add(c * 16),
                b0 = in(reg) kb,
                b1 = in(reg) kb.add(16),
                sa = in(reg) sa,
                sb = in(reg) sb,
                options(nostack, readonly),
            );
        }
        asm!(
            "tilestored [{c0} + {sc}*1], tmm0",
            "tilestored [{c1} + {sc}*1], tmm1",
            c0 = in(reg) s.as_mut_ptr(),
            c1 = in(reg) s.as_mut_ptr().add(16),
            sc = in(reg) KB * 4,
            options(nostack),
        );
    }

    /// `o` (16 × dk) += the step's weights `p` × its 32 value rows, four 16-column tiles at a
    /// time, `o` loaded as their accumulators.
    unsafe fn weighted_values(p: &[u32; QT * KB / 2], pk: &Packed, dk: usize, b: usize, o: &mut [f32]) {
        let sv = dk * 4;
        let vb = pk.vp.as_ptr().add(b * (KB / 2) * dk);
        for g in (0..dk / 16).step_by(4) {
            let n = (dk / 16 - g).min(4);
            asm!("tileloadd tmm4, [{a} + {sa}*1]", a = in(reg) p.as_ptr(), sa = in(reg) 64usize, options(nostack, readonly));
            for i in 0..n {
                let c = o.as_ptr().add((g + i) * 16);
                on_tile!(i, "tileloadd tmm", ", [{c} + {sc}*1]", c = c, sc = sv);
            }
            for i in 0..n {
                let bt = vb.add((g + i) * 16);
                asm!("tileloadd tmm6, [{b} + {sb}*1]", b = in(reg) bt, sb = in(reg) sv, options(nostack, readonly));
                on_tile!(i, "tdpbf16ps tmm", ", tmm4, tmm6");
            }
            for i in 0..n {
                let c = o.as_mut_ptr().add((g + i) * 16);
                on_tile!(i, "tilestored [{c} + {sc}*1], tmm", "", c = c, sc = sv);
            }
        }
    }

    /// The online softmax of one step's scores (times `scale_log2`, so `2^x` is the weight):
    /// each row's max raised, `alpha` the factor its sum and output shrink by, the step's
    /// weights into `p` as bf16 pairs. `mask`: keys of the step past `first + row` (this
    /// offset from the step's first key) are not seen.
    #[target_feature(enable = "avx512f,avx512bf16")]
    unsafe fn softmax(
        s: &mut [f32; QT * KB],
        m: &mut [f32; QT],
        l: &mut [f32; QT],
        alpha: &mut [f32; QT],
        p: &mut [u32; QT * KB / 2],
        scale_log2: f32,
        mask: Option<i64>,
    ) {
        let k = _mm512_set1_ps(scale_log2);
        let lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        let ninf = _mm512_set1_ps(f32::NEG_INFINITY);
        for r in 0..QT {
            let mut lo = _mm512_mul_ps(_mm512_loadu_ps(s.as_ptr().add(r * KB)), k);
            let mut hi = _mm512_mul_ps(_mm512_loadu_ps(s.as_ptr().add(r * KB + 16)), k);
            if let Some(off) = mask {
                // Key j of the step is seen when j ≤ off + r.
                let last = (off + r as i64).clamp(-1, KB as i64) as i32;
                let l0 = _mm512_cmpgt_epi32_mask(lanes, _mm512_set1_epi32(last));
                let l1 = _mm512_cmpgt_epi32_mask(lanes, _mm512_set1_epi32(last - 16));
                lo = _mm512_mask_blend_ps(l0, lo, ninf);
                hi = _mm512_mask_blend_ps(l1, hi, ninf);
            }
            // The running max moves only when the step's top passes it by `LAZY_MAX` (or at
            // the row's first keys, whose output and sum are still 0): the weights stay below
            // 2^LAZY_MAX, and the output is rescaled in a few steps, not in every one.
            let top = _mm512_reduce_max_ps(_mm512_max_ps(lo, hi));
            if m[r] == f32::NEG_INFINITY || top > m[r] + LAZY_MAX {
                alpha[r] = if m[r] == f32::NEG_INFINITY { 1.0 } else { (m[r] - top).exp2() };
                m[r] = top;
            }
            let t = _mm512_set1_ps(m[r]);
            let (wl, wh) = (exp2(_mm512_sub_ps(lo, t)), exp2(_mm512_sub_ps(hi, t)));
            l[r] = l[r] * alpha[r] + _mm512_reduce_add_ps(_mm512_add_ps(wl, wh));
            let w: __m512i = std::mem::transmute(_mm512_cvtne2ps_pbh(wh, wl));
            _mm512_storeu_si512(p.as_mut_ptr().add(r * KB / 2).cast(), w);
        }
    }
}
