#!/usr/bin/env bash
# `make test-loaded`: the whole suite, twice in a row, from a fresh clone of this checkout's
# HEAD, while a CPU-bound process keeps one core busy the whole time. A suite that depends on
# the machine's speed fails here; CI's and a laptop's runs are never this quiet.
#
#   bash scripts/test-loaded.sh [RUNS]        (default 2; output and a summary in .cache/loaded/)
#
# The clone is set up as `make test` sets a fresh clone up (venv, clients), then each run is
# the pytest suite. librdkafka's own C suite (`make rdkafka-suite`, ~30 min per run on two
# quiet cores) joins each run with TEST_LOADED_RDKAFKA=1. Exits non-zero if any run failed.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
RUNS=${1:-2}
OUT=$ROOT/.cache/loaded
mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/kcoord-loaded-XXXXXX)
SUMMARY=$OUT/summary.txt

git clone -q --no-hardlinks "$ROOT" "$WORK/kcoord"
# The venv's pip cache and the Java jar are reused as a developer's machine would; the
# checkout itself is fresh (nothing uncommitted comes along).
if [ -d "$ROOT/.cache/kjar/lib" ]; then
  mkdir -p "$WORK/kcoord/.cache/kjar" && cp -r "$ROOT/.cache/kjar/lib" "$WORK/kcoord/.cache/kjar/"
fi

# One core's worth of pure CPU for as long as the runs last.
python3 -c 'while True: pass' &
BURNER=$!
trap 'kill "$BURNER" 2>/dev/null; wait "$BURNER" 2>/dev/null' EXIT

{
  echo "test-loaded: $(git -C "$WORK/kcoord" log -1 --format='%h %s')"
  echo "clone: $WORK/kcoord; CPU burner pid $BURNER; $(nproc) cores; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$SUMMARY"

status=0
for run in $(seq 1 "$RUNS"); do
  log=$OUT/run$run.log
  start=$(date +%s)
  (
    cd "$WORK/kcoord" || exit 1
    if [ "$run" = 1 ]; then
      make setup clients || exit 1
    fi
    rc=0
    .venv/bin/python -m pytest -q -p no:cacheprovider tests || rc=$?
    if [ "${TEST_LOADED_RDKAFKA:-0}" = 1 ]; then
      make --no-print-directory rdkafka-suite ARGS=--check || rc=$?
    fi
    exit $rc
  ) >"$log" 2>&1
  rc=$?
  [ $rc = 0 ] || status=1
  result=$(grep -E '^(=+ )?[0-9]+ (passed|failed)' "$log" | tail -1)
  echo "run $run: exit $rc in $(( $(date +%s) - start )) s: ${result:-no pytest summary}; load now: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$SUMMARY"
  grep -E '^(FAILED|ERROR) ' "$log" | tee -a "$SUMMARY"
done
rm -rf "$WORK"
exit $status
