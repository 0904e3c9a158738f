#!/usr/bin/env bash
# host-deps.sh: makes sure the host has the few system programs the test ground uses, and
# installs the missing ones from Debian's packages when it can (as root, with apt-get).
#   ip (iproute2)                      sets up the local cluster's network namespace
#   unshare, nsenter (util-linux)      a UTS namespace per mysqld; the demo's kubectl wrapper
#   hostname (hostname)                names each pod's mysqld after its pod
#   apt-get, dpkg-deb, the Debian archive keyring   provision MySQL without installing it
set -euo pipefail
declare -A pkg=([ip]=iproute2 [unshare]=util-linux [nsenter]=util-linux [hostname]=hostname
  [apt-get]=apt [dpkg-deb]=dpkg)
missing=()
for cmd in "${!pkg[@]}"; do
  command -v "$cmd" >/dev/null || missing+=("${pkg[$cmd]}")
done
[ -f /usr/share/keyrings/debian-archive-keyring.gpg ] || missing+=(debian-archive-keyring)
[ ${#missing[@]} -eq 0 ] && exit 0
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "missing host packages: ${missing[*]} (install them, e.g. apt-get install ${missing[*]})" >&2
  exit 1
fi
echo ">> installing host packages: ${missing[*]}" >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
