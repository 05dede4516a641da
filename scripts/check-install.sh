#!/usr/bin/env bash
# `cargo install` from a clean clone of this repository, timed, and the installed binary run
# (its version, then the main job). What the README's install section promises.
#
#   scripts/check-install.sh [DIR]     # DIR: where to clone and install (a new temp dir)
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-$(mktemp -d /tmp/goodput-install.XXXXXX)}
git clone -q . "$DIR/clone"
start=$(date +%s)
cargo install --locked --path "$DIR/clone" --root "$DIR/root" --target-dir "$DIR/target" -q
took=$(( $(date +%s) - start ))
"$DIR/root/bin/goodput" --version
"$DIR/root/bin/goodput" run --concurrency 1,2 --requests 4 --refine 0 -q | grep -q Conclusion
echo "check-install: cargo install --path from a clean clone in ${took} s; $DIR/root/bin/goodput runs the main job"
