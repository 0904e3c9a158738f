#!/usr/bin/env bash
# provision.sh: Prometheus's promtool from Debian sid's prometheus package (3.5.3 there),
# unpacked into the cache like MySQL (hack/lib/debian-unpack.sh; nothing installed on the
# host). The rules tier checks and unit-tests Dolphin's alert rules with it.
#
# Output (idempotent; FORCE=1 fetches again):
#   $DOLPHIN_CACHE/prometheus/<suite>/root      the unpacked tree
#   $DOLPHIN_CACHE/prometheus/<suite>/VERSION   `promtool --version`'s first line
# and prints promtool's path on its last line.
set -euo pipefail
suite=${PROMETHEUS_SUITE:-sid}
pkgs=prometheus
cache=${DOLPHIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dolphin}
base=$cache/prometheus/$suite
root=$base/root
promtool=$root/usr/bin/promtool
say() { echo "[prometheus-provision] $*" >&2; }

# shellcheck source=hack/lib/debian-unpack.sh
. "$(dirname "$0")/../lib/debian-unpack.sh"

complete() { [ -s "$base/VERSION" ] && "$promtool" --version >/dev/null 2>&1; }

mkdir -p "$base"
exec 9>"$base.lock"
flock 9
if ! complete || [ "${FORCE:-0}" = 1 ]; then
  rm -f "$base/VERSION"
  fetch
  "$promtool" --version 2>&1 | head -1 >"$base/VERSION"
  say "ready: $(cat "$base/VERSION")"
fi
echo "$promtool"
