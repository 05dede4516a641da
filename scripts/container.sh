#!/usr/bin/env bash
# Builds the container image from the Dockerfile and checks it: the binary answers, runs as a
# non-root user, and the main job runs inside. Podman or Docker.
#
#   scripts/container.sh [--engine podman|docker] [--local-bases] [--tag goodput:dev]
#
# --local-bases: for a machine that reaches Debian's mirror and static.rust-lang.org but no
# container registry: the base images are built here (Debian bookworm by debootstrap, then a
# Rust 1.95 toolchain by rustup on it) and passed to the Dockerfile's RUST_IMAGE and
# RUNTIME_IMAGE arguments (with the host's CAs from /usr/local/share/ca-certificates). CONTAINER_FLAGS adds flags to every podman build and run (a sandbox
# whose cgroups crun refuses needed `--runtime runc --ulimit nofile=4096:4096 --ulimit
# nproc=4096:4096`; docker's build takes no --runtime, so leave it unset there).
set -euo pipefail
cd "$(dirname "$0")/.."
ENGINE=$(command -v podman || command -v docker || true)
LOCAL=0
TAG=goodput:dev
while [ $# -gt 0 ]; do
    case "$1" in
        --engine) ENGINE="${2:?--engine podman|docker}"; shift 2 ;;
        --local-bases) LOCAL=1; shift ;;
        --tag) TAG="${2:?--tag NAME:TAG}"; shift 2 ;;
        *) echo "container: unknown argument $1" >&2; exit 2 ;;
    esac
done
[ -n "$ENGINE" ] || { echo "container: no podman or docker here" >&2; exit 2; }
FLAGS=()
[ -z "${CONTAINER_FLAGS:-}" ] || read -r -a FLAGS <<<"$CONTAINER_FLAGS"
ARGS=()
if [ "$LOCAL" = 1 ]; then
    ROOTFS=${ROOTFS:-/tmp/goodput-bookworm}
    if ! "$ENGINE" image inspect localhost/goodput-base:bookworm >/dev/null 2>&1; then
        [ -x "$ROOTFS/bin/sh" ] || debootstrap --variant=minbase bookworm "$ROOTFS" http://deb.debian.org/debian
        # The host's own CAs (an egress proxy's, here) are trusted in the local bases too:
        # ca-certificates, installed in the images, adds them to the bundle cargo and curl use.
        mkdir -p "$ROOTFS/usr/local/share/ca-certificates"
        cp /usr/local/share/ca-certificates/*.crt "$ROOTFS/usr/local/share/ca-certificates/" 2>/dev/null || true
        tar -C "$ROOTFS" -c . | "$ENGINE" import - localhost/goodput-base:bookworm
    fi
    if ! "$ENGINE" image inspect localhost/goodput-rust:1.95 >/dev/null 2>&1; then
        "$ENGINE" build ${FLAGS[@]+"${FLAGS[@]}"} --network host -t localhost/goodput-rust:1.95 -f - . <<'CONTAINERFILE'
FROM localhost/goodput-base:bookworm
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates curl gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
ENV RUSTUP_HOME=/usr/local/rustup CARGO_HOME=/usr/local/cargo PATH=/usr/local/cargo/bin:$PATH
RUN curl -fsSL -o /tmp/rustup-init https://static.rust-lang.org/rustup/dist/x86_64-unknown-linux-gnu/rustup-init \
    && chmod +x /tmp/rustup-init && /tmp/rustup-init -y --profile minimal --default-toolchain 1.95.0 \
    && rm /tmp/rustup-init && cargo --version
CONTAINERFILE
    fi
    ARGS=(--build-arg RUST_IMAGE=localhost/goodput-rust:1.95 --build-arg RUNTIME_IMAGE=localhost/goodput-base:bookworm)
fi
start=$(date +%s)
"$ENGINE" build ${FLAGS[@]+"${FLAGS[@]}"} --network host ${ARGS[@]+"${ARGS[@]}"} -t "$TAG" .
echo "container: built $TAG in $(( $(date +%s) - start )) s" >&2
"$ENGINE" run --rm ${FLAGS[@]+"${FLAGS[@]}"} "$TAG" --version
uid=$("$ENGINE" run --rm ${FLAGS[@]+"${FLAGS[@]}"} --entrypoint id "$TAG" -u)
[ "$uid" != 0 ] || { echo "container: the image runs as root" >&2; exit 1; }
out=$("$ENGINE" run --rm ${FLAGS[@]+"${FLAGS[@]}"} "$TAG" run --concurrency 1,2 --requests 4 --refine 0 -q)
case "$out" in
    *Conclusion*) ;;
    *) echo "container: the main job printed no conclusion:" >&2; echo "$out" >&2; exit 1 ;;
esac
size=$("$ENGINE" image inspect --format '{{.Size}}' "$TAG")
echo "container: $TAG runs as uid $uid, runs the main job; $((size / 1000000)) MB"
