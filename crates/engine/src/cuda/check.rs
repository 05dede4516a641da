//! On-device checks of goodput's CUDA kernels against candle's reference ops on the same GPU,
//! for what the end-to-end greedy comparison does not reach: paged attention over contexts
//! long enough to split into partitions (at the default split, at 512 positions and unsplit),
//! mixed with short and long prefill chunks (the long ones in the tensor-core prefill kernel
//! and through cuBLAS), in f32, bf16 and f16 and at 1, 3 and 4 query heads per KV head; the
//! small-batch matmul on e4m3 weights; each small-batch matmul kernel;
//! and the sampler's cuts and distribution. Run by `goodput engine-check`.

use crate::attention::{gather_attention, write_kv};
use crate::cuda::gemv::{gemv_with, GEMV_MAX_ROWS};
use crate::cuda::gemv_table::GemvKernel;
use crate::cuda::kernels::{self, Heads};
use crate::cuda::layout::{Split, MAX_PART_LEN};
use crate::cuda::meta::StepDevice;
use crate::cuda::report::KernelCheck;
use crate::cuda::values::values;
use crate::kv_cache::AttnMeta;
use crate::sampler::argmax;
use candle_core::{DType, Device, Result, Tensor};

fn check(name: impl Into<String>, diff: f64, tolerance: f64) -> KernelCheck {
    KernelCheck { name: name.into(), max_abs_diff: diff, tolerance, passed: diff.is_finite() && diff <= tolerance }
}

fn rand(shape: (usize, usize, usize), seed: u64, dtype: DType, dev: &Device) -> Result<Tensor> {
    Tensor::from_vec(values(shape.0 * shape.1 * shape.2, seed), shape, dev)?.to_dtype(dtype)
}

fn max_diff(a: &Tensor, b: &Tensor) -> Result<f64> {
    let d = (a.to_dtype(DType::F32)? - b.to_dtype(DType::F32)?)?.abs()?;
    Ok(d.flatten_all()?.max(0)?.to_scalar::<f32>()? as f64)
}

/// One attention check: operands, head shape, context split and where long chunks go.
#[derive(Clone, Copy)]
struct Case {
    dtype: DType,
    d: usize,
    hq: usize,
    hkv: usize,
    tolerance: f64,
    /// Partitions of this length (default: the split `layout::part_len` picks).
    part_len: Option<usize>,
    /// Long chunks in the tensor-core prefill kernel (else through cuBLAS).
    flash: bool,
}

/// Paged attention (kernel path) against the gather reference, both on `dev`, for a step of a
/// long decode, a short decode, a short chunk, two long chunks (the prefill kernel or the
/// cuBLAS path; 300 rows in 700 positions span several blocks of rows and tiles of positions,
/// with tails) and a decode of 512 positions.
fn attention(dev: &Device, c: Case) -> Result<KernelCheck> {
    let Case { dtype, d, hq, hkv, .. } = c;
    let bs = 16;
    let seqs: [(usize, usize); 6] = [(1, 1300), (1, 10), (5, 21), (70, 90), (1, 512), (300, 700)];
    let mut next = 1u32;
    let mut tables = Vec::new();
    for &(_, ctx) in &seqs {
        let n = ctx.div_ceil(bs) as u32;
        // Blocks in reverse order: the table, not the layout, decides where K/V are.
        tables.push((next..next + n).rev().collect::<Vec<u32>>());
        next += n;
    }
    let pool = (next as usize * bs, hkv, d);
    let k_pool = Tensor::zeros(pool, dtype, dev)?;
    let v_pool = Tensor::zeros(pool, dtype, dev)?;
    let (mut meta, mut fill) = (AttnMeta::new(bs), AttnMeta::new(bs));
    for (&(q, ctx), bt) in seqs.iter().zip(&tables) {
        meta.push(q, ctx, bt);
        fill.push(ctx, ctx, bt);
    }
    let n = fill.num_tokens();
    write_kv(&k_pool, &v_pool, &rand((n, hkv, d), 1, dtype, dev)?, &rand((n, hkv, d), 2, dtype, dev)?, &fill)?;
    let t = meta.num_tokens();
    let q = rand((t, hq, d), 3, dtype, dev)?;
    let scale = 1.0 / (d as f32).sqrt();
    let positions = vec![0u32; t];
    let flash_group = c.flash.then_some(hq / hkv);
    let step = StepDevice::upload(&positions, &meta, Split { hkv, force_part_len: c.part_len, flash_group }, dev)?;
    let got = kernels::attention(&q, &k_pool, &v_pool, &step, Heads { hq, hkv, d }, scale)?;
    let want = gather_attention(&q, &k_pool, &v_pool, &meta, &crate::attention::AttnOpts::scaled(scale))?;
    Ok(check(
        format!(
            "attention d{d} {dtype:?} {hq}/{hkv} heads (decode 1300/10/512, chunks 5, 70 and 300 {}), partitions of {}",
            if c.flash { "on tensor cores" } else { "via cuBLAS" },
            c.part_len.map_or("the default length".into(), |l| format!("{l} positions"))
        ),
        max_diff(&got, &want)?,
        c.tolerance,
    ))
}

/// The sampler: top-k 1 and temperature 0 give the argmax; over a grid of uniform draws, the
/// share of each token matches its probability after the top-k and top-p cuts.
fn sampling(dev: &Device) -> Result<Vec<KernelCheck>> {
    let vocab = 20_000;
    let mut logits = values(vocab, 7).iter().map(|x| x * 4.0).collect::<Vec<f32>>();
    let (a, b, c) = (vocab - 3, 123, 15_000);
    logits[a] = 20.0;
    logits[b] = 19.5;
    logits[c] = 19.0;
    let row = Tensor::from_vec(logits.clone(), (1, vocab), dev)?;
    let argmax = argmax(&logits);
    let mut out = Vec::new();
    let greedy = kernels::sample(&row, &[[0.0, 0.0, 1.0, 0.5]])?[0];
    out.push(check("sample: temperature 0 = argmax", (greedy != argmax) as u32 as f64, 0.0));
    // top-k 3 at temperature 1: only a, b, c, in proportion e^20 : e^19.5 : e^19.
    let draws = 1000;
    let rows = Tensor::from_vec(logits.repeat(draws), (draws, vocab), dev)?;
    let params: Vec<[f32; 4]> = (0..draws).map(|i| [1.0, 3.0, 1.0, (i as f32 + 0.5) / draws as f32]).collect();
    let ids = kernels::sample(&rows, &params)?;
    let w = [20.0f64.exp(), 19.5f64.exp(), 19.0f64.exp()];
    let total: f64 = w.iter().sum();
    let mut worst = 0.0f64;
    for (tok, wt) in [a, b, c].iter().zip(w) {
        let share = ids.iter().filter(|&&x| x as usize == *tok).count() as f64 / draws as f64;
        worst = worst.max((share - wt / total).abs());
    }
    let outside = ids.iter().filter(|&&x| ![a, b, c].contains(&(x as usize))).count() as f64;
    out.push(check("sample: top-k 3, token shares vs probabilities", worst.max(outside), 0.01));
    // top-p 0.4: a alone holds e^20 / (e^20 + e^19.5 + e^19 + the rest) ≈ 0.51, so only a.
    let params: Vec<[f32; 4]> = (0..draws).map(|i| [1.0, 0.0, 0.4, (i as f32 + 0.5) / draws as f32]).collect();
    let ids = kernels::sample(&rows, &params)?;
    let not_a = ids.iter().filter(|&&x| x as usize != a).count() as f64;
    out.push(check("sample: top-p 0.4 keeps the top token alone", not_a, 0.0));
    Ok(out)
}

/// Each small-batch matmul kernel against candle's (cuBLAS) for 1 to 4 rows, bf16: an 8B
/// model's down projection width (512 of its rows), a width and a row count that leave tails
/// (4104 = 513 × 8, 1001 rows), and SmolLM2's 576. With an f32 output (the LM head's), each
/// kernel and cuBLAS's `GemmEx` against the product of the operands widened to f32, to a
/// tolerance a bf16 output fails (its rounding alone is up to 2⁻⁹ of |y|).
fn gemv(dev: &Device) -> Result<Vec<KernelCheck>> {
    use GemvKernel::{Cublas, GemvT, S2, U4, U8};
    let mut out = Vec::new();
    for (kernel, dtype) in [(GemvT, DType::BF16), (U4, DType::BF16), (U8, DType::BF16), (S2, DType::BF16)]
        .into_iter()
        .chain([GemvT, U4, U8, S2, Cublas].map(|k| (k, DType::F32)))
    {
        let mut worst = 0f64;
        for (i, (n, k)) in [(512, 14_336), (1001, 4104), (576, 576)].into_iter().enumerate() {
            let w = Tensor::from_vec(values(n * k, 11 + i as u64), (n, k), dev)?.to_dtype(DType::BF16)?;
            for m in 1..=GEMV_MAX_ROWS {
                let x = Tensor::from_vec(values(m * k, 12 + m as u64), (m, k), dev)?.to_dtype(DType::BF16)?;
                let got = gemv_with(&x, &w, kernel, dtype)?;
                let want = match dtype {
                    DType::F32 => x.to_dtype(DType::F32)?.matmul(&w.to_dtype(DType::F32)?.t()?)?,
                    _ => x.matmul(&w.t()?)?,
                };
                // Relative to the output's scale (sums of k products of values in [-1, 1]).
                let scale = want.to_dtype(DType::F32)?.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()? as f64;
                worst = worst.max(max_diff(&got, &want)? / scale.max(1e-9));
            }
        }
        let (what, tolerance) = match dtype {
            DType::F32 => ("f32 output", 2e-4),
            _ => ("bf16", 1e-2),
        };
        out.push(check(
            format!("{} 1–4 rows × (14336 → 512, 4104 → 1001, 576 → 576), {what} (max |Δ| / max |y|)", kernel.name()),
            worst,
            tolerance,
        ));
    }
    Ok(out)
}

/// `gemv_fp8` at 1 to 4 rows against cuBLAS on the dequantized weights (the same values in
/// bf16), relative to the output's scale: a wide matrix, one whose width leaves a tail (4112
/// = 257 × 16) and SmolLM2's 576.
fn fp8_matmul(dev: &Device) -> Result<KernelCheck> {
    let mut worst = 0f64;
    for (i, (n, k)) in [(512, 14_336), (1001, 4112), (576, 576)].into_iter().enumerate() {
        let w = Tensor::from_vec(values(n * k, 21 + i as u64), (n, k), dev)?.to_dtype(DType::BF16)?;
        let (f, deq) = crate::fp8::quantize(&w).map_err(|e| candle_core::Error::Msg(e.to_string()))?;
        for m in 1..=GEMV_MAX_ROWS {
            let x = Tensor::from_vec(values(m * k, 22 + m as u64), (m, k), dev)?.to_dtype(DType::BF16)?;
            let Some(got) = crate::cuda::gemv::gemv_fp8(&x, &f)? else {
                candle_core::bail!("gemv_fp8 refused {m} × {k} rows against {n} × {k}");
            };
            let want = x.matmul(&deq.t()?)?;
            let scale = want.to_dtype(DType::F32)?.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()? as f64;
            worst = worst.max(max_diff(&got, &want)? / scale.max(1e-9));
        }
    }
    Ok(check(
        "gemv_fp8 1–4 rows × (14336 → 512, 4112 → 1001, 576 → 576), e4m3 weights vs cuBLAS on their bf16 values (max |Δ| / max |y|)",
        worst,
        1e-2,
    ))
}

/// SwiGLU in the small-batch gate|up matmul's epilogue (`gemv_u4`, `gemv_u8`, and on e4m3
/// weights `gemv_fp8`) against the same product followed by `silu_mul`, 1 to 4 rows of
/// 2 × 1001 gate|up rows of width 4112: the same sums rounded at the same points, so equal up to
/// the order of the warp's sum (max |Δ| / max |y|).
fn swiglu(dev: &Device) -> Result<KernelCheck> {
    use crate::cuda::gemv::{gemv_fp8, gemv_swiglu_with};
    let (n, k) = (2 * 1001, 4112);
    let w = Tensor::from_vec(values(n * k, 31), (n, k), dev)?.to_dtype(DType::BF16)?;
    let (f, _) = crate::fp8::quantize(&w).map_err(|e| candle_core::Error::Msg(e.to_string()))?;
    let mut worst = 0f64;
    for m in 1..=GEMV_MAX_ROWS {
        let x = Tensor::from_vec(values(m * k, 32 + m as u64), (m, k), dev)?.to_dtype(DType::BF16)?;
        for (u, fp8) in [(4, None), (8, None), (4, Some(&f))] {
            let Some(got) = gemv_swiglu_with(&x, &w, fp8, u)? else {
                candle_core::bail!("gemv_swiglu refused {m} rows");
            };
            let gu = match fp8 {
                Some(f) => gemv_fp8(&x, f)?.ok_or_else(|| candle_core::Error::Msg("gemv_fp8 refused".into()))?,
                None => gemv_with(&x, &w, GemvKernel::U4, DType::BF16)?,
            };
            let want = kernels::silu_mul(&gu)?;
            let scale = want.to_dtype(DType::F32)?.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()? as f64;
            worst = worst.max(max_diff(&got, &want)? / scale.max(1e-9));
        }
    }
    Ok(check(
        "SwiGLU in the gate|up epilogue (gemv_u4, gemv_u8, gemv_fp8) 1–4 rows × (4112 → 2 × 1001) vs matmul + silu_mul",
        worst,
        1e-2,
    ))
}

/// Every kernel check on `dev`; none on devices without goodput's kernels.
pub fn check_kernels(dev: &Device) -> Result<Vec<KernelCheck>> {
    if !dev.is_cuda() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for d in [64, 128] {
        let f32 = Case { dtype: DType::F32, d, hq: 8, hkv: 2, tolerance: 1e-4, part_len: None, flash: false };
        let bf16 = Case { dtype: DType::BF16, tolerance: 3e-2, ..f32 };
        // The default split, the old fixed 512 and one partition for every context.
        for part_len in [None, Some(MAX_PART_LEN), Some(1 << 20)] {
            out.push(attention(dev, Case { part_len, ..f32 })?);
            out.push(attention(dev, Case { part_len, ..bf16 })?);
            out.push(attention(dev, Case { part_len, flash: true, ..bf16 })?);
        }
        // Three query heads per KV head (rows of a token across two blocks), one, and f16.
        out.push(attention(dev, Case { hq: 6, flash: true, ..bf16 })?);
        out.push(attention(dev, Case { hq: 2, flash: true, ..bf16 })?);
        out.push(attention(dev, Case { dtype: DType::F16, tolerance: 1e-2, flash: true, ..bf16 })?);
    }
    out.extend(gemv(dev)?);
    out.push(fp8_matmul(dev)?);
    out.push(swiglu(dev)?);
    out.extend(sampling(dev)?);
    Ok(out)
}
