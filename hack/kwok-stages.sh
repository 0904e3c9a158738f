#!/usr/bin/env bash
# kwok-stages.sh VERSION: writes bin/kwok-stages.yaml, the Stage objects kwok needs.
#
# kwok exits with "no stages found" unless it is given Stage objects. We use the ones
# kwokctl ships for a "fast" cluster, from the pinned kwok module itself (so they match the
# binary): nodes become Ready and keep a heartbeat, pods become Ready at once, complete,
# and are removed when deleted.
set -euo pipefail
version=$1
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${DOLPHIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dolphin}
out=$cache/bin/kwok-stages-$version.yaml
if [ ! -s "$out" ]; then
  dir=$(go -C "$root/hack/tools/kwok" list -m -f '{{.Dir}}' sigs.k8s.io/kwok)/kustomize/stage
  for f in node/fast/node-initialize.yaml node/heartbeat/node-heartbeat.yaml \
           pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
    echo ---; cat "$dir/$f"
  done >"$out.tmp"
  mv "$out.tmp" "$out"
fi
ln -sfn "$out" "$root/bin/kwok-stages.yaml"
