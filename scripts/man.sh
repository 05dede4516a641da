#!/usr/bin/env bash
# The man pages of goodput from its clap definition (clap_mangen): goodput.1 and one page per
# command (goodput-run.1, …) into DIR (target/man), then each checked by man's own formatter
# where `man` is installed.
#
#   scripts/man.sh [--goodput BIN] [DIR]
#   man -l target/man/goodput-run.1           # read one
#   sudo cp target/man/*.1 /usr/local/share/man/man1/ && sudo mandb   # install them
set -euo pipefail
cd "$(dirname "$0")/.."
GOODPUT=target/release/goodput
if [ "${1:-}" = "--goodput" ]; then GOODPUT="$2"; shift 2; fi
DIR="${1:-target/man}"
[ -x "$GOODPUT" ] || { echo "man.sh: no goodput binary at $GOODPUT (cargo build --release)" >&2; exit 2; }
"$GOODPUT" man --out "$DIR"
if command -v man >/dev/null; then
    for page in "$DIR"/*.1; do
        if ! MANWIDTH=100 man -l "$page" >/dev/null 2>"$DIR/.warnings" || [ -s "$DIR/.warnings" ]; then
            echo "man.sh: $page:" >&2; cat "$DIR/.warnings" >&2; exit 1
        fi
    done
    rm -f "$DIR/.warnings"
fi
echo "man pages in $DIR: $(ls "$DIR" | wc -l) pages"
