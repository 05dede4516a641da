#!/usr/bin/env bash
# Validates deploy/kubernetes/*.yaml against the Kubernetes API schemas, strictly (unknown
# fields refused), with PyPI's kubernetes-validate (its schemas ship in the wheel: no cluster,
# no network beyond PyPI). Usage: scripts/check-k8s.sh [KUBERNETES_VERSION]
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${GOODPUT_K8S_VENV:-target/k8s-venv}
[ -x "$venv/bin/kubernetes-validate" ] || { python3 -m venv "$venv" && "$venv/bin/pip" install -q kubernetes-validate; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for f in deploy/kubernetes/*.yaml; do
  # The placeholder a user fills in before applying.
  sed 's/__START_AT__/2026-12-02T18:30:00Z/' "$f" > "$tmp/$(basename "$f")"
  "$venv/bin/kubernetes-validate" --strict ${1:+-k "$1"} "$tmp/$(basename "$f")"
done
