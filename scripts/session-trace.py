#!/usr/bin/env python3
"""A trace of sessions in the form AIPerf's `mooncake_trace` reads with `session_id` (and
goodput's `run --trace`): one JSON line per turn, `session_id`, the first turn's `timestamp`
(ms), each later turn's `delay` (ms after the turn before it ended: a tool's or a user's wait),
`input_length`, `output_length` and `hash_ids`, the prompt's blocks. A session's context grows
as an agent's does: each turn's blocks are the turn before's, then new ones (its answer and the
next message or tool result); no two sessions share a block. With `--subagents N`, each
session's first turn calls N subagents (`parent_session_id`), two turns each, which start
`delay` ms after it and share its first block (the system prompt); the session's next turn
waits for them.

  scripts/session-trace.py [--sessions N] [--turns K] [--first-blocks F] [--blocks-per-turn B]
                           [--block-size T] [--output O] [--gap-ms G] [--delay-ms D] [--subagents N]
                           [--seed S] > trace.jsonl
"""
import argparse
import json
import random
import sys


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sessions", type=int, default=16)
    p.add_argument("--turns", type=int, default=6)
    p.add_argument("--first-blocks", type=int, default=4)
    p.add_argument("--blocks-per-turn", type=int, default=2)
    p.add_argument("--block-size", type=int, default=64)
    p.add_argument("--output", type=int, default=16)
    p.add_argument("--gap-ms", type=float, default=500.0, help="between sessions' starts")
    p.add_argument("--delay-ms", type=float, default=200.0, help="mean tool wait between turns")
    p.add_argument("--subagents", type=int, default=0, help="subagents each session's first turn calls")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    rng = random.Random(a.seed)
    for s in range(a.sessions):
        blocks = [s * 10_000 + j for j in range(a.first_blocks)]
        for t in range(a.turns):
            if t > 0:
                blocks = blocks + [s * 10_000 + len(blocks) + j for j in range(a.blocks_per_turn)]
            line = {"session_id": f"session-{s}"}
            if t == 0:
                line["timestamp"] = round(s * a.gap_ms, 3)
            else:
                line["delay"] = round(rng.expovariate(1.0 / a.delay_ms), 3) if a.delay_ms > 0 else 0
            line.update(input_length=len(blocks) * a.block_size, output_length=a.output, hash_ids=blocks)
            sys.stdout.write(json.dumps(line) + "\n")
            for k in range(a.subagents if t == 0 else 0):
                own = [blocks[0]] + [s * 10_000 + 5_000 + k * 100 + j for j in range(2)]
                for u in range(2):
                    sub = {"session_id": f"session-{s}-sub-{k}"}
                    if u == 0:
                        sub["parent_session_id"] = f"session-{s}"
                    sub["delay"] = round(rng.expovariate(1.0 / a.delay_ms), 3) if a.delay_ms > 0 else 0
                    own = own + ([s * 10_000 + 5_000 + k * 100 + 50 + u] if u else [])
                    sub.update(input_length=len(own) * a.block_size, output_length=a.output, hash_ids=own)
                    sys.stdout.write(json.dumps(sub) + "\n")


if __name__ == "__main__":
    main()
