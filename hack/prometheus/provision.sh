#!/usr/bin/env bash
# provision.sh: Prometheus (prometheus, promtool) and mysqld_exporter from Debian sid's
# prometheus and prometheus-mysqld-exporter packages (3.5.3 and 0.19.0 there), unpacked
# into the cache like MySQL (hack/lib/debian-unpack.sh; nothing installed on the host).
# The rules tier checks and unit-tests Dolphin's alert rules with promtool; the e2e tier
# runs Prometheus; the local exporter image is built from mysqld_exporter (hack/images).
#
# Output (idempotent; FORCE=1 fetches again):
#   $DOLPHIN_CACHE/prometheus/<suite>/root               the unpacked tree
#   $DOLPHIN_CACHE/prometheus/<suite>/VERSION            `promtool --version`'s first line
#   $DOLPHIN_CACHE/prometheus/<suite>/EXPORTER_VERSION   `mysqld_exporter --version`'s
# and prints promtool's path on its last line.
set -euo pipefail
suite=${PROMETHEUS_SUITE:-sid}
pkgs="prometheus prometheus-mysqld-exporter"
cache=${DOLPHIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dolphin}
base=$cache/prometheus/$suite
root=$base/root
promtool=$root/usr/bin/promtool
say() { echo "[prometheus-provision] $*" >&2; }

# shellcheck source=hack/lib/debian-unpack.sh
. "$(dirname "$0")/../lib/debian-unpack.sh"

exporter=$root/usr/bin/prometheus-mysqld-exporter
complete() {
  [ -s "$base/VERSION" ] && [ -s "$base/EXPORTER_VERSION" ] && "$promtool" --version >/dev/null 2>&1 &&
    [ -x "$root/usr/bin/prometheus" ] && [ -x "$exporter" ]
}

mkdir -p "$base"
exec 9>"$base.lock"
flock 9
if ! complete || [ "${FORCE:-0}" = 1 ]; then
  rm -f "$base/VERSION" "$base/EXPORTER_VERSION"
  fetch
  "$promtool" --version 2>&1 | head -1 >"$base/VERSION"
  "$exporter" --version 2>&1 | head -1 >"$base/EXPORTER_VERSION"
  say "ready: $(cat "$base/VERSION")"
fi
echo "$promtool"
