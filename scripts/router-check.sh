#!/usr/bin/env bash
# The simulated fleet against a real router: 2 `goodput serve` replicas of a model (tiny) on
# loopback, each pinned to one CPU, behind sglang-router or vllm-router (from PyPI, pinned), driven by
# `goodput run` with a trace whose requests share system prompts; then the same trace through
# `goodput plan --trace --profile` with the replicas' profile measured under the check's own load
# on another trace (their steps, `serve --steps`), plus the time outside the engines measured on
# that trace (`--request-overhead`: its mean, and each calibration request's own). Per policy it prints
# output throughput, TTFT and E2E P50/P95, the prefix-hit rate and the replicas' request
# shares, measured beside simulated.
#
#   scripts/router-check.sh [--goodput BIN] [--out DIR] [--rate R] [--duration S] [--repeats N] [--router sglang|vllm]
#                           [--groups G] [--prefix-blocks P] [--own-blocks O] [--output T] [--kv-blocks B] [--model M]
#                           [--weights W]
#
# --groups: shared system prompts in the trace (16); --prefix-blocks: each one's length in blocks
# of 64 tokens (4); --own-blocks: each request's own blocks after it (1); --output: output tokens a
# request (32); --model: a catalog model (tiny); --weights: its weights as `serve --weights` takes
# them (dummy; smollm2-135m runs its real weights by default, fetched by scripts/fetch-smollm2.sh and dequantized,
# whose real text has no first-text hold; `--weights dummy` keeps it on dummy ones); --kv-blocks: each replica's KV pool in
# blocks of 16 tokens (the engine's default: room for every prefix, so both routers hit them
# all); a pool smaller than the prefixes' working set is where routing decides the hits.
#
# vllm-router's cache-aware policy tokenizes each prompt on the workers (`/tokenize`) and keeps
# a tree of tokens; sglang-router's keeps one of characters.
#
# Every process it starts runs in its own process group and is stopped (the group) on exit.
# The replicas restart before each policy, so each starts with cold prefix caches.
set -euo pipefail
cd "$(dirname "$0")/.."
GOODPUT=target/release/goodput
OUT=/tmp/goodput-router-check
RATE=6
DURATION=60
REPEATS=1
KIND=sglang
PREFIXES=16
PREFIX_BLOCKS=4
OWN_BLOCKS=1
OUTPUT=32
MODEL=tiny
WEIGHTS=
KV=()
while [ $# -gt 0 ]; do
    case "$1" in
        --goodput) GOODPUT="$2"; shift 2 ;;
        --out) OUT="$2"; shift 2 ;;
        --rate) RATE="$2"; shift 2 ;;
        --duration) DURATION="$2"; shift 2 ;;
        --repeats) REPEATS="$2"; shift 2 ;;
        --router) KIND="$2"; shift 2 ;;
        --groups) PREFIXES="$2"; shift 2 ;;
        --prefix-blocks) PREFIX_BLOCKS="$2"; shift 2 ;;
        --own-blocks) OWN_BLOCKS="$2"; shift 2 ;;
        --output) OUTPUT="$2"; shift 2 ;;
        --model) MODEL="$2"; shift 2 ;;
        --weights) WEIGHTS="$2"; shift 2 ;;
        --kv-blocks) KV=(--kv-blocks "$2"); shift 2 ;;
        *) echo "router-check: unknown argument $1" >&2; exit 2 ;;
    esac
done
[ -x "$GOODPUT" ] || { echo "router-check: no goodput binary at $GOODPUT (cargo build --release)" >&2; exit 2; }
mkdir -p "$OUT"
if [ -z "$WEIGHTS" ] && [ "$MODEL" = smollm2-135m ]; then WEIGHTS="$(scripts/fetch-smollm2.sh):dequant"; fi
# Every goodput process takes the model's weights (the client its tokenizer from them).
MODEL_ARGS=(-m "$MODEL")
[ -n "$WEIGHTS" ] && MODEL_ARGS+=(--weights "$WEIGHTS")
case "$KIND" in
    sglang) ROUTER=$(scripts/install-routers.sh | grep sglang-router); LAUNCH=(launch); LEVEL=warn ;;
    vllm) ROUTER=$(scripts/install-routers.sh | grep vllm-router); LAUNCH=(); LEVEL=warning ;;
    *) echo "router-check: --router sglang or vllm" >&2; exit 2 ;;
esac
PORTS=(18101 18102)
ROUTER_PORT=18300
GROUPS_STARTED=()

stop_all() {
    for pg in "${GROUPS_STARTED[@]}"; do
        kill -TERM -- "-$pg" 2>/dev/null || true
    done
    for pg in "${GROUPS_STARTED[@]}"; do
        for _ in $(seq 50); do kill -0 -- "-$pg" 2>/dev/null || break; sleep 0.1; done
        kill -KILL -- "-$pg" 2>/dev/null || true
    done
    GROUPS_STARTED=()
}
trap stop_all EXIT

# Starts "$@" in a new process group, logging to $LOG; records the group.
start() {
    setsid "$@" >"$LOG" 2>&1 &
    GROUPS_STARTED+=("$!")
}

wait_for() { # URL, what
    for _ in $(seq 100); do
        if curl -sf -m 1 "$1" >/dev/null 2>&1; then return 0; fi
        sleep 0.2
    done
    echo "router-check: $2 did not come up ($1)" >&2
    exit 1
}

start_replicas() { # [steps file prefix]
    for i in 0 1; do
        local steps=()
        [ $# -gt 0 ] && steps=(--steps "$1-$i.jsonl")
        LOG="$OUT/replica-$i.log" start "$GOODPUT" serve "${MODEL_ARGS[@]}" --port "${PORTS[$i]}" --threads 1 --engine-cpus "$i" "${KV[@]}" "${steps[@]}"
    done
    for p in "${PORTS[@]}"; do wait_for "http://127.0.0.1:$p/health" "replica :$p"; done
}

start_router() { # policy
    LOG="$OUT/router-$1.log" start "$ROUTER" "${LAUNCH[@]}" --host 127.0.0.1 --port "$ROUTER_PORT" \
        --worker-urls "http://127.0.0.1:${PORTS[0]}" "http://127.0.0.1:${PORTS[1]}" --policy "$1" \
        --prometheus-host 127.0.0.1 --prometheus-port 18390 --log-level "$LEVEL" --disable-retries
    for _ in $(seq 100); do
        if curl -s -m 1 "http://127.0.0.1:$ROUTER_PORT/readiness" | grep -q '"healthy_workers":2'; then return 0; fi
        sleep 0.2
    done
    echo "router-check: $KIND-router ($1) did not see both replicas" >&2
    exit 1
}

# Requests each replica finished, from its /metrics.
served() {
    for p in "${PORTS[@]}"; do
        curl -s "http://127.0.0.1:$p/metrics" | awk '/^goodput_request_success_total/ {print $2}'
    done | paste -sd, -
}

# Mean TTFT in seconds the replicas saw themselves (receipt to first token), from their /metrics.
server_ttft() {
    for p in "${PORTS[@]}"; do curl -s "http://127.0.0.1:$p/metrics"; done |
        awk '/^goodput_time_to_first_token_seconds_sum/ {s += $2} /^goodput_time_to_first_token_seconds_count/ {n += $2}
             END {if (n > 0) printf "%.6f\n", s / n}'
}

python3 scripts/shared-prefix-trace.py --rate "$RATE" --duration "$DURATION" --groups "$PREFIXES" --prefix-blocks "$PREFIX_BLOCKS" --own-blocks "$OWN_BLOCKS" --output "$OUTPUT" \
    --out "$OUT/trace.jsonl"
echo "router-check: profiling one replica on a quiet CPU …" >&2
"$GOODPUT" profile "${MODEL_ARGS[@]}" --engine-cpus 1 --harness-cpus 0 --time 30s --out "$OUT/quiet.json" -q

# The calibration: another trace (seed 1) through round-robin, each replica writing its steps.
# The replicas' steps under the check's own contention (the other replica's HTTP threads, the
# router and the client share their cores) make the loaded profile; the client's mean TTFT
# less the servers' own is the time outside the engines.
echo "router-check: calibrating on another trace (the replicas' steps under load, the time outside them) …" >&2
python3 scripts/shared-prefix-trace.py --rate "$RATE" --duration "$DURATION" --groups "$PREFIXES" --prefix-blocks "$PREFIX_BLOCKS" --own-blocks "$OWN_BLOCKS" --output "$OUTPUT" --seed 1 \
    --out "$OUT/calibration.jsonl"
start_replicas "$OUT/calibration-steps"
start_router round_robin
"$GOODPUT" run --target "http://127.0.0.1:$ROUTER_PORT" "${MODEL_ARGS[@]}" --api chat --trace "$OUT/calibration.jsonl" \
    --trace-block-size 64 --out "$OUT/calibration" --overwrite -q >"$OUT/calibration.log" 2>&1
SERVER_TTFT=$(server_ttft)
# The chat template's tokens around a prompt, from a replica's own /tokenize of a chat: the
# head is what an empty and a one-letter message share, the tail the rest of the empty one.
TEMPLATE=$(python3 -c "
import json, urllib.request
def tokens(content):
    body = json.dumps({'messages': [{'role': 'user', 'content': content}]}).encode()
    req = urllib.request.Request('http://127.0.0.1:${PORTS[0]}/tokenize', data=body, headers={'Content-Type': 'application/json'})
    return json.load(urllib.request.urlopen(req))['tokens']
empty, one = tokens(''), tokens('x')
head = next((i for i, (a, b) in enumerate(zip(empty, one)) if a != b), min(len(empty), len(one)))
print(f'{head},{len(empty) - head}')")
stop_all
echo "router-check: the chat template adds $TEMPLATE tokens (head,tail) to each prompt" >&2
echo "$TEMPLATE" >"$OUT/template.txt"
"$GOODPUT" profile "${MODEL_ARGS[@]}" --from-steps "$OUT/calibration-steps-0.jsonl,$OUT/calibration-steps-1.jsonl" \
    --no-roofline --out "$OUT/loaded.json" -q >"$OUT/loaded.txt"
OVERHEAD_MS=$(python3 -c "
import json, sys
s = json.load(open('$OUT/calibration/summary.json'))['levels'][0]['summary']
print(f\"{max(0.0, (s['ttft']['mean'] - float('$SERVER_TTFT')) * 1e3):.3f}\")")
echo "router-check: outside the engines: ${OVERHEAD_MS} ms a request (client mean TTFT less the servers')" >&2
echo "$OVERHEAD_MS" >"$OUT/overhead-ms.txt"

for rep in $(seq "$REPEATS"); do
    for policy in round_robin cache_aware; do
        run="$OUT/run-$policy-$rep"
        start_replicas "$run-steps"
        start_router "$policy"
        "$GOODPUT" run --target "http://127.0.0.1:$ROUTER_PORT" "${MODEL_ARGS[@]}" --api chat --trace "$OUT/trace.jsonl" \
            --trace-block-size 64 --out "$run" --overwrite -q >"$run.log" 2>&1 || true
        served >"$run.served"
        stop_all
        echo "router-check: $policy (repeat $rep): replicas served $(cat "$run.served")" >&2
    done
done

# The simulated fleet three ways: the quiet profile alone (as before), the loaded profile,
# and the loaded profile with the time outside the engines and the chat template's tokens.
# (The quiet profile's grid needs the default pool: with --kv-blocks it has no row.)
rm -f "$OUT/sim-quiet.json"
[ ${#KV[@]} -gt 0 ] || "$GOODPUT" plan -m "$MODEL" --trace "$OUT/trace.jsonl" --trace-block-size 64 --profile "$OUT/quiet.json" \
    --replicas 2 --router round-robin,cache-aware --json "$OUT/sim-quiet.json" >"$OUT/sim-quiet.txt"
"$GOODPUT" plan -m "$MODEL" --trace "$OUT/trace.jsonl" --trace-block-size 64 --profile "$OUT/loaded.json" --replicas 2 \
    --router round-robin,cache-aware --json "$OUT/sim-loaded.json" >"$OUT/sim-loaded.txt"
"$GOODPUT" plan -m "$MODEL" --trace "$OUT/trace.jsonl" --trace-block-size 64 --profile "$OUT/loaded.json" --replicas 2 \
    --router round-robin,cache-aware --request-overhead "${OVERHEAD_MS}ms" --chat-template-tokens "$TEMPLATE" \
    --json "$OUT/sim.json" --steps-out "$OUT/sim-steps" >"$OUT/sim.txt"
# The same with each request's own time outside the engines, drawn from the calibration's
# requests (their stamps against the client's): the tail of the hops, not only their mean.
"$GOODPUT" plan -m "$MODEL" --trace "$OUT/trace.jsonl" --trace-block-size 64 --profile "$OUT/loaded.json" --replicas 2 \
    --router round-robin,cache-aware --request-overhead "$OUT/calibration" --chat-template-tokens "$TEMPLATE" \
    --json "$OUT/sim-drawn.json" >"$OUT/sim-drawn.txt" 2>&1
# Step by step: each replica's steps in every run and in the simulation, priced by the loaded
# profile (where the simulated replicas gain or lose time against the measured ones: the work
# each did, and its steps against their price).
STEP_FILES=$(ls "$OUT"/run-*-steps-*.jsonl "$OUT"/sim-steps/*.jsonl | paste -sd, -)
"$GOODPUT" profile -m "$MODEL" --from-steps "$STEP_FILES" --price-with "$OUT/loaded.json" \
    --json "$OUT/priced.json" >"$OUT/priced.txt"
python3 scripts/router-check-table.py "$OUT" "$REPEATS"
echo "steps against their price: $OUT/priced.txt" >&2
