#!/usr/bin/env bash
# Installs Debian's headless-capable Chromium (for the report's browser test) if it is not
# already there. Prints the browser's path.
set -euo pipefail
if ! command -v chromium >/dev/null 2>&1; then
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq >&2
    $SUDO apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >&2
fi
command -v chromium
