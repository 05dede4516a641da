#!/usr/bin/env bash
# The simulator's accuracy on this machine: a profile of the model, then REPEATS runs of a
# sweep, each with its simulated twin (`--predict`), the engine pinned to CPU 1 and the
# harness to CPU 0; then, per metric, the error of the twin against the measurement
# (predicted ÷ measured − 1: its median over the repeats per level, and the MAPE over the
# levels) beside the machine's own run-to-run spread.
#
#   scripts/accuracy.sh [--goodput BIN] [--model M] [--out DIR] [--repeats N] [--profile-time T] [-- RUN ARGS…]
#
# RUN ARGS default to `--scenario short-qa --concurrency 1,2,4,8,16`; e.g.
#   scripts/accuracy.sh --model tiny -- --scenario short-qa --rate 2,5,8,11
#   scripts/accuracy.sh --model smollm2-135m --profile-time 300s -- --scenario multi-turn --concurrency 1,2,4
set -euo pipefail
cd "$(dirname "$0")/.."
GOODPUT=target/release/goodput
MODEL=tiny
OUT=/tmp/goodput-accuracy
REPEATS=3
PROFILE_TIME=90s
while [ $# -gt 0 ]; do
    case "$1" in
        --goodput) GOODPUT="$2"; shift 2 ;;
        --model) MODEL="$2"; shift 2 ;;
        --out) OUT="$2"; shift 2 ;;
        --repeats) REPEATS="$2"; shift 2 ;;
        --profile-time) PROFILE_TIME="$2"; shift 2 ;;
        --) shift; break ;;
        *) echo "accuracy: unknown argument $1" >&2; exit 2 ;;
    esac
done
RUN_ARGS=("$@")
[ ${#RUN_ARGS[@]} -gt 0 ] || RUN_ARGS=(--scenario short-qa --concurrency 1,2,4,8,16)
[ -x "$GOODPUT" ] || { echo "accuracy: no goodput binary at $GOODPUT (cargo build --release)" >&2; exit 2; }
mkdir -p "$OUT"
PIN=(--engine-cpus 1 --harness-cpus 0)
if [ ! -f "$OUT/profile.json" ]; then
    "$GOODPUT" profile -m "$MODEL" "${PIN[@]}" --time "$PROFILE_TIME" --out "$OUT/profile.json" \
        --save-steps "$OUT/grid.jsonl" -q
fi
for rep in $(seq "$REPEATS"); do
    echo "accuracy: run $rep of $REPEATS: ${RUN_ARGS[*]}" >&2
    "$GOODPUT" run -m "$MODEL" "${PIN[@]}" "${RUN_ARGS[@]}" --predict "$OUT/profile.json" \
        --out "$OUT/run-$rep" --overwrite -q >"$OUT/run-$rep.log" 2>&1
done
python3 scripts/accuracy-table.py "$OUT" "$REPEATS"
