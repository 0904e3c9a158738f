#!/usr/bin/env bash
# provision.sh: a static busybox from Debian's busybox-static package, unpacked into the
# cache (nothing installed on the host). The images that stand for distroless's :debug
# variant (the base of opm's image and of OLM's util image) carry it at /busybox, as
# distroless does; OLM's bundle unpack Jobs run its cp.
#
# Output (idempotent; FORCE=1 fetches again):
#   $DOLPHIN_CACHE/busybox/busybox    the binary
#   $DOLPHIN_CACHE/busybox/APPLETS    `busybox --list`, one applet a line
#   $DOLPHIN_CACHE/busybox/VERSION    the package's version
set -euo pipefail
cache=${DOLPHIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dolphin}
out=$cache/busybox
if [ -z "${FORCE:-}" ] && [ -x "$out/busybox" ] && [ -s "$out/APPLETS" ] && [ -s "$out/VERSION" ]; then
  exit 0
fi
for c in apt-get dpkg-deb; do command -v $c >/dev/null || { echo "busybox: need $c" >&2; exit 1; }; done
mkdir -p "$cache"
tmp=$(mktemp -d "$cache/busybox.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
# apt-get download uses the host's package lists; refresh them once when it finds nothing.
timeout 120 apt-get download busybox-static >/dev/null 2>&1 ||
  { timeout 300 apt-get update -qq && timeout 120 apt-get download busybox-static >/dev/null; }
deb=$(ls busybox-static_*.deb)
dpkg-deb -x "$deb" root
file_ok=$(head -c 4 root/bin/busybox | od -An -c | tr -d ' ')
[ "$file_ok" = "177ELF" ] || { echo "busybox: $deb has no ELF /bin/busybox" >&2; exit 1; }
root/bin/busybox --list >APPLETS
dpkg-deb -f "$deb" Version >VERSION
mkdir -p "$out.new"
mv root/bin/busybox APPLETS VERSION "$out.new/"
rm -rf "$out"
mv "$out.new" "$out"
echo "busybox $(cat "$out/VERSION") in $out" >&2
