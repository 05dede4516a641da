#!/usr/bin/env bash
# goodput's CPU engine against vLLM's CPU build, side by side on this machine. Both servers
# run at once, each pinned to core 0, bf16, the same model shape with dummy weights (the same
# compute as real ones), the same tokenizer, prefix caching off on both; the clients run on
# core 1. For every round, prompt length and client, vLLM and goodput are driven one after
# the other (the order alternates by round), each run with its own seed so no run reuses
# another's prompts (`vllm bench serve` draws the same prompts unless given a new --seed).
#
# Clients: `goodput run` (token-id prompts of exact length, closed loop at each number of
# users) and `vllm bench serve` (random dataset, --ignore-eos, --max-concurrency). OUTPUT
# tokens out, ignore_eos on both. Then scripts/vs-vllm-table.py prints, per prompt length,
# users and client, goodput/vLLM ratios of output tok/s, median TTFT and median TPOT: the
# median over rounds [min–max], the machine's load beside them.
#
#   scripts/vs-vllm-cpu.sh                       # 128 and 1024 in, 4 and 16 users, 3 rounds
#   ROUNDS=1 INPUTS=128 USERS=4 scripts/vs-vllm-cpu.sh
#
# Environment: SHAPE (smollm2-135m or tiny), INPUTS ("128 1024"), OUTPUT (64), USERS (4,16),
# REQUESTS (32 measured per level), WARMUP (4), ROUNDS (3), CLIENTS ("goodput vllm"), DTYPE
# (goodput's, bf16), OUT (default /tmp/vs-vllm-<time>), PEERS (../shared/peers), GOODPUT (the
# release binary). A benchmark, not a CI test: it installs vLLM on first use (~6 GB under
# /tmp/peers, ~10 min); ~25 min with the defaults after that.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PEERS=${PEERS:-$ROOT/../shared/peers}
GOODPUT=${GOODPUT:-$ROOT/target/release/goodput}
SHAPE=${SHAPE:-smollm2-135m}
INPUTS=${INPUTS:-"128 1024"}
OUTPUT=${OUTPUT:-64}
USERS=${USERS:-4,16}
REQUESTS=${REQUESTS:-32}
WARMUP=${WARMUP:-4}
ROUNDS=${ROUNDS:-3}
CLIENTS=${CLIENTS:-"goodput vllm"}
DTYPE=${DTYPE:-bf16}
OUT=${OUT:-/tmp/vs-vllm-$(date +%Y%m%d-%H%M%S)}
VLLM_PORT=8011
GOODPUT_PORT=8012
VENV=${VENV:-/tmp/peers/vllmenv}

die() { echo "vs-vllm-cpu: $*" >&2; exit 1; }
log() { echo "vs-vllm-cpu: $*" >&2; }

[ -x "$GOODPUT" ] || die "no $GOODPUT: run cargo build --release first"
[ -x "$PEERS/run_vllm_peer.sh" ] || die "no vLLM peer scripts in $PEERS"
[ "$(nproc)" -ge 2 ] || die "needs 2 cores (servers on core 0, clients on core 1)"
case "$SHAPE" in
    tiny) MODEL_DIR=/tmp/peers/tinyllama ;;
    smollm2-135m) MODEL_DIR=/tmp/peers/smollm2-135m ;;
    *) die "unknown SHAPE $SHAPE (tiny or smollm2-135m)" ;;
esac
mkdir -p "$OUT"

GOODPUT_PID=""
cleanup() {
    [ -n "$GOODPUT_PID" ] && kill "$GOODPUT_PID" 2>/dev/null && wait "$GOODPUT_PID" 2>/dev/null
    "$PEERS/stop_vllm_peer.sh" >/dev/null 2>&1 || true
}
trap cleanup EXIT

log "vLLM on core 0 (prefix caching off)"
taskset -c 0 env MODEL_SHAPE="$SHAPE" PORT=$VLLM_PORT EXTRA_ARGS="--no-enable-prefix-caching" \
    "$PEERS/run_vllm_peer.sh" >&2
log "goodput serve ($DTYPE) on core 0 (prefix caching off)"
taskset -c 0 "$GOODPUT" serve --model "$SHAPE" --dtype "$DTYPE" --port $GOODPUT_PORT --threads 1 \
    --tokenizer "$MODEL_DIR/tokenizer.json" --no-prefix-caching --max-model-len 2048 \
    > "$OUT/serve-goodput.log" 2>&1 &
GOODPUT_PID=$!
for _ in $(seq 1 120); do
    curl -sf "http://127.0.0.1:$GOODPUT_PORT/health" >/dev/null 2>&1 && break
    kill -0 "$GOODPUT_PID" 2>/dev/null || die "goodput serve died: see $OUT/serve-goodput.log"
    sleep 1
done

seed=1000
# One run: client $1 against server $2 with $3 prompt tokens into $4 (a directory).
drive() {
    local client=$1 server=$2 input=$3 dir=$4 port served
    if [ "$server" = vllm ]; then port=$VLLM_PORT; served=$MODEL_DIR; else port=$GOODPUT_PORT; served=$SHAPE; fi
    seed=$((seed + 1))
    mkdir -p "$dir"
    cat /proc/loadavg > "$dir/loadavg.before"
    if [ "$client" = goodput ]; then
        taskset -c 1 "$GOODPUT" run --target "http://127.0.0.1:$port" --served-model-name "$served" \
            --model "$SHAPE" --tokenizer "$MODEL_DIR/tokenizer.json" --input-len "$input" \
            --output-len "$OUTPUT" --concurrency "$USERS" --requests "$REQUESTS" --warmup "$WARMUP" \
            --seed $seed --refine 0 --out "$dir/run" --overwrite > "$dir/client.log" 2>&1 \
            || die "goodput run failed: see $dir/client.log"
    else
        for u in ${USERS//,/ }; do
            seed=$((seed + 1))
            taskset -c 1 "$VENV/bin/vllm" bench serve --backend vllm --base-url "http://127.0.0.1:$port" \
                --model "$served" --tokenizer "$MODEL_DIR" --dataset-name random \
                --random-input-len "$input" --random-output-len "$OUTPUT" --ignore-eos \
                --num-prompts "$REQUESTS" --num-warmups "$WARMUP" --max-concurrency "$u" --seed $seed \
                --save-result --result-dir "$dir" --result-filename "users-$u.json" \
                >> "$dir/client.log" 2>&1 || die "vllm bench serve failed: see $dir/client.log"
        done
    fi
    cat /proc/loadavg > "$dir/loadavg.after"
    log "  $dir done"
}

for r in $(seq 1 "$ROUNDS"); do
    order="vllm goodput"
    [ $((r % 2)) -eq 0 ] && order="goodput vllm"
    for input in $INPUTS; do
        for client in $CLIENTS; do
            for server in $order; do
                drive "$client" "$server" "$input" "$OUT/r$r/in$input/$client/$server"
            done
        done
    done
done
python3 "$ROOT/scripts/vs-vllm-table.py" "$OUT" | tee "$OUT/table.md"
log "results in $OUT"
