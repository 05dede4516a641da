#!/usr/bin/env bash
# Records `goodput serve`'s own streams (issue 48) beside vLLM's: the raw SSE bodies of a
# completions stream with usage and token ids, and a chat stream with usage, on the tiny
# model with dummy weights, each prefixed with an SSE comment naming the server and request.
#   scripts/record-goodput-streams.sh [OUT_DIR]   (default crates/client/tests/fixtures/recorded)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-crates/client/tests/fixtures/recorded}
BIN=${BIN:-target/release/goodput}
PORT=${PORT:-8019}
mkdir -p "$OUT"
url=http://127.0.0.1:$PORT
"$BIN" serve --port "$PORT" >/dev/null 2>&1 &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null || true' EXIT
for _ in $(seq 1 120); do curl -sf "$url/v1/models" >/dev/null 2>&1 && break; sleep 0.5; done
version=$("$BIN" --version | awk '{print $2}')
record() {
  local name=$1 path=$2 body=$3
  {
    printf ': recorded from goodput serve %s (tiny, dummy weights) on %s\n' "$version" "$(date -u +%F)"
    printf ': POST %s %s\n\n' "$path" "$body"
    curl -sN -X POST "$url$path" -H 'Content-Type: application/json' -d "$body"
  } >"$OUT/$name"
  echo "recorded $OUT/$name ($(wc -c <"$OUT/$name") bytes)"
}
record goodput-completions-usage.sse /v1/completions \
  '{"model":"tiny","prompt":[11,22,33,44,55,66,77,88],"max_tokens":6,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true},"return_token_ids":true,"seed":1}'
record goodput-chat-usage.sse /v1/chat/completions \
  '{"model":"tiny","messages":[{"role":"user","content":"hello there, how are you"}],"max_completion_tokens":6,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true},"seed":1}'
