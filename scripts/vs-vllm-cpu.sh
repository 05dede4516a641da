#!/usr/bin/env bash
# goodput's CPU engine against vLLM's CPU build, side by side on this machine: each server
# pinned to one core (core 0) with dummy weights of the same shape, driven in turn by the
# same client (`goodput run`, token-id prompts of exact length, ignore_eos) from the other
# core (core 1). 128 tokens in, 64 out, closed loop at each concurrency, REQUESTS measured
# requests per level after WARMUP, REPEATS repeats per server. Then `goodput compare` prints,
# per level, vLLM's median against goodput's with the ratio and the run-to-run noise.
#
#   scripts/vs-vllm-cpu.sh                      # smollm2-135m and tiny, 4 and 16 users, 3 repeats
#   SHAPES=tiny REPEATS=1 scripts/vs-vllm-cpu.sh
#
# Environment: SHAPES (tiny, smollm2-135m), CONCURRENCY (4,16), REQUESTS (50), WARMUP (8),
# REPEATS (3), DTYPE (goodput's --dtype, bf16), OUT (results directory, default
# /tmp/vs-vllm-<time>), PEERS (../shared/peers, where run_vllm_peer.sh is), GOODPUT (the
# release binary). A benchmark, not a CI test: it installs vLLM on first use (~6 GB under
# /tmp/peers, ~10 min) and takes ~40 min with the defaults.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PEERS=${PEERS:-$ROOT/../shared/peers}
GOODPUT=${GOODPUT:-$ROOT/target/release/goodput}
SHAPES=${SHAPES:-"smollm2-135m tiny"}
CONCURRENCY=${CONCURRENCY:-4,16}
REQUESTS=${REQUESTS:-50}
WARMUP=${WARMUP:-8}
REPEATS=${REPEATS:-3}
DTYPE=${DTYPE:-bf16}
OUT=${OUT:-/tmp/vs-vllm-$(date +%Y%m%d-%H%M%S)}
VLLM_PORT=8011
GOODPUT_PORT=8012

die() { echo "vs-vllm-cpu: $*" >&2; exit 1; }
log() { echo "vs-vllm-cpu: $*" >&2; }

[ -x "$GOODPUT" ] || die "no $GOODPUT: run cargo build --release first"
[ -x "$PEERS/run_vllm_peer.sh" ] || die "no vLLM peer scripts in $PEERS"
[ "$(nproc)" -ge 2 ] || die "needs 2 cores (server on core 0, client on core 1)"
mkdir -p "$OUT"
SCENARIO=$OUT/fixed-128-64.toml
cat > "$SCENARIO" <<'EOF'
kind = "single"
name = "fixed-128-64"
input = { kind = "fixed", n = 128 }
output = { kind = "fixed", n = 64 }
shared_prefix = 0
EOF

GOODPUT_PID=""
cleanup() {
    [ -n "$GOODPUT_PID" ] && kill "$GOODPUT_PID" 2>/dev/null && wait "$GOODPUT_PID" 2>/dev/null
    "$PEERS/stop_vllm_peer.sh" >/dev/null 2>&1 || true
}
trap cleanup EXIT

# One repeat: the client on core 1, every concurrency level, no SLO bisection.
drive() { # port served-name shape dir
    taskset -c 1 "$GOODPUT" run --target "http://127.0.0.1:$1" --served-model-name "$2" --model "$3" \
        --scenario "$SCENARIO" --concurrency "$CONCURRENCY" --requests "$REQUESTS" --warmup "$WARMUP" \
        --refine 0 --out "$4" > "$4.log" 2>&1 || die "client run failed: see $4.log"
    log "  $4 done"
}

wait_ready() { # port
    for _ in $(seq 1 300); do
        curl -sf "http://127.0.0.1:$1/v1/models" >/dev/null 2>&1 && return 0
        sleep 1
    done
    die "server on port $1 did not come up"
}

for shape in $SHAPES; do
    case "$shape" in
        tiny) served=/tmp/peers/tinyllama ;;
        smollm2-135m) served=/tmp/peers/smollm2-135m ;;
        *) die "unknown shape $shape (tiny or smollm2-135m)" ;;
    esac
    log "$shape: vLLM on core 0"
    taskset -c 0 env MODEL_SHAPE="$shape" PORT=$VLLM_PORT "$PEERS/run_vllm_peer.sh" >&2
    vllm_runs=()
    for r in $(seq 1 "$REPEATS"); do
        drive $VLLM_PORT "$served" "$shape" "$OUT/vllm-$shape-r$r"
        vllm_runs+=("$OUT/vllm-$shape-r$r")
    done
    "$PEERS/stop_vllm_peer.sh" >&2

    log "$shape: goodput serve ($DTYPE) on core 0"
    taskset -c 0 "$GOODPUT" serve --model "$shape" --dtype "$DTYPE" --port $GOODPUT_PORT --threads 1 \
        > "$OUT/serve-$shape.log" 2>&1 &
    GOODPUT_PID=$!
    wait_ready $GOODPUT_PORT
    goodput_runs=()
    for r in $(seq 1 "$REPEATS"); do
        drive $GOODPUT_PORT "$shape" "$shape" "$OUT/goodput-$shape-r$r"
        goodput_runs+=("$OUT/goodput-$shape-r$r")
    done
    kill "$GOODPUT_PID"
    wait "$GOODPUT_PID" 2>/dev/null || true
    GOODPUT_PID=""

    join() { local IFS=,; echo "$*"; }
    echo "## $shape: vLLM (A) against goodput $DTYPE (B), $REPEATS repeats each"
    "$GOODPUT" compare "$(join "${vllm_runs[@]}")" "$(join "${goodput_runs[@]}")" \
        --metrics output_throughput,tpot_p50,ttft_p50 --export-markdown "$OUT/compare-$shape.md"
done
log "results in $OUT"
