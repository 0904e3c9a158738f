# debian-unpack.sh: sourced by the provisioning scripts. fetch resolves the dependency
# closure of $pkgs in Debian $suite against an empty dpkg status with a private apt
# configuration, state and cache under $base/apt, downloads it and unpacks every .deb into
# $root (nothing is installed on the host). The caller sets base, root, suite, pkgs and a
# say function.

mirror() {
  if [ -n "${DEBIAN_MIRROR:-}" ]; then echo "$DEBIAN_MIRROR"; return; fi
  local m
  m=$(grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}' | grep -v security | head -1 || true)
  [ -n "$m" ] || m=$(grep -hs '^deb ' /etc/apt/sources.list | awk '{print $2}' | grep -v security | head -1 || true)
  [ -n "$m" ] || { say "no Debian mirror in the host's apt sources; set DEBIAN_MIRROR"; return 1; }
  echo "$m"
}

fetch() {
  local apt=$base/apt keyring=/usr/share/keyrings/debian-archive-keyring.gpg m n
  for c in apt-get dpkg-deb; do command -v $c >/dev/null || { say "need $c"; exit 1; }; done
  [ -f "$keyring" ] || { say "need $keyring (apt-get install debian-archive-keyring)"; exit 1; }
  m=$(mirror)
  rm -rf "$apt/lists" "$apt/cache/archives"
  mkdir -p "$apt/etc/apt.conf.d" "$apt/etc/preferences.d" "$apt/etc/sources.list.d" \
    "$apt/lists/partial" "$apt/cache/archives/partial"
  : >"$apt/status.empty"
  printf 'Types: deb\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By: %s\n' \
    "$m" "$suite" "$keyring" >"$apt/etc/sources.list.d/dolphin-mysql.sources"
  cat >"$apt/apt.conf" <<CONF
Dir::Etc "$apt/etc";
Dir::Etc::sourcelist "/dev/null";
Dir::State "$apt";
Dir::State::lists "$apt/lists";
Dir::State::status "$apt/status.empty";
Dir::Cache "$apt/cache";
Acquire::Check-Valid-Until "false";
Acquire::Languages "none";
APT::Install-Recommends "false";
APT::Architecture "amd64";
APT::Architectures { "amd64"; };
Debug::NoLocking "true";
APT::Sandbox::User "root";
CONF
  say "resolving and downloading $pkgs from $suite"
  APT_CONFIG=$apt/apt.conf apt-get update -qq
  # shellcheck disable=SC2086
  if ! APT_CONFIG=$apt/apt.conf apt-get install -y -qq --download-only $pkgs >"$apt/download.log" 2>&1; then
    cat "$apt/download.log" >&2; exit 1
  fi
  n=$(find "$apt/cache/archives" -name '*.deb' | wc -l)
  say "unpacking $n packages"
  rm -rf "$root.tmp" "$root"
  mkdir -p "$root.tmp"
  for deb in "$apt"/cache/archives/*.deb; do dpkg-deb -x "$deb" "$root.tmp"; done
  rm -rf "$apt/cache/archives"
  mv "$root.tmp" "$root"
}
