#!/usr/bin/env bash
# Installs Debian's Prometheus server (for the dashboard's check: every panel's query against
# a real Prometheus scraping goodput) if it is not already there. Prints its path.
set -euo pipefail
if ! command -v prometheus >/dev/null 2>&1; then
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq >&2
    # The package's own service is not wanted: the check starts its own server.
    $SUDO apt-get install -y -qq --no-install-recommends prometheus >&2
    $SUDO systemctl disable --now prometheus >/dev/null 2>&1 || true
fi
command -v prometheus
