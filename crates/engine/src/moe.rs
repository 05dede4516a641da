//! A mixture-of-experts MLP on the packed step: the router's logits for every token, each
//! family's rule for its experts and weights ([`route`]), then the tokens grouped by expert so
//! each expert's weights are read once per step (one matmul of all its tokens, on the same
//! f32/bf16 kernels as the dense layers), the weighted outputs summed back per token, and the
//! shared expert added. Weights load from the hub's per-expert tensors, transformers v5's fused
//! 3-D ones, or gpt-oss's (interleaved gate/up, x·W orientation, MXFP4 blocks).

use crate::cpu::mxfp4::Mxfp4Matrix;
use crate::error::{EngineError, Result, TensorProblem};
use crate::linear::{fuse, Linear};
use crate::mxfp4;
use crate::weights::{Init, TensorSource};
use candle_core::quantized::QMatMul;
use candle_core::{DType, Device, Tensor};
use goodput_core::arch::{ExpertActivation, Scoring};
use goodput_core::{Architecture, ModelSpec, MoeSpec};

/// The experts and weights of one token: `(expert, weight)`, `experts_per_token` of them.
pub fn route(m: &MoeSpec, logits: &[f32], correction: Option<&[f32]>) -> Vec<(usize, f32)> {
    let k = m.experts_per_token;
    let top = |scores: &[f32]| -> Vec<usize> {
        let mut idx: Vec<usize> = (0..scores.len()).collect();
        // Stable: among equal scores the lower expert wins, as torch.topk does on CPU.
        idx.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
        idx.truncate(k);
        idx
    };
    match m.scoring {
        Scoring::Softmax => {
            let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let e: Vec<f32> = logits.iter().map(|&x| (x - max).exp()).collect();
            let sum: f32 = e.iter().sum();
            let p: Vec<f32> = e.iter().map(|x| x / sum).collect();
            let chosen = top(&p);
            let norm = if m.renormalize { chosen.iter().map(|&i| p[i]).sum::<f32>() } else { 1.0 };
            chosen.into_iter().map(|i| (i, p[i] / norm)).collect()
        }
        Scoring::Sigmoid => {
            let s: Vec<f32> = logits.iter().map(|&x| 1.0 / (1.0 + (-x).exp())).collect();
            let mut c: Vec<f32> = match correction {
                Some(b) => s.iter().zip(b).map(|(x, b)| x + b).collect(),
                None => s.clone(),
            };
            if m.n_group > 1 {
                keep_best_groups(m, &mut c);
            }
            let chosen = top(&c);
            let norm = if m.renormalize { chosen.iter().map(|&i| s[i]).sum::<f32>() + 1e-20 } else { 1.0 };
            let f = m.routed_scaling_factor as f32;
            chosen.into_iter().map(|i| (i, s[i] / norm * f)).collect()
        }
    }
}

/// DeepSeek's group limit: a group scores the sum of its two best (biased) scores; the experts
/// of all but the `topk_group` best groups are set to −∞.
fn keep_best_groups(m: &MoeSpec, c: &mut [f32]) {
    let size = m.num_experts / m.n_group;
    let score = |g: &[f32]| {
        let mut v = g.to_vec();
        v.sort_by(|a, b| b.total_cmp(a));
        v.iter().take(2).sum::<f32>()
    };
    let scores: Vec<f32> = c.chunks(size).map(score).collect();
    let mut groups: Vec<usize> = (0..m.n_group).collect();
    groups.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    for &g in &groups[m.topk_group..] {
        c[g * size..(g + 1) * size].fill(f32::NEG_INFINITY);
    }
}

/// One projection of an expert: a dense (or quantized) linear layer, or an MXFP4 matrix read
/// in place with an f32 bias.
pub(crate) enum Proj {
    Dense(Linear),
    Mx(Box<Mxfp4Matrix>, Option<Tensor>),
}

impl Proj {
    pub(crate) fn forward(&self, x: &Tensor) -> Result<Tensor> {
        match self {
            Proj::Dense(l) => l.forward(x),
            Proj::Mx(w, b) => {
                let m = x.dim(0)?;
                let xs = x.to_dtype(DType::F32)?.contiguous()?.flatten_all()?.to_vec1::<f32>()?;
                let y = Tensor::from_vec(w.matmul_t(&xs, m), (m, w.n), x.device())?.to_dtype(x.dtype())?;
                Ok(match b {
                    Some(b) => y.broadcast_add(b)?,
                    None => y,
                })
            }
        }
    }

    pub(crate) fn bytes(&self) -> u64 {
        match self {
            Proj::Dense(l) => l.bytes(),
            Proj::Mx(w, b) => (w.bytes() + b.as_ref().map_or(0, |b| b.elem_count() * 4)) as u64,
        }
    }

    pub(crate) fn macs(&self) -> u64 {
        match self {
            Proj::Dense(l) => l.macs(),
            Proj::Mx(w, _) => (w.n * w.k) as u64,
        }
    }
}

/// One expert: gate|up as one matmul (gate rows first), down.
pub(crate) struct Expert {
    pub(crate) gate_up: Proj,
    pub(crate) down: Proj,
}

impl Expert {
    pub(crate) fn bytes(&self) -> u64 {
        self.gate_up.bytes() + self.down.bytes()
    }

    pub(crate) fn macs(&self) -> u64 {
        self.gate_up.macs() + self.down.macs()
    }
}

/// The experts one step used in one sparse layer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExpertLoad {
    pub layer: usize,
    /// Tokens routed to each expert (`experts_per_token` per token in all).
    pub tokens: Vec<u32>,
    /// The experts each token went to, ascending, `experts_per_token` per token, token by
    /// token (what a routing comparison between two runs reads).
    pub choices: Vec<u32>,
}

impl ExpertLoad {
    /// Experts that received at least one token: each of them had its weights read.
    pub fn distinct(&self) -> usize {
        self.tokens.iter().filter(|&&n| n > 0).count()
    }

    /// The experts token `i` went to (ascending).
    pub fn chosen(&self, i: usize, per_token: usize) -> &[u32] {
        self.choices.get(i * per_token..(i + 1) * per_token).unwrap_or(&[])
    }
}

pub(crate) struct Moe {
    pub(crate) spec: MoeSpec,
    pub(crate) router: Linear,
    /// DeepSeek's `e_score_correction_bias` (selection only).
    pub(crate) correction: Option<Vec<f32>>,
    pub(crate) experts: Vec<Expert>,
    pub(crate) shared: Option<Expert>,
    pub(crate) layer: usize,
}

impl Moe {
    /// The MoE output of the normed rows `h` (`(tokens, hidden)`), and the step's load.
    pub(crate) fn forward(&self, h: &Tensor) -> Result<(Tensor, ExpertLoad)> {
        let (t, hidden) = h.dims2()?;
        let logits = self.router.forward(h)?.to_dtype(DType::F32)?.to_vec2::<f32>()?;
        let mut by_expert: Vec<(Vec<u32>, Vec<f32>)> = vec![(Vec::new(), Vec::new()); self.experts.len()];
        let mut choices = Vec::with_capacity(t * self.spec.experts_per_token);
        for (tok, row) in logits.iter().enumerate() {
            let at = choices.len();
            for (e, w) in route(&self.spec, row, self.correction.as_deref()) {
                by_expert[e].0.push(tok as u32);
                by_expert[e].1.push(w);
                choices.push(e as u32);
            }
            choices[at..].sort_unstable();
        }
        let mut out = vec![0f32; t * hidden];
        for (e, (toks, ws)) in by_expert.iter().enumerate().filter(|(_, (toks, _))| !toks.is_empty()) {
            let idx = Tensor::from_slice(toks, toks.len(), h.device())?;
            let y = self.expert(&self.experts[e], &h.index_select(&idx, 0)?)?;
            let y = y.to_dtype(DType::F32)?.to_vec2::<f32>()?;
            for ((&tok, &w), row) in toks.iter().zip(ws).zip(&y) {
                let dst = &mut out[tok as usize * hidden..(tok as usize + 1) * hidden];
                dst.iter_mut().zip(row).for_each(|(o, &x)| *o += w * x);
            }
        }
        let mut y = Tensor::from_vec(out, (t, hidden), h.device())?.to_dtype(h.dtype())?;
        if let Some(shared) = &self.shared {
            y = (y + self.expert(shared, h)?)?;
        }
        let tokens = by_expert.iter().map(|(t, _)| t.len() as u32).collect();
        let load = ExpertLoad { layer: self.layer, tokens, choices };
        Ok((y, load))
    }

    /// One expert's MLP of rows `x`.
    pub(crate) fn expert(&self, e: &Expert, x: &Tensor) -> Result<Tensor> {
        let gu = e.gate_up.forward(x)?;
        let i = gu.dim(1)? / 2;
        let (g, u) = (gu.narrow(1, 0, i)?, gu.narrow(1, i, i)?);
        let act = match self.spec.activation {
            ExpertActivation::Swiglu => (candle_nn::ops::silu(&g)? * u)?,
            ExpertActivation::ClampedSwiglu { limit, alpha } => {
                let g = g.minimum(limit)?;
                let u = u.clamp(-limit, limit)?;
                let glu = (&g * candle_nn::ops::sigmoid(&(&g * alpha)?)?)?;
                ((u + 1.0)? * glu)?
            }
        };
        e.down.forward(&act)
    }

    /// The MoE of layer `i` (`prefix` = `model.layers.{i}`).
    pub(crate) fn load(spec: &ModelSpec, src: &mut dyn TensorSource, i: usize, act: DType) -> Result<Self> {
        let m = spec.moe.clone().ok_or_else(|| EngineError::Internal("a sparse layer without a moe spec".into()))?;
        let (h, p) = (spec.hidden_size, format!("model.layers.{i}"));
        let names = Names::of(spec.architecture, &p);
        let router = Linear::load(src, &names.router, m.num_experts, h, m.router_bias, act)?;
        let correction = if m.scoring == Scoring::Sigmoid {
            let b =
                src.tensor(&format!("{}.e_score_correction_bias", names.router), &[m.num_experts], Init::Std(0.01))?;
            Some(b.to_dtype(DType::F32)?.to_vec1::<f32>()?)
        } else {
            None
        };
        let experts = load_experts(spec, src, &names, act)?;
        let shared = match m.shared_intermediate_size {
            0 => None,
            n => Some(per_expert(
                src,
                &format!("{p}.mlp.shared_experts"),
                ["gate_proj", "up_proj", "down_proj"],
                h,
                n,
                false,
                act,
            )?),
        };
        Ok(Self { spec: m, router, correction, experts, shared, layer: i })
    }
}

/// Where a family keeps its experts.
struct Names {
    router: String,
    /// Prefix of expert `j`'s tensors (`{experts}.{j}.{gate,up,down}`), and their names.
    experts: String,
    parts: [&'static str; 3],
}

impl Names {
    fn of(arch: Architecture, p: &str) -> Self {
        match arch {
            Architecture::Mixtral => Self {
                router: format!("{p}.block_sparse_moe.gate"),
                experts: format!("{p}.block_sparse_moe.experts"),
                parts: ["w1", "w3", "w2"],
            },
            Architecture::GptOss => {
                Self { router: format!("{p}.mlp.router"), experts: format!("{p}.mlp.experts"), parts: ["", "", ""] }
            }
            _ => Self {
                router: format!("{p}.mlp.gate"),
                experts: format!("{p}.mlp.experts"),
                parts: ["gate_proj", "up_proj", "down_proj"],
            },
        }
    }
}

/// One expert from its own tensors `{prefix}.{gate,up,down}.weight`.
fn per_expert(
    src: &mut dyn TensorSource,
    prefix: &str,
    parts: [&str; 3],
    h: usize,
    i: usize,
    bias: bool,
    act: DType,
) -> Result<Expert> {
    let mut gate = Linear::load(src, &format!("{prefix}.{}", parts[0]), i, h, bias, act)?;
    let mut up = Linear::load(src, &format!("{prefix}.{}", parts[1]), i, h, bias, act)?;
    let mut down = Linear::load(src, &format!("{prefix}.{}", parts[2]), h, i, bias, act)?;
    let mut gate_up =
        fuse([&mut gate, &mut up])?.ok_or_else(|| EngineError::tensor(prefix, TensorProblem::Quantized))?;
    gate_up.pack()?;
    down.pack()?;
    Ok(Expert { gate_up: Proj::Dense(gate_up), down: Proj::Dense(down) })
}

/// Every routed expert of a layer, from whichever layout the source holds.
fn load_experts(spec: &ModelSpec, src: &mut dyn TensorSource, n: &Names, act: DType) -> Result<Vec<Expert>> {
    let m = spec.moe.as_ref().expect("a sparse layer");
    let (h, i, e) = (spec.hidden_size, m.expert_intermediate_size, m.num_experts);
    if spec.architecture == Architecture::GptOss {
        return gpt_oss_experts(src, &n.experts, e, h, i, act);
    }
    let first = format!("{}.0.{}.weight", n.experts, n.parts[0]);
    if src.contains(&first) {
        return (0..e).map(|j| per_expert(src, &format!("{}.{j}", n.experts), n.parts, h, i, false, act)).collect();
    }
    // transformers v5: `gate_up_proj` (E, 2I, H), gate rows first; `down_proj` (E, H, I).
    let gu = src.tensor(&format!("{}.gate_up_proj", n.experts), &[e, 2 * i, h], Init::Std((1.0 / h as f64).sqrt()))?;
    let down = src.tensor(&format!("{}.down_proj", n.experts), &[e, h, i], Init::Std((1.0 / i as f64).sqrt()))?;
    (0..e).map(|j| Ok(Expert { gate_up: dense(gu.get(j)?, None)?, down: dense(down.get(j)?, None)? })).collect()
}

fn dense(w: Tensor, b: Option<Tensor>) -> Result<Proj> {
    let mut l = Linear { w: QMatMul::Tensor(w.contiguous()?), b, packed: None, fp8: None };
    l.pack()?;
    Ok(Proj::Dense(l))
}

/// gpt-oss's experts: `gate_up_proj` (E, H, 2I) used as x·W with gate and up interleaved
/// (columns 2c and 2c + 1), `down_proj` (E, I, H), biases (E, 2I) and (E, H); or the same
/// as MXFP4 `_blocks`/`_scales` holding the matrices as (E, out, in).
fn gpt_oss_experts(
    src: &mut dyn TensorSource,
    p: &str,
    e: usize,
    h: usize,
    i: usize,
    act: DType,
) -> Result<Vec<Expert>> {
    let gu_b = src.tensor(&format!("{p}.gate_up_proj_bias"), &[e, 2 * i], Init::Std(0.02))?.to_dtype(act)?;
    let down_b = src.tensor(&format!("{p}.down_proj_bias"), &[e, h], Init::Std(0.02))?.to_dtype(act)?;
    let blocks = format!("{p}.gate_up_proj_blocks");
    // Dummy weights of gpt-oss are MXFP4, as the published checkpoints are.
    if src.contains(&blocks) && (src.is_dummy() || !src.contains(&format!("{p}.gate_up_proj"))) {
        return gpt_oss_packed(src, p, (e, h, i), &gu_b, &down_b);
    }
    let std = |n: usize| Init::Std((1.0 / n as f64).sqrt());
    let gu = src.tensor(&format!("{p}.gate_up_proj"), &[e, h, 2 * i], std(h))?;
    let down = src.tensor(&format!("{p}.down_proj"), &[e, i, h], std(i))?;
    // De-interleave: gate = columns 0, 2, 4…; up = 1, 3, 5…; then (out, in) rows, gate first.
    let dev = gu.device().clone();
    let (even, odd) = (stride_idx(i, 0, &dev)?, stride_idx(i, 1, &dev)?);
    (0..e)
        .map(|j| {
            let w = gu.get(j)?; // (H, 2I)
            let w = Tensor::cat(&[w.index_select(&even, 1)?, w.index_select(&odd, 1)?], 1)?.t()?;
            Ok(Expert {
                gate_up: dense(w, Some(deinterleave(&gu_b.get(j)?, i)?))?,
                down: dense(down.get(j)?.t()?, Some(down_b.get(j)?))?,
            })
        })
        .collect()
}

/// A bias `(2I)` with gate and up interleaved, as `(gate ‖ up)`.
fn deinterleave(b: &Tensor, i: usize) -> Result<Tensor> {
    let dev = b.device();
    Ok(Tensor::cat(&[b.index_select(&stride_idx(i, 0, dev)?, 0)?, b.index_select(&stride_idx(i, 1, dev)?, 0)?], 0)?)
}

/// gpt-oss's MXFP4 experts, kept packed: `gate_up_proj_blocks` `(E, 2I, H/32, 16)` holds the
/// matrices as (out, in) with gate and up rows interleaved (reordered here, gate rows first);
/// `down_proj_blocks` `(E, H, I/32, 16)`.
fn gpt_oss_packed(
    src: &mut dyn TensorSource,
    p: &str,
    (e, h, i): (usize, usize, usize),
    gu_b: &Tensor,
    down_b: &Tensor,
) -> Result<Vec<Expert>> {
    let gu = mxfp4::packed(src, &format!("{p}.gate_up_proj"), e, 2 * i, h)?;
    let down = mxfp4::packed(src, &format!("{p}.down_proj"), e, h, i)?;
    let f32_bias = |b: Tensor| b.to_dtype(DType::F32);
    let order: Vec<usize> = (0..i).map(|r| 2 * r).chain((0..i).map(|r| 2 * r + 1)).collect();
    gu.into_iter()
        .zip(down)
        .enumerate()
        .map(|(j, (g, d))| {
            Ok(Expert {
                gate_up: Proj::Mx(Box::new(g.rows(&order)), Some(f32_bias(deinterleave(&gu_b.get(j)?, i)?)?)),
                down: Proj::Mx(Box::new(d), Some(f32_bias(down_b.get(j)?)?)),
            })
        })
        .collect()
}

fn stride_idx(n: usize, offset: u32, dev: &Device) -> Result<Tensor> {
    let idx: Vec<u32> = (0..n as u32).map(|c| 2 * c + offset).collect();
    Ok(Tensor::from_vec(idx, n, dev)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use goodput_core::Catalog;

    fn spec(name: &str) -> MoeSpec {
        Catalog::builtin().get(name).unwrap().moe.clone().unwrap()
    }

    /// Each family's rule by hand.
    #[test]
    fn routing_rules_by_hand() {
        // Softmax over [1, 3, 2, 0], top 2 = experts 1 and 2, renormalised: e^3/(e^3+e^2).
        let mix = MoeSpec { num_experts: 4, ..spec("tiny-mixtral") };
        let r = route(&mix, &[1.0, 3.0, 2.0, 0.0], None);
        let w1 = 3f32.exp() / (3f32.exp() + 2f32.exp());
        assert_eq!(r.iter().map(|x| x.0).collect::<Vec<_>>(), [1, 2]);
        assert!((r[0].1 - w1).abs() < 1e-6 && (r[1].1 - (1.0 - w1)).abs() < 1e-6);
        // Without renormalisation the weights are the softmax's.
        let raw = route(&MoeSpec { renormalize: false, ..mix.clone() }, &[1.0, 3.0, 2.0, 0.0], None);
        let total: f32 = [1f32, 3.0, 2.0, 0.0].iter().map(|x| x.exp()).sum();
        assert!((raw[0].1 - 3f32.exp() / total).abs() < 1e-6);
        // DeepSeek: 8 experts in 4 groups, 2 groups kept, top 2. The bias moves the choice
        // (expert 0's biased score wins) but the weights are the plain sigmoids, × 2.5.
        let ds =
            MoeSpec { num_experts: 8, n_group: 4, topk_group: 2, experts_per_token: 2, ..spec("tiny-deepseek-v3") };
        let logits = [0.0, -1.0, 2.0, 1.5, -2.0, -2.0, 1.0, 0.5];
        let bias = [3.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0];
        let sig = |x: f32| 1.0 / (1.0 + (-x).exp());
        let r = route(&ds, &logits, Some(&bias));
        // Groups (with bias): {0,1}: 3.5+0.27, {2,3}: 0.88+0.82, {4,5}: 0.24, {6,7}: 0.73+0.62.
        // Kept: {0,1} and {2,3}; top 2 by biased score: 0 (3.5) and 2 (0.88).
        assert_eq!(r.iter().map(|x| x.0).collect::<Vec<_>>(), [0, 2]);
        let norm = sig(0.0) + sig(2.0);
        assert!((r[0].1 - sig(0.0) / norm * 2.5).abs() < 1e-6, "{r:?}");
        // Without the bias, group {6,7} outranks {0,1}.
        let r = route(&ds, &logits, None);
        assert_eq!(r.iter().map(|x| x.0).collect::<Vec<_>>(), [2, 3]);
    }
}
