#!/usr/bin/env python3
"""The table of scripts/vs-vllm-cpu.sh: goodput/vLLM ratios per prompt length, users and client.

Reads OUT/rR/inN/CLIENT/SERVER/: `goodput run`'s run/summary.json (its levels carry the same
flat fields as vLLM's result files: max_concurrency, output_throughput, median_ttft_ms,
median_tpot_ms) or `vllm bench serve`'s users-U.json. For each round the ratio goodput/vLLM of
each figure; printed as the median over rounds [min–max], with each server's median figures
and the 1-minute load the runs started at.

    scripts/vs-vllm-table.py /tmp/vs-vllm-20261206-130000
"""
import json
import statistics
import sys
from pathlib import Path

FIGURES = [("output_throughput", "output tok/s"), ("median_ttft_ms", "median TTFT"), ("median_tpot_ms", "median TPOT")]


def levels(d: Path):
    """{users: {figure: value}} of one run directory."""
    out = {}
    summary = d / "run" / "summary.json"
    if summary.exists():
        for lv in json.loads(summary.read_text())["levels"]:
            out[int(lv["max_concurrency"])] = {f: lv[f] for f, _ in FIGURES}
    for f in sorted(d.glob("users-*.json")):
        r = json.loads(f.read_text())
        out[int(r["max_concurrency"])] = {k: r[k] for k, _ in FIGURES}
    return out


def load(d: Path):
    p = d / "loadavg.before"
    return float(p.read_text().split()[0]) if p.exists() else float("nan")


def spread(xs):
    return f"{statistics.median(xs):.2f} [{min(xs):.2f}–{max(xs):.2f}]" if xs else "-"


def main(root: Path):
    rows = {}
    for run in sorted(root.glob("r*/in*/*/goodput")):
        client, inp, rnd = run.parent.name, run.parent.parent.name[2:], run.parent.parent.parent.name
        vllm = run.parent / "vllm"
        g, v = levels(run), levels(vllm)
        for users in sorted(set(g) & set(v)):
            key = (int(inp), users, client)
            row = rows.setdefault(key, {"ratios": {f: [] for f, _ in FIGURES}, "g": [], "v": [], "load": []})
            for f, _ in FIGURES:
                row["ratios"][f].append(g[users][f] / v[users][f])
            row["g"].append(g[users])
            row["v"].append(v[users])
            row["load"] += [load(run), load(vllm)]
    if not rows:
        sys.exit(f"vs-vllm-table: no paired runs under {root}")
    print(f"goodput / vLLM ({root.name}); median over rounds [min–max]; output tok/s above 1 and TTFT/TPOT below 1 favour goodput\n")
    print("| in | users | client | rounds | output tok/s | median TTFT | median TPOT | goodput tok/s | vLLM tok/s | goodput TTFT ms | vLLM TTFT ms | load |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for (inp, users, client), r in sorted(rows.items()):
        med = lambda side, f: statistics.median(x[f] for x in r[side])
        print(
            f"| {inp} | {users} | {client} | {len(r['g'])} | "
            + " | ".join(spread(r["ratios"][f]) for f, _ in FIGURES)
            + f" | {med('g', 'output_throughput'):.0f} | {med('v', 'output_throughput'):.0f}"
            + f" | {med('g', 'median_ttft_ms'):.0f} | {med('v', 'median_ttft_ms'):.0f}"
            + f" | {statistics.median(r['load']):.2f} |"
        )


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(Path(sys.argv[1]))
