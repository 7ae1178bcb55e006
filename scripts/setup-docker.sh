#!/usr/bin/env bash
# Installs what the Docker tests (tests/docker/) need: Debian's Docker engine (docker.io), its
# compose (docker-compose) and debootstrap; then makes the base images' root filesystems from
# Debian's packages (no image registry is reachable), cached as tarballs under .cache/docker/
# keyed by their package list, so a rerun does not repeat debootstrap. The tests start dockerd
# themselves (link-local addresses only) and `docker import` these tarballs.
# Idempotent: each step is skipped when already done. Times each step (stderr).
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"

need_apt=()
command -v dockerd >/dev/null || need_apt+=(docker.io)
[ -x /usr/bin/docker ] || need_apt+=(docker.io)    # the client that matches Debian's engine
command -v debootstrap >/dev/null || need_apt+=(debootstrap)
# compose: the `docker compose` plugin when the machine has one, else Debian's docker-compose
docker compose version >/dev/null 2>&1 || command -v docker-compose >/dev/null || need_apt+=(docker-compose)
if [ ${#need_apt[@]} -gt 0 ]; then
  t=$SECONDS
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
  echo "setup-docker: apt-get install ${need_apt[*]}: $((SECONDS - t)) s" >&2
fi
# Debian's package starts nothing here (no systemd); the tests start their own dockerd.

# The machine's Debian mirror: the one its apt sources name.
mirror() {
  local m
  m=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null \
      | grep -v '^[[:space:]]*#' | grep -oE 'https?://[^ ]+/debian/?( |$)' | tr -d ' ' || true)
  m=${m%%$'\n'*}
  echo "${m:-http://deb.debian.org/debian}"
}

# base NAME PACKAGES: .cache/docker/NAME-<key>.tar, the rootfs of `debootstrap --variant=minbase
# --include=PACKAGES bookworm`
base() {
  local name=$1 pkgs=$2 key out tmp t
  mkdir -p .cache/docker
  key=$(printf 'bookworm minbase %s' "$pkgs" | sha256sum | cut -c1-12)
  out=.cache/docker/$name-$key.tar
  [ -f "$out" ] && { echo "$out"; return; }
  mkdir -p .cache/docker
  tmp=$(mktemp -d .cache/docker/rootfs.XXXXXX)
  t=$SECONDS
  $SUDO debootstrap --variant=minbase --include="$pkgs" bookworm "$tmp/rootfs" "$(mirror)" \
    >"$tmp/debootstrap.log" 2>&1 || { tail -20 "$tmp/debootstrap.log" >&2; exit 1; }
  # what an image needs no copy of: apt's lists and archives, docs, man pages
  $SUDO rm -rf "$tmp"/rootfs/var/lib/apt/lists/* "$tmp"/rootfs/var/cache/apt/* \
    "$tmp"/rootfs/usr/share/doc/* "$tmp"/rootfs/usr/share/man/* "$tmp"/rootfs/usr/share/locale/*
  $SUDO tar -C "$tmp/rootfs" --numeric-owner -cf "$out.part" .
  mv "$out.part" "$out"
  $SUDO rm -rf "$tmp"
  echo "setup-docker: debootstrap $name ($pkgs): $((SECONDS - t)) s" >&2
  echo "$out"
}

# The server's base: Python and venv. The compactor's: also a Java runtime for Spark, and ps.
# ZooKeeper's (docker-compose.cluster.yml): Debian's ZooKeeper (libzookeeper-java, the server's
# jars from the zookeeper source package, whose `zookeeper` binary package adds only scripts and
# a GUI and needs the full default-jre) and a headless Java runtime.
mkdir -p .cache/docker
# The tests read which tarball is which from .cache/docker/bases ("name tarball" lines) and
# import each as the image name:<key>.
server=$(base kcoord-base "python3,python3-venv")
compactor=$(base kcoord-jre-base "python3,python3-venv,openjdk-17-jre-headless,procps")
zookeeper=$(base kcoord-zookeeper-base "openjdk-17-jre-headless,libzookeeper-java,libslf4j-java")
printf 'kcoord-base %s\nkcoord-jre-base %s\nkcoord-zookeeper-base %s\n' "$server" "$compactor" "$zookeeper" \
  >.cache/docker/bases.part
mv .cache/docker/bases.part .cache/docker/bases
