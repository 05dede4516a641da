//! RoPE tables: the inverse frequencies of the rotated dims (all of a head, or MLA's RoPE
//! part), with Llama 3's or YaRN's frequency scaling, and YaRN's attention factor on cos and
//! sin, as transformers' `_compute_llama3_parameters` and `_compute_yarn_parameters` give them.

use crate::error::Result;
use candle_core::{DType, Device, Tensor};
use goodput_core::{ModelSpec, RopeScaling};
use std::f64::consts::PI;

/// Inverse frequencies of the `spec.rope_dim() / 2` rotated pairs.
pub fn inv_freq(spec: &ModelSpec) -> Vec<f64> {
    let d = spec.rope_dim();
    let base: Vec<f64> = (0..d / 2).map(|i| 1.0 / spec.rope_theta.powf(2.0 * i as f64 / d as f64)).collect();
    match &spec.rope_scaling {
        Some(s) if s.rope_type == "llama3" => llama3(base, s),
        Some(s) if s.rope_type == "yarn" => yarn(base, s, d, spec.rope_theta),
        _ => base,
    }
}

fn llama3(mut f: Vec<f64>, s: &RopeScaling) -> Vec<f64> {
    let (lo, hi) = (s.low_freq_factor.unwrap_or(1.0), s.high_freq_factor.unwrap_or(4.0));
    let orig = s.original_max_position_embeddings as f64;
    let (low_wavelen, high_wavelen) = (orig / lo, orig / hi);
    for x in &mut f {
        let wavelen = 2.0 * PI / *x;
        if wavelen > low_wavelen {
            *x /= s.factor;
        } else if wavelen >= high_wavelen {
            let smooth = (orig / wavelen - lo) / (hi - lo);
            *x = (1.0 - smooth) * *x / s.factor + smooth * *x;
        }
    }
    f
}

/// YaRN: interpolated (÷ factor) frequencies below the correction range, the original ones
/// above it, a linear ramp between.
fn yarn(extra: Vec<f64>, s: &RopeScaling, d: usize, theta: f64) -> Vec<f64> {
    let orig = s.original_max_position_embeddings as f64;
    let correction = |rotations: f64| (d as f64 * (orig / (rotations * 2.0 * PI)).ln()) / (2.0 * theta.ln());
    let (mut low, mut high) = (correction(s.beta_fast.unwrap_or(32.0)), correction(s.beta_slow.unwrap_or(1.0)));
    if s.truncate.unwrap_or(true) {
        (low, high) = (low.floor(), high.ceil());
    }
    let (low, mut high) = (low.max(0.0), high.min(d as f64 - 1.0));
    if low == high {
        high += 0.001;
    }
    extra
        .iter()
        .enumerate()
        .map(|(i, &e)| {
            let ramp = ((i as f64 - low) / (high - low)).clamp(0.0, 1.0);
            (e / s.factor) * ramp + e * (1.0 - ramp)
        })
        .collect()
}

/// The factor on cos and sin (YaRN's attention factor; 1 otherwise).
pub fn attention_factor(spec: &ModelSpec) -> f64 {
    spec.rope_scaling.as_ref().map_or(1.0, RopeScaling::attention_factor)
}

/// cos and sin `(max_len, rope_dim / 2)` in `dtype`, scaled by the attention factor.
pub fn tables(spec: &ModelSpec, max_len: usize, device: &Device, dtype: DType) -> Result<(Tensor, Tensor)> {
    let inv = inv_freq(spec);
    let max_len = max_len.max(1);
    let mut angles = Vec::with_capacity(max_len * inv.len());
    for p in 0..max_len {
        angles.extend(inv.iter().map(|f| (p as f64 * f) as f32));
    }
    let angles = Tensor::from_vec(angles, (max_len, inv.len()), device)?;
    let a = attention_factor(spec);
    Ok(((angles.cos()? * a)?.to_dtype(dtype)?, (angles.sin()? * a)?.to_dtype(dtype)?))
}

/// Applies RoPE to `x` `(tokens, heads, d)` with per-token `cos`/`sin` rows `(tokens, d / 2)`:
/// pairs `(2i, 2i + 1)` when `interleaved` (GGUF Llama, DeepSeek), else `(i, i + d/2)`.
pub fn apply(x: &Tensor, cos: &Tensor, sin: &Tensor, interleaved: bool) -> Result<Tensor> {
    let (t, h, d) = x.dims3()?;
    if let Some(y) = crate::cpu::rope::apply(x, cos, sin, d, interleaved)? {
        return Ok(y);
    }
    if interleaved {
        let x = x.reshape((1, t, h, d))?.transpose(1, 2)?.contiguous()?;
        let y = candle_nn::rotary_emb::rope_i(&x, cos, sin)?;
        Ok(y.transpose(1, 2)?.reshape((t, h, d))?)
    } else {
        let x = x.reshape((1, t, h, d))?.contiguous()?;
        Ok(candle_nn::rotary_emb::rope_thd(&x, cos, sin)?.reshape((t, h, d))?)
    }
}

/// [`apply`] to `x` `(tokens, heads · d)` (a column range of a wider product is read where
/// it lies on the CPU), returning `(tokens, heads, d)`.
pub fn apply_heads(x: &Tensor, heads: usize, cos: &Tensor, sin: &Tensor, interleaved: bool) -> Result<Tensor> {
    let (t, n) = x.dims2()?;
    let d = n / heads.max(1);
    if let Some(y) = crate::cpu::rope::apply(x, cos, sin, d, interleaved)? {
        return Ok(y);
    }
    apply(&x.reshape((t, heads, d))?, cos, sin, interleaved)
}

#[cfg(test)]
mod tests {
    use super::*;
    use goodput_core::Catalog;

    /// The inverse frequencies transformers computes for the checked-in reference models
    /// (tests/fixtures/ref-models/README.md): gpt-oss (16 dims, θ 150000, YaRN ×4 untruncated)
    /// and DeepSeek-V3 (RoPE part of 8 dims, θ 10⁴, YaRN ×4 truncated).
    #[test]
    fn yarn_frequencies_match_transformers() {
        let mut oss = Catalog::builtin().get("tiny-gpt-oss").unwrap().clone();
        oss.head_dim = Some(16);
        oss.rope_scaling.as_mut().unwrap().original_max_position_embeddings = 64;
        let want = [1.0, 0.1169, 0.0127033, 0.00286356, 0.000645497, 0.000145507, 3.27998e-05, 7.39367e-06];
        for (got, want) in inv_freq(&oss).iter().zip(want) {
            assert!((got / want - 1.0).abs() < 1e-4, "{got} against {want}");
        }
        assert!((attention_factor(&oss) - 1.1386294).abs() < 1e-6);
        let mut ds = Catalog::builtin().get("tiny-deepseek-v3").unwrap().clone();
        ds.mla.as_mut().unwrap().qk_rope_head_dim = 8;
        ds.rope_scaling.as_mut().unwrap().original_max_position_embeddings = 64;
        let got = inv_freq(&ds);
        for (got, want) in got.iter().zip([1.0, 0.0625, 0.0025, 0.00025]) {
            assert!((got / want - 1.0).abs() < 1e-6, "{got} against {want}");
        }
        assert_eq!(attention_factor(&ds), 1.0);
    }
}
