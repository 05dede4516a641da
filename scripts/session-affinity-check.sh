#!/usr/bin/env bash
# Session affinity behind a real router: two `goodput serve` replicas (tiny, one CPU each) behind
# vllm-router's `consistent_hash` policy (from PyPI, pinned by install-routers.sh), driven by a
# trace of agent sessions (scripts/session-trace.py: each turn re-sends its session's context
# and adds to it), twice on cold replicas: without a session header (the router hashes each
# request's own x-request-id, so a session's turns scatter) and with `--session-header
# X-Session-ID` (the header the policy reads first). Per side: the run's session line (turns
# that found the turn before's prompt cached, i.e. reached the replica holding their session),
# the later turns' cached share, TTFT by turn, and each replica's share of the requests.
#
#   scripts/session-affinity-check.sh [--goodput BIN] [--out DIR] [--sessions N] [--turns K]
set -euo pipefail
cd "$(dirname "$0")/.."
GOODPUT=target/release/goodput
OUT=/tmp/goodput-affinity
SESSIONS=24
TURNS=6
while [ $# -gt 0 ]; do
    case "$1" in
        --goodput) GOODPUT="$2"; shift 2 ;;
        --out) OUT="$2"; shift 2 ;;
        --sessions) SESSIONS="$2"; shift 2 ;;
        --turns) TURNS="$2"; shift 2 ;;
        *) echo "session-affinity-check: unknown argument $1" >&2; exit 2 ;;
    esac
done
GOODPUT=$(realpath "$GOODPUT")
ROUTER=$(scripts/install-routers.sh | grep vllm-router)
PORTS=(18121 18122)
ROUTER_PORT=18320
rm -rf "$OUT" && mkdir -p "$OUT"
python3 scripts/session-trace.py --sessions "$SESSIONS" --turns "$TURNS" --first-blocks 4 --blocks-per-turn 2 \
    --block-size 64 --output 16 --gap-ms 400 --delay-ms 150 > "$OUT/sessions.jsonl"

STARTED=()
stop_all() {
    for pg in "${STARTED[@]}"; do kill -TERM -- "-$pg" 2>/dev/null || true; done
    for pg in "${STARTED[@]}"; do
        for _ in $(seq 50); do kill -0 -- "-$pg" 2>/dev/null || break; sleep 0.1; done
        kill -KILL -- "-$pg" 2>/dev/null || true
    done
    STARTED=()
}
trap stop_all EXIT
start() { setsid "$@" >"$LOG" 2>&1 & STARTED+=("$!"); }
wait_for() {
    for _ in $(seq 150); do curl -sf -m 1 "$1" >/dev/null 2>&1 && return 0; sleep 0.2; done
    echo "session-affinity-check: $1 did not come up" >&2; exit 1
}
served() { curl -sf "http://127.0.0.1:$1/metrics" | awk '/^goodput_request_success_total/ {s += $2} END {print s + 0}'; }

for side in without with; do
    for i in 0 1; do
        LOG="$OUT/$side-replica-$i.log" start "$GOODPUT" serve -m tiny --port "${PORTS[$i]}" --threads 1 --engine-cpus "$i"
    done
    for p in "${PORTS[@]}"; do wait_for "http://127.0.0.1:$p/health"; done
    LOG="$OUT/$side-router.log" start "$ROUTER" --host 127.0.0.1 --port "$ROUTER_PORT" --policy consistent_hash \
        --worker-urls "http://127.0.0.1:${PORTS[0]}" "http://127.0.0.1:${PORTS[1]}" --disable-retries --log-level warning
    wait_for "http://127.0.0.1:$ROUTER_PORT/health"
    header=()
    [ "$side" = with ] && header=(--session-header X-Session-ID)
    "$GOODPUT" run --target "http://127.0.0.1:$ROUTER_PORT" --served-model-name tiny --trace "$OUT/sessions.jsonl" \
        --trace-block-size 64 "${header[@]}" --out "$OUT/$side" -q > "$OUT/$side.txt" 2> "$OUT/$side.err" \
        || { cat "$OUT/$side.err"; exit 1; }
    a=$(served "${PORTS[0]}"); b=$(served "${PORTS[1]}")
    echo "== $side the session header: replica requests $a / $b"
    grep -E "^Sessions:" "$OUT/$side.txt" || true
    sed -n '/^By turn/,/^└/p' "$OUT/$side.txt"
    stop_all
done
