#!/usr/bin/env bash
# Reasoning models measured against vLLM's own figures: vLLM's CPU build serving the tiny
# shape with dummy weights behind a tokenizer that has <think>/</think> and its deepseek_r1
# reasoning parser (everything before </think> streams as delta.reasoning), pinned to core 0;
# `goodput run` over chat from core 1 (and once over the Responses API). goodput's TTFT,
# TTFO, reasoning tokens and reasoning share per level, beside vLLM's TTFT histogram (the
# scrapes bracketing each level) and its usage's reasoning_tokens. Then the `reasoning`
# scenario through `goodput serve` (dummy weights, reasoning asked through goodput's
# extension field) over HTTP and in-process. Prints one Markdown table of them all.
#
#   scripts/vs-vllm-reasoning.sh
#
# Environment: OUT (default /tmp/vs-vllm-reasoning-<time>), PEERS (../shared/peers), GOODPUT
# (the release binary), REQUESTS (40). A benchmark, not a CI test: it installs vLLM on first
# use (~6 GB under /tmp/peers, ~10 min); ~6 min once installed.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PEERS=${PEERS:-$ROOT/../shared/peers}
GOODPUT=${GOODPUT:-$ROOT/target/release/goodput}
REQUESTS=${REQUESTS:-40}
OUT=${OUT:-/tmp/vs-vllm-reasoning-$(date +%Y%m%d-%H%M%S)}
MODEL_DIR=/tmp/peers/tiny-think
die() { echo "vs-vllm-reasoning: $*" >&2; exit 1; }
[ -x "$GOODPUT" ] || die "no $GOODPUT: run cargo build --release first"
[ -x "$PEERS/run_vllm_peer.sh" ] || die "no vLLM peer scripts in $PEERS"
mkdir -p "$OUT"
cat > "$OUT/fixed-128-64.toml" <<'EOF'
name = "fixed-128-64"
input = { kind = "fixed", n = 128 }
output = { kind = "fixed", n = 64 }
EOF

# 1. vLLM with its reasoning parser.
taskset -c 0 env THINK=1 MODEL_DIR=$MODEL_DIR MODEL_SHAPE=tiny PORT=8011 \
  EXTRA_ARGS="--reasoning-parser deepseek_r1" "$PEERS/run_vllm_peer.sh"
trap '"$PEERS/stop_vllm_peer.sh" || true' EXIT
peer() {
  taskset -c 1 "$GOODPUT" run --target http://127.0.0.1:8011 --served-model-name $MODEL_DIR --model tiny \
    --tokenizer $MODEL_DIR --scenario "$OUT/fixed-128-64.toml" --warmup 4 --seed 12 --scrape-interval 200ms \
    --slo ttft_p95=2s,ttfo_p95=5s --out "$OUT/$1" "${@:2}" > "$OUT/$1.txt" 2>&1
}
peer vllm-chat --api chat --concurrency 1,4 --requests "$REQUESTS"
peer vllm-responses --api responses --concurrency 2 --requests 8
"$PEERS/stop_vllm_peer.sh"
trap - EXIT

# 2. The reasoning scenario through goodput serve (core 0) over HTTP, and in-process.
taskset -c 0 "$GOODPUT" serve --port 8125 --max-model-len 1024 > "$OUT/serve.log" 2>&1 &
SERVE=$!
trap 'kill $SERVE 2>/dev/null || true' EXIT
for _ in $(seq 60); do curl -sf http://127.0.0.1:8125/health >/dev/null && break; sleep 0.5; done
common=(--scenario reasoning --max-model-len 1024 --concurrency 1,4 --requests 8 --warmup 2 --seed 21
  --slo ttfo_p95=5s,tpot_p95=50ms --refine 0)
taskset -c 1 "$GOODPUT" run --target http://127.0.0.1:8125 "${common[@]}" --out "$OUT/serve" > "$OUT/serve.txt" 2>&1
kill $SERVE; wait $SERVE 2>/dev/null || true
trap - EXIT
"$GOODPUT" run "${common[@]}" --out "$OUT/in-process" --report > "$OUT/in-process.txt" 2>&1

# 3. One table.
python3 - "$OUT" vllm-chat vllm-responses serve in-process <<'PY'
import json, sys
out, runs = sys.argv[1], sys.argv[2:]
print("| run | users | n | TTFT p50 / p95 ms | TTFO p50 / p95 ms | reasoning p50 ms | reasoning tokens p50 | share | server TTFT mean ms (n) |")
print("|---|---|---|---|---|---|---|---|---|")
for name in runs:
    s = json.load(open(f"{out}/{name}/summary.json"))
    for l in s["levels"]:
        S = l["summary"]
        ms = lambda k, st: f"{S[k][st] * 1e3:.1f}" if S.get(k) else "-"
        h = (l.get("server") or {}).get("histograms", {}).get("time_to_first_token_seconds")
        srv = f"{h['mean'] * 1e3:.1f} ({h['count']:.0f})" if h and h.get("mean") is not None else "-"
        rt = f"{S['reasoning_tokens']['p50']:g}" if S.get("reasoning_tokens") else "-"
        print(f"| {name} | {S['load']:g} | {S['ttft']['n']} | {ms('ttft', 'p50')} / {ms('ttft', 'p95')} | "
              f"{ms('ttfo', 'p50')} / {ms('ttfo', 'p95')} | {ms('reasoning_time', 'p50')} | "
              f"{rt} | {S.get('reasoning_share') or 0:.3f} | {srv} |")
PY
echo "results in $OUT" >&2
