#!/usr/bin/env python3
"""A Mooncake-format trace (JSONL: timestamp ms, input_length, output_length, hash_ids) whose
requests share system prompts: each request takes one of --groups prefixes of --prefix-blocks
blocks (drawn Zipf-like, so some prefixes are hot), then --own-blocks blocks of its own.
Arrivals are Poisson at --rate for --duration seconds. Standard library only; seeded.

  scripts/shared-prefix-trace.py --rate 6 --duration 60 --out trace.jsonl

With goodput's --trace-block-size B (Mooncake: 512) a request's prompt is
(prefix-blocks + own-blocks) × B tokens, the first prefix-blocks × B shared with every request
of its group.
"""
import argparse
import json
import random


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rate", type=float, default=6.0, help="requests per second (Poisson)")
    ap.add_argument("--duration", type=float, default=60.0, help="seconds")
    ap.add_argument("--groups", type=int, default=16)
    ap.add_argument("--prefix-blocks", type=int, default=4)
    ap.add_argument("--own-blocks", type=int, default=1)
    ap.add_argument("--output", type=int, default=32, help="output tokens per request")
    ap.add_argument("--block-size", type=int, default=64, help="tokens per hash id, as --trace-block-size")
    ap.add_argument("--zipf", type=float, default=1.0, help="group popularity ∝ 1/(rank+1)^s")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    if not (a.rate > 0 and a.duration > 0 and a.groups >= 1 and a.prefix_blocks >= 0 and a.own_blocks >= 1):
        raise SystemExit("--rate and --duration must be positive, --groups and --own-blocks at least 1")
    rng = random.Random(a.seed)
    weights = [1.0 / (g + 1) ** a.zipf for g in range(a.groups)]
    t, n, next_own = 0.0, 0, 1_000_000
    with open(a.out, "w") as f:
        while True:
            t += rng.expovariate(a.rate)
            if t >= a.duration:
                break
            g = rng.choices(range(a.groups), weights)[0]
            ids = [g * 1000 + b for b in range(a.prefix_blocks)] + list(range(next_own, next_own + a.own_blocks))
            next_own += a.own_blocks
            line = {
                "timestamp": round(t * 1000.0, 3),
                "input_length": (a.prefix_blocks + a.own_blocks) * a.block_size,
                "output_length": a.output,
                "hash_ids": ids,
            }
            f.write(json.dumps(line) + "\n")
            n += 1
    share = a.prefix_blocks / (a.prefix_blocks + a.own_blocks)
    print(f"{n} requests over {a.duration:.0f} s to {a.out}: {a.groups} prefixes of {a.prefix_blocks * a.block_size} tokens "
          f"({share:.0%} of each prompt), {a.output} output tokens")


if __name__ == "__main__":
    main()
