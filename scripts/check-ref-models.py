#!/usr/bin/env python3
"""Re-computes the reference logits of tests/fixtures/ref-models/ with an independent numpy-only
implementation of each family (no torch, no transformers), written from the math in
tests/fixtures/ref-models/README.md, and compares: teacher-forced logits to within 1e-4 and the
greedy ids exactly. It checks the README, the key layouts (including the MXFP4 packing) and the
config conventions that a port such as the Rust engine must follow.

Run from the repository root (needs only numpy): python3 scripts/check-ref-models.py [DIR ...]
"""
import json
import math
import os
import struct
import sys

import numpy as np

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures",
                                     "ref-models"))
TOL = 1e-4
f32 = np.float32


def load_safetensors(path):
    """Minimal reader: 8-byte little-endian header size, JSON header, raw little-endian data."""
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    data = raw[8 + n :]
    out = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        buf = data[a:b]
        dt = v["dtype"]
        if dt == "BF16":  # the top 16 bits of an f32
            arr = (np.frombuffer(buf, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            arr = np.frombuffer(buf, dtype={"F32": "<f4", "I64": "<i8", "U8": "u1"}[dt])
        out[k] = arr.reshape(v["shape"])
    return out


# ------------------------------------------------------------------------------------------------
# building blocks


def rmsnorm(x, w, eps):
    x = x.astype(f32)
    return (w * (x / np.sqrt((x * x).mean(-1, keepdims=True) + f32(eps)))).astype(f32)


def silu(x):
    return x / (1 + np.exp(-x))


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def linear(x, w, b=None):  # nn.Linear: w [out, in]
    y = x @ w.T
    return y if b is None else y + b


def rope_params(cfg, dim):
    """-> (inv_freq [dim/2], attention_factor), from config.json's rope_parameters (v5) or
    rope_theta + rope_scaling (v4 / published)."""
    rp = cfg.get("rope_parameters") or {}
    theta = rp.get("rope_theta", cfg.get("rope_theta"))
    if "rope_type" not in rp and cfg.get("rope_scaling"):
        rp = {**cfg["rope_scaling"], "rope_theta": theta}
    kind = rp.get("rope_type", rp.get("type", "default"))
    pos_freqs = theta ** (np.arange(0, dim, 2, dtype=np.float64).astype(f32) / dim)
    if kind == "default":
        return (1.0 / pos_freqs).astype(f32), 1.0
    assert kind == "yarn", kind
    factor, orig = rp["factor"], rp["original_max_position_embeddings"]
    ms, msa = rp.get("mscale"), rp.get("mscale_all_dim")

    def get_mscale(s, m=1.0):
        return 1.0 if s <= 1 else 0.1 * m * math.log(s) + 1.0

    att = rp.get("attention_factor")
    if att is None:
        att = get_mscale(factor, ms) / get_mscale(factor, msa) if (ms and msa) else get_mscale(factor)
    bf, bs = rp.get("beta_fast") or 32, rp.get("beta_slow") or 1

    def corr_dim(nrot):
        return dim * math.log(orig / (nrot * 2 * math.pi)) / (2 * math.log(theta))

    low, high = corr_dim(bf), corr_dim(bs)
    if rp.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(dim // 2, dtype=f32) - low) / (high - low), 0, 1).astype(f32)
    extra, inter = 1.0 / pos_freqs, 1.0 / (factor * pos_freqs)
    inv = inter * ramp + extra * (1 - ramp)
    return inv.astype(f32), att


def cos_sin(inv_freq, att, T):
    ang = np.arange(T, dtype=f32)[:, None] * inv_freq[None, :]
    return (np.cos(ang) * f32(att)).astype(f32), (np.sin(ang) * f32(att)).astype(f32)  # [T, d/2]


def rope_half(x, cos, sin):  # x [T, heads, d]: NeoX / rotate_half: pairs (i, i + d/2)
    d = x.shape[-1] // 2
    x1, x2 = x[..., :d], x[..., d:]
    c, s = cos[:, None, :], sin[:, None, :]
    return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], -1)


def rope_interleaved(x, cos, sin):  # DeepSeek: pairs (2i, 2i+1); output de-interleaved [evens | odds]
    x1, x2 = x[..., 0::2], x[..., 1::2]
    c, s = cos[:, None, :], sin[:, None, :]
    return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], -1)


def attention(q, k, v, scale, window=None, sinks=None):
    """q [T, H, d], k [T, KV, d], v [T, KV, dv]; head h reads kv head h // (H / KV)."""
    T, H, _ = q.shape
    rep = H // k.shape[1]
    k, v = np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1)
    s = np.einsum("qhd,khd->hqk", q, k) * f32(scale)
    i, j = np.arange(T)[:, None], np.arange(T)[None, :]
    allowed = j <= i
    if window is not None:
        allowed &= j > i - window  # keys i-window+1 .. i
    s = np.where(allowed[None], s, -np.inf)
    if sinks is not None:  # one extra logit per head in the softmax, then dropped
        s = np.concatenate([s, np.broadcast_to(sinks[:, None, None], (H, T, 1))], -1)
        p = softmax(s)[..., :-1]
    else:
        p = softmax(s)
    return np.einsum("hqk,khd->qhd", p, v).reshape(T, -1).astype(f32)


def swiglu_mlp(x, gate, up, down):
    return linear(silu(linear(x, gate)) * linear(x, up), down)


# ------------------------------------------------------------------------------------------------
# families


def llama_like_attention(W, p, cfg, x, cs, qk_norm):
    T = x.shape[0]
    hd = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    q = linear(x, W[p + "q_proj.weight"]).reshape(T, -1, hd)
    k = linear(x, W[p + "k_proj.weight"]).reshape(T, -1, hd)
    v = linear(x, W[p + "v_proj.weight"]).reshape(T, -1, hd)
    if qk_norm:  # Qwen3: RMSNorm over head_dim, per head, before rope
        q = rmsnorm(q, W[p + "q_norm.weight"], cfg["rms_norm_eps"])
        k = rmsnorm(k, W[p + "k_norm.weight"], cfg["rms_norm_eps"])
    q, k = rope_half(q, *cs), rope_half(k, *cs)
    return linear(attention(q, k, v, hd ** -0.5), W[p + "o_proj.weight"])


def forward_qwen_mixtral(W, cfg, ids):
    mt = cfg["model_type"]
    T, eps = len(ids), cfg["rms_norm_eps"]
    hd = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    cs = cos_sin(*rope_params(cfg, hd), T)
    x = W["model.embed_tokens.weight"][ids]
    n_exp = cfg.get("num_experts", cfg.get("num_local_experts"))
    k = cfg.get("num_experts_per_tok")
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        x = x + llama_like_attention(W, p + "self_attn.", cfg, rmsnorm(x, W[p + "input_layernorm.weight"], eps),
                                     cs, qk_norm=mt != "mixtral")
        h = rmsnorm(x, W[p + "post_attention_layernorm.weight"], eps)
        moe = p + ("block_sparse_moe." if mt == "mixtral" else "mlp.")
        if moe + "gate.weight" not in W:  # dense layer
            x = x + swiglu_mlp(h, W[p + "mlp.gate_proj.weight"], W[p + "mlp.up_proj.weight"],
                               W[p + "mlp.down_proj.weight"])
            continue
        probs = softmax(linear(h, W[moe + "gate.weight"]))
        top = np.argsort(-probs, -1, kind="stable")[:, :k]
        w = np.take_along_axis(probs, top, -1)
        if mt == "mixtral" or cfg.get("norm_topk_prob"):
            w = w / w.sum(-1, keepdims=True)
        out = np.zeros_like(h)
        for e in range(n_exp):
            if mt == "mixtral":
                g, u, d = (W[f"{moe}experts.{e}.{n}.weight"] for n in ("w1", "w3", "w2"))
            elif moe + "experts.gate_up_proj" in W:  # fused: [E, 2I, H] = cat(gate, up), [E, H, I]
                gu = W[moe + "experts.gate_up_proj"][e]
                g, u = np.split(gu, 2, axis=0)
                d = W[moe + "experts.down_proj"][e]
            else:
                g, u, d = (W[f"{moe}experts.{e}.{n}_proj.weight"] for n in ("gate", "up", "down"))
            rows, slot = np.nonzero(top == e)
            if len(rows):
                out[rows] += w[rows, slot][:, None] * swiglu_mlp(h[rows], g, u, d)
        x = x + out
    x = rmsnorm(x, W["model.norm.weight"], eps)
    head = W.get("lm_head.weight", W["model.embed_tokens.weight"])  # tied: no lm_head.weight stored
    return linear(x, head)


def forward_deepseek_v3(W, cfg, ids):
    T, eps, H = len(ids), cfg["rms_norm_eps"], cfg["num_attention_heads"]
    dn, dr, dv = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
    kvr = cfg["kv_lora_rank"]
    inv, att = rope_params(cfg, dr)
    cs = cos_sin(inv, att, T)
    rp = cfg["rope_parameters"]
    scale = (dn + dr) ** -0.5
    if rp.get("rope_type", "default") != "default" and rp.get("mscale_all_dim"):
        m = 0.1 * rp["mscale_all_dim"] * math.log(rp["factor"]) + 1.0
        scale *= m * m
    E, ng, kg, k = cfg["n_routed_experts"], cfg["n_group"], cfg["topk_group"], cfg["num_experts_per_tok"]
    x = W["model.embed_tokens.weight"][ids]
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        a = p + "self_attn."
        h = rmsnorm(x, W[p + "input_layernorm.weight"], eps)
        # the q_a / kv_a norms are built with their default eps 1e-6, not rms_norm_eps
        q = linear(rmsnorm(linear(h, W[a + "q_a_proj.weight"]), W[a + "q_a_layernorm.weight"], 1e-6),
                   W[a + "q_b_proj.weight"]).reshape(T, H, dn + dr)
        ckv = linear(h, W[a + "kv_a_proj_with_mqa.weight"])
        c, k_rope = ckv[:, :kvr], ckv[:, kvr:].reshape(T, 1, dr)
        kv = linear(rmsnorm(c, W[a + "kv_a_layernorm.weight"], 1e-6), W[a + "kv_b_proj.weight"]).reshape(T, H, dn + dv)
        k_nope, v = kv[..., :dn], kv[..., dn:]
        rope = rope_interleaved if cfg.get("rope_interleave", True) else rope_half
        q_rope, k_rope = rope(q[..., dn:], *cs), rope(k_rope, *cs)
        qq = np.concatenate([q[..., :dn], q_rope], -1)
        kk = np.concatenate([k_nope, np.broadcast_to(k_rope, (T, H, dr))], -1)
        x = x + linear(attention(qq, kk, v, scale), W[a + "o_proj.weight"])
        h = rmsnorm(x, W[p + "post_attention_layernorm.weight"], eps)
        mp = p + "mlp."
        if l < cfg["first_k_dense_replace"]:
            x = x + swiglu_mlp(h, W[mp + "gate_proj.weight"], W[mp + "up_proj.weight"], W[mp + "down_proj.weight"])
            continue
        s = sigmoid(linear(h, W[mp + "gate.weight"]))
        choice = s + W[mp + "gate.e_score_correction_bias"]  # the bias only picks; weights use s
        grp = np.sort(choice.reshape(T, ng, E // ng), -1)[..., -2:].sum(-1)
        keep = np.argsort(-grp, -1, kind="stable")[:, :kg]
        gmask = np.zeros((T, ng), bool)
        np.put_along_axis(gmask, keep, True, -1)
        masked = np.where(np.repeat(gmask, E // ng, -1), choice, -np.inf)
        top = np.argsort(-masked, -1, kind="stable")[:, :k]
        w = np.take_along_axis(s, top, -1)
        if cfg.get("norm_topk_prob"):
            w = w / (w.sum(-1, keepdims=True) + 1e-20)
        w = w * cfg["routed_scaling_factor"]
        out = swiglu_mlp(h, W[mp + "shared_experts.gate_proj.weight"], W[mp + "shared_experts.up_proj.weight"],
                         W[mp + "shared_experts.down_proj.weight"])
        for e in range(E):
            rows, slot = np.nonzero(top == e)
            if len(rows):
                g, u, d = (W[f"{mp}experts.{e}.{n}_proj.weight"] for n in ("gate", "up", "down"))
                out[rows] += w[rows, slot][:, None] * swiglu_mlp(h[rows], g, u, d)
        x = x + out
    return linear(rmsnorm(x, W["model.norm.weight"], eps), W["lm_head.weight"])


FP4 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], dtype=f32)


def mxfp4(blocks, scales):
    """[E, R, G, 16] u8 + [E, R, G] u8 -> [E, R, G*32] f32: low nibble = even element, x 2^(s-127)."""
    v = np.stack([FP4[blocks & 15], FP4[blocks >> 4]], -1).reshape(*blocks.shape[:-1], 32)
    v = v * np.exp2(scales.astype(f32) - 127)[..., None]
    return v.reshape(*blocks.shape[:-2], -1).astype(f32)


def forward_gpt_oss(W, cfg, ids):
    T, eps, hd = len(ids), cfg["rms_norm_eps"], cfg["head_dim"]
    cs = cos_sin(*rope_params(cfg, hd), T)
    k = cfg.get("num_experts_per_tok", cfg.get("experts_per_token"))
    limit, alpha = cfg.get("swiglu_limit", 7.0), cfg.get("swiglu_alpha", 1.702)
    x = W["model.embed_tokens.weight"][ids]
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        a = p + "self_attn."
        h = rmsnorm(x, W[p + "input_layernorm.weight"], eps)
        q = linear(h, W[a + "q_proj.weight"], W[a + "q_proj.bias"]).reshape(T, -1, hd)
        kk = linear(h, W[a + "k_proj.weight"], W[a + "k_proj.bias"]).reshape(T, -1, hd)
        v = linear(h, W[a + "v_proj.weight"], W[a + "v_proj.bias"]).reshape(T, -1, hd)
        q, kk = rope_half(q, *cs), rope_half(kk, *cs)
        win = cfg["sliding_window"] if cfg["layer_types"][l] == "sliding_attention" else None
        o = attention(q, kk, v, hd ** -0.5, window=win, sinks=W[a + "sinks"])
        x = x + linear(o, W[a + "o_proj.weight"], W[a + "o_proj.bias"])
        h = rmsnorm(x, W[p + "post_attention_layernorm.weight"], eps)
        m = p + "mlp."
        logits = linear(h, W[m + "router.weight"], W[m + "router.bias"])
        top = np.argsort(-logits, -1, kind="stable")[:, :k]
        w = softmax(np.take_along_axis(logits, top, -1))  # top-k first, then softmax over the k
        ex = m + "experts."
        if ex + "gate_up_proj" in W:  # [E, H, 2I], [E, I, H]: x @ W
            gu_w, d_w = W[ex + "gate_up_proj"], W[ex + "down_proj"]
        else:  # MXFP4 [E, out, in/32, 16]: transpose back to x @ W
            gu_w = mxfp4(W[ex + "gate_up_proj_blocks"], W[ex + "gate_up_proj_scales"]).transpose(0, 2, 1)
            d_w = mxfp4(W[ex + "down_proj_blocks"], W[ex + "down_proj_scales"]).transpose(0, 2, 1)
        out = np.zeros_like(h)
        for e in range(gu_w.shape[0]):
            rows, slot = np.nonzero(top == e)
            if not len(rows):
                continue
            gu = h[rows] @ gu_w[e] + W[ex + "gate_up_proj_bias"][e]
            gate, up = np.minimum(gu[:, 0::2], limit), np.clip(gu[:, 1::2], -limit, limit)
            y = (up + 1) * (gate * sigmoid(alpha * gate))
            out[rows] += w[rows, slot][:, None] * (y @ d_w[e] + W[ex + "down_proj_bias"][e])
        x = x + out
    return linear(rmsnorm(x, W["model.norm.weight"], eps), W["lm_head.weight"])


FORWARD = {"qwen3": forward_qwen_mixtral, "qwen3_moe": forward_qwen_mixtral, "mixtral": forward_qwen_mixtral,
           "deepseek_v3": forward_deepseek_v3, "gpt_oss": forward_gpt_oss}


def check(d):
    cfg = json.load(open(os.path.join(d, "config.json")))
    W = {k: v.astype(f32) if v.dtype != np.uint8 else v
         for k, v in load_safetensors(os.path.join(d, "model.safetensors")).items()}
    R = load_safetensors(os.path.join(d, "reference.safetensors"))
    fwd = FORWARD[cfg["model_type"]]
    worst, ok = 0.0, True
    for i in range(3):
        prompt, greedy, ref = R[f"prompt_{i}"], R[f"greedy_{i}"], R[f"logits_{i}"]
        full = np.concatenate([prompt, greedy])
        lg = fwd(W, cfg, full)
        diff = float(np.abs(lg - ref).max())
        worst = max(worst, diff)
        am = lg[len(prompt) - 1 : -1].argmax(-1)
        if diff > TOL or not np.array_equal(am, greedy):
            ok = False
    print(f"{os.path.basename(d):16s} {'ok  ' if ok else 'FAIL'} max |logits - reference| = {worst:.3g}")
    return ok


def main(argv):
    dirs = argv or sorted(os.path.join(ROOT, x) for x in os.listdir(ROOT) if os.path.isdir(os.path.join(ROOT, x)))
    ok = all([check(d) for d in dirs])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main(sys.argv[1:])
