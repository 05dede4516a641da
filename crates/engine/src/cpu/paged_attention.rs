//! The CPU kernel of attention over the paged KV pool: a candle custom op that reads every
//! sequence's K/V in place where the block table says (f32 pools, or bf16 widened in the
//! products), with an online softmax per query row, for decode rows and prefill chunks alike
//! (causal: query `i` of a chunk of `q_len` new tokens in a context of `ctx_len` sees positions
//! `0..=ctx_len - q_len + i`); and the in-place write of new K/V into a CPU pool. The pool
//! layout is `kv_cache.rs`'s; which path a step takes is `attention.rs`'s.

use crate::cpu::simd;
use crate::kv_cache::AttnMeta;
use candle_core::{CpuStorage, CustomOp3, Layout, Result, Shape, Tensor};
use half::slice::HalfFloatSliceExt;
use rayon::prelude::*;

fn cpu_f32<'a>(s: &'a CpuStorage, l: &Layout, what: &str) -> Result<&'a [f32]> {
    let CpuStorage::F32(data) = s else { candle_core::bail!("paged attention: {what} must be f32") };
    match l.contiguous_offsets() {
        Some((a, b)) => Ok(&data[a..b]),
        None => candle_core::bail!("paged attention: {what} must be contiguous"),
    }
}

/// A KV pool element the kernel reads: f32, or bf16 as raw bits (widened in the products by
/// `simd`'s loops).
trait KvElem: simd::Lane + Send + Sync {
    /// Whether the softmax weights use [`exp_poly`] (vectorized) instead of libm's `expf`:
    /// for bf16 pools, whose results need not match anything bit for bit; f32 keeps `expf`.
    const POLY_EXP: bool;
    fn from_f32(x: f32) -> Self;
}

/// `e^x` for `x ≤ 0` (softmax weights) in arithmetic the compiler vectorizes: `x = n ln 2 + r`
/// with `|r| ≤ ln 2 / 2`, a degree-6 Taylor polynomial of `e^r` (relative error < 3e-7 on
/// that interval, about 2 ulp), times `2^n` built in the exponent bits. Below −87 it gives
/// ~1e-38 instead of a denormal or 0.
fn exp_poly(x: f32) -> f32 {
    // Rounding by adding and subtracting 1.5 · 2^23 (nearest, ties to even; |x| < 2^22),
    // not `round()`, which is a libm call on baseline x86-64 and stops vectorization.
    const SHIFT: f32 = 12_582_912.0;
    let x = x.max(-87.0);
    let n = (x * std::f32::consts::LOG2_E + SHIFT) - SHIFT;
    let r = x - n * 0.693_145_75 - n * 1.428_606_8e-6;
    let p = 1.0 + r * (1.0 + r * (0.5 + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0))))));
    p * f32::from_bits(((n as i32 + 127) as u32) << 23)
}

impl KvElem for f32 {
    const POLY_EXP: bool = false;
    fn from_f32(x: f32) -> Self {
        x
    }
}

impl KvElem for u16 {
    const POLY_EXP: bool = true;
    fn from_f32(x: f32) -> Self {
        half::bf16::from_f32(x).to_bits()
    }
}

/// A pool's values, in place.
enum PoolData<'a> {
    F32(&'a [f32]),
    Bf16(&'a [u16]),
}

fn cpu_pool<'a>(s: &'a CpuStorage, l: &Layout, what: &str) -> Result<PoolData<'a>> {
    let Some((a, b)) = l.contiguous_offsets() else { candle_core::bail!("paged attention: {what} must be contiguous") };
    match s {
        CpuStorage::F32(d) => Ok(PoolData::F32(&d[a..b])),
        CpuStorage::BF16(d) => Ok(PoolData::Bf16(d[a..b].reinterpret_cast())),
        _ => candle_core::bail!("paged attention: {what} must be f32 or bf16"),
    }
}

/// A pool's values, to write.
enum PoolMut<'a> {
    F32(&'a mut [f32]),
    Bf16(&'a mut [u16]),
}

fn mut_pool<'a>(s: &'a mut CpuStorage, l: &Layout) -> Result<PoolMut<'a>> {
    let Some((a, b)) = l.contiguous_offsets() else { candle_core::bail!("kv pool must be contiguous") };
    match s {
        CpuStorage::F32(d) => Ok(PoolMut::F32(&mut d[a..b])),
        CpuStorage::BF16(d) => Ok(PoolMut::Bf16(d[a..b].reinterpret_cast_mut())),
        _ => candle_core::bail!("kv pool must be f32 or bf16"),
    }
}

/// Copies `src`'s rows (`row` values each) into the pool slots, converting to the pool's type.
fn write_rows<E: KvElem>(pool: &mut [E], src: &[f32], slots: &[u32], row: usize) -> Result<()> {
    for (i, &slot) in slots.iter().enumerate() {
        let dst = slot as usize * row;
        if dst + row > pool.len() {
            candle_core::bail!("kv slot {slot} is outside the pool");
        }
        for (d, &x) in pool[dst..dst + row].iter_mut().zip(&src[i * row..(i + 1) * row]) {
            *d = E::from_f32(x);
        }
    }
    Ok(())
}

/// Writes the new tokens' K or V (`(tokens, kv_heads, head_dim)`) into their pool slots.
struct WriteSlots<'a> {
    slots: &'a [u32],
}

impl candle_core::InplaceOp2 for WriteSlots<'_> {
    fn name(&self) -> &'static str {
        "kv-write-slots"
    }
    fn cpu_fwd(&self, pool: &mut CpuStorage, pl: &Layout, src: &CpuStorage, sl: &Layout) -> Result<()> {
        let src = cpu_f32(src, sl, "new K/V")?;
        let row = src.len() / self.slots.len().max(1);
        match mut_pool(pool, pl)? {
            PoolMut::F32(pool) => write_rows(pool, src, self.slots, row),
            PoolMut::Bf16(pool) => write_rows(pool, src, self.slots, row),
        }
    }
}

/// Writes `k` and `v` (`(tokens, kv_heads, head_dim)`, f32, contiguous) into the slots of a
/// CPU pool of f32 or bf16, converting.
pub(crate) fn write_slots(k_pool: &Tensor, v_pool: &Tensor, k: &Tensor, v: &Tensor, slots: &[u32]) -> Result<()> {
    k_pool.inplace_op2(k, &WriteSlots { slots })?;
    v_pool.inplace_op2(v, &WriteSlots { slots })
}

struct PagedAttention<'a> {
    meta: &'a AttnMeta,
    scale: f32,
}

impl CustomOp3 for PagedAttention<'_> {
    fn name(&self) -> &'static str {
        "paged-attention"
    }

    fn cpu_fwd(
        &self,
        qs: &CpuStorage,
        ql: &Layout,
        ks: &CpuStorage,
        kl: &Layout,
        vs: &CpuStorage,
        vl: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (t, hq, d) = ql.shape().dims3()?;
        let (_, hkv, dk) = kl.shape().dims3()?;
        if dk != d || hkv == 0 || hq % hkv != 0 {
            candle_core::bail!("paged attention: q {:?} and kv pool {:?} do not match", ql.shape(), kl.shape());
        }
        let q = cpu_f32(qs, ql, "q")?;
        let meta = self.meta;
        // Row → sequence, for the parallel loop over (token, query head).
        let mut tok_seq = vec![0u32; t];
        for (si, s) in meta.seqs.iter().enumerate() {
            if s.q_start + s.q_len > t || s.q_len > s.ctx_len || s.bt_len < s.ctx_len.div_ceil(meta.block_size) {
                candle_core::bail!("paged attention: sequence {si} does not fit the query tensor");
            }
            tok_seq[s.q_start..s.q_start + s.q_len].fill(si as u32);
        }
        let max_slot =
            meta.block_tables.iter().copied().max().unwrap_or(0) as usize * meta.block_size + meta.block_size;
        let dims = Dims { t, hq, hkv, d };
        let out = match (cpu_pool(ks, kl, "k pool")?, cpu_pool(vs, vl, "v pool")?) {
            (PoolData::F32(k), PoolData::F32(v)) => self.attend(q, k, v, dims, &tok_seq, max_slot)?,
            (PoolData::Bf16(k), PoolData::Bf16(v)) => self.attend(q, k, v, dims, &tok_seq, max_slot)?,
            _ => candle_core::bail!("paged attention: the k and v pools differ in dtype"),
        };
        Ok((CpuStorage::F32(out), Shape::from((t, hq, d))))
    }
}

/// Query rows, query heads, KV heads and head dim of one attention call.
#[derive(Clone, Copy)]
struct Dims {
    t: usize,
    hq: usize,
    hkv: usize,
    d: usize,
}

impl PagedAttention<'_> {
    /// The kernel over pools of element `E`: one parallel item per (query row, query head),
    /// an online softmax over its KV head's blocks.
    fn attend<E: KvElem>(
        &self,
        q: &[f32],
        k: &[E],
        v: &[E],
        dims: Dims,
        tok_seq: &[u32],
        max_slot: usize,
    ) -> Result<Vec<f32>> {
        let Dims { t, hq, hkv, d } = dims;
        if max_slot * hkv * d > k.len() || k.len() != v.len() {
            candle_core::bail!("paged attention: a block table points outside the kv pool");
        }
        let meta = self.meta;
        let group = hq / hkv;
        let mut out = vec![0f32; t * hq * d];
        let scale = self.scale;
        // One item per (query row, query head): at decode, items are few (a batch of one has
        // `heads` of them), so they are as small as they can be for the threads to share.
        out.par_chunks_mut(d).enumerate().for_each(|(item, acc)| {
            let (row, h) = (item / hq, item % hq);
            let kh = h / group;
            let s = &meta.seqs[tok_seq[row] as usize];
            let i = row - s.q_start;
            let visible = s.ctx_len - s.q_len + i + 1;
            let mut scores = vec![0f32; meta.block_size];
            let qrow = &q[(row * hq + h) * d..(row * hq + h + 1) * d];
            let (mut m, mut l) = (f32::NEG_INFINITY, 0f32);
            let mut p0 = 0;
            while p0 < visible {
                let n = meta.block_size.min(visible - p0);
                let base = meta.slot(s, p0);
                let mut bmax = f32::NEG_INFINITY;
                for (j, slot) in scores[..n].iter_mut().enumerate() {
                    let off = ((base + j) * hkv + kh) * d;
                    let sc = simd::dot(qrow, &k[off..off + d]) * scale;
                    *slot = sc;
                    bmax = bmax.max(sc);
                }
                if bmax > m {
                    let c = (m - bmax).exp();
                    l *= c;
                    acc.iter_mut().for_each(|a| *a *= c);
                    m = bmax;
                }
                if E::POLY_EXP {
                    scores[..n].iter_mut().for_each(|sc| *sc = exp_poly(*sc - m));
                } else {
                    scores[..n].iter_mut().for_each(|sc| *sc = (*sc - m).exp());
                }
                for (j, &w) in scores[..n].iter().enumerate() {
                    l += w;
                    let off = ((base + j) * hkv + kh) * d;
                    simd::axpy(w, &v[off..off + d], acc);
                }
                p0 += n;
            }
            let inv = 1.0 / l;
            acc.iter_mut().for_each(|a| *a *= inv);
        });
        Ok(out)
    }
}

/// The kernel alone, for every sequence whatever its length (CPU, f32).
pub fn paged_attention_kernel(
    q: &Tensor,
    k_pool: &Tensor,
    v_pool: &Tensor,
    meta: &AttnMeta,
    scale: f32,
) -> Result<Tensor> {
    q.contiguous()?.apply_op3_no_bwd(k_pool, v_pool, &PagedAttention { meta, scale })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::{gather_attention, paged_attention, write_kv};

    #[test]
    fn the_polynomial_exp_is_within_a_few_ulp_of_expf() {
        let mut worst = 0f64;
        for i in 0..=20_000 {
            let x = -30.0 * i as f32 / 20_000.0;
            let (got, want) = (exp_poly(x) as f64, (x as f64).exp());
            worst = worst.max((got - want).abs() / want);
        }
        assert!(worst < 5e-7, "relative error {worst}");
        assert_eq!(exp_poly(0.0), 1.0);
        assert!(exp_poly(f32::NEG_INFINITY) < 1e-37);
    }
    use candle_core::{DType, Device};

    fn rand(shape: (usize, usize, usize), seed: u64) -> Tensor {
        let n = shape.0 * shape.1 * shape.2;
        let mut x = seed.wrapping_mul(0x9E3779B97F4A7C15) | 1;
        let v: Vec<f32> = (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x % 2001) as f32 / 1000.0 - 1.0
            })
            .collect();
        Tensor::from_vec(v, shape, &Device::Cpu).unwrap()
    }

    #[test]
    fn kernel_matches_gather_for_decode_and_chunks_with_gqa() {
        let (bs, nb, hkv, hq, d) = (4, 48, 2, 6, 16);
        let k_pool = Tensor::zeros((nb * bs, hkv, d), DType::F32, &Device::Cpu).unwrap();
        let v_pool = Tensor::zeros((nb * bs, hkv, d), DType::F32, &Device::Cpu).unwrap();
        let long: usize = 67;
        let long_blocks: Vec<u32> = (20..20 + long.div_ceil(bs) as u32).collect();
        // (new tokens, context, block table): a decode, a short chunk, a fresh prefill, a long
        // chunk, and another decode.
        let seqs: Vec<(usize, usize, Vec<u32>)> = vec![
            (1, 10, vec![3, 7, 1]),
            (5, 11, vec![2, 9, 11]),
            (7, 7, vec![19, 4]),
            (long - 5, long, long_blocks),
            (1, 3, vec![5]),
        ];
        let mut meta = AttnMeta::new(bs);
        let mut fill = AttnMeta::new(bs);
        for (q, c, bt) in &seqs {
            meta.push(*q, *c, bt);
            fill.push(*c, *c, bt);
        }
        let n = fill.num_tokens();
        write_kv(&k_pool, &v_pool, &rand((n, hkv, d), 1), &rand((n, hkv, d), 2), &fill).unwrap();
        let q = rand((meta.num_tokens(), hq, d), 3);
        let a = paged_attention(&q, &k_pool, &v_pool, &meta, 0.25).unwrap();
        let b = gather_attention(&q, &k_pool, &v_pool, &meta, 0.25).unwrap();
        assert_eq!(a.dims(), &[meta.num_tokens(), hq, d]);
        let diff = (a - b).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
        assert!(diff < 1e-5, "max abs diff {diff}");
    }

    /// bf16 pools: the kernel reads them in place and agrees with the gather path over the same
    /// pools (both see the same rounded K/V), and stays close to attention over f32 pools.
    #[test]
    fn bf16_pools_match_gather_and_stay_close_to_f32() {
        let (bs, nb, hkv, hq, d) = (4, 24, 2, 4, 16);
        let mut meta = AttnMeta::new(bs);
        let mut fill = AttnMeta::new(bs);
        for (q, c, bt) in [(1usize, 10usize, vec![3u32, 7, 1]), (6, 13, vec![2, 9, 11, 12]), (1, 2, vec![5])] {
            meta.push(q, c, &bt);
            fill.push(c, c, &bt);
        }
        let n = fill.num_tokens();
        let (k, v) = (rand((n, hkv, d), 4), rand((n, hkv, d), 5));
        let pools = |dt: DType| {
            let kp = Tensor::zeros((nb * bs, hkv, d), dt, &Device::Cpu).unwrap();
            let vp = kp.zeros_like().unwrap();
            write_kv(&kp, &vp, &k, &v, &fill).unwrap();
            (kp, vp)
        };
        let (kb, vb) = pools(DType::BF16);
        let (kf, vf) = pools(DType::F32);
        let q = rand((meta.num_tokens(), hq, d), 6);
        let max_diff =
            |a: Tensor, b: Tensor| (a - b).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
        let paged = paged_attention(&q, &kb, &vb, &meta, 0.25).unwrap();
        assert_eq!(paged.dtype(), DType::F32);
        let gathered = gather_attention(&q, &kb, &vb, &meta, 0.25).unwrap();
        assert!(max_diff(paged.clone(), gathered) < 1e-5);
        let f32_out = paged_attention(&q, &kf, &vf, &meta, 0.25).unwrap();
        let d = max_diff(paged, f32_out);
        assert!(d > 0.0 && d < 2e-2, "bf16 rounding moves the output a little: {d}");
    }

    #[test]
    fn a_block_table_outside_the_pool_is_an_error() {
        let k_pool = Tensor::zeros((8, 1, 8), DType::F32, &Device::Cpu).unwrap();
        let mut meta = AttnMeta::new(4);
        meta.push(1, 1, &[5]);
        let q = rand((1, 1, 8), 1);
        assert!(paged_attention(&q, &k_pool, &k_pool, &meta, 1.0).is_err());
    }
}
