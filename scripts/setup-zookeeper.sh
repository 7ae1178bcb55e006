#!/usr/bin/env bash
# Installs Apache ZooKeeper from Debian's `zookeeper` package (the server jar and its
# dependencies under /usr/share/java) for the cluster tests and `kcoord cluster`
# (docs/cluster.md). The server is not started or enabled as a service: `kcoord cluster` and the
# tests' cluster fixture run their own, each with its own data directory. Idempotent.
set -euo pipefail
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
if [ ! -f /usr/share/java/zookeeper.jar ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    zookeeper default-jre-headless libslf4j-java >/dev/null
fi
command -v java >/dev/null || { echo "setup-zookeeper: no java on PATH" >&2; exit 1; }
ls /usr/share/java/zookeeper.jar >/dev/null
