//! The tensor-core prefill kernel's algorithm (`kernels/flash.cuh`) run on the host, block by
//! block and tile by tile as the GPU runs it, reading the step's metadata buffer at the same
//! offsets: the planned items, each row's token and query head, the causal bound of a block's
//! walk, the masked tiles, the online softmax with its rescaling and the probabilities rounded
//! to the operands' dtype before P·V. What it cannot check is the kernel's own arithmetic
//! (fragment layouts, shuffles): `goodput engine-check` compares the kernel itself with the
//! reference on the GPU. Host code for tests, compiled with them in every build (no CUDA).

use crate::cuda::layout::{HostStep, FLASH_ROWS, SKIP_ROW};

/// Positions per tile of the kernel's walk (`FLASH_COLS` in `kernels/flash.cuh`).
pub(crate) const FLASH_COLS: usize = 64;

/// A step's queries `(tokens, hq, d)` and pools `(slots, hkv, d)`, widened to f32.
pub(crate) struct Operands<'a> {
    pub q: &'a [f32],
    pub k_pool: &'a [f32],
    pub v_pool: &'a [f32],
    pub hq: usize,
    pub hkv: usize,
    pub d: usize,
    pub block_size: usize,
    pub scale: f32,
}

/// One row's running state: max (log2 units), sum of probabilities, unnormalised output.
struct RowState {
    m: f32,
    l: f32,
    o: Vec<f32>,
}

/// Every planned block of `step` for every KV head, written into `out` `(tokens, hq, d)`;
/// `round` is the operands' rounding of a probability (identity for f32).
pub(crate) fn run(step: &HostStep, x: &Operands<'_>, round: fn(f32) -> f32, out: &mut [f32]) {
    let off = step.offsets();
    for b in 0..step.flash_items {
        let item = &step.buf[off.flash_items + 2 * b..off.flash_items + 2 * b + 2];
        if item[0] == SKIP_ROW {
            continue;
        }
        let info = &step.buf[off.seq_info + 4 * item[0] as usize..][..4];
        let bt = &step.buf[off.block_tables + info[3] as usize..];
        for kh in 0..x.hkv {
            block(x, info, bt, item[1] as usize, kh, round, out);
        }
    }
}

/// One block: rows `row0..row0 + 64` of one sequence's chunk for KV head `kh`.
fn block(x: &Operands<'_>, info: &[u32], bt: &[u32], row0: usize, kh: usize, round: fn(f32) -> f32, out: &mut [f32]) {
    let (q_start, q_len, ctx_len) = (info[0] as usize, info[1] as usize, info[2] as usize);
    let group = x.hq / x.hkv;
    let (rows, past) = (q_len * group, ctx_len - q_len);
    let last_row = rows.min(row0 + FLASH_ROWS) - 1;
    let end = ctx_len.min(past + last_row / group + 1);
    let sl2 = x.scale * std::f32::consts::LOG2_E;
    let row_range = row0..rows.min(row0 + FLASH_ROWS);
    let mut state: Vec<RowState> =
        row_range.clone().map(|_| RowState { m: f32::NEG_INFINITY, l: 0.0, o: vec![0.0; x.d] }).collect();
    let at = |p: usize| {
        let slot = bt[p / x.block_size] as usize * x.block_size + p % x.block_size;
        (slot * x.hkv + kh) * x.d
    };
    for p0 in (0..end).step_by(FLASH_COLS) {
        let tile = p0..(p0 + FLASH_COLS).min(end);
        for (r, st) in row_range.clone().zip(&mut state) {
            let (tok, head) = (r / group, kh * group + r % group);
            let vis = past + tok + 1;
            let qr = &x.q[((q_start + tok) * x.hq + head) * x.d..][..x.d];
            let s: Vec<f32> = tile
                .clone()
                .map(|p| match p < vis {
                    true => qr.iter().zip(&x.k_pool[at(p)..][..x.d]).map(|(a, b)| a * b).sum::<f32>() * sl2,
                    false => f32::NEG_INFINITY,
                })
                .collect();
            let mn = s.iter().fold(st.m, |a, &b| a.max(b));
            let base = if mn == f32::NEG_INFINITY { 0.0 } else { mn };
            let corr = (st.m - base).exp2();
            st.m = mn;
            st.l *= corr;
            st.o.iter_mut().for_each(|o| *o *= corr);
            for (p, sv) in tile.clone().zip(s) {
                let pr = round((sv - base).exp2());
                st.l += pr;
                let v = &x.v_pool[at(p)..][..x.d];
                st.o.iter_mut().zip(v).for_each(|(o, v)| *o += pr * v);
            }
        }
    }
    for (r, st) in row_range.zip(state) {
        let (tok, head) = (r / group, kh * group + r % group);
        let inv = if st.l > 0.0 { 1.0 / st.l } else { 0.0 };
        let dst = &mut out[((q_start + tok) * x.hq + head) * x.d..][..x.d];
        dst.iter_mut().zip(&st.o).for_each(|(d, o)| *d = o * inv);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::layout::{host, Split};
    use crate::cuda::values::values;
    use crate::kv_cache::AttnMeta;

    fn bf16(x: f32) -> f32 {
        half::bf16::from_f32(x).to_f32()
    }

    /// Softmax attention of one row in f64, straight from the definition.
    fn reference(x: &Operands<'_>, meta: &AttnMeta, seq: usize, tok: usize, head: usize) -> Vec<f64> {
        let s = &meta.seqs[seq];
        let kh = head / (x.hq / x.hkv);
        let qr = &x.q[((s.q_start + tok) * x.hq + head) * x.d..][..x.d];
        let vis = s.ctx_len - s.q_len + tok + 1;
        let row = |p: usize| (meta.slot(s, p) * x.hkv + kh) * x.d;
        let scores: Vec<f64> = (0..vis)
            .map(|p| {
                let k = &x.k_pool[row(p)..][..x.d];
                qr.iter().zip(k).map(|(a, b)| *a as f64 * *b as f64).sum::<f64>() * x.scale as f64
            })
            .collect();
        let m = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let w: Vec<f64> = scores.iter().map(|s| (s - m).exp()).collect();
        let sum: f64 = w.iter().sum();
        let mut o = vec![0.0; x.d];
        for (p, wp) in w.iter().enumerate() {
            let v = &x.v_pool[row(p)..][..x.d];
            o.iter_mut().zip(v).for_each(|(o, v)| *o += wp / sum * *v as f64);
        }
        o
    }

    /// A decode row, a 100-token chunk at 150 positions and a 40-token first chunk, 3 query
    /// heads per KV head (a token's rows straddle blocks), blocks in reverse order.
    #[test]
    fn the_planned_blocks_compute_every_long_row_once_and_match_softmax_attention() {
        let (bs, hq, hkv, d) = (16, 6, 2, 64);
        let mut meta = AttnMeta::new(bs);
        let mut next = 0u32;
        for (q, ctx) in [(1usize, 30usize), (100, 150), (40, 40)] {
            let n = ctx.div_ceil(bs) as u32;
            meta.push(q, ctx, &(next..next + n).rev().collect::<Vec<_>>());
            next += n;
        }
        let t = meta.num_tokens();
        let positions = vec![0; t];
        let step =
            host(&positions, &meta, Split { hkv, force_part_len: None, flash_group: Some(hq / hkv) }, None).unwrap();
        // 300 rows → 5 blocks, 120 rows → 2.
        assert_eq!(step.flash_items, 7);
        let slots = next as usize * bs;
        let (q, k, v) = (values(t * hq * d, 1), values(slots * hkv * d, 2), values(slots * hkv * d, 3));
        let x = Operands { q: &q, k_pool: &k, v_pool: &v, hq, hkv, d, block_size: bs, scale: 0.5 };
        for (round, tolerance) in [(std::convert::identity as fn(f32) -> f32, 1e-5), (bf16, 1e-2)] {
            let mut out = vec![f32::NAN; t * hq * d];
            run(&step, &x, round, &mut out);
            // The decode row is the paged kernel's: untouched.
            assert!(out[..hq * d].iter().all(|o| o.is_nan()));
            let mut worst = 0f64;
            for (seq, s) in meta.seqs.iter().enumerate().skip(1) {
                for tok in 0..s.q_len {
                    for head in 0..hq {
                        let got = &out[((s.q_start + tok) * hq + head) * d..][..d];
                        for (g, w) in got.iter().zip(reference(&x, &meta, seq, tok, head)) {
                            worst = worst.max((*g as f64 - w).abs());
                        }
                    }
                }
            }
            assert!(worst <= tolerance, "max |Δ| {worst} > {tolerance}");
        }
    }
}
