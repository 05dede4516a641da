//! One decoder layer of any family the engine runs, on the packed step: its attention
//! (grouped-query with the options of each family — q/k norms, biases, sinks, a sliding window
//! — or DeepSeek's latent attention) and its MLP (dense SwiGLU, or routed experts), between the
//! two RMSNorms of the pre-norm residual block.

use crate::attention::{gather_attention, paged_attention, write_kv, write_rows, AttentionImpl, AttnOpts};
use crate::error::Result;
use crate::kv_cache::AttnMeta;
use crate::linear::{fuse, quantize_fused, Linear};
use crate::mla::Mla;
use crate::moe::{Expert, ExpertLoad, Moe};
use crate::rope;
use crate::weights::{Init, TensorSource};
use candle_core::{DType, Tensor};
use goodput_core::ModelSpec;

/// Grouped-query attention (multi-head when the KV heads are the heads).
pub(crate) struct Gqa {
    pub(crate) q: Linear,
    pub(crate) k: Linear,
    pub(crate) v: Linear,
    pub(crate) o: Linear,
    /// q, k and v as one matmul (their weights concatenated at load; `q`, `k`, `v` are then
    /// views of it). Built on CUDA, where each launch costs, and for bf16 weights on CPU,
    /// where each parallel matmul costs a fork-join of the thread pool (f32 weights on CPU stay
    /// apart, so f32 results do not move).
    pub(crate) qkv: Option<Linear>,
    /// Qwen3's per-head RMSNorm weights of q and k (`head_dim`), applied before RoPE.
    pub(crate) q_norm: Option<Tensor>,
    pub(crate) k_norm: Option<Tensor>,
    /// What the attention does besides the causal softmax (scale, window, sinks).
    pub(crate) opts: AttnOpts,
}

/// The dense SwiGLU MLP.
pub(crate) struct Mlp {
    pub(crate) gate: Linear,
    pub(crate) up: Linear,
    pub(crate) down: Linear,
    /// gate and up as one matmul, likewise.
    pub(crate) gate_up: Option<Linear>,
}

pub(crate) enum Attn {
    Gqa(Gqa),
    Mla(Mla),
}

pub(crate) enum Ffn {
    Dense(Mlp),
    Moe(Moe),
}

pub(crate) struct Layer {
    pub(crate) attn_norm: Tensor,
    pub(crate) mlp_norm: Tensor,
    pub(crate) attn: Attn,
    pub(crate) ffn: Ffn,
}

/// What a layer's forward needs of the step besides its rows.
pub(crate) struct StepCtx<'a> {
    pub spec: &'a ModelSpec,
    pub cos: &'a Tensor,
    pub sin: &'a Tensor,
    pub attention: AttentionImpl,
    pub interleaved: bool,
    /// Seconds in the attention layers' q|k|v and o products this step, when the step is timed
    /// by parts ([`PartTimes::projections_s`]).
    pub projections: Option<std::cell::Cell<f64>>,
}

impl StepCtx<'_> {
    /// `f()`, its time added to [`StepCtx::projections`] when the step is timed.
    pub(crate) fn projection<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        let Some(c) = &self.projections else { return f() };
        let t = std::time::Instant::now();
        let y = f()?;
        c.set(c.get() + t.elapsed().as_secs_f64());
        Ok(y)
    }

    pub(crate) fn rms_norm(&self, x: &Tensor, w: &Tensor) -> Result<Tensor> {
        rms_norm(x, w, self.spec.rms_norm_eps as f32)
    }

    pub(crate) fn rope(&self, x: &Tensor) -> Result<Tensor> {
        rope::apply(x, self.cos, self.sin, self.interleaved)
    }

    /// RoPE of `x` `(tokens, heads · head_dim)`, as `(tokens, heads, head_dim)`.
    pub(crate) fn rope_heads(&self, x: &Tensor, heads: usize) -> Result<Tensor> {
        rope::apply_heads(x, heads, self.cos, self.sin, self.interleaved)
    }

    pub(crate) fn attend(&self, q: &Tensor, kv: &LayerKv, v: &Tensor, opts: &AttnOpts) -> Result<Tensor> {
        Ok(match self.attention {
            AttentionImpl::Paged => paged_attention(q, kv.k, v, kv.meta, opts)?,
            AttentionImpl::Gather => gather_attention(q, kv.k, v, kv.meta, opts)?,
        })
    }
}

/// RMSNorm over the last dimension: goodput's kernel for f32 on the CPU ([`crate::cpu::norm`]),
/// candle's op elsewhere.
pub(crate) fn rms_norm(x: &Tensor, w: &Tensor, eps: f32) -> Result<Tensor> {
    match crate::cpu::norm::rms_norm(x, w, eps)? {
        Some(y) => Ok(y),
        None => Ok(candle_nn::ops::rms_norm(&x.contiguous()?, w, eps)?),
    }
}

/// The residual stream `x + y`: goodput's add for f32 on the CPU ([`crate::cpu::norm::add`]),
/// candle's elsewhere.
pub(crate) fn residual(x: &Tensor, y: &Tensor) -> Result<Tensor> {
    match crate::cpu::norm::add(x, y)? {
        Some(s) => Ok(s),
        None => Ok((x + y)?),
    }
}

/// Seconds one step spent in each part of its forward, summed over the layers (on the CPU,
/// where the forward is synchronous; [`crate::Llama::time_parts`]). The rest of the step (the
/// embedding, scheduling, sampling) is not in it.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct PartTimes {
    /// The q|k|v and o products of the attention layers (GQA; MLA's are in `attention_s`).
    pub projections_s: f64,
    /// Norm, RoPE, the KV write and attention itself, of every layer.
    pub attention_s: f64,
    /// Norm and MLP of the dense layers.
    pub dense_mlp_s: f64,
    /// Norm, router, routed and shared experts of the sparse layers.
    pub moe_s: f64,
    /// The final norm and the LM head of the rows sampled.
    pub lm_head_s: f64,
}

/// A layer's place in the paged pool: its K and V pools (MLA's one latent pool is both) and
/// the step's map into them for the layer's KV-cache group.
pub(crate) struct LayerKv<'a> {
    pub k: &'a Tensor,
    pub v: &'a Tensor,
    pub meta: &'a AttnMeta,
}

impl Layer {
    /// Rounds the layer's dense projections through e4m3 ([`Linear::quantize_fp8`]): a GQA block's
    /// q|k|v and o, a dense MLP's gate|up and down. Returns how many weights it rounded (none
    /// for MLA attention, a mixture's experts and GGUF-quantized weights, which keep their
    /// format).
    pub(crate) fn quantize_fp8(&mut self) -> Result<usize> {
        let mut n = 0;
        if let Attn::Gqa(a) = &mut self.attn {
            n += quantize_fused(&mut a.qkv, [&mut a.q, &mut a.k, &mut a.v])?;
            n += a.o.quantize_fp8()? as usize;
        }
        if let Ffn::Dense(m) = &mut self.ffn {
            n += quantize_fused(&mut m.gate_up, [&mut m.gate, &mut m.up])?;
            n += m.down.quantize_fp8()? as usize;
        }
        Ok(n)
    }

    /// The Llama block's parts, when this layer is one (no norms on q/k, no sinks or window,
    /// no bias on o, a dense MLP): what goodput's CUDA step runs.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn llama(&self) -> Option<(&Gqa, &Mlp)> {
        match (&self.attn, &self.ffn) {
            (Attn::Gqa(a), Ffn::Dense(m))
                if a.q_norm.is_none() && a.opts.sinks.is_none() && a.opts.window.is_none() && a.o.b.is_none() =>
            {
                Some((a, m))
            }
            _ => None,
        }
    }

    /// The residual stream after this layer, its new K/V (or latent rows) written to its pools;
    /// the time of its parts added to `times` when given.
    pub(crate) fn forward(
        &self,
        x: &Tensor,
        ctx: &StepCtx,
        kv: &LayerKv,
        times: Option<&mut PartTimes>,
    ) -> Result<(Tensor, Option<ExpertLoad>)> {
        let start = std::time::Instant::now();
        let x = self.attention(x, ctx, kv)?;
        let mid = std::time::Instant::now();
        let h = ctx.rms_norm(&x, &self.mlp_norm)?;
        let (y, load) = match &self.ffn {
            Ffn::Dense(m) => (m.forward(&h)?, None),
            Ffn::Moe(m) => {
                let (y, load) = m.forward(&h)?;
                (y, Some(load))
            }
        };
        if let Some(t) = times {
            t.attention_s += mid.duration_since(start).as_secs_f64();
            let ffn = mid.elapsed().as_secs_f64();
            match self.ffn {
                Ffn::Dense(_) => t.dense_mlp_s += ffn,
                Ffn::Moe(_) => t.moe_s += ffn,
            }
        }
        Ok((residual(&x, &y)?, load))
    }

    /// The residual stream after the attention half of the layer.
    fn attention(&self, x: &Tensor, ctx: &StepCtx, kv: &LayerKv) -> Result<Tensor> {
        let t = x.dim(0)?;
        let h = ctx.rms_norm(x, &self.attn_norm)?;
        let a = match &self.attn {
            Attn::Gqa(g) => {
                let (q, k, v) = g.qkv(&h, ctx)?;
                write_kv(kv.k, kv.v, &k, &v, kv.meta)?;
                let a = ctx.attend(&q, kv, kv.v, &g.opts)?;
                let a = a.reshape((t, ()))?;
                ctx.projection(|| g.o.forward(&a))?
            }
            Attn::Mla(m) => {
                let rows = m.rows(&h, &|x| ctx.rope(x))?;
                write_rows(kv.k, &rows.cache, kv.meta)?;
                let o_lat = ctx.attend(&m.absorbed_queries(&rows)?, kv, kv.k, &m.opts(ctx.spec))?;
                m.output(&o_lat)?
            }
        };
        residual(x, &a)
    }

    /// Loads layer `i`, fusing and packing its projections where that pays (see [`Gqa::qkv`]).
    pub(crate) fn load(
        spec: &ModelSpec,
        src: &mut dyn TensorSource,
        i: usize,
        act: DType,
        fuse_parts: bool,
    ) -> Result<Self> {
        let h = spec.hidden_size;
        let p = format!("model.layers.{i}");
        let norm = |src: &mut dyn TensorSource, n: &str| -> Result<Tensor> {
            Ok(src.tensor(&format!("{p}.{n}.weight"), &[h], Init::Ones)?.to_dtype(act)?)
        };
        let attn = match spec.mla {
            Some(_) => Attn::Mla(Mla::load(spec, src, i, act)?),
            None => Attn::Gqa(Gqa::load(spec, src, i, act, fuse_parts)?),
        };
        let ffn = if spec.is_sparse(i) {
            Ffn::Moe(Moe::load(spec, src, i, act)?)
        } else {
            Ffn::Dense(Mlp::load(src, &format!("{p}.mlp"), h, spec.intermediate_size, act, fuse_parts)?)
        };
        Ok(Self {
            attn_norm: norm(src, "input_layernorm")?,
            mlp_norm: norm(src, "post_attention_layernorm")?,
            attn,
            ffn,
        })
    }

    /// Multiply-accumulates per token: all the layer's linears, the shared expert, and the
    /// `experts_per_token` routed experts a token is sent to.
    pub(crate) fn macs_per_token(&self) -> u64 {
        let linears: u64 = self.linears().iter().map(|l| l.macs()).sum();
        match &self.ffn {
            Ffn::Moe(m) => {
                let one = m.experts.first().map_or(0, Expert::macs);
                linears + m.shared.as_ref().map_or(0, Expert::macs) + one * m.spec.experts_per_token as u64
            }
            Ffn::Dense(_) => linears,
        }
    }

    /// Bytes of one routed expert and of all of this layer's (`None` for a dense layer).
    pub(crate) fn routed_bytes(&self) -> Option<(u64, u64)> {
        let Ffn::Moe(m) = &self.ffn else { return None };
        Some((m.experts.first().map_or(0, Expert::bytes), m.experts.iter().map(Expert::bytes).sum()))
    }

    /// Bytes of all of the layer's weights: linears, experts (routed and shared) and norms.
    pub(crate) fn bytes(&self) -> u64 {
        let t = |t: &Tensor| (t.elem_count() * t.dtype().size_in_bytes()) as u64;
        let experts = match &self.ffn {
            Ffn::Moe(m) => m.experts.iter().chain(&m.shared).map(Expert::bytes).sum(),
            Ffn::Dense(_) => 0,
        };
        self.linears().iter().map(|l| l.bytes()).sum::<u64>() + experts + t(&self.attn_norm) + t(&self.mlp_norm)
    }

    /// The layer's linear layers but its experts (for byte and MAC counts): attention, the
    /// dense MLP or the router.
    pub(crate) fn linears(&self) -> Vec<&Linear> {
        let mut out: Vec<&Linear> = match &self.attn {
            Attn::Gqa(g) => vec![&g.q, &g.k, &g.v, &g.o],
            Attn::Mla(m) => {
                let mut v = vec![&m.q_b, &m.kv_a, &m.kv_b, &m.o];
                v.extend(m.q_a.as_ref().map(|(a, _)| a));
                v
            }
        };
        match &self.ffn {
            Ffn::Dense(m) => out.extend([&m.gate, &m.up, &m.down]),
            Ffn::Moe(m) => out.push(&m.router),
        }
        out
    }
}

impl Gqa {
    fn load(spec: &ModelSpec, src: &mut dyn TensorSource, i: usize, act: DType, fuse_parts: bool) -> Result<Self> {
        let (h, d) = (spec.hidden_size, spec.head_dim());
        let (nq, nkv) = (spec.num_heads * d, spec.num_kv_heads * d);
        let p = format!("model.layers.{i}.self_attn");
        let bias = spec.has_qkv_bias();
        let mut g = Self {
            q: Linear::load(src, &format!("{p}.q_proj"), nq, h, bias, act)?,
            k: Linear::load(src, &format!("{p}.k_proj"), nkv, h, bias, act)?,
            v: Linear::load(src, &format!("{p}.v_proj"), nkv, h, bias, act)?,
            o: Linear::load(src, &format!("{p}.o_proj"), h, nq, spec.has_attention_bias(), act)?,
            qkv: None,
            q_norm: None,
            k_norm: None,
            opts: AttnOpts { window: spec.window(i), ..AttnOpts::scaled(1.0 / (d as f32).sqrt()) },
        };
        if spec.has_qk_norm() {
            let n = |src: &mut dyn TensorSource, w: &str| -> Result<Tensor> {
                Ok(src.tensor(&format!("{p}.{w}.weight"), &[d], Init::Ones)?.to_dtype(act)?)
            };
            (g.q_norm, g.k_norm) = (Some(n(src, "q_norm")?), Some(n(src, "k_norm")?));
        }
        if spec.has_sinks() {
            let s = src.tensor(&format!("{p}.sinks"), &[spec.num_heads], Init::Std(1.0))?;
            g.opts.sinks = Some(s.to_dtype(DType::F32)?.to_vec1::<f32>()?);
        }
        if fuse_parts {
            g.qkv = fuse([&mut g.q, &mut g.k, &mut g.v])?;
        }
        match g.qkv.as_mut() {
            Some(f) => pack(&mut [f, &mut g.o])?,
            None => pack(&mut [&mut g.q, &mut g.k, &mut g.v, &mut g.o])?,
        }
        Ok(g)
    }

    /// q, k and v of `h` (`(tokens, hidden)`) as `(tokens, heads, head_dim)`, with one matmul
    /// where the layer's projections are fused; q and k normed (Qwen3) and rotated.
    pub(crate) fn qkv(&self, h: &Tensor, ctx: &StepCtx) -> Result<(Tensor, Tensor, Tensor)> {
        let s = ctx.spec;
        let (t, d) = (h.dim(0)?, s.head_dim());
        let (nq, nkv) = (s.num_heads * d, s.num_kv_heads * d);
        let (q, k, v) = match &self.qkv {
            Some(f) => {
                let y = ctx.projection(|| f.forward(h))?;
                (y.narrow(1, 0, nq)?, y.narrow(1, nq, nkv)?, y.narrow(1, nq + nkv, nkv)?)
            }
            None => ctx.projection(|| Ok((self.q.forward(h)?, self.k.forward(h)?, self.v.forward(h)?)))?,
        };
        let v = v.reshape((t, s.num_kv_heads, d))?;
        if let (Some(qn), Some(kn)) = (&self.q_norm, &self.k_norm) {
            let q = ctx.rms_norm(&q.reshape((t, s.num_heads, d))?, qn)?;
            let k = ctx.rms_norm(&k.reshape((t, s.num_kv_heads, d))?, kn)?;
            return Ok((ctx.rope(&q)?, ctx.rope(&k)?, v));
        }
        // Rotated where they lie in the fused product (no copy of q and k first).
        Ok((ctx.rope_heads(&q, s.num_heads)?, ctx.rope_heads(&k, s.num_kv_heads)?, v))
    }
}

/// Packs the linears a step multiplies by for `vdpbf16ps` ([`Linear::pack`]; a no-op but for
/// bf16 weights on a CPU with AVX-512 BF16, whatever the device).
fn pack(ls: &mut [&mut Linear]) -> Result<()> {
    for l in ls {
        l.pack()?;
    }
    Ok(())
}

impl Mlp {
    fn load(src: &mut dyn TensorSource, p: &str, h: usize, i: usize, act: DType, fuse_parts: bool) -> Result<Self> {
        let mut m = Self {
            gate: Linear::load(src, &format!("{p}.gate_proj"), i, h, false, act)?,
            up: Linear::load(src, &format!("{p}.up_proj"), i, h, false, act)?,
            down: Linear::load(src, &format!("{p}.down_proj"), h, i, false, act)?,
            gate_up: None,
        };
        if fuse_parts {
            m.gate_up = fuse([&mut m.gate, &mut m.up])?;
        }
        match m.gate_up.as_mut() {
            Some(f) => pack(&mut [f, &mut m.down])?,
            None => pack(&mut [&mut m.gate, &mut m.up, &mut m.down])?,
        }
        Ok(m)
    }

    /// The gate and up projections of the normed rows `h`, with one matmul where fused.
    pub(crate) fn gate_up(&self, h: &Tensor) -> Result<(Tensor, Tensor)> {
        Ok(match &self.gate_up {
            Some(f) => halves(&f.forward(h)?)?,
            None => (self.gate.forward(h)?, self.up.forward(h)?),
        })
    }

    pub(crate) fn forward(&self, h: &Tensor) -> Result<Tensor> {
        // bf16 weights on the CPU (packed): SwiGLU in one vectorized pass over the fused rows.
        if let (Some(f), Some(d)) = (&self.gate_up, &self.down.packed) {
            // On AMX tiles: SwiGLU in the gate|up product's epilogue, no f32 rows between.
            if let (Some(p), None, None) = (&f.packed, &f.b, &self.down.b) {
                if let Some(y) = crate::cpu::mlp_amx::forward(h, p, d)? {
                    return Ok(y);
                }
            }
            let y = f.forward(h)?;
            if let Some(a) = crate::cpu::swiglu::swiglu(&y)? {
                return self.down.forward(&a);
            }
            let (g, u) = halves(&y)?;
            return self.down.forward(&(candle_nn::ops::silu(&g)? * u)?);
        }
        let (g, u) = self.gate_up(h)?;
        self.down.forward(&(candle_nn::ops::silu(&g)? * u)?)
    }
}

/// The gate and up halves of a fused gate|up product's rows.
fn halves(y: &Tensor) -> Result<(Tensor, Tensor)> {
    let i = y.dim(1)? / 2;
    Ok((y.narrow(1, 0, i)?, y.narrow(1, i, i)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::weights::DummySource;
    use candle_core::quantized::QMatMul;
    use candle_core::Device;
    use goodput_core::Catalog;

    fn max_diff(a: &Tensor, b: &Tensor) -> f32 {
        (a - b).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap()
    }

    /// `--dtype fp8` rounds every dense projection row by row through e4m3 (each row's
    /// largest weight becomes ±448 × its scale, the rest e4m3 values × the scale), and the parts
    /// of a fused projection stay views of its new weight.
    #[test]
    fn fp8_rounds_each_projection_and_keeps_the_parts_views_of_the_fused_weight() {
        let spec = Catalog::builtin().get("tiny").unwrap().clone();
        let mut src = DummySource { seed: 5, dtype: DType::F32, device: Device::Cpu };
        let mut layer = Layer::load(&spec, &mut src, 0, DType::F32, true).unwrap();
        assert_eq!(layer.quantize_fp8().unwrap(), 4);
        let (Attn::Gqa(a), Ffn::Dense(m)) = (&layer.attn, &layer.ffn) else { panic!("llama layer") };
        for l in [a.qkv.as_ref().unwrap(), &a.o, m.gate_up.as_ref().unwrap(), &m.down] {
            let QMatMul::Tensor(w) = &l.w else { panic!("dense") };
            let rows = w.to_vec2::<f32>().unwrap();
            for row in rows.iter().take(8) {
                let amax = row.iter().fold(0f32, |a, x| a.max(x.abs()));
                let scale = amax / crate::fp8::E4M3_MAX;
                for x in row {
                    let q = x / scale;
                    let on_grid = float8::F8E4M3::from_f32(q).to_f32();
                    assert!((on_grid - q).abs() <= 1e-5 * q.abs() + 1e-30, "{x} is not an e4m3 value × {scale}");
                }
            }
        }
        let QMatMul::Tensor(k) = &a.k.w else { panic!("k is dense") };
        let QMatMul::Tensor(qkv) = &a.qkv.as_ref().unwrap().w else { panic!("qkv is dense") };
        let d = spec.hidden_size;
        assert_eq!(k.layout().start_offset(), d * d, "k starts after q's rows");
        let k_rows = qkv.narrow(0, d, k.dim(0).unwrap()).unwrap();
        assert_eq!(max_diff(k, &k_rows), 0.0);
    }

    /// Fusing q|k|v and gate|up leaves every part computing what it did (the parts are then
    /// views of the fused weight) and the fused matmul their outputs side by side — with
    /// Qwen2's q/k/v biases too. The dummy source gives both loads the same weights.
    #[test]
    fn fused_projections_equal_their_parts() {
        let spec = ModelSpec { qkv_bias: true, ..Catalog::builtin().get("tiny").unwrap().clone() };
        let load = |fuse| {
            let mut src = DummySource { seed: 3, dtype: DType::F32, device: Device::Cpu };
            Layer::load(&spec, &mut src, 0, DType::F32, fuse).unwrap()
        };
        let (apart, fused) = (load(false), load(true));
        let x = Tensor::randn(0f32, 1.0, (3, spec.hidden_size), &Device::Cpu).unwrap();
        let (Attn::Gqa(a), Attn::Gqa(f)) = (&apart.attn, &fused.attn) else { panic!("gqa") };
        let (Ffn::Dense(am), Ffn::Dense(fm)) = (&apart.ffn, &fused.ffn) else { panic!("dense") };
        let parts = |g: &Gqa, m: &Mlp| [&g.q, &g.k, &g.v, &m.gate, &m.up].map(|l| l.forward(&x).unwrap());
        let (before, after) = (parts(a, am), parts(f, fm));
        for (b, a) in before.iter().zip(&after) {
            assert!(max_diff(b, a) < 1e-5);
        }
        let qkv = f.qkv.as_ref().unwrap().forward(&x).unwrap();
        assert!(max_diff(&qkv, &Tensor::cat(&before[..3], 1).unwrap()) < 1e-5);
        let gate_up = fm.gate_up.as_ref().unwrap().forward(&x).unwrap();
        assert!(max_diff(&gate_up, &Tensor::cat(&before[3..], 1).unwrap()) < 1e-5);
        // No extra memory: the parts are views of the fused weights.
        let QMatMul::Tensor(k) = &f.k.w else { panic!("k is dense") };
        assert_eq!(k.layout().start_offset(), spec.hidden_size * spec.hidden_size, "k starts after q's rows");
        assert!(apart.llama().is_some() && fused.llama().is_some());
    }

    /// bf16 weights on a CPU with AVX-512 BF16: every linear a step multiplies by is packed
    /// for `vdpbf16ps` (the fused q|k|v and gate|up, o and down).
    #[test]
    #[cfg_attr(not(host_avx512bf16), ignore = "this CPU has no AVX-512 BF16: nothing is packed here")]
    fn bf16_layers_are_fused_and_packed() {
        assert!(crate::cpu::bf16_dot::available(), "built on a CPU with AVX-512 BF16, run on one without");
        let spec = Catalog::builtin().get("tiny").unwrap().clone();
        let mut src = DummySource { seed: 3, dtype: DType::BF16, device: Device::Cpu };
        let l = Layer::load(&spec, &mut src, 0, DType::F32, true).unwrap();
        let (a, m) = l.llama().unwrap();
        for (name, lin) in
            [("qkv", a.qkv.as_ref()), ("o", Some(&a.o)), ("gate_up", m.gate_up.as_ref()), ("down", Some(&m.down))]
        {
            assert!(lin.is_some_and(|l| l.packed.is_some()), "{name} is not packed");
        }
    }

    /// A Qwen3 layer (q/k norms), a gpt-oss layer (sinks, a window, o bias) and a MoE layer are
    /// not the Llama block the CUDA step runs.
    #[test]
    fn only_the_llama_block_is_llama() {
        for (name, layer) in [("tiny-qwen3", 0), ("tiny-gpt-oss", 0), ("tiny-mixtral", 1), ("tiny-deepseek-v3", 0)] {
            let spec = Catalog::builtin().get(name).unwrap().clone();
            let mut src = DummySource { seed: 1, dtype: DType::F32, device: Device::Cpu };
            let l = Layer::load(&spec, &mut src, layer, DType::F32, false).unwrap();
            assert!(l.llama().is_none(), "{name}");
        }
    }
}
