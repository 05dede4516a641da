#!/usr/bin/env python3
"""goodput's projections beside published serving figures (docs/sizing.md, "Public figures
beside the projection"). Nothing is fitted to the figures: every projection runs with the
stated efficiencies of `goodput plan`. Prints the three tables as Markdown.

  scripts/public-figures.py [--goodput target/release/goodput] [--only dense,oss,deepseek]

1. TensorRT-LLM perf-overview v0.17 (FP8, max throughput): the throughput plateau of a closed
   loop under lenient SLOs, --max-num-seqs 2048 --max-num-batched-tokens 16384.
2. InferenceX gpt-oss-120b 1k/1k FP4 on B200: `plan --curve` over TP 1/2/4/8, its Pareto
   frontier interpolated at 72, 86 and 100 tok/s per user.
3. SGLang DeepSeek-V3 on 12 x 8 H100 with prefill/decode disaggregation (LMSYS, 2025-05-05):
   each phase alone on its own layout (`plan --export-profile … --json`): prefill on 4 nodes
   (TP1·DP32·EP32), decode on 8 nodes (TP1·DP64·EP64: SGLang's EP72 needs EPLB's redundant
   experts, 256 do not split 72 ways), 2000-token inputs, the decode batch the KV holds.
"""
import argparse
import json
import os
import subprocess
import tempfile

LENIENT = "ttft_p95=1000s,tpot_p95=10s,e2e_p95=100000s,error_rate=100%"

# (model, isl, osl, gpu, tp, published output tok/s per system), TensorRT-LLM v0.17 FP8.
TRT = [
    ("llama-3.1-8b", 128, 128, "h100-sxm", 1, 28836.77), ("llama-3.1-8b", 128, 128, "h200", 1, 29526.04),
    ("llama-3.1-8b", 2048, 128, "h100-sxm", 1, 3556.73), ("llama-3.1-8b", 2048, 128, "h200", 1, 3794.14),
    ("llama-3.1-8b", 128, 2048, "h100-sxm", 1, 21109.38), ("llama-3.1-8b", 128, 2048, "h200", 1, 25398.86),
] + [
    ("llama-3.1-70b", isl, osl, gpu, tp, fig)
    for (isl, osl, gpu, figs) in [
        (128, 128, "h100-sxm", [3378.03, 6645.12, 11127.53, 14730.69]),
        (128, 128, "h200", [4020.75, 6823.01, 11098.63, 15355.84]),
        (2048, 128, "h100-sxm", [343.29, 772.66, 1302.6, 1923.41]),
        (2048, 128, "h200", [465.99, 809, 1358.06, 1983.03]),
    ]
    for tp, fig in zip([1, 2, 4, 8], figs)
]

OSS = [(72, 25320), (86, 22213), (100, 20939)]  # tok/s per user, tok/s per GPU


def scenario(dirname, isl, osl):
    path = os.path.join(dirname, f"fixed-{isl}-{osl}.toml")
    with open(path, "w") as f:
        f.write(f'kind = "single"\nname = "fixed-{isl}-{osl}"\n')
        f.write(f'input = {{ kind = "fixed", n = {isl} }}\noutput = {{ kind = "fixed", n = {osl} }}\n')
    return path


def goodput(binary, args):
    out = subprocess.run([binary] + args, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"goodput {' '.join(args)}: {out.stderr}")
    return out.stdout


def dense(binary, tmp):
    print("| model | ISL/OSL | GPU | TP | TensorRT-LLM v0.17, FP8 (output tok/s) | goodput projection (output tok/s) | projection ÷ published |")
    print("|---|---|---|---|---|---|---|")
    for model, isl, osl, gpu, tp, fig in TRT:
        js = os.path.join(tmp, "plan.json")
        goodput(binary, ["plan", "-m", model, "--users", "8192", "--gpus", gpu, "--tp", str(tp), "--dtype", "fp8",
                         "--max-num-seqs", "2048", "--max-num-batched-tokens", "16384", "--scenario",
                         scenario(tmp, isl, osl), "--slo", LENIENT, "--requests", "400", "--json", js])
        row = json.load(open(js))["rows"][0]
        tps = row.get("capacity_output_tps")
        proj = f"{tps:,.0f}" if tps else f"- ({row['unfit']})"
        ratio = f"{tps / fig:.2f}" if tps else "-"
        print(f"| {model} | {isl}/{osl} | {gpu} | {tp} | {fig:,.0f} | {proj} | {ratio} |")


def interpolate(frontier, x, key):
    pts = sorted(frontier, key=lambda p: p["tps_per_user"])
    for a, b in zip(pts, pts[1:]):
        if a["tps_per_user"] <= x <= b["tps_per_user"]:
            f = (x - a["tps_per_user"]) / (b["tps_per_user"] - a["tps_per_user"])
            return a[key] + f * (b[key] - a[key]), f"{a['layout']}@{a['users']}–{b['layout']}@{b['users']}"
    return None, "outside the frontier"


def oss(binary, tmp):
    js = os.path.join(tmp, "curve.json")
    goodput(binary, ["plan", "--curve", "-m", "gpt-oss-120b", "--gpus", "b200", "--tp", "1,2,4,8", "--ep", "1",
                     "--dtype", "mxfp4", "--scenario", scenario(tmp, 1024, 1024), "--max-num-seqs", "512",
                     "--max-num-batched-tokens", "16384", "--requests", "100", "--slo", LENIENT, "--json", js])
    frontier = [p for p in json.load(open(js))["points"] if p["frontier"]]
    print("| tok/s per user | InferenceX (tok/s per GPU) | goodput, input + output | ratio | goodput, output only | ratio | frontier points between |")
    print("|---|---|---|---|---|---|---|")
    for user, fig in OSS:
        total, between = interpolate(frontier, user, "total_tps_per_gpu")
        out, _ = interpolate(frontier, user, "output_tps_per_gpu")
        if total is None:
            print(f"| {user} | {fig:,} | - | - | - | - | {between} |")
            continue
        print(f"| {user} | {fig:,} | {total:,.0f} | {total / fig:.2f} | {out:,.0f} | {out / fig:.2f} | {between} |")


def deepseek(binary, tmp):
    scen = scenario(tmp, 2000, 100)
    rows = []
    for phase, dp, nodes, figure in [("prefill", 32, 4, 52300), ("decode", 64, 8, 22300)]:
        js = os.path.join(tmp, f"{phase}.json")
        goodput(binary, ["plan", "--export-profile", "h100-sxm", "-m", "deepseek-v3", "--tp", "1", "--dp-attention",
                         str(dp), "--ep", str(dp), "--nodes", str(nodes), "--dtype", "fp8", "--kv-dtype", "bf16",
                         "--scenario", scen, "--max-num-batched-tokens", "16384", "--max-num-seqs", "1024",
                         "--out", os.path.join(tmp, f"{phase}-profile.json"), "--json", js])
        table = json.load(open(js))
        if phase == "prefill":
            r = next(r for r in table if r["phase"] == "prefill")
            what = f"{r['batch']} × {r['prompt_tokens']}-token prompts a step"
        else:
            r = next(r for r in table if r["phase"] == "decode" and r["kv_full"])
            what = f"{r['batch']} sequences per GPU at {r['context']} context (the KV full)"
        per_node = r["tokens_per_s_per_gpu"] * 8
        rows.append((phase, f"TP1·DP{dp}·EP{dp}", what, figure, per_node))
    print("| phase | layout (H100, FP8 weights, bf16 KV) | step | SGLang (tok/s per node) | goodput projection (tok/s per node) | ratio |")
    print("|---|---|---|---|---|---|")
    for phase, layout, what, fig, proj in rows:
        print(f"| {phase} | {layout} | {what} | {fig:,} | {proj:,.0f} | {proj / fig:.2f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--goodput", default="target/release/goodput")
    ap.add_argument("--only", default="dense,oss,deepseek")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for name, f in [("dense", dense), ("oss", oss), ("deepseek", deepseek)]:
            if name in a.only.split(","):
                f(a.goodput, tmp)
                print()


if __name__ == "__main__":
    main()
