#!/usr/bin/env bash
# provision.sh: a private Oracle MySQL for tests, from Debian's own packages.
#
# Debian bookworm ships no MySQL server; Debian sid ships Oracle MySQL (mysql-server-core,
# the 9.7 LTS series), built against sid's glibc. We neither add sid to the host's apt
# sources nor install anything into the host's dpkg database: apt runs with a private
# configuration, state and cache, resolves the full dependency closure against an empty
# dpkg status, downloads it, and `dpkg-deb -x` unpacks every .deb into one folder. mysqld
# then runs through that folder's own dynamic loader (see the wrappers written below), so
# the host's libc is never used.
#
# Output (idempotent; rebuilt only when missing, incomplete or FORCE=1):
#   $DOLPHIN_CACHE/mysql/<suite>/root       the unpacked tree
#   $DOLPHIN_CACHE/mysql/<suite>/bin/*      mysqld, mysql, mysqladmin, ... wrappers
#   $DOLPHIN_CACHE/mysql/<suite>/VERSION    `mysqld --version` of what was unpacked
#   $DOLPHIN_CACHE/mysql/<suite>/PKGS       the package list it was unpacked from
# and prints the root folder on its last line.
#
# The mirror is the host's own Debian mirror, read from its apt sources (DEBIAN_MIRROR
# overrides). Known snag: the mirror may serve a frozen sid whose Release file is past
# Valid-Until, so that check is off in the private configuration.
set -euo pipefail
suite=${MYSQL_SUITE:-sid}
# dash, coreutils, findutils and gzip make the tree a MySQL image's root too (hack/images
# packs it): the pod's init script and probes, and the backup job's script, run under sh.
# (MYSQL_DEBS, not MYSQL_PKGS: that is the Makefile's list of Go test packages, and make
# exports a variable set on its command line to this script.)
pkgs=${MYSQL_DEBS:-mysql-server-core mysql-client-core dash coreutils findutils gzip}
cache=${DOLPHIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dolphin}
base=$cache/mysql/$suite
root=$base/root
ldso=$root/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2
libs=$root/usr/lib/x86_64-linux-gnu
say() { echo "[mysql-provision] $*" >&2; }

complete() {
  [ -f "$base/VERSION" ] && [ -x "$ldso" ] && [ "$(cat "$base/PKGS" 2>/dev/null)" = "$pkgs" ] &&
    "$ldso" --library-path "$libs" "$root/usr/sbin/mysqld" --no-defaults --version >/dev/null 2>&1
}

# shellcheck source=hack/lib/debian-unpack.sh
. "$(dirname "$0")/../lib/debian-unpack.sh"

wrappers() {
  mkdir -p "$base/bin"
  # mysqld: basedir, plugin and message folders point into the tree. --no-defaults or
  # --defaults-file must stay the first option, so a host my.cnf is never read.
  cat >"$base/bin/mysqld" <<W
#!/bin/sh
first=--no-defaults
case "\${1:-}" in --no-defaults|--defaults-file=*) first=\$1; shift;; esac
exec "$ldso" --library-path "$libs" "$root/usr/sbin/mysqld" "\$first" --basedir="$root/usr" \\
  --lc-messages-dir="$root/usr/share/mysql" --character-sets-dir="$root/usr/share/mysql/charsets" \\
  --plugin-dir="$root/usr/lib/mysql/plugin" "\$@"
W
  for tool in mysql mysqladmin mysqldump mysqlbinlog; do
    [ -x "$root/usr/bin/$tool" ] || continue
    cat >"$base/bin/$tool" <<W
#!/bin/sh
case "\${1:-}" in --no-defaults|--defaults-file=*|--defaults-extra-file=*) ;; *) set -- --no-defaults "\$@";; esac
exec "$ldso" --library-path "$libs" "$root/usr/bin/$tool" "\$@"
W
  done
  chmod +x "$base/bin"/*
}

mkdir -p "$base"
exec 9>"$base.lock"
flock 9
if ! complete || [ "${FORCE:-0}" = 1 ]; then
  rm -f "$base/VERSION"
  fetch
  wrappers
  "$base/bin/mysqld" --version >"$base/VERSION"
  echo "$pkgs" >"$base/PKGS"
  say "ready: $(cat "$base/VERSION")"
fi
echo "$root"
