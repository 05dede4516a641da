#!/usr/bin/env python3
"""Builds tiny random reference models with Hugging Face transformers and writes, for each, the
weights and the logits/greedy ids transformers computes, so the Rust engine can be checked against
transformers in CI without torch. Deterministic (fixed seeds, one CPU thread); nothing is downloaded.

Output: tests/fixtures/ref-models/<family>/
  config.json, generation_config.json, model.safetensors   as save_pretrained writes them (float32)
  reference.safetensors   prompt_{i} int64 [len], greedy_{i} int64 [32], logits_{i} float32 [len+32, vocab]
                          for i = 0, 1, 2 with prompt lengths 5, 13, 21 (random ids in [0, vocab))
  meta.json               versions, margins, the key names/shapes/dtypes of model.safetensors, checks
The math each family's transformers code does is written down in tests/fixtures/ref-models/README.md;
scripts/check-ref-models.py re-computes every reference from it with numpy alone.

Families (directory: class):
  qwen3            Qwen3ForCausalLM       2 layers, head_dim 32 != hidden/heads, tied embeddings
  qwen3_moe        Qwen3MoeForCausalLM    2 layers: layer 0 dense (mlp_only_layers=[0]), layer 1 sparse
  qwen3_moe_fused  same model and reference as qwen3_moe, experts in the fused in-memory v5 layout
                   (mlp.experts.gate_up_proj [E, 2I, H], mlp.experts.down_proj [E, H, I]); save_pretrained
                   of this transformers writes the per-expert hub layout (experts.{j}.gate_proj.weight ...)
  mixtral          MixtralForCausalLM     2 sparse layers, top-2 of 8
  deepseek_v3      DeepseekV3ForCausalLM  3 layers: layer 0 dense (first_k_dense_replace=1), 1-2 MoE; MLA
                   with q/kv LoRA, YaRN, interleaved rope, sigmoid grouped routing, non-zero
                   e_score_correction_bias, 1 shared expert, routed_scaling_factor 2.5
  gpt_oss          GptOssForCausalLM      4 layers sliding/full/sliding/full, window 8, sinks, biases, YaRN
  gpt_oss_mxfp4    gpt_oss's weights with the experts quantized to MXFP4 as openai/gpt-oss-20b stores them
                   (gate_up_proj_blocks/_scales, down_proj_blocks/_scales uint8), the other tensors in bf16
                   as published, the published config.json style (rope_scaling, quantization_config); its
                   reference is computed by transformers from that directory (dequantized on CPU)

Every model is evaluated in float32 with attn_implementation="eager" and experts_implementation="eager".
Each prompt is re-seeded until greedy decoding has a top-1/top-2 logit margin >= 1e-3 at every step,
every router decision (top-k boundary in router logits for softmax routers, in sigmoid+bias scores
for DeepSeek, its group choice too) has a margin >= 1e-3, the greedy ids never hit eos and hold at
least 8 distinct ids, so f32 implementations that differ by ~1e-5 pick the same ids and experts.
The reference greedy ids come from an explicit no-cache loop of full forwards; the logits are one
teacher-forced forward over prompt + greedy.

Generated with: python 3.11.7, torch 2.15.0 (+cu132 PyPI wheel, run on CPU), transformers 5.24.0
(the newest on PyPI; it has qwen3, qwen3_moe, mixtral, deepseek_v3 and gpt_oss), safetensors, numpy
(exact versions in each meta.json).

Setup and run from the repository root:
  python3 -m venv /tmp/refenv
  /tmp/refenv/bin/pip install torch transformers==5.24.0 safetensors numpy
  /tmp/refenv/bin/python scripts/make-ref-models.py            # all families
  /tmp/refenv/bin/python scripts/make-ref-models.py gpt_oss     # some
"""
import hashlib
import json
import math
import os
import shutil
import sys
import warnings

import numpy as np
import safetensors
import torch
import transformers
from safetensors import safe_open
from safetensors.torch import save_file
from transformers import (
    DeepseekV3Config,
    DeepseekV3ForCausalLM,
    GptOssConfig,
    GptOssForCausalLM,
    MixtralConfig,
    MixtralForCausalLM,
    Qwen3Config,
    Qwen3ForCausalLM,
    Qwen3MoeConfig,
    Qwen3MoeForCausalLM,
)

warnings.filterwarnings("ignore")
transformers.logging.set_verbosity_error()
transformers.utils.logging.disable_progress_bar()
torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "ref-models")
ROOT = os.path.normpath(ROOT)

VOCAB = 512
HIDDEN = 64
MAX_POS = 256
PROMPT_LENS = (5, 13, 21)
NEW_TOKENS = 32
MIN_MARGIN = 1e-3  # greedy top-1 minus top-2 logit, at every generated step
MIN_ROUTER_MARGIN = 1e-3  # gap at every router's top-k boundary (DeepSeek: group choice too)
MIN_DISTINCT = 8  # distinct ids among the 32 greedy ones: no collapsed, repeating continuations
MAX_ATTEMPTS = 200
BOS, EOS = 1, 2
COMMON = dict(
    vocab_size=VOCAB,
    hidden_size=HIDDEN,
    max_position_embeddings=MAX_POS,
    bos_token_id=BOS,
    eos_token_id=EOS,
    pad_token_id=None,
    attn_implementation="eager",
    experts_implementation="eager",
)

# family -> seed of the weights; prompt i, attempt a uses seed * 1000 + 100 * i + a
SEEDS = {"qwen3": 4, "qwen3_moe": 30, "mixtral": 8, "deepseek_v3": 33, "gpt_oss": 20}


def config_for(family):
    if family == "qwen3":
        return Qwen3ForCausalLM, Qwen3Config(
            **COMMON,
            intermediate_size=48,  # != hidden: no square MLP matrix hides a transposition
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=32,  # != hidden/heads = 16
            rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
            rms_norm_eps=1e-6,
            tie_word_embeddings=True,
        )
    if family == "qwen3_moe":
        return Qwen3MoeForCausalLM, Qwen3MoeConfig(
            **COMMON,
            intermediate_size=48,  # the dense layer 0
            moe_intermediate_size=16,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
            num_experts=8,
            num_experts_per_tok=2,
            norm_topk_prob=True,
            decoder_sparse_step=1,
            mlp_only_layers=[0],
            rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
            rms_norm_eps=1e-6,
            tie_word_embeddings=False,
        )
    if family == "mixtral":
        return MixtralForCausalLM, MixtralConfig(
            **COMMON,
            intermediate_size=16,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
            num_local_experts=8,
            num_experts_per_tok=2,
            sliding_window=None,
            rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
            rms_norm_eps=1e-5,
            tie_word_embeddings=False,
        )
    if family == "deepseek_v3":
        return DeepseekV3ForCausalLM, DeepseekV3Config(
            **COMMON,
            intermediate_size=32,  # the dense layer 0
            moe_intermediate_size=8,
            num_hidden_layers=3,
            first_k_dense_replace=1,
            num_attention_heads=4,
            num_key_value_heads=4,  # MLA: keys/values are expanded per head from the latent; must equal heads
            n_routed_experts=8,
            n_group=4,
            topk_group=2,
            num_experts_per_tok=2,
            n_shared_experts=1,
            routed_scaling_factor=2.5,
            norm_topk_prob=True,
            q_lora_rank=32,
            kv_lora_rank=32,
            qk_nope_head_dim=16,
            qk_rope_head_dim=8,
            v_head_dim=16,
            rope_interleave=True,
            rope_parameters={
                "rope_type": "yarn",
                "rope_theta": 10000.0,
                "factor": 4.0,
                "original_max_position_embeddings": 64,
                "beta_fast": 32,
                "beta_slow": 1,
                "mscale": 1.0,
                "mscale_all_dim": 1.0,
            },
            rms_norm_eps=1e-6,
            tie_word_embeddings=False,
        )
    if family == "gpt_oss":
        return GptOssForCausalLM, GptOssConfig(
            **COMMON,
            intermediate_size=32,  # a multiple of 32, the MXFP4 block, for gpt_oss_mxfp4
            num_hidden_layers=4,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
            num_local_experts=8,
            num_experts_per_tok=2,
            sliding_window=8,
            layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
            attention_bias=True,
            swiglu_limit=7.0,
            rope_parameters={
                "rope_type": "yarn",
                "rope_theta": 150000.0,
                "factor": 4.0,
                "original_max_position_embeddings": 64,
                "beta_fast": 32.0,
                "beta_slow": 1.0,
                "truncate": False,
            },
            rms_norm_eps=1e-5,
            tie_word_embeddings=False,
        )
    raise KeyError(family)


# ---------------------------------------------------------------------------------------------
# weights


def reinit(model, family, seed):
    """Re-initialises every parameter (and DeepSeek's e_score_correction_bias) from one seed so the
    logits are well spread and the routing decisive."""
    g = torch.Generator().manual_seed(seed)
    cfg = model.config

    def normal(p, std, mean=0.0):
        p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float32) * std + mean)

    router_std = {"deepseek_v3": 2.0, "gpt_oss": 3.0}.get(family, 4.0)  # x sqrt(1/H); inputs are ~unit rms
    with torch.no_grad():
        for name, p in model.named_parameters():  # tied lm_head is listed once, as embed_tokens
            fan_in = p.shape[-1]
            if name.endswith("embed_tokens.weight"):
                # tied: small, or greedy decoding just repeats the input token (logits ~ e_t . E); the
                # final norm below restores the logits' spread
                normal(p, 0.1 if cfg.tie_word_embeddings else 1.0)
            elif name == "lm_head.weight":
                normal(p, 2.0 / math.sqrt(fan_in))
            elif name == "model.norm.weight" and cfg.tie_word_embeddings:
                normal(p, 0.5, mean=5.0)
            elif "norm" in name and name.endswith(".weight"):  # RMSNorms incl. q/k/kv_a/q_a norms
                normal(p, 0.1, mean=1.0)
            elif name.endswith("self_attn.sinks"):
                normal(p, 1.0)
            elif name.endswith(("mlp.gate.weight", "mlp.router.weight")):
                normal(p, router_std / math.sqrt(fan_in))
            elif name.endswith("mlp.router.bias"):
                normal(p, 0.5)
            elif name.endswith("experts.gate_up_proj"):
                if family == "gpt_oss":  # [E, H, 2I], x @ W; larger so the swiglu clamp (7) bites
                    normal(p, 3.5 / math.sqrt(p.shape[1]))
                else:  # [E, 2I, H], x @ W.T
                    normal(p, 1.0 / math.sqrt(fan_in))
            elif name.endswith("experts.down_proj"):
                if family == "gpt_oss":  # [E, I, H]
                    normal(p, 0.5 / math.sqrt(p.shape[1]))
                else:  # [E, H, I]
                    normal(p, 1.0 / math.sqrt(fan_in))
            elif name.endswith(("bias", "_bias")):
                normal(p, 0.1)
            elif p.ndim == 2:  # nn.Linear [out, in]
                normal(p, 1.0 / math.sqrt(fan_in))
            else:
                raise RuntimeError(f"no init rule for {name} {tuple(p.shape)}")
        for name, b in model.named_buffers():
            if name.endswith("e_score_correction_bias"):
                normal(b, 0.15)


# ---------------------------------------------------------------------------------------------
# routers: margins at every top-k boundary, from the router's own inputs


class RouterProbe:
    def __init__(self, model, family):
        self.family = family
        self.records = []
        self.handles = []
        for name, mod in model.named_modules():
            if type(mod).__name__.endswith(("TopKRouter", "TopkRouter")):
                self.handles.append(mod.register_forward_hook(self.hook(name)))

    def hook(self, name):
        def fn(mod, inputs, outputs):
            x = inputs[0].reshape(-1, mod.hidden_dim).float()
            self.records.append((name, mod, x, outputs[2]))

        return fn

    def clear(self):
        self.records = []

    def analyse(self):
        """min margin over all tokens/layers, tokens where DeepSeek's bias changed the selection,
        and a check that the recomputed selection equals the module's."""
        mins, bias_changed, mismatched = [], 0, 0
        for name, mod, x, idx in self.records:
            if self.family in ("qwen3_moe", "mixtral", "qwen3_moe_fused"):
                q = x @ mod.weight.float().T  # softmax is monotonic: the top-k of the logits
                srt = q.sort(dim=-1, descending=True).values
                mins.append((srt[:, mod.top_k - 1] - srt[:, mod.top_k]).min().item())
                sel = q.topk(mod.top_k, dim=-1).indices
            elif self.family.startswith("gpt_oss"):
                q = x @ mod.weight.float().T + mod.bias.float()
                srt = q.sort(dim=-1, descending=True).values
                mins.append((srt[:, mod.top_k - 1] - srt[:, mod.top_k]).min().item())
                sel = q.topk(mod.top_k, dim=-1).indices
            else:  # deepseek_v3
                s = torch.sigmoid(x @ mod.weight.float().T)
                sel, m = deepseek_select(mod, s + mod.e_score_correction_bias)
                sel0, _ = deepseek_select(mod, s)
                mins.append(m)
                bias_changed += int((sel.sort(-1).values != sel0.sort(-1).values).any(-1).sum())
            mismatched += int((sel.sort(-1).values != idx.sort(-1).values).any(-1).sum())
        return min(mins), bias_changed, mismatched


def deepseek_select(mod, choice):
    e, ng, kg, k = mod.num_experts, mod.num_group, mod.topk_group, mod.top_k
    grp = choice.view(-1, ng, e // ng).topk(2, dim=-1).values.sum(-1)
    gs = grp.sort(dim=-1, descending=True).values
    gmargin = (gs[:, kg - 1] - gs[:, kg]).min().item() if kg < ng else math.inf
    gidx = grp.topk(kg, dim=-1).indices
    gmask = torch.zeros_like(grp).scatter_(1, gidx, 1).bool()
    emask = gmask.unsqueeze(-1).expand(-1, ng, e // ng).reshape(-1, e)
    masked = choice.masked_fill(~emask, float("-inf"))
    es = masked.sort(dim=-1, descending=True).values
    emargin = (es[:, k - 1] - es[:, k]).min().item()
    return masked.topk(k, dim=-1).indices, min(gmargin, emargin)


class ClampProbe:
    """Counts gpt-oss swiglu inputs beyond the clamp, to show the fixture exercises it."""

    def __init__(self, model):
        self.gate_hi = self.up_out = self.total = 0
        for mod in model.modules():
            if type(mod).__name__ == "GptOssExperts":
                orig = mod._apply_gate

                def wrapped(gate_up, orig=orig, mod=mod):
                    gate, up = gate_up[..., ::2], gate_up[..., 1::2]
                    self.gate_hi += int((gate > mod.limit).sum())
                    self.up_out += int((up.abs() > mod.limit).sum())
                    self.total += gate.numel()
                    return orig(gate_up)

                mod._apply_gate = wrapped


# ---------------------------------------------------------------------------------------------
# reference data


@torch.no_grad()
def greedy_no_cache(model, prompt):
    ids = prompt.clone()
    step_logits, margins = [], []
    for _ in range(NEW_TOKENS):
        last = model(input_ids=ids[None], use_cache=False).logits[0, -1].float()
        top = last.topk(2).values
        margins.append((top[0] - top[1]).item())
        step_logits.append(last)
        ids = torch.cat([ids, last.argmax().view(1)])
    return ids[len(prompt):], torch.stack(step_logits), margins


@torch.no_grad()
def make_reference(model, family, seed, probe):
    """Picks prompts (re-seeding until every margin holds) and computes the reference tensors."""
    tensors, info = {}, []
    for i, n in enumerate(PROMPT_LENS):
        for attempt in range(MAX_ATTEMPTS):
            pseed = seed * 1000 + 100 * i + attempt
            g = torch.Generator().manual_seed(pseed)
            prompt = torch.randint(0, VOCAB, (n,), generator=g, dtype=torch.int64)
            greedy, step_logits, margins = greedy_no_cache(model, prompt)
            if min(margins) < MIN_MARGIN or (greedy == EOS).any() or greedy.unique().numel() < MIN_DISTINCT:
                continue
            full = torch.cat([prompt, greedy])
            probe.clear()
            logits = model(input_ids=full[None], use_cache=False).logits[0].float()
            rmargin, bias_changed, mismatched = probe.analyse() if probe.handles else (math.inf, 0, 0)
            if rmargin < MIN_ROUTER_MARGIN:
                continue
            break
        else:
            raise RuntimeError(f"{family}: no prompt {i} with margins after {MAX_ATTEMPTS} attempts")
        assert mismatched == 0, f"{family}: recomputed router selection differs from the module's"
        # the one teacher-forced forward must agree with the loop of full forwards
        tf = logits[n - 1 : n - 1 + NEW_TOKENS]
        assert torch.equal(tf.argmax(-1), greedy), f"{family}: teacher-forced argmax != greedy"
        loop_vs_tf = (tf - step_logits).abs().max().item()
        # generate() with its cache, only as a cross-check (the reference does not rely on it)
        gen = model.generate(
            input_ids=prompt[None], attention_mask=torch.ones(1, n, dtype=torch.int64), do_sample=False,
            max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, use_cache=True, eos_token_id=None,
            pad_token_id=0,
        )[0, n:]
        tensors[f"prompt_{i}"] = prompt.contiguous()
        tensors[f"greedy_{i}"] = greedy.contiguous()
        tensors[f"logits_{i}"] = logits.contiguous()
        info.append({
            "prompt_len": n,
            "prompt_seed": pseed,
            "attempts": attempt + 1,
            "min_greedy_margin": min(margins),
            "min_router_margin": None if math.isinf(rmargin) else rmargin,
            "tokens_where_e_score_correction_bias_changed_the_experts": bias_changed if family.startswith("deepseek") else None,
            "max_abs_diff_loop_vs_teacher_forced": loop_vs_tf,
            "generate_with_cache_matches": bool(torch.equal(gen, greedy)),
            "distinct_greedy_ids": int(greedy.unique().numel()),
        })
    return tensors, info


@torch.no_grad()
def default_impl_diff(cls, path, tensors):
    """Max |logits| difference between eager and transformers' default kernels (sdpa, grouped_mm)."""
    try:
        m = cls.from_pretrained(path, dtype=torch.float32).eval()
    except Exception as e:  # noqa: BLE001
        return f"not run: {type(e).__name__}: {e}"[:200]
    out = 0.0
    for i in range(len(PROMPT_LENS)):
        full = torch.cat([tensors[f"prompt_{i}"], tensors[f"greedy_{i}"]])
        lg = m(input_ids=full[None], use_cache=False).logits[0].float()
        out = max(out, (lg - tensors[f"logits_{i}"]).abs().max().item())
    return {"attn": m.config._attn_implementation, "experts": m.config._experts_implementation, "max_abs_diff": out}


def keys_of(path):
    out = []
    with safe_open(path, "pt") as f:
        for k in sorted(f.keys()):
            s = f.get_slice(k)
            out.append({"name": k, "shape": list(s.get_shape()), "dtype": s.get_dtype()})
    return out


def versions():
    return {
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "safetensors": safetensors.__version__,
        "numpy": np.__version__,
    }


def sha256(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def fresh_dir(family):
    d = os.path.join(ROOT, family)
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    return d


def write_meta(d, meta):
    for f in os.listdir(d):
        os.chmod(os.path.join(d, f), 0o644)  # save_file writes 0600
    meta["files"] = {f: {"bytes": os.path.getsize(os.path.join(d, f)), "sha256": sha256(os.path.join(d, f))}
                     for f in sorted(os.listdir(d)) if f != "meta.json"}
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")


def summary(family, info):
    return {
        "min_greedy_margin": min(x["min_greedy_margin"] for x in info),
        "min_router_margin": min((x["min_router_margin"] for x in info if x["min_router_margin"] is not None),
                                 default=None),
    }


# ---------------------------------------------------------------------------------------------
# families


def build(family):
    cls, cfg = config_for(family)
    torch.manual_seed(SEEDS[family])  # construction draws from the global generator; reinit overwrites it all
    model = cls(cfg).eval()
    reinit(model, family, SEEDS[family])
    assert model.config._attn_implementation == "eager" and model.config._experts_implementation == "eager"
    return cls, model


def run_family(family):
    cls, model = build(family)
    probe = RouterProbe(model, family)
    clamp = ClampProbe(model) if family == "gpt_oss" else None
    d = fresh_dir(family)
    model.save_pretrained(d)
    # what we computed with must be what was saved: reload and compare every tensor
    re = cls.from_pretrained(d, dtype=torch.float32, attn_implementation="eager", experts_implementation="eager")
    sd, rsd = model.state_dict(), re.state_dict()
    assert sd.keys() == rsd.keys() and all(torch.equal(sd[k], rsd[k]) for k in sd), f"{family}: reload differs"
    tensors, info = make_reference(model, family, SEEDS[family], probe)
    save_file(tensors, os.path.join(d, "reference.safetensors"), metadata={"format": "pt"})
    meta = {
        "family": family,
        "class": cls.__name__,
        "versions": versions(),
        "weights_seed": SEEDS[family],
        "attn_implementation": "eager",
        "experts_implementation": "eager",
        "dtype": "float32",
        **summary(family, info),
        "prompts": info,
        "default_kernels_vs_reference": default_impl_diff(cls, d, tensors),
    }
    if clamp is not None:
        meta["swiglu_clamp_hits"] = {"gate_above_limit": clamp.gate_hi, "up_outside_limit": clamp.up_out,
                                     "values_seen": clamp.total}
    meta["model_safetensors_keys"] = keys_of(os.path.join(d, "model.safetensors"))
    write_meta(d, meta)
    print(f"{family:16s} min greedy margin {meta['min_greedy_margin']:.4g}  min router margin "
          f"{meta['min_router_margin']}  attempts {[x['attempts'] for x in info]}")
    if family == "qwen3_moe":
        write_qwen3_moe_fused(model, d, tensors, meta)
    if family == "gpt_oss":
        write_gpt_oss_mxfp4(model, info)
    return meta


def write_qwen3_moe_fused(model, src, tensors, src_meta):
    """The same weights in the other layout: the fused 3-D expert tensors the v5 modules hold."""
    family = "qwen3_moe_fused"
    d = fresh_dir(family)
    for f in ("config.json", "generation_config.json"):
        shutil.copy(os.path.join(src, f), os.path.join(d, f))
    sd = {k: v.contiguous() for k, v in model.state_dict().items()}
    save_file(sd, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    shutil.copy(os.path.join(src, "reference.safetensors"), os.path.join(d, "reference.safetensors"))
    # transformers must load this layout into the same model and give the same logits
    m = Qwen3MoeForCausalLM.from_pretrained(d, dtype=torch.float32, attn_implementation="eager",
                                            experts_implementation="eager").eval()
    msd = m.state_dict()
    assert msd.keys() == sd.keys() and all(torch.equal(msd[k], sd[k]) for k in sd)
    diff = 0.0
    with torch.no_grad():
        for i in range(len(PROMPT_LENS)):
            full = torch.cat([tensors[f"prompt_{i}"], tensors[f"greedy_{i}"]])
            lg = m(input_ids=full[None], use_cache=False).logits[0]
            assert torch.equal(lg[len(tensors[f"prompt_{i}"]) - 1 : -1].argmax(-1), tensors[f"greedy_{i}"])
            diff = max(diff, (lg - tensors[f"logits_{i}"]).abs().max().item())
    assert diff < 1e-5, diff
    meta = dict(src_meta)
    meta["loaded_by_transformers_max_abs_diff_vs_reference"] = diff
    meta["family"] = family
    meta["note"] = ("same config, weights and reference.safetensors as qwen3_moe; only the expert tensors' "
                    "layout differs (fused [E, 2I, H] gate_up_proj = cat(gate, up) rows, [E, H, I] down_proj)")
    meta.pop("files", None)
    meta["model_safetensors_keys"] = keys_of(os.path.join(d, "model.safetensors"))
    write_meta(d, meta)
    print(f"{family:16s} loads in transformers to the same weights; logits within {diff:.2g} (reference copied)")


# ---------------------------------------------------------------------------------------------
# MXFP4 (gpt-oss): 32 values per block along the input dim, one E8M0 scale byte (2^(s-127)) per
# block, FP4 E2M1 codes two per byte, low nibble = even element. Layout as openai/gpt-oss-20b:
#   gate_up_proj_blocks [E, 2I, H/32, 16] u8, gate_up_proj_scales [E, 2I, H/32] u8  (rows = the 2I
#   outputs, still gate/up interleaved: row 2j = gate j, row 2j+1 = up j)
#   down_proj_blocks    [E, H, I/32, 16] u8,  down_proj_scales    [E, H, I/32] u8
# i.e. the transpose of the in-memory gate_up_proj [E, H, 2I] / down_proj [E, I, H].

FP4_VALUES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                       -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0], dtype=np.float32)


def mxfp4_quantize(w):
    """w [..., K] float32 (K % 32 == 0) -> blocks [..., K/32, 16] u8, scales [..., K/32] u8.
    OCP MX rule: scale = 2^(floor(log2(amax)) - 2); elements rounded to the nearest E2M1 value,
    saturating at +-6."""
    *pre, k = w.shape
    x = w.reshape(*pre, k // 32, 32).astype(np.float32)
    amax = np.abs(x).max(-1)
    e = np.where(amax > 0, np.floor(np.log2(np.maximum(amax, 1e-38))) - 2, -127).clip(-127, 127)
    y = x / np.exp2(e)[..., None]
    mags = FP4_VALUES[:8]
    idx = np.abs(np.abs(y)[..., None] - mags).argmin(-1).astype(np.uint8)  # ties -> smaller magnitude
    codes = idx | np.where(y < 0, 8, 0).astype(np.uint8)
    blocks = (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)
    scales = (e + 127).astype(np.uint8)
    return blocks, scales


def mxfp4_dequantize(blocks, scales):
    """Inverse of the packing: -> [..., K] float32."""
    lo, hi = FP4_VALUES[blocks & 0x0F], FP4_VALUES[blocks >> 4]
    vals = np.stack([lo, hi], axis=-1).reshape(*blocks.shape[:-1], 32)
    vals = vals * np.exp2(scales.astype(np.float32) - 127)[..., None]
    return vals.reshape(*blocks.shape[:-2], -1).astype(np.float32)


def write_gpt_oss_mxfp4(model, src_info):
    from transformers import Mxfp4Config
    from transformers.integrations.mxfp4 import convert_moe_packed_tensors

    family = "gpt_oss_mxfp4"
    d = fresh_dir(family)
    cfg = model.config
    out = {}
    for k, v in model.state_dict().items():
        if k.endswith(("experts.gate_up_proj", "experts.down_proj")):
            rows = v.transpose(1, 2).contiguous().numpy()  # [E, out, in]
            blocks, scales = mxfp4_quantize(rows)
            tb, ts = torch.from_numpy(blocks), torch.from_numpy(scales)
            # transformers' own dequantizer must read our bytes to the same weights as ours
            theirs = convert_moe_packed_tensors(tb, ts, dtype=torch.float32)
            ours = torch.from_numpy(mxfp4_dequantize(blocks, scales)).transpose(1, 2)
            assert torch.equal(theirs, ours), k
            out[k + "_blocks"], out[k + "_scales"] = tb, ts
        else:
            out[k] = v.to(torch.bfloat16).contiguous()  # published: everything else bf16
    save_file(dict(sorted(out.items())), os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    rp = cfg.rope_parameters
    published_style = {  # the key set of openai/gpt-oss-20b's config.json, with this model's values
        "architectures": ["GptOssForCausalLM"],
        "attention_bias": True,
        "attention_dropout": 0.0,
        "eos_token_id": EOS,
        "experts_per_token": cfg.num_experts_per_tok,
        "head_dim": cfg.head_dim,
        "hidden_act": "silu",
        "hidden_size": cfg.hidden_size,
        "initial_context_length": rp["original_max_position_embeddings"],
        "initializer_range": 0.02,
        "intermediate_size": cfg.intermediate_size,
        "layer_types": list(cfg.layer_types),
        "max_position_embeddings": cfg.max_position_embeddings,
        "model_type": "gpt_oss",
        "num_attention_heads": cfg.num_attention_heads,
        "num_experts_per_tok": cfg.num_experts_per_tok,
        "num_hidden_layers": cfg.num_hidden_layers,
        "num_key_value_heads": cfg.num_key_value_heads,
        "num_local_experts": cfg.num_local_experts,
        "output_router_logits": False,
        "pad_token_id": 0,
        "quantization_config": {
            "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                       "model.embed_tokens", "lm_head"],
            "quant_method": "mxfp4",
        },
        "rms_norm_eps": cfg.rms_norm_eps,
        "rope_scaling": {
            "beta_fast": rp["beta_fast"],
            "beta_slow": rp["beta_slow"],
            "factor": rp["factor"],
            "original_max_position_embeddings": rp["original_max_position_embeddings"],
            "rope_type": "yarn",
            "truncate": False,
        },
        "rope_theta": rp["rope_theta"],
        "router_aux_loss_coef": 0.9,
        "sliding_window": cfg.sliding_window,
        "swiglu_limit": cfg.swiglu_limit,
        "tie_word_embeddings": False,
        "transformers_version": "4.57.0",
        "use_cache": True,
        "vocab_size": cfg.vocab_size,
    }
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(published_style, f, indent=2)
        f.write("\n")
    # transformers reads the directory itself (dequantizing MXFP4 on CPU) and computes the reference
    m = GptOssForCausalLM.from_pretrained(
        d, dtype=torch.float32, attn_implementation="eager", experts_implementation="eager",
        quantization_config=Mxfp4Config(dequantize=True),
    ).eval()
    assert type(m.model.layers[0].mlp.experts).__name__ == "GptOssExperts"
    lc = m.config
    assert lc.rope_parameters == {**cfg.rope_parameters}, (lc.rope_parameters, cfg.rope_parameters)
    for a in ("sliding_window", "layer_types", "num_experts_per_tok", "num_local_experts", "swiglu_limit",
              "swiglu_alpha", "head_dim", "rms_norm_eps", "intermediate_size", "tie_word_embeddings"):
        assert getattr(lc, a) == getattr(cfg, a), a
    # the loaded weights: bf16-rounded non-expert tensors, our dequantized experts
    msd = m.state_dict()
    for k, v in model.state_dict().items():
        if k.endswith(("experts.gate_up_proj", "experts.down_proj")):
            b, s = out[k + "_blocks"].numpy(), out[k + "_scales"].numpy()
            want = torch.from_numpy(mxfp4_dequantize(b, s)).transpose(1, 2)
        else:
            want = v.to(torch.bfloat16).float()
        assert torch.equal(msd[k], want), k
    probe = RouterProbe(m, family)
    tensors, info = make_reference(m, family, SEEDS["gpt_oss"], probe)
    save_file(tensors, os.path.join(d, "reference.safetensors"), metadata={"format": "pt"})
    meta = {
        "family": family,
        "class": "GptOssForCausalLM",
        "versions": versions(),
        "weights": ("gpt_oss's weights; experts MXFP4-quantized (OCP rule: scale 2^(floor(log2 amax)-2), "
                    "round to nearest E2M1, saturate at 6), every other tensor rounded to bf16 and stored "
                    "bf16 as openai/gpt-oss-20b stores them; the reference is transformers' float32 eager "
                    "forward of this directory loaded with Mxfp4Config(dequantize=True)"),
        "attn_implementation": "eager",
        "experts_implementation": "eager",
        "compute_dtype": "float32",
        **summary(family, info),
        "prompts": info,
        "model_safetensors_keys": keys_of(os.path.join(d, "model.safetensors")),
    }
    write_meta(d, meta)
    print(f"{family:16s} min greedy margin {meta['min_greedy_margin']:.4g}  min router margin "
          f"{meta['min_router_margin']}  attempts {[x['attempts'] for x in info]}")


def main(argv):
    families = argv or list(SEEDS)
    for f in families:
        if f not in SEEDS:
            raise SystemExit(f"unknown family {f} (one of {', '.join(SEEDS)}; qwen3_moe also writes "
                             "qwen3_moe_fused, gpt_oss also writes gpt_oss_mxfp4)")
    os.makedirs(ROOT, exist_ok=True)
    print(f"transformers {transformers.__version__}, torch {torch.__version__} -> {ROOT}")
    for f in families:
        run_family(f)
    total = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(ROOT) for f in fs)
    print(f"total size of {ROOT}: {total / 1e6:.2f} MB")


if __name__ == "__main__":
    main(sys.argv[1:])
