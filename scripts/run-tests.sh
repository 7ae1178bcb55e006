#!/usr/bin/env bash
# `make test`'s pytest: the cluster tests (three-node clusters with ZooKeeper: they mostly wait on
# sessions, elections and failovers, not on the CPU) run in a second pytest process beside the
# rest, so their waiting overlaps the CPU-bound tests. Each process has its own kcoord server
# and ZooKeeper (free ports, its own directories); the Java helpers are compiled once first (the
# two processes would otherwise compile them into the same directory at once).
# Exit status: non-zero when either pytest fails (or collects no test).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
CLUSTER=(
  "tests/integration/test_cluster*.py"
  "tests/integration/test_jepsen.py"
  "tests/integration/test_replica*.py"
  "tests/integration/test_fetch_session_replication.py"
  "tests/integration/test_rdkafka_cluster_server.py"
)
"$PY" -c 'import sys; sys.path.insert(0, "tests"); import clientlib; clientlib.compile_java(); clientlib.compile_java4()' \
  || exit 1

log=$(mktemp -t kcoord-cluster-tests.XXXXXX)
# shellcheck disable=SC2068 # the globs expand to the files
"$PY" -m pytest -q -p no:cacheprovider ${CLUSTER[@]} >"$log" 2>&1 &
cluster_pid=$!

ignore=()
for g in "${CLUSTER[@]}"; do ignore+=("--ignore-glob=$g"); done
"$PY" -m pytest -q -p no:cacheprovider tests "${ignore[@]}"
rc=$?

wait "$cluster_pid"
cluster_rc=$?
echo
echo "==== the cluster tests (run beside the others: ${CLUSTER[*]}) ===="
cat "$log"
rm -f "$log"
[ "$rc" -ne 0 ] && exit "$rc"
exit "$cluster_rc"
