#!/usr/bin/env bash
# Regenerates hack/tools/k8s/go.mod and go.sum for a Kubernetes release.
#
# k8s.io/kubernetes cannot be `go install`ed: its go.mod replaces every staging module
# (k8s.io/api, k8s.io/apiserver, ...) with ./staging/src/..., and such replace lines are
# refused outside the main module. This wrapper module requires k8s.io/kubernetes and
# replaces each staging module (those kubernetes requires at v0.0.0) with the tag the
# release published for it (v1.37.2 -> v0.37.2). Run it only when bumping the version,
# then commit go.mod and go.sum: they are the single source of the pinned version.
#
# usage: hack/tools/k8s/regen.sh v1.37.2
set -euo pipefail
version=${1:?usage: $0 v1.MINOR.PATCH}
staging=v0.${version#v1.}
cd "$(dirname "$0")"
rm -f go.mod go.sum
go mod init github.com/dolphin-operator/dolphin/hack/tools/k8s
go mod edit -go=1.26.0 -require="k8s.io/kubernetes@${version}"
kmod=$(go mod download -json "k8s.io/kubernetes@${version}" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
for m in $(awk '$1 ~ /^k8s\.io\// && $2 == "v0.0.0" {print $1}' "$kmod"); do
  go mod edit -replace="$m=$m@${staging}"
done
for c in kube-apiserver kubectl kube-controller-manager kube-scheduler kubelet kube-proxy; do
  go mod edit -tool="k8s.io/kubernetes/cmd/$c"
done
go mod tidy
