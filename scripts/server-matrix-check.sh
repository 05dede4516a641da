#!/usr/bin/env bash
# Server configurations in a matrix, against vLLM's CPU build (../shared/peers installs it):
# `[server]` starts `vllm serve` once per value of `server.max-num-seqs` (2 and 8), and once
# with a value vLLM refuses; each configuration is waited for, swept, stopped; the refused one
# is recorded and the matrix goes on; `--resume` then keeps the finished runs and reruns it.
# The matrix summary names the configuration that serves the most within the SLOs.
# Usage: scripts/server-matrix-check.sh [BINARY] [OUT]
set -euo pipefail
BIN=$(realpath "${1:-target/release/goodput}")
OUT=${2:-/tmp/server-matrix}
ROOT=/tmp/peers
if [ ! -x "$ROOT/vllmenv/bin/vllm" ] || [ ! -f "$ROOT/tinyllama/tokenizer.json" ]; then
  echo "vLLM's CPU build is not installed: run ../shared/peers/run_vllm_peer.sh once (then stop_vllm_peer.sh)"
  exit 2
fi
rm -rf "$OUT" && mkdir -p "$OUT"
cat > "$OUT/servers.toml" <<TOML
target = "http://127.0.0.1:8013"
concurrency = [1, 2, 4, 8]
requests = 80
warmup = 4
input-len = 256
output-len = 64
slo = "ttft_p95=300ms,tpot_p95=60ms"
out = "$OUT/runs"

[server]
command = "$ROOT/vllmenv/bin/vllm serve {model} --load-format dummy --dtype bfloat16 --host {host} --port {port} --max-model-len 2048 --max-num-seqs {max-num-seqs}"
model = "$ROOT/tinyllama"
start-timeout = "5m"
grace = "20s"
env = { VLLM_CPU_KVCACHE_SPACE = "1", HF_HUB_OFFLINE = "1", TRANSFORMERS_OFFLINE = "1", VLLM_CACHE_ROOT = "$ROOT/cache/vllm", TORCHINDUCTOR_CACHE_DIR = "$ROOT/cache/inductor", HF_HOME = "$ROOT/cache/hf", TMPDIR = "$ROOT/tmp" }

[matrix]
server.max-num-seqs = [2, "eight", 8]
TOML
echo "== the matrix, one configuration refused by vLLM"
"$BIN" run --config "$OUT/servers.toml" -q || echo "(exit $?: a configuration failed, as planned)"
echo "== resumed: the finished runs kept"
"$BIN" run --config "$OUT/servers.toml" -q --resume || echo "(exit $?)"
for d in "$OUT"/runs/*/; do
  echo "$d: $(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["end"], r["healthy_after_s"], r["exit"])' "$d/server.json")"
done
