#!/usr/bin/env bash
# host-deps.sh: makes sure the host has the few system programs the test ground uses, and
# installs the missing ones from Debian's packages when it can (as root, with apt-get).
#   ip (iproute2)                      sets up the local cluster's network namespace
#   unshare, nsenter (util-linux)      a UTS namespace per mysqld; the demo's kubectl wrapper
#   hostname (hostname)                names each pod's mysqld after its pod
#   apt-get, dpkg-deb, the Debian archive keyring   provision MySQL without installing it
#   runc (>= 1.1)                      the nodes' container runtime, under containerd's shim
#   /usr/lib/cni (containernetworking-plugins)      bridge, host-local, loopback, portmap
#   iptables (>= 1.8), conntrack       kube-proxy's Service rules; a lost node's traffic dropped
set -euo pipefail
declare -A pkg=([ip]=iproute2 [unshare]=util-linux [nsenter]=util-linux [hostname]=hostname
  [apt-get]=apt [dpkg-deb]=dpkg [runc]=runc [iptables]=iptables [conntrack]=conntrack)
missing=()
for cmd in "${!pkg[@]}"; do
  command -v "$cmd" >/dev/null || missing+=("${pkg[$cmd]}")
done
[ -f /usr/share/keyrings/debian-archive-keyring.gpg ] || missing+=(debian-archive-keyring)
for plugin in bridge host-local loopback portmap; do
  [ -x /usr/lib/cni/$plugin ] || { missing+=(containernetworking-plugins); break; }
done
# at_least NAME WANT HAVE: fails when HAVE (x.y[.z]) is older than WANT.
at_least() {
  [ "$(printf '%s\n%s\n' "$2" "$3" | sort -V | head -1)" = "$2" ] ||
    { echo "$1 $3 is older than the $2 the test ground needs" >&2; exit 1; }
}
check_versions() {
  at_least runc 1.1 "$(runc --version | awk 'NR==1 {print $3}' | cut -d+ -f1)"
  at_least iptables 1.8 "$(iptables --version | awk '{print $2}' | tr -d v)"
}
if [ ${#missing[@]} -eq 0 ]; then check_versions; exit 0; fi
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "missing host packages: ${missing[*]} (install them, e.g. apt-get install ${missing[*]})" >&2
  exit 1
fi
echo ">> installing host packages: ${missing[*]}" >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
check_versions
