#!/usr/bin/env python3
"""Writes the small sample files of examples/ (deterministic; nothing is downloaded):

- examples/traces/mooncake-sample.jsonl: 120 requests over 120 s in Mooncake's trace format
  (timestamp ms, input_length, output_length, hash_ids of 512-token blocks). A few long
  "documents" are shared by many requests, as in Mooncake's conversation and tool traces, so a
  replay meets the prefix cache as the traced service did; bursts every 30 s.
- examples/traces/azure-sample.csv: 120 requests over 120 s in the Azure LLM inference trace
  format (TIMESTAMP, ContextTokens, GeneratedTokens).
- examples/datasets/sharegpt-sample.json: 16 ShareGPT conversations (1-3 turns).
- examples/datasets/prompts-sample.jsonl: 16 JSONL prompts with output_tokens.

Run from the repository root: python3 scripts/make-samples.py
"""
import datetime
import json
import random

rng = random.Random(20261130)

WORDS = ("the a of to and in is it that for on with as was at by this be from are or have an they which "
         "one you were all we there can what their if when up so out about into them then more some her "
         "would make like him has two its time could no see these my than first water been call who oil "
         "now find long down day did get come made may part over new sound take only little work know").split()


def sentence(n):
    return " ".join(rng.choice(WORDS) for _ in range(n))


def mooncake():
    lines, t_ms, next_hash = [], 0.0, 1000
    documents = [[next_hash + 10 * d + b for b in range(rng.randint(1, 3))] for d in range(6)]
    for i in range(120):
        # Poisson arrivals at ~1 req/s, with a burst of 8 at every 30 s mark.
        t_ms += rng.expovariate(1.0) * 1000 if i % 30 else 0.0
        doc = rng.choice(documents) if rng.random() < 0.6 else []
        own = rng.randint(1, 2)
        hashes = doc + list(range(next_hash + 100, next_hash + 100 + own))
        next_hash += own
        input_length = 512 * (len(hashes) - 1) + rng.randint(40, 512)
        lines.append({"timestamp": int(t_ms), "input_length": input_length,
                      "output_length": rng.randint(20, 200), "hash_ids": hashes})
    return "".join(json.dumps(line) + "\n" for line in lines)


def azure():
    t = datetime.datetime(2023, 11, 16, 18, 15, 46, 680590)
    rows = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    for _ in range(120):
        t += datetime.timedelta(seconds=rng.expovariate(1.0))
        rows.append(f"{t.strftime('%Y-%m-%d %H:%M:%S.%f')}0,{int(rng.lognormvariate(6.0, 0.7))},"
                    f"{rng.randint(10, 300)}")
    return "\n".join(rows) + "\n"


def sharegpt():
    out = []
    for i in range(16):
        conv = []
        for _ in range(rng.randint(1, 3)):
            conv.append({"from": "human", "value": sentence(rng.randint(20, 120))})
            conv.append({"from": "gpt", "value": sentence(rng.randint(20, 150))})
        out.append({"id": f"sample-{i}", "conversations": conv})
    return json.dumps(out, indent=1) + "\n"


def prompts():
    return "".join(json.dumps({"prompt": sentence(rng.randint(30, 200)), "output_tokens": rng.randint(16, 128)}) + "\n"
                   for _ in range(16))


if __name__ == "__main__":
    for path, text in [("examples/traces/mooncake-sample.jsonl", mooncake()),
                       ("examples/traces/azure-sample.csv", azure()),
                       ("examples/datasets/sharegpt-sample.json", sharegpt()),
                       ("examples/datasets/prompts-sample.jsonl", prompts())]:
        with open(path, "w") as f:
            f.write(text)
        print(f"wrote {path}")
