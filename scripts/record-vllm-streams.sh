#!/usr/bin/env bash
# Records real vLLM CPU streams (issue 48) as the client's fixtures: the raw SSE bodies of a
# completions stream with usage, a chat stream with usage, a reasoning stream through
# `--reasoning-parser deepseek_r1`, and an error answer, each prefixed with an SSE comment
# naming the server and the request. Needs ../shared/peers (installs vLLM on first use,
# ~10 min); two server starts of ~100 s each.
#   scripts/record-vllm-streams.sh [OUT_DIR]   (default crates/client/tests/fixtures/recorded)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-crates/client/tests/fixtures/recorded}
PEERS=${PEERS:-../shared/peers}
PORT=${PORT:-8011}
mkdir -p "$OUT"
url=http://127.0.0.1:$PORT

wait_ready() {
  for _ in $(seq 1 300); do
    curl -sf "$url/v1/models" >/dev/null 2>&1 && return 0
    sleep 1
  done
  echo "vLLM did not come up on $url" >&2
  return 1
}

# record NAME PATH BODY: the response body of POST PATH, after a comment naming what it is.
record() {
  local name=$1 path=$2 body=$3 version
  version=$(/tmp/peers/vllmenv/bin/python -c 'import vllm; print(vllm.__version__)' 2>/dev/null || echo '?')
  {
    printf ': recorded from vLLM %s (CPU, dummy weights) on %s\n' "$version" "$(date -u +%F)"
    printf ': POST %s %s\n\n' "$path" "$body"
    curl -sN -X POST "$url$path" -H 'Content-Type: application/json' -d "$body"
  } >"$OUT/$name"
  echo "recorded $OUT/$name ($(wc -c <"$OUT/$name") bytes)"
}

serve() {
  "$PEERS/stop_vllm_peer.sh" >/dev/null 2>&1 || true
  taskset -c 0 env PORT="$PORT" "$@" "$PEERS/run_vllm_peer.sh" &
  wait_ready
}

trap '"$PEERS/stop_vllm_peer.sh" >/dev/null 2>&1 || true' EXIT

serve MODEL_SHAPE=tiny
model=$(curl -s "$url/v1/models" | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"][0]["id"])')
record vllm-completions-usage.sse /v1/completions \
  "{\"model\":\"$model\",\"prompt\":[11,22,33,44,55,66,77,88],\"max_tokens\":6,\"ignore_eos\":true,\"stream\":true,\"stream_options\":{\"include_usage\":true,\"continuous_usage_stats\":false},\"seed\":1}"
record vllm-chat-usage.sse /v1/chat/completions \
  "{\"model\":\"$model\",\"messages\":[{\"role\":\"user\",\"content\":\"hello there, how are you\"}],\"max_completion_tokens\":6,\"ignore_eos\":true,\"stream\":true,\"stream_options\":{\"include_usage\":true},\"seed\":1}"
record vllm-error-too-long.json /v1/completions \
  "{\"model\":\"$model\",\"prompt\":[11,22,33],\"max_tokens\":100000,\"stream\":true}"

serve MODEL_SHAPE=tiny THINK=1 MODEL_DIR=/tmp/peers/tiny-think EXTRA_ARGS="--reasoning-parser deepseek_r1"
model=$(curl -s "$url/v1/models" | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"][0]["id"])')
record vllm-reasoning-usage.sse /v1/chat/completions \
  "{\"model\":\"$model\",\"messages\":[{\"role\":\"user\",\"content\":\"think about it\"}],\"max_completion_tokens\":8,\"ignore_eos\":true,\"stream\":true,\"stream_options\":{\"include_usage\":true},\"seed\":1}"
