#!/usr/bin/env bash
# `cargo install` from a clean clone of this repository, timed, and the installed binary run
# (its version, then the main job). What the README's install section promises.
#
#   scripts/check-install.sh [DIR]     # DIR: where to clone and install (a new temp dir)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -gt 0 ]; then
    DIR=$1
else
    DIR=$(mktemp -d /tmp/goodput-install.XXXXXX)
    trap 'rm -rf "$DIR"' EXIT
fi
git clone -q . "$DIR/clone"
start=$(date +%s)
cargo install --locked --path "$DIR/clone" --root "$DIR/root" --target-dir "$DIR/target" -q
took=$(( $(date +%s) - start ))
"$DIR/root/bin/goodput" --version
out=$("$DIR/root/bin/goodput" run --concurrency 1,2 --requests 4 --refine 0 -q)
case "$out" in
    *Conclusion*) ;;
    *) echo "check-install: the main job printed no conclusion:" >&2; echo "$out" >&2; exit 1 ;;
esac
echo "check-install: cargo install --path from a clean clone in ${took} s; the installed goodput runs the main job"
