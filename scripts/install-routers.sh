#!/usr/bin/env bash
# Installs the two Rust routers that ship on PyPI, pinned, into a venv ($ROUTERS_VENV,
# default /work/routers-venv), for router-in-front-of-replicas benchmarks:
#   vllm-router 0.1.17   -> $ROUTERS_VENV/bin/vllm-router  (flags: --worker-urls ... --policy ...)
#   sglang-router 0.3.2  -> $ROUTERS_VENV/bin/sglang-router launch  (same flags after `launch`)
# Idempotent: reuses the venv and skips pip when both pinned versions are already there.
# Prints the two entry points' paths (one a line) on stdout; pip's chatter goes to stderr.
set -euo pipefail
VENV="${ROUTERS_VENV:-/work/routers-venv}"
PYTHON="${PYTHON:-python3}"
VLLM_ROUTER_VERSION="0.1.17"
SGLANG_ROUTER_VERSION="0.3.2"

if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV" >&2
fi

installed() {
    "$VENV/bin/python" -m pip show "$1" 2>/dev/null | awk '/^Version:/ {print $2}'
}

if [ "$(installed vllm-router)" != "$VLLM_ROUTER_VERSION" ] \
    || [ "$(installed sglang-router)" != "$SGLANG_ROUTER_VERSION" ]; then
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check \
        "vllm-router==$VLLM_ROUTER_VERSION" "sglang-router==$SGLANG_ROUTER_VERSION" >&2
fi

for bin in vllm-router sglang-router; do
    if [ ! -x "$VENV/bin/$bin" ]; then
        echo "install-routers: $VENV/bin/$bin missing after install" >&2
        exit 1
    fi
    echo "$VENV/bin/$bin"
done
