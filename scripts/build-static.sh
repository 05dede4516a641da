#!/usr/bin/env bash
# A static goodput binary (musl, no shared libraries): runs on any x86-64 Linux, whatever its
# glibc, as vLLM's static `vllm-bench` does. Needs the musl target (`rustup target add
# x86_64-unknown-linux-musl`) and a C compiler for it (Debian's `musl-tools`, for mimalloc and
# ring); installs both when missing and allowed to.
#
#   scripts/build-static.sh            # → target/goodput-static (stripped)
#
# The CPU kernels dispatch at run time (AVX-512 BF16, AVX2, the portable fallback), so one
# binary serves every x86-64 machine.
set -euo pipefail
cd "$(dirname "$0")/.."
TARGET=x86_64-unknown-linux-musl
rustup target list --installed | grep -qx "$TARGET" || rustup target add "$TARGET"
if ! command -v musl-gcc >/dev/null; then
    echo "build-static: installing musl-tools (musl-gcc) …" >&2
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -q musl-tools >/dev/null
fi
export CC_x86_64_unknown_linux_musl=musl-gcc
cargo build --release --locked --target "$TARGET" --bin goodput
cp "target/$TARGET/release/goodput" target/goodput-static
strip target/goodput-static
# A dynamic executable lists its libraries as `name => path`; a static one none.
if ldd target/goodput-static 2>&1 | grep -q '=>'; then
    echo "build-static: target/goodput-static links shared libraries:" >&2
    ldd target/goodput-static >&2
    exit 1
fi
echo "build-static: target/goodput-static ($(du -h target/goodput-static | cut -f1), static: $(file -b target/goodput-static | cut -d, -f1-2))"
