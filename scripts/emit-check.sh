#!/usr/bin/env bash
# `plan --emit vllm` checked against vLLM's CPU build (../shared/peers installs it): the command
# the plan emits for a small model, every flag as emitted, started with the peer's model
# directory and dummy weights in place of the repository (no download here). Passes when the
# server answers /health; a flag vLLM refuses ends it with vLLM's own message.
# Usage: scripts/emit-check.sh [BINARY]
set -euo pipefail
BIN=${1:-target/release/goodput}
ROOT=/tmp/peers
VENV=$ROOT/vllmenv
PORT=${PORT:-8012}
LOG=$ROOT/logs/emit-check.log
if [ ! -x "$VENV/bin/vllm" ] || [ ! -f "$ROOT/tinyllama/tokenizer.json" ]; then
  echo "vLLM's CPU build is not installed: run ../shared/peers/run_vllm_peer.sh once (then stop_vllm_peer.sh)"
  exit 2
fi
mkdir -p "$ROOT/logs"
# Blocks of 32: vLLM's CPU attention takes multiples of 32 only ("No common block size for 16
# (CPU_ATTN: [MultipleOf(32)])"), where its GPU backends take the plan's default of 16.
emitted=$("$BIN" plan -m tiny --rate 1 --gpus h100-sxm --tp 1 --dtype bf16 --block-size 32 --emit vllm 2>/dev/null)
echo "$emitted"
# The command without its comments and line breaks: `vllm serve MODEL FLAGS…`.
cmd=$(echo "$emitted" | grep -v '^#' | tr -d '\\' | tr '\n' ' ')
read -r -a words <<< "$cmd"
[ "${words[0]} ${words[1]}" = "vllm serve" ] || { echo "not a vllm serve command: $cmd"; exit 1; }
flags=("${words[@]:3}")
echo "starting: vllm serve $ROOT/tinyllama ${flags[*]} --load-format dummy --port $PORT"
env HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_CPU_KVCACHE_SPACE=1 \
  setsid "$VENV/bin/vllm" serve "$ROOT/tinyllama" "${flags[@]}" --load-format dummy \
  --host 127.0.0.1 --port "$PORT" --max-model-len 2048 > "$LOG" 2>&1 &
pid=$!
trap 'kill -- -$pid 2>/dev/null || true' EXIT
t0=$(date +%s)
until curl -sf "http://127.0.0.1:$PORT/health" > /dev/null; do
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "vLLM exited; its log:"; tail -30 "$LOG"; exit 1
  fi
  if [ $(( $(date +%s) - t0 )) -gt 300 ]; then echo "no /health within 300 s"; tail -30 "$LOG"; exit 1; fi
  sleep 2
done
echo "vLLM serves with the emitted flags: /health answered after $(( $(date +%s) - t0 )) s"
grep -E "non-default args|max_num_seqs" "$LOG" | head -3 | cut -c1-400
# Every flag of a wide-EP fp8 plan (attention DP, expert parallel, fp8 weights and KV) among the
# flags this vLLM knows (`vllm serve --help=all`); a GPU-only value cannot start on a CPU.
wide=$("$BIN" plan -m deepseek-v3 --rate 10 --gpus h200 --tp 1 --dp-attention 8 --ep all --dtype fp8 --emit vllm 2>/dev/null)
help=$("$VENV/bin/vllm" serve --help=all 2>/dev/null)
missing=0
for f in $(echo "$wide" | grep -v '^#' | grep -oE -- '--[a-z-]+' | sort -u); do
  if grep -qE -- "^  $f[ ,=]|^  $f\$" <<< "$help"; then echo "vllm knows $f"; else echo "vllm does not know $f"; missing=1; fi
done
exit $missing
