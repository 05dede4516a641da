#!/usr/bin/env bash
# goodput's own HTTP/1.1 path and hyper against the server stack vLLM runs on (Starlette's
# StreamingResponse under uvicorn), with each of uvicorn's HTTP/1.1 implementations (h11 and
# httptools): the same run through both clients, side by side. Installs uvicorn, httptools and
# Starlette from PyPI into a venv (GOODPUT_VENV, default /tmp/goodput-uvicorn).
#   scripts/interop-uvicorn.sh [PORT]
set -euo pipefail
cd "$(dirname "$0")/.."
port=${1:-8731}
venv=${GOODPUT_VENV:-/tmp/goodput-uvicorn}
[ -x "$venv/bin/uvicorn" ] || { python3 -m venv "$venv" && "$venv/bin/pip" install -q uvicorn httptools starlette; }
cargo build --release -q -p goodput
out=$(mktemp -d)
for impl in h11 httptools; do
  setsid "$venv/bin/uvicorn" --app-dir scripts/interop uvicorn_app:app --port "$port" --http "$impl" --log-level warning &
  server=$!
  trap 'kill -- -$server 2>/dev/null || true' EXIT
  for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/v1/models" >/dev/null && break; sleep 0.2; done
  for client in own hyper; do
    flag=(); [ "$client" = hyper ] && flag=(--hyper-client)
    echo "== uvicorn --http $impl, client $client"
    target/release/goodput run --target "http://127.0.0.1:$port" --served-model-name m --scenario short-qa \
      --concurrency 8 --requests 80 "${flag[@]}" --out "$out/$impl-$client" 2>&1 | grep -E "^  [0-9]+ users:|^system:"
  done
  kill -- -$server; wait $server 2>/dev/null || true
done
rm -rf "$out"
