#!/usr/bin/env bash
# The shard/merge comparison as a command: against one `goodput serve` on loopback, each of
# REPEATS seeds runs once as one process and once as SHARDS shard processes (started together
# with --start-at, clocks measured against the server), merged; then `goodput compare` of the
# singles against the merged runs (medians over the repeats, their spread as the noise).
# Usage: scripts/shards-vs-one.sh [SHARDS=2] [REPEATS=3] [RATE=6] [REQUESTS=24]
set -euo pipefail
cd "$(dirname "$0")/.."
shards=${1:-2} repeats=${2:-3} rate=${3:-6} requests=${4:-24}
bin=${GOODPUT_BIN:-target/release/goodput}
[ -x "$bin" ] || cargo build --release
out=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$bin" serve --port "$port" --no-prefix-caching >"$out/serve.log" 2>&1 &
serve=$!
trap 'kill $serve 2>/dev/null; wait $serve 2>/dev/null || true' EXIT
until curl -fs "http://127.0.0.1:$port/health" >/dev/null 2>&1; do sleep 0.2; done
target=http://127.0.0.1:$port
common=(run --target "$target" --rate "$rate" --requests "$requests" --warmup 4 --refine 0 -q)
singles=() merged=()
for r in $(seq 1 "$repeats"); do
  seed=$((20 + r))
  "$bin" "${common[@]}" --seed $seed --out "$out/single$r" >/dev/null 2>&1
  at=$(date -u -d '+2 sec' +%Y-%m-%dT%H:%M:%SZ)
  for i in $(seq 0 $((shards - 1))); do
    "$bin" "${common[@]}" --seed $seed --shard "$i/$shards" --start-at "$at" --clock-ref "$target" \
      --out "$out/r$r/shard$i" >/dev/null 2>"$out/r$r-shard$i.log" &
  done
  wait $(jobs -p | grep -v "^$serve$") 2>/dev/null || true
  "$bin" merge "$out/r$r"/shard* --out "$out/merged$r" >/dev/null
  singles+=("$out/single$r") merged+=("$out/merged$r")
done
"$bin" compare "$(IFS=,; echo "${singles[*]}")" "$(IFS=,; echo "${merged[*]}")"
echo "runs in $out"
