#!/usr/bin/env bash
# A local NTP server on loopback for `goodput run --clock-ref ntp://127.0.0.1:11123`: Debian's
# chrony serving this machine's clock, adjusting nothing (-x), no root needed beyond the
# install. Usage: scripts/local-ntp.sh [start|stop]
set -euo pipefail
dir=${TMPDIR:-/tmp}/goodput-chrony
case "${1:-start}" in
  start)
    command -v chronyd >/dev/null || { echo "installing chrony (apt)"; ${SUDO:-$( [ "$(id -u)" = 0 ] || echo sudo)} apt-get install -y -q chrony >/dev/null; }
    mkdir -p "$dir"
    cat > "$dir/chrony.conf" <<CONF
local stratum 8
allow 127.0.0.1
port 11123
bindaddress 127.0.0.1
cmdport 0
pidfile $dir/chronyd.pid
driftfile $dir/chrony.drift
CONF
    chronyd -x -f "$dir/chrony.conf"
    echo "NTP on 127.0.0.1:11123 (stop: $0 stop)";;
  stop)
    [ -f "$dir/chronyd.pid" ] && kill "$(cat "$dir/chronyd.pid")" || true;;
esac
