#!/usr/bin/env bash
# Fetches librdkafka's Debian source package and builds its C test suite (test-runner) in
# .cache/rdk, for scripts/rdkafka_suite.py. Nothing of it is committed. Idempotent: a finished
# build (stamp file) is left alone; delete .cache/rdk to start over.
#
# The source comes through apt with a private sources list and private state directories, so
# the machine's apt configuration and package lists are not touched. The mirror is the one the
# machine's own apt sources name (RDK_DEBIAN_MIRROR overrides it).
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION="${RDK_DEB_VERSION:-2.14.2-1}"
UPSTREAM="${VERSION%-*}"
DIR="$PWD/.cache/rdk"
SRC="$DIR/librdkafka-$UPSTREAM"
STAMP="$SRC/.kcoord-built"

if [ -f "$STAMP" ] && [ -x "$SRC/tests/test-runner" ]; then
  echo "librdkafka $UPSTREAM test-runner: $SRC/tests/test-runner (cached)"
  exit 0
fi

SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"

# What the build needs (rapidjson-dev lets 0053, 0098, 0101 and 0110 check JSON statistics).
need_apt=()
for p in build-essential pkg-config libssl-dev zlib1g-dev libzstd-dev liblz4-dev rapidjson-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || need_apt+=("$p")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# The Debian archive the machine's apt sources already use: the first URI ending in /debian.
mirror="${RDK_DEBIAN_MIRROR:-}"
if [ -z "$mirror" ]; then
  mirror=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '/^URIs:/ {for (i = 2; i <= NF; i++) print $i}' \
           | sed 's:/*$::' | grep -E '/debian$' | head -n1 || true)
fi
if [ -z "$mirror" ] && [ -f /etc/apt/sources.list ]; then
  mirror=$(awk '$1 == "deb" || $1 == "deb-src" {for (i = 2; i <= NF; i++) if ($i !~ /^\[/ && $i ~ /:\/\//) {print $i; break}}' \
           /etc/apt/sources.list | sed 's:/*$::' | grep -E '/debian$' | head -n1 || true)
fi
if [ -z "$mirror" ]; then
  echo "setup-rdkafka: no Debian archive found in /etc/apt/sources.list{,.d}; set RDK_DEBIAN_MIRROR" >&2
  exit 2
fi

mkdir -p "$DIR/apt/lists/partial" "$DIR/apt/cache/archives/partial"
cat > "$DIR/apt/deb-src.sources" <<EOT
Types: deb-src
URIs: $mirror
Suites: unstable testing
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOT
APT_OPTS=(-o "Dir::Etc::SourceList=$DIR/apt/deb-src.sources" -o Dir::Etc::SourceParts=/dev/null
          -o "Dir::State::Lists=$DIR/apt/lists" -o "Dir::Cache=$DIR/apt/cache"
          -o APT::Sandbox::User=root)
ORIG="$DIR/librdkafka_$UPSTREAM.orig.tar.gz"
if [ ! -f "$ORIG" ]; then
  apt-get "${APT_OPTS[@]}" update -qq
  # apt checks the files against the signed Sources index.
  (cd "$DIR" && apt-get "${APT_OPTS[@]}" -qq source --download-only "librdkafka=$VERSION")
fi

rm -rf "$SRC"
mkdir -p "$SRC"
tar -xzf "$ORIG" -C "$SRC" --strip-components=1
cd "$SRC"
echo "building librdkafka $UPSTREAM and its test-runner in $SRC (a few minutes on 2 cores)"
./configure --no-download --disable-curl --disable-gssapi > "$DIR/configure.log" 2>&1 \
  || { tail -n 30 "$DIR/configure.log"; exit 1; }
jobs=$(nproc 2>/dev/null || echo 2)
make -j"$jobs" libs > "$DIR/build.log" 2>&1 || { tail -n 40 "$DIR/build.log"; exit 1; }
make -j"$jobs" -C tests test-runner >> "$DIR/build.log" 2>&1 || { tail -n 40 "$DIR/build.log"; exit 1; }
echo "$VERSION" > "$STAMP"
echo "librdkafka $UPSTREAM test-runner: $SRC/tests/test-runner"
